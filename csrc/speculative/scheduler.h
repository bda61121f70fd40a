// The speculation scheduler: per step, the draft length k (0 = a plain decode step) that
// maximises expected tokens per second, within a ledger that keeps speculation from losing.
//
// Costs. A plain step's seconds c1 come from the generation's own plain steps (the first two
// set it, the faster counting: the first step after a load runs cold; later ones refine it,
// faster ones weighing more, and no verify pass may be faster: timings are slowed by stalls, never
// sped up). A verify pass of r rows costs c1 plus what its r - 1 extra rows add: a prior computed
// at load (model/pass_cost.h) scaled by what passes of that size really took, or, for a size not
// run yet, by what passes of every size took, and never more than r - 1 plain steps; until a
// size has run twice, its extra rows cost at most what an extra row of a smaller size run did
// (a pass reads the weights once: the curve bends down), so that a cold first pass or a prior
// wrong in shape cannot keep longer drafts out for good. No pass is run to calibrate; a later
// generation on the same model starts from what this one measured.
//
// Acceptance. Per proposer and draft position, decayed counts with a prior; a proposer with no
// draft worth verifying steps aside and is probed again after 8, 16, 32, ... plain steps; one
// that costs and could not gain even at perfect acceptance is not probed at all, unless only one
// measured pass says so (a cold first pass must not keep it out for good).
// What its passes really took (drafting, catch-up, verifying) against what the model
// predicted scales its predictions (a row count's first pass, which runs cold, aside), so
// mispredictions cost a few passes, not a generation.
//
// The ledger (the floor by construction). Each speculative pass earns (tokens it emitted) x c1
// minus the seconds it took, drafting and catch-up included. A pass runs only if its worst case
// (every draft rejected: one token for its predicted time) keeps the balance above minus the
// allowance: one plain step plus kBudget of the plain time of the tokens generated so far. The
// generation's balance and the proposer's own are both held to it, so a proposer cannot spend
// what another earned. Whatever the drafts, the prior or the machine, speculation then loses at
// most the allowance against plain decoding (as well as c1 is measured): failed probes are paid
// for by measured gains or by that small budget, never by hope. A proposer whose passes have
// lost on balance needs the margin of a proposer that costs before it drafts again. A draft
// model's catch-up (its prompt, at first) is an investment, made only when drafting is predicted
// to repay it twice over the tokens left and it is at most 3 % of their plain time; it is kept
// out of the balances, so at worst speculation loses the allowance and that investment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/pass_cost.h"

namespace ds4::speculative {

class Scheduler {
public:
    // cost[0]: seconds of a plain step, or 0 when the generation's plain steps will measure it
    // (no draft is verified until they have); cost[r - 1] - cost[0], r = 2 .. n_max + 1: the
    // prior of what a verify pass of r rows adds to a plain step.
    Scheduler(int n_max, std::vector<double> cost, int n_proposers);
    // What an earlier generation measured (model::Model::pass_times) replaces what it covers:
    // its plain step, and the fits of the row counts it ran.
    void resume(const model::PassTimes& t);
    model::PassTimes pass_times() const;

