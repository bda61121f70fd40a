// Sampler implementation: the chain documented in sampler.h, written for 262k-wide rows.
// Greedy is one pass over the row. Sampling: a copy only when bias or penalties apply, one pass
// for validation and the max; with no filter, one vectorised pass of weights by id and done;
// otherwise one pass gathering candidates (a small top-k keeps a k-heap there;
// without top-p, min-p's threshold already drops tokens there), then work in proportion to what
// survives: top-k beyond the heap limit is nth_element; top-p bounds the nucleus with a mass
// histogram and sorts only about the nucleus. Nothing is fully sorted unless it is all kept.
#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>

#include "backend/cpu/vmath.h"

namespace ds4::sample {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

template <typename T>
std::string str(T v) {
    std::ostringstream os;
    os << v;
    return os.str();
}

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument("SamplingParams: " + msg); }

// Best-first order: higher logit first, then lower id. A strict total order on finite logits, so
// nth_element/sort results (and thus the kept sets) do not depend on the standard library.
struct Better {
    template <typename C>
    bool operator()(const C& a, const C& b) const {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    }
};

uint64_t random_seed() {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ static_cast<uint64_t>(rd());
}

}  // namespace

void SamplingParams::validate(int32_t n_vocab) const {
    if (!(temperature >= 0.0f) || !std::isfinite(temperature))
        bad("temperature must be finite and >= 0 (0 = greedy), got " + str(temperature));
    if (top_k < 0) bad("top_k must be >= 0 (0 = off), got " + str(top_k));
    if (!(top_p > 0.0f && top_p <= 1.0f)) bad("top_p must be in (0, 1] (1 = off), got " + str(top_p));
    if (!(min_p >= 0.0f && min_p < 1.0f)) bad("min_p must be in [0, 1) (0 = off), got " + str(min_p));
    if (!(repeat_penalty > 0.0f) || !std::isfinite(repeat_penalty))
        bad("repeat_penalty must be finite and > 0 (1 = off), got " + str(repeat_penalty));
    if (repeat_last_n < 0) bad("repeat_last_n must be >= 0 (0 = no penalties), got " + str(repeat_last_n));
    if (!std::isfinite(presence_penalty)) bad("presence_penalty must be finite, got " + str(presence_penalty));
    if (!std::isfinite(frequency_penalty)) bad("frequency_penalty must be finite, got " + str(frequency_penalty));
    for (const auto& [id, b] : logit_bias) {
        if (std::isnan(b) || b == kInf)
            bad("logit_bias for token " + str(id) + " must be finite or -inf (a ban), got " + str(b));
        if (id < 0 || (n_vocab >= 0 && id >= n_vocab))
            bad("logit_bias token id " + str(id) + " is out of range [0, " +
                (n_vocab >= 0 ? str(n_vocab) : std::string("n_vocab")) + ")");
    }
}

Sampler::Sampler(const SamplingParams& params, int32_t n_vocab) : params_(params), n_vocab_(n_vocab) {
    if (n_vocab <= 0) throw std::invalid_argument("Sampler: n_vocab must be > 0, got " + str(n_vocab));
    params_.validate(n_vocab);
    ring_.assign(static_cast<size_t>(params_.repeat_last_n), 0);
    reset();
}

void Sampler::set_seed(uint64_t seed) {
    seed_ = seed;
    rng_.seed_with(seed);
}

void Sampler::reset() {
    set_seed(params_.has_seed ? params_.seed : random_seed());
    for (size_t i = 0; i < ring_size_; ++i) counts_[static_cast<size_t>(ring_[(ring_head_ + i) % ring_.size()])] = 0;
    ring_head_ = ring_size_ = 0;
}

void Sampler::accept(int32_t token) {
    if (token < 0 || token >= n_vocab_)
        throw std::invalid_argument("Sampler.accept: token " + str(token) + " out of range [0, " + str(n_vocab_) + ")");
    if (ring_.empty()) return;
    if (counts_.empty()) counts_.assign(static_cast<size_t>(n_vocab_), 0);
    if (ring_size_ == ring_.size()) {  // window full: the oldest token leaves it
        --counts_[static_cast<size_t>(ring_[ring_head_])];
        ring_head_ = (ring_head_ + 1) % ring_.size();
        --ring_size_;
    }
    ring_[(ring_head_ + ring_size_) % ring_.size()] = token;
    ++ring_size_;
    ++counts_[static_cast<size_t>(token)];
}

