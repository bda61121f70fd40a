// See scheduler.h.
#include "speculative/scheduler.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace ds4::speculative {

namespace {

// Older outcomes fade: the acceptance follows what the text does now (code, then prose).
constexpr double kDecay = 0.95;
// Prior of a position, worth kPriorWeight outcomes: 1/2 for the first, and for the others the
// rate of the position before (a proposer right at one position is mostly right at the next, so
// longer drafts get tried once shorter ones are accepted).
constexpr double kPriorWeight = 2.0;
// Plain-step timings: each new one weighs this much, clamped to [1/2, 2] x the estimate so that
// one stalled step does not move it alone.
constexpr double kStepWeight = 0.1, kStepWeightDown = 0.3;
// Verify-pass timings against the prior: each weighs this much in its size's fit and in the
// fit of all sizes; a ratio is clamped to [kFitMin, kFitMax].
constexpr double kFitWeight = 0.3, kFitMin = 0.25, kFitMax = 8.0;
// A proposer is first probed at its first chance; after kProbeEvery steps without drafting, a
// proposer with a draft gets one short probe; each probe that does not bring the proposer back
// doubles the wait, up to kProbeMax.
constexpr int kProbeEvery = 8, kProbeMax = 256;
// The least speed-up (at perfect acceptance) worth drafting with a proposer that costs.
constexpr double kMinGain = 1.1;
// The least predicted speed-up for which a proposer that costs drafts (and one whose passes
// have lost on balance): at break-even its passes only add risk (the Qwen 0.5B draft, predicted
// at ~1.0x, measured 0.93-0.94x).
constexpr double kCostlyMargin = 1.05;
// Measured / predicted pass seconds: each pass weighs this much, its ratio clamped so that one
// pass the machine stalled (or a timer's hiccup) cannot switch a proposer off alone. The same
// clamp bounds what one pass can cost the ledger.
constexpr double kSlowWeight = 0.25, kSlowMin = 0.5, kSlowMax = 4.0;
// A pass size's own timings are trusted from this many on; before, an extra row of it costs at
// most kSpread x what one of a smaller size run cost (1.5 let a prior whose third row costs
// twice its second keep Gemma's fresh-process edit at one drafted token per pass).
constexpr int kTrusted = 2;
constexpr double kSpread = 1.0;
// The allowance: one plain step, plus this share of the plain time of the tokens so far.
constexpr double kBudget = 0.02;
// The most a proposer's catch-up may invest, as a share of the plain time of the tokens left.
constexpr double kInvest = 0.03;

}  // namespace

Scheduler::Scheduler(int n_max, std::vector<double> cost, int n_proposers)
    : n_max_(n_max), stats_(static_cast<size_t>(n_proposers)), skipped_(static_cast<size_t>(n_proposers), 0),
      probe_wait_(static_cast<size_t>(n_proposers), 1), slow_(static_cast<size_t>(n_proposers), 1.0),
      picked_(static_cast<size_t>(n_proposers)), own_(static_cast<size_t>(n_proposers), 0.0) {
    if (n_max < 1) throw std::invalid_argument("n_max must be >= 1, got " + std::to_string(n_max));
    if (cost.size() < static_cast<size_t>(n_max) + 1) throw std::invalid_argument("Scheduler: need n_max + 1 costs");
    c1_ = cost[0];
    c1_known_ = c1_ > 0;
    prior_.resize(static_cast<size_t>(n_max) + 1);
    for (size_t i = 1; i < prior_.size(); ++i) prior_[i] = std::max(0.0, cost[i] - cost[0]);
    fit_.rows.resize(prior_.size());
    for (auto& s : stats_) s.resize(static_cast<size_t>(n_max));
}

void Scheduler::resume(const model::PassTimes& t) {
    if (t.step > 0) {
        c1_ = t.step;
        c1_known_ = true;
    }
    for (size_t i = 0; i < fit_.rows.size() && i < t.rows.size(); ++i)
        if (t.rows[i].seen > 0) fit_.rows[i] = t.rows[i];
    if (t.all.seen > 0) fit_.all = t.all;
}

model::PassTimes Scheduler::pass_times() const {
    model::PassTimes t = fit_;
    t.step = c1_known_ ? c1_ : 0.0;
    return t;
}