    int n_max() const { return n_max_; }
    int n_proposers() const { return static_cast<int>(stats_.size()); }
    // How many of the `available` drafted tokens of proposer p to verify (0: decode plainly),
    // drafting costing draft_fixed seconds per draft (a block drafter's pass) and draft_cost
    // per token, after catch_up seconds of bringing the proposer up to date. A proposer that
    // costs must be predicted to gain 5 %.
    int pick(int p, int available, double draft_cost = 0.0, double catch_up = 0.0, double draft_fixed = 0.0);
    // After proposer p drafted k tokens with confidences (its estimate that token i is accepted
    // given the ones before it were, DSpark's calibrated confidence head), how many of them to
    // verify: the prefix with the most expected tokens per second, the draft being paid for
    // already; 0 decodes plainly. Never more than k (what pick() weighed against the ledger).
    int cut(int p, int k, const std::vector<float>& confidence) const;
    // Seconds each verified draft token adds besides its row of the pass (exact sampling's
    // per-row probabilities); 0 by default.
    void set_row_overhead(double seconds) { row_overhead_ = seconds; }
    // A target pass over `rows` rows took `seconds`; rows == 1 is a plain step (one token).
    void timed_pass(int rows, double seconds);
    // Proposer p's draft of k tokens had its first `accepted` accepted; drafting and verifying it
    // took `seconds` (0: not timed, and the ledger is not told), of which caught_up catching the
    // proposer up.
    void verified(int p, int k, int accepted, double seconds = 0.0, double caught_up = 0.0);
    // Proposer p was asked for a draft and drafted nothing it could verify (a confidence cut,
    // a context it could not draft after): its `seconds` are a loss to the ledger.
    void wasted(int p, double seconds);
    // Tokens the generation may still emit: what an investment must be repaid over.
    void set_horizon(int64_t tokens) { horizon_ = tokens; }

    // Whether a proposer costing draft_fixed per draft and draft_cost per token could gain at
    // all (at perfect acceptance).
    bool worth(double draft_cost, double draft_fixed = 0.0) const;
    // Expected tokens from one pass that verifies k drafted tokens of proposer p (1 + the
    // expected accepted prefix).
    double expected_tokens(int p, int k) const;
    // Seconds of a pass over `rows` rows as the scheduler models it (0 while c1 is unknown).
    double cost(int rows) const;
    // Seconds one more row adds to a batched pass, averaged over the longest pass.
    double extra_per_row() const { return (cost(n_max_ + 1) - cost(1)) / n_max_; }
    bool knows_plain_step() const { return c1_known_; }
    // Plain decoding's speed as the scheduler models it.
    double plain_tokens_per_second() const { return c1_ > 0 ? 1.0 / c1_ : 0.0; }
    // Acceptance rate at each draft position of proposer p (given the earlier ones accepted).
    std::vector<double> acceptance(int p) const;
    // Measured over predicted seconds of proposer p's passes (running; 1 until it has drafted).
    double slowdown(int p) const { return slow_[static_cast<size_t>(p)]; }
    // The ledger: seconds speculation has gained over plain decoding (negative: lost), in all
    // and by proposer p, and the most it may lose now; and the catch-ups invested apart.
    double balance() const { return balance_; }
    double invested() const { return invested_; }
    double balance(int p) const { return own_[static_cast<size_t>(p)]; }
    double allowance() const;

private:
    struct Position {
        double reached = 0, accepted = 0;  // decayed counts
    };
    using PassFit = model::PassTimes::Fit;

    int n_max_;
    double c1_ = 0;          // seconds of a plain step
    double row_overhead_ = 0;
    bool c1_known_ = false;
    int n_plain_ = 0;        // plain steps timed
    std::vector<double> prior_;  // [r - 1]: prior extra seconds of r rows
    model::PassTimes fit_;       // the passes' measured / prior extra cost (its step unused: c1_)
    std::vector<std::vector<Position>> stats_;  // [proposer][position]
    std::vector<int> skipped_;                  // plain steps since the proposer last drafted
    std::vector<int> probe_wait_;               // plain steps before its next probe
    std::vector<double> slow_;                  // measured / predicted pass seconds
    struct Picked {
        double draft_cost = 0, draft_fixed = 0, catch_up = 0;  // what pick() was told for the pass it chose
        bool invest = false;                  // the catch-up was an investment
    };
    std::vector<Picked> picked_;
    double balance_ = 0;         // the ledger, all proposers
    std::vector<double> own_;    // ... and each one's
    int64_t n_tokens_ = 0;       // tokens the timed steps and passes emitted
    int64_t horizon_ = 0;        // tokens the generation may still emit
    double invested_ = 0;        // catch-ups invested (kept out of the balances)
};

}  // namespace ds4::speculative