std::vector<int32_t> Sampler::history() const {
    std::vector<int32_t> h(ring_size_);
    for (size_t i = 0; i < ring_size_; ++i) h[i] = ring_[(ring_head_ + i) % ring_.size()];
    return h;
}

void Sampler::check_n(int32_t n) const {
    if (n != n_vocab_)
        throw std::invalid_argument("Sampler: row has " + str(n) + " entries, the sampler was built for n_vocab " +
                                    str(n_vocab_));
}

bool Sampler::penalises() const {
    return ring_size_ > 0 && (params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f ||
                              params_.frequency_penalty != 0.0f);
}

bool Sampler::adjusts() const { return penalises() || !params_.logit_bias.empty(); }

template <typename Fn>
void Sampler::each_penalised(Fn&& fn) {
    // Once per distinct token: the count is negated while applied so repeats are skipped, then
    // restored.
    for (size_t i = 0; i < ring_size_; ++i) {
        const auto t = static_cast<size_t>(ring_[(ring_head_ + i) % ring_.size()]);
        const int32_t c = counts_[t];
        if (c <= 0) continue;
        fn(static_cast<int32_t>(t), c);
        counts_[t] = -c;
    }
    for (size_t i = 0; i < ring_size_; ++i) {
        const auto t = static_cast<size_t>(ring_[(ring_head_ + i) % ring_.size()]);
        if (counts_[t] < 0) counts_[t] = -counts_[t];
    }
}

float Sampler::penalised(float l, int32_t count) const {
    l = l > 0.0f ? l / params_.repeat_penalty : l * params_.repeat_penalty;
    return l - (static_cast<float>(count) * params_.frequency_penalty + params_.presence_penalty);
}

const float* Sampler::adjusted_row(const float* logits, int32_t n) {
    if (!adjusts()) return logits;  // nothing to change: no copy
    work_.assign(logits, logits + n);
    for (const auto& [id, b] : params_.logit_bias) work_[static_cast<size_t>(id)] += b;
    if (penalises()) {
        each_penalised([this](int32_t t, int32_t c) {
            float& l = work_[static_cast<size_t>(t)];
            l = penalised(l, c);
        });
    }
    return work_.data();
}

float Sampler::checked_max(const float* row, int32_t n) const {
    float lmax = -kInf;
    for (int32_t i = 0; i < n; ++i) {
        const float v = row[i];
        if (!(v < kInf)) throw std::invalid_argument("Sampler: logit " + str(i) + " is " + str(v) + " (NaN or +inf)");
        lmax = v > lmax ? v : lmax;
    }
    if (lmax == -kInf) throw std::invalid_argument("Sampler: every logit is -inf (all tokens banned)");
    return lmax;
}

int32_t Sampler::argmax(const float* row) const {
    float best = -kInf;
    int32_t best_id = -1;
    for (int32_t i = 0; i < n_vocab_; ++i) {
        const float v = row[i];
        if (!(v < kInf)) throw std::invalid_argument("Sampler: logit " + str(i) + " is " + str(v) + " (NaN or +inf)");
        if (v > best) {  // strict: the first (lowest) id wins ties
            best = v;
            best_id = i;
        }
    }
    if (best_id < 0) throw std::invalid_argument("Sampler: every logit is -inf (all tokens banned)");
    return best_id;
}

void Sampler::top_k(int32_t k) {
    // Partial selection: the k best land in front, in unspecified order (sorted later by id).
    std::nth_element(cand_.begin(), cand_.begin() + k, cand_.end(), Better{});
    cand_.resize(static_cast<size_t>(k));
    sorted_by_id_ = false;
}

