// See dflash.h.
#include "speculative/dflash.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "speculative/draft.h"
#include "speculative/draw.h"

namespace ds4::speculative {

namespace {

// Context rows a draft takes along at about the cost of its block: the tokens a verify pass
// accepted since the last draft.
constexpr int64_t kFree = 16;

class DFlashProposer final : public Proposer {
public:
    DFlashProposer(model::Session& target, std::shared_ptr<model::BlockDrafter> d, int32_t vocab, float confidence,
                   int64_t shortlist)
        : session_(target), d_(std::move(d)), vocab_(vocab), head_rows_(shortlist),
          // a confidence head cuts by its own estimate; without one, by the draft's top probability
          confidence_(confidence), draw_(d_->has_confidence() ? 0.0f : confidence) {
        session_.track_block(d_);
        // Priors until its passes are timed: a block pass streams the draft layers' weights and
        // the (shortlisted) head once, as a decode step streams the target's; a context row
        // costs its fc and key/value projections, against a row of the target's pass.
        const model::PassWork& w = target.model().work();
        pass_share_ = (d_->block_bytes() + w.head.bytes * w.head_share(shortlist)) / w.bytes();
        block_row_share_ = d_->block_macs() / w.macs();
        row_share_ = d_->context_macs() / w.macs();
    }
    const char* name() const override { return d_->kind(); }
    bool costs() const override { return true; }
    int max_draft() const override { return d_->max_draft(); }
    double cost_per_draft(const TargetCost& target) const override {
        // the block's rows, as a batched pass adds rows
        const double rows = static_cast<double>(d_->block_size() - 1) * target.row * block_row_share_;
        return per_pass_.or_else(pass_share_ * target.step + rows);
    }

    double catch_up_seconds(const std::vector<int32_t>&, const TargetCost& target) const override {
        const int64_t lag = session_.block_lag();
        const bool stale = session_.block_stale();
        if (lag <= kFree) return 0.0;
        // The feed lost track: the context is evaluated again to recover it.
        if (stale) return static_cast<double>(lag) * target.row * (1.0 + row_share_);
        return static_cast<double>(lag - kFree) * feed_row_.or_else(row_share_ * target.row);
    }

    void sample_drafts(const sample::SamplingParams& params, int32_t n_vocab) override {
        draw_.sample(params, n_vocab, n_vocab);
    }

    void propose(const std::vector<int32_t>& ctx, int n_max, Draft* draft) override {
        if (ctx.empty() || n_max < 1) return;
        const int64_t p = static_cast<int64_t>(ctx.size()) - 1;  // where the target evaluates ctx.back()
        if (session_.n_past() != p) return;                       // a token is pending: see Session::block_draft
        const int n = std::min(n_max, max_draft());
        const int64_t lag = session_.block_lag();
        const bool stale = session_.block_stale();  // this pass re-evaluates the context first
        const auto n_vocab = static_cast<int32_t>(session_.n_vocab());
        double kept = 1.0;  // the confidence head's estimate that the whole draft so far is accepted
        const auto pick = [&](const model::BlockRow& r) -> int32_t {
            if (confidence_ > 0.0f && d_->has_confidence()) {
                kept *= r.confidence;
                if (kept < confidence_) return -1;
            }
            const int32_t id = r.logits && !draw_.argmax_only() ? draw_.pick(r.logits, n_vocab, vocab_, draft) : r.argmax;
            if (id < 0 || id >= vocab_) return -1;  // low confidence, or a padding row of the embedding
            draft->tokens.push_back(id);
            if (d_->has_confidence()) draft->confidence.push_back(r.confidence);
            return id;
        };
        const double t0 = now_seconds();
        if (!session_.block_draft(ctx.back(), n, !draw_.argmax_only(), head_rows_, pick)) return;
        time(lag, stale, now_seconds() - t0, draft);
    }

private:
    // A pass that fed `lag` context rows took s seconds: past the few a verify pass leaves
    // behind, the feed is catching up, timed apart with what each row added (not when the
    // context was evaluated again: that is the target's work).
    void time(int64_t lag, bool stale, double s, Draft* draft) {
        if (lag <= kFree) {
            per_pass_.add(s);
            return;
        }
        draft->catch_up_seconds += s;
        if (per_pass_.seen > 0 && !stale) feed_row_.add(std::max(0.0, s - per_pass_.value) / static_cast<double>(lag));
    }

    model::Session& session_;
    std::shared_ptr<model::BlockDrafter> d_;
    int32_t vocab_;
    int64_t head_rows_;
    float confidence_;
    DraftDraw draw_;
    RunningSeconds per_pass_;   // seconds per block pass
    RunningSeconds feed_row_;   // seconds per context row a pass caught up besides its block
    double pass_share_ = 0;     // a block pass / the target's decode step (prior, by weight bytes)
    double block_row_share_ = 0;  // a block row / a row of the target's pass (prior, by multiply-adds)
    double row_share_ = 0;      // a context row / a row of the target's pass (prior, by multiply-adds)
};

}  // namespace

std::unique_ptr<Proposer> make_dflash_proposer(model::Session& target, std::shared_ptr<model::BlockDrafter> drafter,
                                               int32_t vocab, float confidence, int64_t shortlist) {
    if (!(confidence >= 0.0f && confidence < 1.0f)) {
        throw std::invalid_argument("spec confidence must be in [0, 1), got " + std::to_string(confidence));
    }
    if (shortlist < 0) shortlist = vocab > 2 * kShortlist ? kShortlist : 0;
    return std::make_unique<DFlashProposer>(target, std::move(drafter), vocab, confidence, shortlist);
}

}  // namespace ds4::speculative
