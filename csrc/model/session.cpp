// Session: eval / truncate / snapshot around a KvCache; see session.h.
#include "model/session.h"

#include <algorithm>
#include <string>

namespace ds4::model {

Session::Session(std::shared_ptr<Model> model) : model_(std::move(model)), kv_(model_->new_cache()) {}

int64_t Session::n_past() const {
    std::lock_guard<std::mutex> lock(mu_);
    return kv_->n_past() + (pending_ >= 0 ? 1 : 0);
}

void Session::eval(const int32_t* tokens, int64_t n, float* logits, int64_t n_out) {
    std::lock_guard<std::mutex> lock(mu_);
    eval_locked(tokens, n, logits, n_out);
}

std::vector<int32_t> Session::with_pending(const int32_t* tokens, int64_t n) const {
    std::vector<int32_t> feed;
    feed.reserve(static_cast<size_t>(n + 1));
    if (pending_ >= 0) feed.push_back(pending_);
    feed.insert(feed.end(), tokens, tokens + n);
    return feed;
}

void Session::eval_locked(const int32_t* tokens, int64_t n, float* logits, int64_t n_out) {
    if (n_out < 0) n_out = n;
    if (n_out > n) throw Error("eval: n_out " + std::to_string(n_out) + " exceeds the " + std::to_string(n) + " tokens fed");
    const std::vector<int32_t> feed = with_pending(tokens, n);
    const auto m = static_cast<int64_t>(feed.size());
    if (m == 0) return;
    const int64_t n_vocab = model_->hparams().n_vocab;
    float* out = logits;
    if (n_out == 0) {  // only the pending token: its logits are still worth keeping
        n_out = 1;
        scratch_.resize(static_cast<size_t>(n_vocab));
        out = scratch_.data();
    }
    model_->eval(*kv_, feed.data(), m, out, n_out, head_rows_);
    tokens_.insert(tokens_.end(), feed.begin(), feed.end());
    pending_ = -1;
    const float* last = out + (n_out - 1) * n_vocab;
    last_logits_.assign(last, last + n_vocab);
}

std::vector<int32_t> Session::eval_argmax(const int32_t* tokens, int64_t n, int64_t n_out) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::vector<int32_t> feed = with_pending(tokens, n);
    const auto m = static_cast<int64_t>(feed.size());
    const int64_t out = n_out < 0 ? m : std::min(n_out, m);
    std::vector<int32_t> ids(static_cast<size_t>(out));
    if (m == 0) return ids;
    if (out < 1) throw Error("eval_argmax: n_out must be >= 1 or < 0 (all), got " + std::to_string(n_out));
    model_->eval_argmax(*kv_, feed.data(), m, ids.data(), out, head_rows_);
    tokens_.insert(tokens_.end(), feed.begin(), feed.end());
    pending_ = -1;
    last_logits_.clear();  // not computed; last_logits() re-runs the last position if asked
    return ids;
}

void Session::truncate(int64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t held = kv_->n_past() + (pending_ >= 0 ? 1 : 0);
    if (n < 0 || n > held) {
        throw Error("truncate(" + std::to_string(n) + "): n_past must be in [0, " + std::to_string(held) + "]");
    }
    if (n == held) return;
    pending_ = -1;
    if (n < kv_->n_past()) {
        kv_->truncate(n);
        tokens_.resize(static_cast<size_t>(n));
        last_logits_.clear();
    }
}

void Session::set_pending(int32_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_ >= 0) throw Error("set_pending: the session already holds a pending token");
    if (id < 0 || id >= model_->hparams().n_vocab)
        throw Error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                    std::to_string(model_->hparams().n_vocab) + ")");
    if (kv_->n_past() + 1 > model_->n_ctx())
        throw state::ContextOverflow("set_pending: the context of " + std::to_string(model_->n_ctx()) + " positions is full");
    pending_ = id;
}

std::vector<int32_t> Session::tokens() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<int32_t> all = tokens_;
    if (pending_ >= 0) all.push_back(pending_);
    return all;
}

std::vector<float> Session::last_logits() {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_ >= 0) {
        eval_locked(nullptr, 0, nullptr, 0);
    } else if (last_logits_.empty()) {
        if (tokens_.empty()) throw Error("the session holds no tokens: there is nothing to continue from");
        // Re-run the last position to recover its logits (after a truncate or restore).
        const int32_t last = tokens_.back();
        const int64_t n = kv_->n_past();
        kv_->truncate(n - 1);
        tokens_.pop_back();
        scratch_.resize(static_cast<size_t>(model_->hparams().n_vocab));
        try {
            eval_locked(&last, 1, scratch_.data(), 1);
        } catch (...) {
            // The cache rows of position n-1 are still there (a re-run writes the same values).
            kv_->commit(n);
            tokens_.push_back(last);
            throw;
        }
    }
    return last_logits_;
}

std::shared_ptr<const Session::Snapshot> Session::snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    auto snap = std::make_shared<Snapshot>();
    snap->model = model_;
    snap->kv = kv_->snapshot();
    snap->tokens = tokens_;
    snap->pending = pending_;
    return snap;
}

void Session::restore(const Snapshot& snap) {
    std::lock_guard<std::mutex> lock(mu_);
    if (snap.model != model_) throw Error("restore: the snapshot was taken from a session of another model");
    if (snap.kv.type != kv_->type()) throw Error("restore: the snapshot's KV type differs from this session's");
    kv_->restore(snap.kv);
    tokens_ = snap.tokens;
    pending_ = snap.pending;
    last_logits_.clear();
}

}  // namespace ds4::model