void Sampler::top_p(double p) {
    const size_t n = cand_.size();
    float lmax = -kInf;
    for (const Cand& c : cand_) lmax = std::max(lmax, c.logit);
    sorted_by_id_ = false;
    double z = 0.0, cum = 0.0;
    // Walks the sorted best-first range [from, to) adding mass; true once the nucleus is complete.
    auto walk = [&](size_t from, size_t to) {
        for (size_t i = from; i < to; ++i) {
            cum += std::exp(cand_[i].logit - lmax) / z;
            if (cum >= p) {
                cand_.resize(i + 1);
                return true;
            }
        }
        return false;
    };
    size_t done = 0;
    if (n <= 2048) {
        for (const Cand& c : cand_) z += std::exp(c.logit - lmax);
    } else {
        // Wide rows: one pass computes Z and a histogram of mass by distance below the max
        // (bins of 1/16 nat, the last one open-ended). The bin where the mass reaches p bounds
        // the nucleus; tokens down to one bin further (a margin for rounding) are moved to the
        // front and sorted, so only about the nucleus is ever sorted.
        constexpr int kBins = 512;
        constexpr double kWidth = 1.0 / 16;
        double hist[kBins] = {};
        for (const Cand& c : cand_) {
            const float e = std::exp(c.logit - lmax);
            const double d = static_cast<double>(lmax) - c.logit;
            z += e;
            hist[d < kBins * kWidth ? static_cast<int>(d / kWidth) : kBins - 1] += e;
        }
        int bin = kBins - 1;
        double mass = 0.0;
        for (int b = 0; b < kBins; ++b) {
            mass += hist[b];
            if (mass >= p * z) {
                bin = b;
                break;
            }
        }
        if (bin + 2 < kBins) {
            const double floor = static_cast<double>(lmax) - (bin + 2) * kWidth;
            const auto mid = std::partition(cand_.begin(), cand_.end(),
                                            [&](const Cand& c) { return static_cast<double>(c.logit) >= floor; });
            done = static_cast<size_t>(mid - cand_.begin());
            std::sort(cand_.begin(), mid, Better{});
            if (walk(0, done)) return;
        }
    }
    // Grow a sorted best-first prefix [0, done) 4x at a time: each round selects the next block
    // out of the unsorted tail. Rarely reached on wide rows (the histogram found the nucleus).
    size_t want = std::min(n, std::max<size_t>(64, done * 4));
    for (;;) {
        if (want < n) std::nth_element(cand_.begin() + done, cand_.begin() + want, cand_.end(), Better{});
        std::sort(cand_.begin() + done, cand_.begin() + want, Better{});
        if (walk(done, want)) return;
        if (want == n) return;  // rounding left the total just below p: keep everything
        done = want;
        want = std::min(n, want * 4);
    }
}

void Sampler::min_p(double p) {
    float lmax = -kInf;
    for (const Cand& c : cand_) lmax = std::max(lmax, c.logit);
    // p_i / p_max = exp(l_i - l_max): the normalisation cancels. remove_if keeps the order.
    cand_.erase(std::remove_if(cand_.begin(), cand_.end(),
                               [&](const Cand& c) { return std::exp(static_cast<double>(c.logit) - lmax) < p; }),
                cand_.end());
}