double Scheduler::cost(int rows) const {
    // Per size: the prior scaled by what passes of that size took, or, for a size not run yet,
    // by what passes of every size took; at most r - 1 plain steps (each would stream the
    // weights again: a prior that says more, a probe the machine stalled, would keep every
    // draft out, and with it the passes that would correct it). A size run fewer than
    // kTrusted times costs at most kSpread x per extra row what a smaller size run took: the
    // curve bends down (a pass reads the weights once), and neither a size's cold first pass
    // nor a prior wrong in shape (the fit of all sizes learnt where the prior is smallest) may
    // keep the longer drafts from being tried. Never cheaper for more rows.
    double e = 0, per_row = std::numeric_limits<double>::infinity();
    for (int r = 2; r <= rows; ++r) {
        const PassFit& f = fit_.rows[static_cast<size_t>(r - 1)];
        double x = std::min(prior_[static_cast<size_t>(r - 1)] * (f.seen > 0 ? f : fit_.all).ratio, (r - 1) * c1_);
        if (f.seen < kTrusted) x = std::min(x, kSpread * per_row * (r - 1));
        if (f.seen > 0) per_row = std::min(per_row, x / (r - 1));
        e = std::max(e, x);
    }
    return c1_ + e;
}

double Scheduler::allowance() const { return c1_ * (1.0 + kBudget * static_cast<double>(n_tokens_)); }

std::vector<double> Scheduler::acceptance(int p) const {
    std::vector<double> out;
    double prior = 0.5;
    for (const Position& s : stats_[static_cast<size_t>(p)]) {
        prior = (s.accepted + kPriorWeight * prior) / (s.reached + kPriorWeight);
        out.push_back(prior);
    }
    return out;
}

double Scheduler::expected_tokens(int p, int k) const {
    const std::vector<double> a = acceptance(p);
    double e = 1.0, prefix = 1.0;
    for (int i = 0; i < k; ++i) {
        prefix *= a[static_cast<size_t>(i)];
        e += prefix;
    }
    return e;
}

bool Scheduler::worth(double draft_cost, double draft_fixed) const {
    if (!c1_known_) return false;
    double best_case = 0;
    for (int k = 1; k <= n_max_; ++k) best_case = std::max(best_case, (k + 1) / (cost(k + 1) + draft_fixed + k * draft_cost));
    return best_case >= kMinGain / cost(1);
}

int Scheduler::cut(int p, int k, const std::vector<float>& confidence) const {
    if (!c1_known_) return k;
    const int kmax = std::min(k, static_cast<int>(confidence.size()));
    const double slow = slow_[static_cast<size_t>(p)];
    int best = 0;
    double best_rate = 1.0 / c1_, e = 1.0, prefix = 1.0;
    for (int i = 1; i <= kmax; ++i) {
        prefix *= std::clamp(static_cast<double>(confidence[static_cast<size_t>(i - 1)]), 0.0, 1.0);
        e += prefix;
        const double rate = e / (slow * (cost(i + 1) + i * row_overhead_));
        if (rate > best_rate) {
            best = i;
            best_rate = rate;
        }
    }
    return best;
}

int Scheduler::pick(int p, int available, double draft_cost, double catch_up, double draft_fixed) {
    if (!c1_known_) return 0;
    const size_t ip = static_cast<size_t>(p);
    const int kmax = std::min(available, n_max_);
    // A proposer that costs, and would not gain kMinGain even if every draft were accepted, is
    // not even probed (on a steep verify curve a draft model cannot pay), unless that verdict
    // rests on a single measured pass: the first pass after a load can run several times slower
    // (buffers grow, pages fault), and with no probe no pass would ever correct the fit. It is
    // then probed as a proposer with no draft worth verifying, until a second pass confirms
    // (the prior alone, from the kernels' rates, is trusted as it is).
    const bool costs = draft_cost > 0 || draft_fixed > 0;
    const bool verdict_measured = fit_.all.seen == 0 || fit_.all.seen >= kTrusted;
    if (costs && verdict_measured && !worth(draft_cost, draft_fixed)) return 0;
    const std::vector<double> a = acceptance(p);
    const double slow = slow_[ip];
    const double margin = costs || own_[ip] < 0 ? kCostlyMargin : 1.0;
    std::vector<double> rate(static_cast<size_t>(kmax) + 1, 0.0);  // [k]: expected tokens per second
    int best = 0;
    double e = 1.0, prefix = 1.0;
    for (int k = 1; k <= kmax; ++k) {
        prefix *= a[static_cast<size_t>(k - 1)];
        e += prefix;
        rate[static_cast<size_t>(k)] = e / (slow * (cost(k + 1) + draft_fixed + k * (draft_cost + row_overhead_)));
        if (rate[static_cast<size_t>(k)] > rate[static_cast<size_t>(best)]) best = k;
    }
    if (rate[static_cast<size_t>(best)] <= margin / c1_) best = 0;
    int& skipped = skipped_[ip];
    int& wait = probe_wait_[ip];
    bool probe = false;
    if (best > 0) {
        wait = kProbeEvery;
    } else if (kmax > 0 && ++skipped >= wait) {
        // A probe drafts one token, or, where a draft costs the same whatever its length (a block
        // drafter's pass), all it can: that is what it pays for (the ledger may shorten it).
        best = draft_fixed > 0 ? kmax : 1;
        probe = true;
        wait = std::min(std::max(2 * wait, kProbeEvery), kProbeMax);
    }
    // A catch-up that drafting is predicted to repay twice over the tokens left, and that is a
    // small share of their plain time, is an investment (a draft model's prompt): kept apart
    // from the ledger, so that the passes it enables are judged on their own. A probe never
    // invests.
    bool invest = false;
    if (catch_up > 0 && best > 0 && !probe) {
        const double plain_left = static_cast<double>(horizon_) * c1_;
        const double gain = plain_left * (1.0 - 1.0 / (rate[static_cast<size_t>(best)] * c1_));
        invest = catch_up <= kInvest * plain_left && gain >= 2.0 * catch_up;
    }
    // The ledger: the pass's worst case (one token for all its time) must stay within what
    // speculation has gained, in all and by this proposer, plus the allowance.
    const double budget = std::min(balance_, own_[ip]) + allowance();
    const double paid = invest ? 0.0 : catch_up;
    const auto worst = [&](int k) { return slow * (cost(k + 1) + draft_fixed + k * (draft_cost + row_overhead_)) + paid - c1_; };
    while (best > 0 && worst(best) > budget) --best;
    if (best > 0 && !probe && rate[static_cast<size_t>(best)] <= margin / c1_) best = 0;
    if (best > 0) skipped = 0;
    picked_[ip] = {draft_cost, draft_fixed, catch_up, invest};
    return best;
}

