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
// After this many steps without drafting, a proposer with a draft gets one short probe.
constexpr int kProbeEvery = 8;

}  // namespace

Scheduler::Scheduler(int n_max, std::vector<double> cost, int n_proposers)
    : n_max_(n_max), cost_(std::move(cost)), stats_(static_cast<size_t>(n_proposers)),
      skipped_(static_cast<size_t>(n_proposers), 0) {
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

int Scheduler::pick(int p, int available, double draft_cost) {
    const int kmax = std::min(available, n_max_);
    const std::vector<double> a = acceptance(p);
    int best = 0;
    double best_rate = 1.0 / cost(1);
    double e = 1.0, prefix = 1.0;
    for (int k = 1; k <= kmax; ++k) {
        prefix *= a[static_cast<size_t>(k - 1)];
        e += prefix;
        const double t = cost(k + 1) + k * draft_cost;
        if (e / t > best_rate) best = k, best_rate = e / t;
    }
    int& skipped = skipped_[static_cast<size_t>(p)];
    if (best == 0 && kmax > 0 && ++skipped >= kProbeEvery) best = 1;
    if (best > 0) skipped = 0;
    return best;
}

void Scheduler::timed_pass(int rows, double seconds) {
    if (rows < 1 || rows > static_cast<int>(cost_.size()) || !(seconds > 0)) return;
    double& c = cost_[static_cast<size_t>(rows - 1)];
    c += kCostWeight * (seconds - c);
}

void Scheduler::verified(int p, int k, int accepted) {
    auto& st = stats_[static_cast<size_t>(p)];
    for (int i = 0; i < k && i <= accepted; ++i) {
        Position& s = st[static_cast<size_t>(i)];
        s.reached = s.reached * kDecay + 1.0;
        s.accepted = s.accepted * kDecay + (i < accepted ? 1.0 : 0.0);
    }
}

}  // namespace ds4::spec