int32_t Sampler::filter(const float* logits, int32_t n) {
    check_n(n);
    const float* row = adjusted_row(logits, n);
    if (params_.temperature == 0.0f) return argmax(row);

    if (cand_.capacity() < static_cast<size_t>(n)) {
        cand_.reserve(static_cast<size_t>(n));
        prob_.reserve(static_cast<size_t>(n));
        weight_.reserve(static_cast<size_t>(n));
    }
    // Pass 1: validate and find the max, which every filter keeps.
    const float lmax = checked_max(row, n);

    dense_ = !filtered();
    if (dense_) {
        // Nothing to filter (the common "temperature only"): every id's weight in one vectorised
        // pass, straight into prob_ by id, no candidate list. -inf (banned) weighs exactly 0.
        prob_.resize(static_cast<size_t>(n));
        backend::cpu::vec_math().exp_scaled(row, n, lmax, params_.temperature, prob_.data());
        double z[4] = {};
        int32_t i = 0;
        for (; i + 4 <= n; i += 4)
            for (int j = 0; j < 4; ++j) z[j] += prob_[static_cast<size_t>(i + j)];
        for (; i < n; ++i) z[0] += prob_[static_cast<size_t>(i)];
        const double total = (z[0] + z[1]) + (z[2] + z[3]);
        for (float& p : prob_) p = static_cast<float>(p / total);
        return -1;
    }

    // Without top-p, min-p's cut (relative to that max) can be applied while gathering; the
    // exact test runs later, so the floor sits a little below it. With top-p it cannot: top-p
    // normalises over everything that survived top-k.
    float floor = std::numeric_limits<float>::lowest();  // excludes -inf (banned)
    if (params_.min_p > 0.0f && params_.top_p >= 1.0f)
        floor = std::max(floor, static_cast<float>(lmax + std::log(static_cast<double>(params_.min_p)) - 1e-3));

    // Pass 2: gather candidates. A small top-k keeps a heap of the k best (front = worst) so the
    // row is scanned once and most tokens cost one comparison; ids arrive ascending, so an equal
    // logit never displaces a lower id.
    cand_.clear();
    const auto k = static_cast<size_t>(params_.top_k);
    if (k > 0 && k <= 4096) {
        for (int32_t i = 0; i < n; ++i) {
            const float v = row[i];
            if (!(v >= floor)) continue;
            if (cand_.size() < k) {
                cand_.push_back({v, i});
                std::push_heap(cand_.begin(), cand_.end(), Better{});
            } else if (v > cand_.front().logit) {
                std::pop_heap(cand_.begin(), cand_.end(), Better{});
                cand_.back() = {v, i};
                std::push_heap(cand_.begin(), cand_.end(), Better{});
            }
        }
        sorted_by_id_ = false;
    } else {
        for (int32_t i = 0; i < n; ++i)
            if (row[i] >= floor) cand_.push_back({row[i], i});
        sorted_by_id_ = true;
        if (k > 0 && k < cand_.size()) top_k(static_cast<int32_t>(k));
    }

    // top-k leaves its survivors in an order that depends on every logit it saw; top-p sums
    // their mass in best-first order, so that a row with the ids top-k drops set to -inf (a
    // shortlisted row's, sample_screened) gives the same floats.
    if (params_.top_p < 1.0f) {
        if (!sorted_by_id_) std::sort(cand_.begin(), cand_.end(), Better{});
        top_p(params_.top_p);
    }
    if (params_.min_p > 0.0f) min_p(params_.min_p);
    // The draw walks ids in ascending order so that sample() == sample_from(probs()).
    if (!sorted_by_id_) std::sort(cand_.begin(), cand_.end(), [](const Cand& a, const Cand& b) { return a.id < b.id; });

    // Temperature: float weights (division, not a reciprocal: a denormal T must not make 0 * inf),
    // normalised in double; the float result is what probs() reports and the draw uses.
    prob_.resize(cand_.size());
    weight_.resize(cand_.size());
    double z = 0.0;
    for (size_t i = 0; i < cand_.size(); ++i)
        z += weight_[i] = std::exp((cand_[i].logit - lmax) / params_.temperature);
    for (size_t i = 0; i < cand_.size(); ++i) prob_[i] = static_cast<float>(weight_[i] / z);
    return -1;
}

int32_t Sampler::sample(const float* logits, int32_t n) {
    const int32_t greedy = filter(logits, n);
    if (greedy >= 0) return greedy;
    if (dense_) return sample_from(prob_.data(), n);
    double total = 0.0;
    for (float q : prob_) total += q;
    const double target = rng_.uniform() * total;
    double cum = 0.0;
    int32_t last = cand_.front().id;
    for (size_t i = 0; i < cand_.size(); ++i) {
        if (prob_[i] <= 0.0f) continue;  // underflowed: never drawn (sample_from skips it too)
        cum += prob_[i];
        last = cand_[i].id;
        if (cum > target) return last;
    }
    return last;  // unreachable when the sums agree; guards against it anyway
}

void Sampler::probs(const float* logits, int32_t n, float* out) {
    const int32_t greedy = filter(logits, n);
    if (dense_ && greedy < 0) {
        std::copy(prob_.begin(), prob_.end(), out);
        return;
    }
    std::fill(out, out + n, 0.0f);
    if (greedy >= 0) {
        out[greedy] = 1.0f;
        return;
    }
    for (size_t i = 0; i < cand_.size(); ++i) out[cand_[i].id] = prob_[i];
}

std::vector<float> Sampler::probs(const float* logits, int32_t n) {
    check_n(n);
    std::vector<float> out(static_cast<size_t>(n));
    probs(logits, n, out.data());
    return out;
}

bool Sampler::screens() const {
    return params_.temperature > 0.0f && (params_.top_p >= 1.0f || params_.top_k > 0);
}

bool Sampler::filtered() const { return params_.top_k > 0 || params_.min_p > 0.0f || params_.top_p < 1.0f; }

float Sampler::margin() const {
    return params_.temperature * std::max(0.0f, std::log(static_cast<float>(n_vocab_)) - 2.0f);
}

float Sampler::head_margin() const {
    float m = margin();
    // top-k: enough for the k best on all but the flattest rows (the head's floor then rises at
    // its capacity); min-p alone: its cut.
    if (params_.top_k > 0) m = std::max(m, 25.0f);
    else if (params_.min_p > 0.0f) m = -std::log(params_.min_p) + 1e-3f;
    return adjusts() ? 1.5f * m + 2.0f : m;
}