void Scheduler::timed_pass(int rows, double seconds) {
    if (rows < 1 || rows > n_max_ + 1 || !(seconds > 0)) return;
    if (rows == 1) {
        ++n_tokens_;
        if (!c1_known_) {
            c1_ = n_plain_ == 0 ? seconds : std::min(c1_, seconds);
            c1_known_ = ++n_plain_ >= 2;
        } else {
            // faster steps weigh more: a step is slowed by stalls, never sped up
            const double w = seconds < c1_ ? kStepWeightDown : kStepWeight;
            c1_ += w * (std::clamp(seconds, 0.5 * c1_, 2.0 * c1_) - c1_);
        }
        return;
    }
    const size_t i = static_cast<size_t>(rows - 1);
    if (!c1_known_) return;
    // No pass is faster than a plain step: a faster one says c1 was measured in a stall.
    c1_ = std::min(c1_, seconds);
    if (!(prior_[i] > 0)) return;
    const double r = std::clamp((seconds - c1_) / prior_[i], kFitMin, kFitMax);
    fit_.rows[i].add(r, kFitWeight);
    fit_.all.add(r, kFitWeight);
}

void Scheduler::wasted(int p, double seconds) {
    if (!(seconds > 0)) return;
    balance_ -= seconds;
    own_[static_cast<size_t>(p)] -= seconds;
}

void Scheduler::verified(int p, int k, int accepted, double seconds, double caught_up) {
    const size_t ip = static_cast<size_t>(p);
    if (seconds > 0 && k >= 1 && k <= n_max_ && c1_known_) {
        const Picked& pk = picked_[ip];
        const double predicted = cost(k + 1) + pk.draft_fixed + k * (pk.draft_cost + row_overhead_) + pk.catch_up;
        const double r = std::clamp(seconds / predicted, kSlowMin, kSlowMax);
        // The first pass of a row count (timed_pass saw it once: this one) runs cold (buffers
        // grow, pages fault, a drafter's first pass too): the fit takes it as the faster of two,
        // the ledger pays it, and no proposer's slowdown inherits it.
        if (fit_.rows[static_cast<size_t>(k)].seen != 1) slow_[ip] += kSlowWeight * (r - slow_[ip]);
        double spent = std::min(seconds, kSlowMax * predicted);
        if (pk.invest) {
            caught_up = std::min(caught_up, spent);
            invested_ += caught_up;
            spent -= caught_up;
        }
        const double gain = (accepted + 1) * c1_ - spent;
        balance_ += gain;
        own_[ip] += gain;
    }
    n_tokens_ += accepted + 1;
    auto& st = stats_[ip];
    for (int i = 0; i < k && i <= accepted; ++i) {
        Position& s = st[static_cast<size_t>(i)];
        s.reached = s.reached * kDecay + 1.0;
        s.accepted = s.accepted * kDecay + (i < accepted ? 1.0 : 0.0);
    }
}

}  // namespace ds4::speculative
