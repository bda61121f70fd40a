// See mtp_feed.h.
#include "model/mtp_feed.h"

#include <algorithm>

namespace ds4::model {

namespace {

// Hidden states kept behind the next row to feed, so that a short rewind (last_logits()
// re-running the last position) does not make the feed stale.
constexpr int64_t kKeep = 8;

}  // namespace

MtpFeed::MtpFeed(Model& model)
    : model_(&model), d_(model.hparams().n_embd), final_norm_(model.hparams().n_layer), hid_(static_cast<size_t>(d_), 0.0f) {}

Captures MtpFeed::before(int64_t at, int64_t n) {
    float* hidden = keep(at, n);
    return hidden ? Captures{&final_norm_, 1, hidden} : Captures{};
}

float* MtpFeed::keep(int64_t at, int64_t n) {
    if (stale_) return nullptr;
    if (h0_ + static_cast<int64_t>(hid_.size()) / d_ != at) {  // rows committed behind the feed's back
        stale_ = true;
        return nullptr;
    }
    pass_.resize(static_cast<size_t>(n * d_));
    return pass_.data();
}

void MtpFeed::committed(state::State& st, const std::vector<int32_t>& tokens, int64_t at, int64_t n) {
    if (stale_) return;
    hid_.insert(hid_.end(), pass_.begin(), pass_.begin() + n * d_);
    // A draft fed the row at `at` ahead of the target; another token went there.
    if (fed_ == at + 1 && tokens[static_cast<size_t>(at)] != fed_tok_) fed_ = at;
    if (n > kEager || at + n - fed_ > kBehind) feed(st, tokens, at + n, -1, nullptr);
    if (n > kBehind) {  // a long prompt's hidden states are not kept in capacity past its pass
        std::vector<float>().swap(pass_);
        hid_.shrink_to_fit();
    }
}

void MtpFeed::rewound(int64_t n) {
    fed_ = std::min(fed_, n);
    if (stale_) return;
    if (n == 0) {
        h0_ = -1;
        hid_.assign(static_cast<size_t>(d_), 0.0f);
        return;
    }
    if (n - 1 < h0_) {  // the hidden state the next row needs is gone
        stale_ = true;
        return;
    }
    hid_.resize(std::min(hid_.size(), static_cast<size_t>((n - h0_) * d_)));
}

void MtpFeed::trim() {
    const int64_t from = std::max(h0_, fed_ - 1 - kKeep);
    hid_.erase(hid_.begin(), hid_.begin() + (from - h0_) * d_);
    h0_ = from;
}

void MtpFeed::feed(state::State& st, const std::vector<int32_t>& tokens, int64_t p, int32_t tok, const MtpOut* out) {
    const int64_t n = p - fed_ + (tok >= 0 ? 1 : 0);
    if (n <= 0) return;
    toks_.assign(tokens.begin() + fed_, tokens.begin() + p);
    if (tok >= 0) toks_.push_back(tok);
    MtpRows r;
    r.pos0 = fed_;
    r.n = n;
    r.tokens = toks_.data();
    r.hidden = hid_.data() + (fed_ - 1 - h0_) * d_;  // row p takes the hidden state of p - 1
    r.n_out = out ? 1 : 0;
    if (out) r.out = *out;
    model_->mtp(st, r);
    fed_ = p + (tok >= 0 ? 1 : 0);
    fed_tok_ = tok;
    trim();
}

bool MtpFeed::resync(state::State& st, const std::vector<int32_t>& tokens, int64_t p) {
    if (std::any_of(tokens.begin(), tokens.begin() + p, [](int32_t t) { return t < 0; })) return false;
    stale_ = false;
    fed_ = 0;
    h0_ = -1;
    hid_.assign(static_cast<size_t>(d_), 0.0f);
    const std::unique_ptr<state::State> scratch = model_->new_state();
    for (int64_t at = 0; at < p; at += kChunk) {
        const int64_t n = std::min(kChunk, p - at);
        model_->eval_captures(*scratch, tokens.data() + at, n, before(at, n));
        hid_.insert(hid_.end(), pass_.begin(), pass_.begin() + n * d_);
        feed(st, tokens, at + n, -1, nullptr);
    }
    return true;
}

bool MtpFeed::draft(state::State& st, const std::vector<int32_t>& tokens, int32_t tok, const MtpOut& out) {
    const int64_t p = st.n_past();
    if (stale_) {
        if (!resync(st, tokens, p)) return false;
    } else if (std::any_of(tokens.begin() + fed_, tokens.begin() + p, [](int32_t t) { return t < 0; })) {
        return false;
    }
    fed_ = std::min(fed_, p);  // tok's row again, if a draft fed it already: its outputs are wanted
    feed(st, tokens, p, tok, &out);
    return true;
}

void MtpFeed::chain(state::State& st, int64_t pos, int32_t tok, const float* hidden, const MtpOut& out) {
    MtpRows r;
    r.pos0 = pos;
    r.n = 1;
    r.tokens = &tok;
    r.hidden = hidden;
    r.n_out = 1;
    r.out = out;
    model_->mtp(st, r);
}

}  // namespace ds4::model
