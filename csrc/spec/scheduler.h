// The speculation scheduler: per step, the draft length k (0 = a plain decode step) that
// maximises expected tokens per second, from the cost of a verify pass of k + 1 rows (calibrated
// when the model first speculates, refined by every pass timed since), the proposer's cost per
// drafted token and its running acceptance per draft position. A proposer is probed at its
// first chance; when no k > 0 pays it steps aside, and re-probes after 8, 16, 32, ... plain
// steps so that a proposer that starts matching again is noticed without probes costing much.
// What a pass really took (drafting and verifying) is compared with what the model predicted,
// and the ratio scales the proposer's predictions: a draft model's first step feeds a few tokens
// at once, its sampling and bookkeeping cost, and on a noisy machine its timings drift, so the
// model alone is optimistic exactly where drafting is marginal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ds4::spec {

class Scheduler {
public:
    // cost[r - 1]: seconds of a target pass over r rows, r = 1 .. n_max + 1.
    Scheduler(int n_max, std::vector<double> cost, int n_proposers);

    int n_max() const { return n_max_; }
    int n_proposers() const { return static_cast<int>(stats_.size()); }
    // How many of the `available` drafted tokens of proposer p to verify (0: decode plainly),
    // drafting costing draft_cost seconds per token, after catch_up seconds of bringing the
    // proposer up to date. A proposer that costs must be predicted to gain 5 %. A probe is
    // skipped (and the wait still doubles) when its catch-up would cost more than 3 % of the
    // plain steps it follows: a draft model that has to re-read everything it sat out would
    // otherwise tax every plain step by its feed cost.
    int pick(int p, int available, double draft_cost = 0.0, double catch_up = 0.0);
    // A target pass over `rows` rows took `seconds`.
    void timed_pass(int rows, double seconds);
    // Proposer p's draft of k tokens had its first `accepted` accepted; drafting and verifying it
    // took `seconds` (0: not timed).
    void verified(int p, int k, int accepted, double seconds = 0.0);

    // Whether a proposer costing draft_cost per token could gain at all (at perfect acceptance).
    bool worth(double draft_cost) const;
    // Expected tokens from one pass that verifies k drafted tokens of proposer p (1 + the
    // expected accepted prefix).
    double expected_tokens(int p, int k) const;
    double cost(int rows) const { return cost_[static_cast<size_t>(rows - 1)]; }
    // Plain decoding's speed as the scheduler models it.
    double plain_tokens_per_second() const { return 1.0 / cost(1); }
    // Acceptance rate at each draft position of proposer p (given the earlier ones accepted).
    std::vector<double> acceptance(int p) const;
    // Measured over predicted seconds of proposer p's passes (running; 1 until it has drafted).
    double slowdown(int p) const { return slow_[static_cast<size_t>(p)]; }

private:
    struct Position {
        double reached = 0, accepted = 0;  // decayed counts
    };
    int n_max_;
    std::vector<double> cost_;
    std::vector<std::vector<Position>> stats_;  // [proposer][position]
    std::vector<int> skipped_;                  // plain steps since the proposer last drafted
    std::vector<int> probe_wait_;               // plain steps before its next probe
    std::vector<double> slow_;                  // measured / predicted pass seconds
    struct Picked {
        double draft_cost = 0, catch_up = 0;  // what pick() was told for the pass it chose
    };
    std::vector<Picked> picked_;
};

}  // namespace ds4::spec