int32_t Sampler::head_keep() const {
    if (params_.top_k > 0) return params_.top_k;
    if (filtered()) return 0;
    const size_t moved = adjusts() ? params_.logit_bias.size() + ring_size_ : 0;
    return static_cast<int32_t>(kScreened + moved);
}

int32_t Sampler::draw_screened(float lmax, float t, const std::function<float(int32_t)>& value) {
    const double temp = params_.temperature;
    weight_.resize(short_.size());
    double w = 0.0;
    for (size_t i = 0; i < short_.size(); ++i) {
        w += weight_[i] = std::exp(static_cast<double>(short_[i].logit - lmax) / temp);
    }
    const auto others = static_cast<uint64_t>(n_vocab_) - short_.size();
    const double tail = static_cast<double>(others) * std::exp(static_cast<double>(t - lmax) / temp);
    for (int round = 0; round < kRounds; ++round) {
        const double u = rng_.uniform() * (w + tail);
        if (u < w || others == 0) {
            double cum = 0.0;
            for (size_t i = 0; i < short_.size(); ++i) {
                cum += weight_[i];
                if (cum > u) return short_[i].id;
            }
            return short_.back().id;  // rounding left u just above the sum
        }
        // The r-th id outside S (S ascending).
        auto id = static_cast<int32_t>(rng_.next() % others);
        for (const Cand& c : short_) {
            if (c.id > id) break;
            ++id;
        }
        const float l = value(id);
        if (std::isnan(l) || l == kInf) throw std::invalid_argument("Sampler: logit " + str(id) + " is " + str(l) + " (NaN or +inf)");
        if (rng_.uniform() < std::exp(static_cast<double>(l - t) / temp)) return id;
    }
    return -1;
}

float Sampler::screen_floor(float lmax) {
    const float t = lmax - margin();
    if (short_.size() <= kScreened) return t;
    // A flat row: the kScreened-th largest logit, so that S stays small (the other ids' rounds
    // are then at most (n_vocab - |S|) / |S| per draw).
    std::nth_element(short_.begin(), short_.begin() + (kScreened - 1), short_.end(), Better{});
    return std::max(t, short_[kScreened - 1].logit);
}

int32_t Sampler::sample_screened(const float* logits, int32_t n) {
    check_n(n);
    if (!screens()) throw std::logic_error("Sampler.sample_screened: needs temperature > 0 and no top-p without top-k");
    if (filtered()) return sample(logits, n);
    const float* row = adjusted_row(logits, n);
    const float lmax = checked_max(row, n);
    short_.clear();
    for (int32_t i = 0; i < n; ++i) {
        if (row[i] >= lmax - margin()) short_.push_back({row[i], i});
    }
    const float t = screen_floor(lmax);
    short_.erase(std::remove_if(short_.begin(), short_.end(), [t](const Cand& c) { return c.logit < t; }), short_.end());
    std::sort(short_.begin(), short_.end(), [](const Cand& a, const Cand& b) { return a.id < b.id; });
    const int32_t id = draw_screened(lmax, t, [row](int32_t i) { return row[i]; });
    return id >= 0 ? id : sample(logits, n);
}

