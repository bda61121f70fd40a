// Drafters for speculative decoding. A Proposer guesses tokens that may follow the context; the
// target model verifies a draft in one batched pass (model/generate.cpp) and every proposer of a
// chain is shown the context as it grows, accepted drafts included.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sample/sampler.h"

namespace ds4::speculative {

// A proposer's guess: tokens, and for a proposer that samples them, where each was drawn from.
struct Draft {
    std::vector<int32_t> tokens;
    // Empty when the tokens are deterministic (q one-hot at each); otherwise tokens.size() rows
    // of the target's n_vocab probabilities, row i the distribution token i was drawn from.
    std::vector<float> q;
    // Empty, or per token the proposer's estimate that it is accepted given the ones before it
    // were (a DSpark drafter's calibrated confidence head): the scheduler cuts the draft by it.
    std::vector<float> confidence;
    // Seconds the proposer spent catching up (feeding what it missed) before drafting.
    double catch_up_seconds = 0;
    void clear() {
        tokens.clear();
        q.clear();
        confidence.clear();
        catch_up_seconds = 0;
    }
};

// What the target's passes cost, as the scheduler measures them: what the priors of a proposer
// that costs are scaled from, before its own steps are timed.
struct TargetCost {
    double step = 0;  // seconds of a plain decode step
    double row = 0;   // seconds one more row adds to a batched pass
};

// A steady clock in seconds, for timing drafts.
inline double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A proposer's running seconds per step: the first two samples set it, the faster counting (the
// first step after a load runs cold: after one, the prior if that is faster), later ones move it
// by 0.2, clamped to [1/2, 2] x the estimate so that one stall does not move it alone.
struct RunningSeconds {
    double value = 0;
    int seen = 0;
    void add(double s) {
        value = seen == 0 ? s : seen == 1 ? std::min(value, s) : value + 0.2 * (std::clamp(s, 0.5 * value, 2.0 * value) - value);
        ++seen;
    }
    double or_else(double prior) const { return seen == 0 ? prior : seen == 1 ? std::min(value, prior) : value; }
};

class Proposer {
public:
    virtual ~Proposer() = default;
    virtual const char* name() const = 0;
    // Appends to draft->tokens up to n_max tokens guessed to follow `context` (every token so far).
    virtual void propose(const std::vector<int32_t>& context, int n_max, Draft* draft) = 0;
    // The context has grown (or is seen for the first time): keep any index current.
    virtual void observe(const std::vector<int32_t>& context) {}
    // Seconds per drafted token (0: free, as the n-gram proposers). A proposer that costs is
    // asked for exactly the number of tokens the scheduler decided to verify.
    virtual double cost_per_token(const TargetCost& target) const { return 0.0; }
    // Seconds per draft whatever its length (a block drafter's pass drafts every position at once).
    virtual double cost_per_draft(const TargetCost& target) const { return 0.0; }
    virtual bool costs() const { return false; }
    // Seconds to bring the proposer up to `context` before it can draft (a draft model feeding
    // what it missed while others drafted or the target decoded alone, the prompt at first):
    // what a probe also pays.
    virtual double catch_up_seconds(const std::vector<int32_t>& context, const TargetCost& target) const {
        return 0.0;
    }
    // Exact sampling at temperature > 0: draw drafts from the proposer's own distribution under
    // `params` and report it in Draft::q (rows of n_vocab, the target's); temperature 0: draft
    // greedily again. A deterministic proposer ignores this; its q stays one-hot.
    virtual void sample_drafts(const sample::SamplingParams& params, int32_t n_vocab) {}
    // Bounds of its own on the tokens of one draft: at most max_draft(), and, when the scheduler
    // (or n_min) has it draft at all, at least min_draft() (a depth policy's draft length).
    virtual int max_draft() const { return 1 << 30; }
    virtual int min_draft() const { return 0; }
    // Its draft of k tokens had its first `accepted` accepted by the target.
    virtual void verified(int k, int accepted) {}
};

// Prompt lookup: the most recent earlier occurrence of the context's last n tokens, n from
// match_max down to match_min, and the tokens that followed it.
std::unique_ptr<Proposer> make_ngram_simple(int match_min = 2, int match_max = 4);
// llama.cpp's ngram-mod: a fixed pool (2^20 entries) maps a hash of n_match tokens to the token
// that last followed them anywhere in the session; a draft chains lookups of its own tail.
std::unique_ptr<Proposer> make_ngram_mod(int n_match = 8);

// A proposer by type name ("ngram-simple", "ngram-mod"); throws std::invalid_argument for an
// unknown or not yet available type, naming the known ones.
std::unique_ptr<Proposer> make_proposer(const std::string& type);

}  // namespace ds4::speculative
