// See draft.h.
#include "speculative/draft.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "model/session.h"
#include "speculative/draw.h"

namespace ds4::speculative {

namespace {

class DraftProposer final : public Proposer {
public:
    DraftProposer(std::shared_ptr<model::Model> m, const model::Model& target, int32_t vocab, float confidence,
                  int64_t shortlist)
        : session_(m), vocab_(vocab), draw_(confidence) {
        session_.set_head_rows(shortlist);
        // Priors until its own steps are timed, from what each model's pass reads and computes:
        // a decode step streams the weights (bytes), a batched feed adds multiply-adds per row.
        const model::PassWork& d = m->work();
        const model::PassWork& t = target.work();
        step_share_ = d.bytes(shortlist) / t.bytes();
        row_share_ = d.macs(shortlist) / t.macs();
    }
    const char* name() const override { return "draft"; }
    bool costs() const override { return true; }
    double cost_per_token(const TargetCost& target) const override {
        return per_token_.or_else(step_share_ * target.step);
    }

    double catch_up_seconds(const std::vector<int32_t>& ctx, const TargetCost& target) const override {
        const int64_t lag = static_cast<int64_t>(ctx.size()) - static_cast<int64_t>(common_prefix(ctx));
        // a draft's first step feeds what is missing in one batch: a few tokens cost about the
        // one-token step it pays anyway
        constexpr int64_t kFree = 4;
        if (lag <= kFree) return 0.0;
        const double per_token = feed_per_token_.or_else(row_share_ * target.row);
        return cost_per_token(target) + static_cast<double>(lag - 1) * per_token;
    }

    void sample_drafts(const sample::SamplingParams& params, int32_t n_vocab) override {
        draw_.sample(params, session_.n_vocab(), n_vocab);
    }

    void propose(const std::vector<int32_t>& ctx, int n_max, Draft* draft) override {
        if (ctx.empty() || n_max < 1) return;
        // Keep the common prefix with what the draft session holds (at least one position to
        // feed, whose prediction is the first draft token), feed the rest.
        size_t common = common_prefix(ctx);
        const int64_t room = session_.n_ctx() - static_cast<int64_t>(ctx.size());
        if (room < 1) return;
        n_max = static_cast<int>(std::min<int64_t>(n_max, room));
        // A draft model with recurrent layers goes back only to its checkpoint (taken below,
        // where drafting began) or to the start.
        if (!session_.can_truncate(static_cast<int64_t>(common))) common = 0;
        session_.truncate(static_cast<int64_t>(common));
        const int32_t* feed = ctx.data() + common;
        int64_t n_feed = static_cast<int64_t>(ctx.size() - common);
        for (int i = 0; i < n_max; ++i) {
            // The cost per drafted token is that of a one-token step: feeding what the draft
            // missed (a prompt, the steps it sat out) is a price of admission, not of drafting.
            const auto t0 = std::chrono::steady_clock::now();
            const int32_t next = plain() ? session_.next_argmax(feed, n_feed) : drawn(feed, n_feed, draft);
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (n_feed == 1) {
                per_token_.add(s);
            } else {
                draft->catch_up_seconds += s;
                if (n_feed >= 8) {  // a batched feed: its cost per token, for catch_up_seconds
                    const double f = s / static_cast<double>(n_feed);
                    feed_per_token_.add(f);
                }
            }
            if (i == 0) session_.checkpoint();  // the draft's tokens may be rejected from here on
            if (next < 0 || next >= vocab_) break;  // low confidence, or a padding row of the draft's embedding
            draft->tokens.push_back(next);
            feed = &draft->tokens.back();
            n_feed = 1;
        }
    }

private:
    bool plain() const { return draw_.argmax_only(); }

    // Positions the draft session holds that match ctx, leaving at least one of ctx to feed
    // (its prediction is the first draft token).
    size_t common_prefix(const std::vector<int32_t>& ctx) const {
        const std::vector<int32_t> held = session_.tokens();
        size_t common = 0;
        while (common < held.size() && common + 1 < ctx.size() && held[common] == ctx[common]) ++common;
        return common;
    }

    // Evaluates feed and returns the next draft token from its logits (DraftDraw::pick).
    int32_t drawn(const int32_t* feed, int64_t n_feed, Draft* draft) {
        const int32_t n = session_.n_vocab();
        row_.resize(static_cast<size_t>(n));
        session_.eval(feed, n_feed, row_.data(), 1);
        return draw_.pick(row_.data(), n, vocab_, draft);
    }

    model::Session session_;
    int32_t vocab_;
    DraftDraw draw_;
    std::vector<float> row_;
    RunningSeconds per_token_;       // seconds per drafted token
    RunningSeconds feed_per_token_;  // seconds per token of a catch-up (a batched feed)
    double step_share_ = 0;      // the draft's step / the target's, by weight bytes read (prior)
    double row_share_ = 0;       // the draft's extra row / the target's, by multiply-adds (prior)
};

std::string quoted(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += (static_cast<unsigned char>(c) < 0x20) ? '?' : c;
    return out + "'";
}

}  // namespace

std::unique_ptr<Proposer> make_draft_proposer(std::shared_ptr<model::Model> draft, const model::Model& target,
                                              const tok::Tokenizer& draft_tok, const tok::Tokenizer& target_tok,
                                              float confidence, int64_t shortlist) {
    if (!(confidence >= 0.0f && confidence < 1.0f)) {
        throw std::invalid_argument("spec confidence must be in [0, 1), got " + std::to_string(confidence));
    }
    const std::string what = "the draft model's vocabulary differs from the target's: ";
    if (draft_tok.vocab_size() != target_tok.vocab_size()) {
        throw std::invalid_argument(what + std::to_string(draft_tok.vocab_size()) + " tokens against " +
                                    std::to_string(target_tok.vocab_size()));
    }
    if (draft_tok.bos_id() != target_tok.bos_id() || draft_tok.eos_id() != target_tok.eos_id()) {
        throw std::invalid_argument(what + "BOS / EOS ids " + std::to_string(draft_tok.bos_id()) + " / " +
                                    std::to_string(draft_tok.eos_id()) + " against " + std::to_string(target_tok.bos_id()) +
                                    " / " + std::to_string(target_tok.eos_id()));
    }
    for (int32_t id = 0; id < target_tok.vocab_size(); ++id) {
        if (draft_tok.token_bytes(id) != target_tok.token_bytes(id)) {
            throw std::invalid_argument(what + "token " + std::to_string(id) + " is " + quoted(draft_tok.token_bytes(id)) +
                                        " against " + quoted(target_tok.token_bytes(id)));
        }
    }
    if (shortlist < 0) shortlist = target_tok.vocab_size() > 2 * kShortlist ? kShortlist : 0;
    return std::make_unique<DraftProposer>(std::move(draft), target, target_tok.vocab_size(), confidence, shortlist);
}

}  // namespace ds4::speculative
