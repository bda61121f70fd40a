// See mtp.h.
#include "speculative/mtp.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "speculative/draft.h"
#include "speculative/draw.h"

namespace ds4::speculative {

void MtpDepth::verified(int k, int accepted) {
    if (fixed_ > 0 || k < 1) return;
    if (accepted == k) {
        misses_ = 0;
        if (k >= depth_ && ++perfect_ >= kPerfect && depth_ < max_) {
            ++depth_;
            perfect_ = 0;
        }
        return;
    }
    perfect_ = 0;
    // The deepest token judged and rejected, those before it accepted: one chained step too many.
    if (depth_ > 1 && k >= depth_ && accepted == k - 1 && ++misses_ >= kMisses) {
        --depth_;
        misses_ = 0;
    }
}

namespace {

// Rows of a first step that ride along with the drafted one at about its cost: the tokens a
// verify pass accepted since the last draft.
constexpr int64_t kFree = 4;

class MtpProposer final : public Proposer {
public:
    MtpProposer(model::Session& target, int32_t vocab, int max_depth, int fixed, float confidence, int64_t shortlist)
        : session_(target), vocab_(vocab), head_rows_(shortlist), depth_(max_depth, fixed), draw_(confidence) {
        session_.track_mtp();
        const model::Model& m = target.model();
        const model::HParams& hp = m.hparams();
        // Priors until its steps are timed: a step reads about one layer of the trunk, the fc
        // joining its inputs and the (shortlisted) head.
        const model::PassWork& w = m.work();
        const double layer = (w.bytes() - w.head.bytes) / (hp.n_layer + hp.n_mtp);
        const double join = 2.0 * static_cast<double>(hp.n_embd * hp.n_embd) * w.head.bytes / static_cast<double>(hp.n_vocab * hp.n_embd);
        step_share_ = (layer + join + w.head.bytes * w.head_share(shortlist)) / w.bytes();
        row_share_ = 1.0 / (hp.n_layer + 1);
        row_.resize(static_cast<size_t>(hp.n_vocab));
        hidden_[0].resize(static_cast<size_t>(hp.n_embd));
        hidden_[1].resize(static_cast<size_t>(hp.n_embd));
    }
    const char* name() const override { return "mtp"; }
    bool costs() const override { return true; }
    int max_draft() const override { return depth_.most(); }
    int min_draft() const override { return depth_.now(); }
    double cost_per_token(const TargetCost& target) const override {
        return per_token_.or_else(step_share_ * target.step);
    }

    double catch_up_seconds(const std::vector<int32_t>&, const TargetCost& target) const override {
        const int64_t lag = session_.mtp_lag();
        if (lag <= kFree) return 0.0;
        // The feed lost track: the context is evaluated again to recover it.
        if (session_.mtp_stale()) return static_cast<double>(lag) * target.row * (1.0 + row_share_);
        // At most kBehind rows (model/mtp_feed.h), taken in the step's pass: as measured, or, before
        // that, about one more step for kEager rows (one layer's weights are read once).
        const double per_row = feed_row_.or_else(cost_per_token(target) / model::MtpFeed::kEager);
        return per_row * static_cast<double>(lag - kFree);
    }

    void sample_drafts(const sample::SamplingParams& params, int32_t n_vocab) override {
        draw_.sample(params, n_vocab, n_vocab);
    }

    void verified(int k, int accepted) override { depth_.verified(k, accepted); }

    void propose(const std::vector<int32_t>& ctx, int n_max, Draft* draft) override {
        if (ctx.empty() || n_max < 1) return;
        const int64_t p = static_cast<int64_t>(ctx.size()) - 1;  // where the target evaluates ctx.back()
        if (session_.n_past() != p) return;                       // a token is pending: see Session::mtp_draft
        const int want = std::min(n_max, depth_.now());
        const int64_t lag = session_.mtp_lag();
        int32_t tok = ctx.back();
        for (int i = 0; i < want; ++i) {
            const double t0 = now_seconds();
            int32_t id = -1;
            model::MtpOut out;
            out.head_rows = head_rows_;
            out.hidden = hidden_[i % 2].data();
            if (draw_.argmax_only()) {
                out.argmax = &id;
            } else {
                out.logits = row_.data();
            }
            if (i == 0) {
                if (!session_.mtp_draft(tok, out)) return;
            } else {
                session_.mtp_chain(p + i, tok, hidden_[(i + 1) % 2].data(), out);
            }
            if (!draw_.argmax_only()) id = draw_.pick(row_.data(), static_cast<int32_t>(row_.size()), vocab_, draft);
            time(i == 0 ? lag + 1 : 1, now_seconds() - t0, draft);
            if (id < 0 || id >= vocab_) break;  // low confidence, or a padding row of the embedding
            draft->tokens.push_back(id);
            tok = id;
        }
    }

private:
    // A step over `rows` rows took s seconds: a drafted token's cost, or, past the few rows a
    // verify pass leaves behind, catching up (what the block had not taken yet), apart, with
    // what each caught-up row added.
    void time(int64_t rows, double s, Draft* draft) {
        if (rows <= kFree + 1) {
            per_token_.add(s);
            return;
        }
        draft->catch_up_seconds += s;
        if (per_token_.seen > 0) feed_row_.add(std::max(0.0, s - per_token_.value) / static_cast<double>(rows - 1));
    }

    model::Session& session_;
    int32_t vocab_;
    int64_t head_rows_;
    MtpDepth depth_;
    DraftDraw draw_;
    std::vector<float> row_;
    std::vector<float> hidden_[2];  // a step's output hidden state, the next chained step's input
    RunningSeconds per_token_;      // seconds per drafted token
    RunningSeconds feed_row_;       // seconds per row a first step caught up besides its own
    double step_share_ = 0;         // a step / the target's decode step (prior, by weight bytes)
    double row_share_ = 0;          // the block's share of a row of the target's pass (one layer more)
};

}  // namespace

std::unique_ptr<Proposer> make_mtp_proposer(model::Session& target, int32_t vocab, int max_depth, int fixed_depth,
                                            float confidence, int64_t shortlist) {
    if (max_depth < 1) throw std::invalid_argument("mtp: the most tokens drafted must be >= 1, got " + std::to_string(max_depth));
    if (fixed_depth < 0) throw std::invalid_argument("mtp: a fixed depth must be >= 1 (0: adaptive), got " + std::to_string(fixed_depth));
    if (!(confidence >= 0.0f && confidence < 1.0f)) {
        throw std::invalid_argument("spec confidence must be in [0, 1), got " + std::to_string(confidence));
    }
    if (shortlist < 0) shortlist = vocab > 2 * kShortlist ? kShortlist : 0;
    return std::make_unique<MtpProposer>(target, vocab, max_depth, fixed_depth, confidence, shortlist);
}

}  // namespace ds4::speculative