int32_t Sampler::sample_screened(const ScreenedRow& row) {
    if (!screens()) throw std::logic_error("Sampler.sample_screened: needs temperature > 0 and no top-p without top-k");
    // The listed ids and those steps 1-2 change (fetched when not listed), their logits adjusted.
    listed_.clear();
    for (int64_t i = 0; i < row.n; ++i) listed_.push_back({row.logits[i], row.ids[i]});
    if (adjusts()) {
        fetch_.clear();
        const auto listed = [&](int32_t id) {
            return std::binary_search(row.ids, row.ids + row.n, id);
        };
        for (const auto& [id, b] : params_.logit_bias) {
            if (!listed(id)) fetch_.push_back(id);
        }
        for (size_t i = 0; i < ring_size_; ++i) {
            const int32_t id = ring_[(ring_head_ + i) % ring_.size()];
            if (!listed(id)) fetch_.push_back(id);
        }
        std::sort(fetch_.begin(), fetch_.end());
        fetch_.erase(std::unique(fetch_.begin(), fetch_.end()), fetch_.end());
        fetched_.resize(fetch_.size());
        if (!fetch_.empty()) row.more(fetch_.data(), static_cast<int64_t>(fetch_.size()), fetched_.data());
        for (size_t i = 0; i < fetch_.size(); ++i) listed_.push_back({fetched_[i], fetch_[i]});
        std::sort(listed_.begin(), listed_.end(), [](const Cand& a, const Cand& b) { return a.id < b.id; });
        if (filtered()) raw_ = listed_;
        const auto find = [&](int32_t id) {
            return std::lower_bound(listed_.begin(), listed_.end(), id, [](const Cand& c, int32_t v) { return c.id < v; });
        };
        for (const auto& [id, b] : params_.logit_bias) find(id)->logit += b;
        if (penalises()) {
            each_penalised([&](int32_t id, int32_t c) {
                Cand& e = *find(id);
                e.logit = penalised(e.logit, c);
            });
        }
    }
    float lmax = -kInf;
    for (const Cand& c : listed_) {
        if (!(c.logit < kInf)) throw std::invalid_argument("Sampler: logit " + str(c.id) + " is " + str(c.logit) + " (NaN or +inf)");
        lmax = std::max(lmax, c.logit);
    }
    // The row fetched whole, where what the list leaves out may pass the filters or reach t
    // (the adjustments lowered the largest logit below what the head was asked for): the full
    // row's draw from the start; or after the rounds ran out: the full row's last resort.
    const auto whole = [&]() -> const float* {
        fetch_.resize(static_cast<size_t>(n_vocab_));
        for (int32_t i = 0; i < n_vocab_; ++i) fetch_[static_cast<size_t>(i)] = i;
        fetched_.resize(fetch_.size());
        row.more(fetch_.data(), n_vocab_, fetched_.data());
        return fetched_.data();
    };
    if (filtered()) {
        // The filters' survivors all listed (the unlisted ids, below thr, cannot pass them):
        // the full row's draw, from the listed ids and -inf for the others.
        int64_t above = 0;
        for (const Cand& c : listed_) above += c.logit >= row.thr;
        const bool listed = params_.top_k > 0
                                ? above >= params_.top_k
                                : lmax != -kInf && static_cast<double>(row.thr) <=
                                                       static_cast<double>(lmax) + std::log(static_cast<double>(params_.min_p)) - 1e-6;
        if (!listed) return sample(whole(), n_vocab_);
        sparse_.assign(static_cast<size_t>(n_vocab_), -kInf);
        for (const Cand& c : adjusts() ? raw_ : listed_) sparse_[static_cast<size_t>(c.id)] = c.logit;
        return sample(sparse_.data(), n_vocab_);
    }
    short_.clear();
    for (const Cand& c : listed_) {
        if (c.logit >= lmax - margin()) short_.push_back(c);
    }
    const float t = lmax == -kInf ? lmax : screen_floor(lmax);
    if (lmax == -kInf || !(row.thr <= t)) return sample_screened(whole(), n_vocab_);
    short_.erase(std::remove_if(short_.begin(), short_.end(), [t](const Cand& c) { return c.logit < t; }), short_.end());
    std::sort(short_.begin(), short_.end(), [](const Cand& a, const Cand& b) { return a.id < b.id; });
    const int32_t id = draw_screened(lmax, t, [&](int32_t i) {
        const auto it = std::lower_bound(listed_.begin(), listed_.end(), i, [](const Cand& c, int32_t v) { return c.id < v; });
        if (it != listed_.end() && it->id == i) return it->logit;
        float v;
        row.more(&i, 1, &v);
        return v;
    });
    return id >= 0 ? id : sample(whole(), n_vocab_);
}

int32_t Sampler::sample_from(const std::vector<float>& p) {
    return sample_from(p.data(), static_cast<int32_t>(p.size()));
}

int32_t Sampler::sample_from(const float* p, int32_t n) {
    check_n(n);
    double total = 0.0;
    for (int32_t i = 0; i < n; ++i) {
        if (!(p[i] >= 0.0f) || !std::isfinite(p[i]))
            throw std::invalid_argument("Sampler.sample_from: p[" + str(i) + "] is " + str(p[i]) +
                                        " (must be finite and >= 0)");
        total += p[i];
    }
    if (!(total > 0.0)) throw std::invalid_argument("Sampler.sample_from: p sums to 0");
    const double target = rng_.uniform() * total;
    double cum = 0.0;
    int32_t last = -1;
    for (int32_t i = 0; i < n; ++i) {
        if (p[i] <= 0.0f) continue;
        cum += p[i];
        last = i;
        if (cum > target) return i;
    }
    return last;
}

}  // namespace ds4::sample
