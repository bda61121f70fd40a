// See draft.h.
#include "spec/draft.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "model/session.h"

namespace ds4::spec {

namespace {

class DraftProposer final : public Proposer {
public:
    DraftProposer(std::shared_ptr<model::Model> m, int32_t vocab) : session_(m), vocab_(vocab) {
        per_token_ = m->verify_costs(1)[0];  // one step of the draft model, timed once per model
    }
    const char* name() const override { return "draft"; }
    double cost_per_token() const override { return per_token_; }
    bool costs() const override { return true; }

    void prepare(const std::vector<int32_t>& ctx) override {
        if (ctx.size() > 1) session_.eval_argmax(ctx.data(), static_cast<int64_t>(ctx.size() - 1));
    }

    void propose(const std::vector<int32_t>& ctx, int n_max, std::vector<int32_t>* draft) override {
        if (ctx.empty() || n_max < 1) return;
        // Keep the common prefix with what the draft session holds (at least one position to
        // feed, whose prediction is the first draft token), feed the rest.
        const std::vector<int32_t> held = session_.tokens();
        size_t common = 0;
        while (common < held.size() && common + 1 < ctx.size() && held[common] == ctx[common]) ++common;
        const int64_t room = session_.n_ctx() - static_cast<int64_t>(ctx.size());
        if (room < 1) return;
        n_max = static_cast<int>(std::min<int64_t>(n_max, room));
        session_.truncate(static_cast<int64_t>(common));
        // The cost per drafted token is that of a one-token step: feeding what the draft missed
        // (a prompt, the steps it sat out) is a price of admission, not of drafting.
        const auto step = [&](const int32_t* t, int64_t n) {
            const auto t0 = std::chrono::steady_clock::now();
            const int32_t id = session_.eval_argmax(t, n).back();
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (n == 1) per_token_ = per_token_ > 0 ? per_token_ + 0.2 * (s - per_token_) : s;
            return id;
        };
        int32_t next = step(ctx.data() + common, static_cast<int64_t>(ctx.size() - common));
        for (int i = 0; i < n_max; ++i) {
            if (next < 0 || next >= vocab_) break;  // a padding row of the draft's embedding
            draft->push_back(next);
            if (i + 1 < n_max) next = step(&next, 1);
        }
    }

private:
    model::Session session_;
    int32_t vocab_;
    double per_token_ = 0;  // seconds per drafted token, running
};

std::string quoted(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += (static_cast<unsigned char>(c) < 0x20) ? '?' : c;
    return out + "'";
}

}  // namespace

std::unique_ptr<Proposer> make_draft_proposer(std::shared_ptr<model::Model> draft, const tok::Tokenizer& draft_tok,
                                              const tok::Tokenizer& target_tok) {
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
    return std::make_unique<DraftProposer>(std::move(draft), target_tok.vocab_size());
}

}  // namespace ds4::spec
