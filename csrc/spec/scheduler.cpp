// See scheduler.h.
#include "spec/scheduler.h"

#include <algorithm>
#include <stdexcept>

namespace ds4::spec {

namespace {

// Older outcomes fade: the acceptance follows what the text does now (code, then prose).
constexpr double kDecay = 0.95;
// Prior of a position, worth kPriorWeight outcomes: 1/2 for the first, and for the others the
// rate of the position before (a proposer right at one position is mostly right at the next, so
// longer drafts get tried once shorter ones are accepted).
constexpr double kPriorWeight = 2.0;
// Timing updates: new pass times weigh this much against the running estimate.
constexpr double kCostWeight = 0.1;
// A proposer is first probed at its first chance (a draft model is then in step with the
// context); after kProbeEvery steps without drafting, a proposer with a draft gets one short
// probe; each probe that does not bring the proposer back doubles the wait, up to kProbeMax (a
// probe of a draft model also pays for feeding it what it missed).
constexpr int kProbeEvery = 8, kProbeMax = 256;
// The least speed-up (at perfect acceptance) worth drafting with a proposer that costs.
constexpr double kMinGain = 1.1;
// The least predicted speed-up for which a proposer that costs drafts: at break-even its
// passes only add risk (measured on the Qwen 0.5B draft: predicted ~1.0x, real 0.93-0.94x).
constexpr double kCostlyMargin = 1.05;
// The most a probe's catch-up may cost, as a share of the plain steps since the last draft: probes
// that do not bring a draft model back are a tax on plain decoding, which must stay under 5 %.
constexpr double kProbeBudget = 0.03;
// Measured / predicted pass seconds: each pass weighs this much, its ratio clamped so that one
// pass the machine stalled (or a timer's hiccup) cannot switch a proposer off alone.
constexpr double kSlowWeight = 0.15, kSlowMin = 0.5, kSlowMax = 4.0;

}  // namespace

Scheduler::Scheduler(int n_max, std::vector<double> cost, int n_proposers)
    : n_max_(n_max), cost_(std::move(cost)), stats_(static_cast<size_t>(n_proposers)),
      skipped_(static_cast<size_t>(n_proposers), 0), probe_wait_(static_cast<size_t>(n_proposers), 1),
      slow_(static_cast<size_t>(n_proposers), 1.0), picked_(static_cast<size_t>(n_proposers)) {
    if (n_max < 1) throw std::invalid_argument("n_max must be >= 1, got " + std::to_string(n_max));
    if (cost_.size() < static_cast<size_t>(n_max) + 1) throw std::invalid_argument("Scheduler: need n_max + 1 costs");
    for (auto& s : stats_) s.resize(static_cast<size_t>(n_max));
}

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

bool Scheduler::worth(double draft_cost) const {
    double best_case = 0;
    for (int k = 1; k <= n_max_; ++k) best_case = std::max(best_case, (k + 1) / (cost(k + 1) + k * draft_cost));
    return best_case >= kMinGain / cost(1);
}

int Scheduler::pick(int p, int available, double draft_cost, double catch_up) {
    const int kmax = std::min(available, n_max_);
    // A proposer that costs, and would not gain kMinGain even if every draft were accepted, is
    // not even probed (on a steep verify curve a draft model cannot pay).
    if (draft_cost > 0 && !worth(draft_cost)) return 0;
    const std::vector<double> a = acceptance(p);
    const double slow = slow_[static_cast<size_t>(p)];
    int best = 0;
    double best_rate = (draft_cost > 0 ? kCostlyMargin : 1.0) / cost(1);
    double e = 1.0, prefix = 1.0;
    for (int k = 1; k <= kmax; ++k) {
        prefix *= a[static_cast<size_t>(k - 1)];
        e += prefix;
        const double t = slow * (cost(k + 1) + k * draft_cost);
        if (e / t > best_rate) best = k, best_rate = e / t;
    }
    int& skipped = skipped_[static_cast<size_t>(p)];
    int& wait = probe_wait_[static_cast<size_t>(p)];
    if (best > 0) {
        wait = kProbeEvery;
    } else if (kmax > 0 && ++skipped >= wait) {
        if (catch_up <= kProbeBudget * skipped * cost(1)) best = 1;
        wait = std::min(std::max(2 * wait, kProbeEvery), kProbeMax);
    }
    if (best > 0) skipped = 0;
    picked_[static_cast<size_t>(p)] = {draft_cost, catch_up};
    return best;
}

void Scheduler::timed_pass(int rows, double seconds) {
    if (rows < 1 || rows > static_cast<int>(cost_.size()) || !(seconds > 0)) return;
    double& c = cost_[static_cast<size_t>(rows - 1)];
    c += kCostWeight * (seconds - c);
}

void Scheduler::verified(int p, int k, int accepted, double seconds) {
    if (seconds > 0 && k >= 1 && k <= n_max_) {
        const Picked& pk = picked_[static_cast<size_t>(p)];
        const double predicted = cost(k + 1) + k * pk.draft_cost + pk.catch_up;
        const double r = std::clamp(seconds / predicted, kSlowMin, kSlowMax);
        double& slow = slow_[static_cast<size_t>(p)];
        slow += kSlowWeight * (r - slow);
    }
    auto& st = stats_[static_cast<size_t>(p)];
    for (int i = 0; i < k && i <= accepted; ++i) {
        Position& s = st[static_cast<size_t>(i)];
        s.reached = s.reached * kDecay + 1.0;
        s.accepted = s.accepted * kDecay + (i < accepted ? 1.0 : 0.0);
    }
}

}  // namespace ds4::spec
