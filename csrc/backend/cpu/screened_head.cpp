#include "backend/cpu/screened_head.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "quant/block_lanes.h"
#include "quant/head_screen.h"
#include "quant/int16_gemm.h"

namespace ds4::backend::cpu {

namespace screen = quant::screen;

bool ScreenedHead::shortlists(const Weight& w) {
    return w.n_mat == 1 && w.n_out < (int64_t{1} << 31) && screen::available(w.type, w.packed != nullptr, w.n_in);
}

bool ScreenedHead::serves(const Weight& w, int64_t n) { return n >= 2 && shortlists(w); }

const std::vector<float>& ScreenedHead::norms(ThreadPool& pool, const Weight& w) {
    std::vector<float>& v = norms_[w.packed];
    if (static_cast<int64_t>(v.size()) != w.n_out) {
        v.resize(static_cast<size_t>(w.n_out));
        const auto* rows = static_cast<const uint8_t*>(w.packed);
        pool.parallel_for(w.n_out, [&](int64_t o0, int64_t o1) {
            screen::row_norms(rows + static_cast<size_t>(o0) * w.row_bytes, w.row_bytes, o1 - o0, w.n_in, v.data() + o0);
        });
    }
    return v;
}

float ScreenedHead::kth_floor(Candidate* cs, int64_t c, int64_t k, float floor) {
    std::nth_element(cs, cs + (k - 1), cs + c, [](const Candidate& p, const Candidate& q) { return p.lower > q.lower; });
    return std::max(floor, cs[k - 1].lower);
}

void ScreenedHead::screen(ThreadPool& pool, const Weight& w, const float* x, int64_t n, const int16_t* a,
                          const float* da, const float* margin, const int32_t* keep) {
    const int64_t n_in = w.n_in, nb = n_in / quant::kSpan, threads = pool.size();
    const quant::BlockLanes bl(n_in);
    const std::vector<float>& wn = norms(pool, w);
    q_.resize(static_cast<size_t>(n * n_in));
    d_.resize(static_cast<size_t>(n * nb));
    neg_.resize(static_cast<size_t>(n * nb));
    bound_.resize(static_cast<size_t>(n));
    // Per activation row, the bound per unit of weight-row norm: ||x - a|| + ||x - s|| and the
    // rounding of both heads (head_screen.h), rounded up.
    const double allow = screen::rounding(n_in);
    for (int64_t r = 0; r < n; ++r) {
        const float* xr = x + r * n_in;
        const double e8 = screen::quantize(xr, n_in, {q_.data() + r * n_in, d_.data() + r * nb, neg_.data() + r * nb});
        double e16 = 0.0, xx = 0.0;
        for (int64_t b = 0; b < nb; ++b) {
            const double scale = da[r * nb + b];
            for (int k = 0; k < quant::kSpan; ++k) {
                const double v = xr[quant::kSpan * b + k];
                const double e = v - scale * a[r * quant::act_stride(n_in) + bl.position(b, k)];
                e16 += e * e;
                xx += v * v;
            }
        }
        e16 = std::sqrt(e16);
        const double bound = (e16 + e8) * (1.0 + 1e-9) + allow * (std::sqrt(xx) + e16 + e8);
        bound_[static_cast<size_t>(r)] =
            std::nextafter(static_cast<float>(bound), std::numeric_limits<float>::infinity());
    }
    scores_.resize(static_cast<size_t>(threads * n * kUnit));
    cand_.resize(static_cast<size_t>(threads * n * kCapacity));
    count_.assign(static_cast<size_t>(threads * n), 0);
    lo_.assign(static_cast<size_t>(threads * n), -std::numeric_limits<float>::infinity());
    raised_.assign(static_cast<size_t>(threads * n), -std::numeric_limits<float>::infinity());
    next_raise_.assign(static_cast<size_t>(threads * n), 0);
    const screen::ScoresFn scores = screen::scores();
    const screen::FilterFn filter = screen::filter();
    idx_.resize(static_cast<size_t>(threads * kUnit));
    up_.resize(static_cast<size_t>(threads * kUnit));
    const auto* rows = static_cast<const uint8_t*>(w.packed);
    pool.for_each_unit((w.n_out + kUnit - 1) / kUnit, [&](int t, int64_t u) {
        const int64_t o0 = u * kUnit, m = std::min(w.n_out, o0 + kUnit) - o0;
        float* ys = scores_.data() + t * n * kUnit;
        for (int64_t r0 = 0; r0 < n;) {
            const int nx = quant::even_rows(n - r0, screen::kRowsMax);
            scores(rows + static_cast<size_t>(o0) * w.row_bytes, w.row_bytes, m, n_in, q_.data() + r0 * n_in,
                   d_.data() + r0 * nb, neg_.data() + r0 * nb, nx, ys + r0 * kUnit, kUnit);
            r0 += nx;
        }
        int32_t* kept = idx_.data() + t * kUnit;
        float* ups = up_.data() + t * kUnit;
        for (int64_t r = 0; r < n; ++r) {
            const size_t slot = static_cast<size_t>(t * n + r);
            const float mr = margin ? margin[r] : 0.0f;
            const int64_t want = keep ? keep[r] : 0;
            const int64_t k = filter(ys + r * kUnit, wn.data() + o0, m, bound_[static_cast<size_t>(r)], mr, raised_[slot],
                                     &lo_[slot], kept, ups);
            float floor = std::max(lo_[slot] - mr, raised_[slot]);
            int64_t c = count_[slot];
            Candidate* cs = cand_.data() + slot * kCapacity;
            const auto prune = [&] {
                c = std::remove_if(cs, cs + c, [floor](const Candidate& e) { return e.upper < floor; }) - cs;
            };
            // Raised again only once the candidates doubled: on a flat row with wide bounds most
            // of them stay above the k-th lower bound, and each raise is a pass over them all.
            int64_t& next_raise = next_raise_[slot];
            const auto raise_to_kth = [&] {
                floor = raised_[slot] = kth_floor(cs, c, want, raised_[slot]);
                prune();
                next_raise = std::max(4 * want + 64, 2 * c);
            };
            for (int64_t j = 0; j < k && c >= 0; ++j) {
                if (ups[j] < floor) continue;
                if (c == kCapacity) {  // drop those the risen floor rules out
                    prune();
                    if (c == kCapacity && want > 0 && want < c) raise_to_kth();
                    if (c == kCapacity && margin) {
                        // A shortlist keeps the upper half (by bound) and says so in its floor.
                        std::nth_element(cs, cs + kCapacity / 2, cs + c,
                                         [](const Candidate& p, const Candidate& q) { return p.upper > q.upper; });
                        floor = raised_[slot] = cs[kCapacity / 2].upper;
                        prune();
                    }
                    if (c == kCapacity) {
                        c = -1;
                        break;
                    }
                    if (ups[j] < floor) continue;
                }
                const float y = ys[r * kUnit + kept[j]];
                cs[c++] = {static_cast<int32_t>(o0 + kept[j]), ups[j],
                           std::fma(-wn[static_cast<size_t>(o0 + kept[j])], bound_[static_cast<size_t>(r)], y)};
                if (want > 0 && c >= std::max(4 * want + 64, next_raise)) raise_to_kth();
            }
            count_[slot] = c;
        }
    });
    floor_.resize(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) {
        float lo = -std::numeric_limits<float>::infinity();
        bool overflow = false;
        for (int64_t t = 0; t < threads; ++t) {
            const size_t slot = static_cast<size_t>(t * n + r);
            lo = std::max(lo, lo_[slot]);
            overflow = overflow || count_[slot] < 0;
            // A top-k's floor at its k-th lower bound once the scan is done, too.
            const int64_t want = keep ? keep[r] : 0, c = count_[slot];
            if (want > 0 && c > 2 * want) {
                Candidate* cs = cand_.data() + slot * kCapacity;
                const float floor = raised_[slot] = kth_floor(cs, c, want, raised_[slot]);
                count_[slot] = std::remove_if(cs, cs + c, [floor](const Candidate& e) { return e.upper < floor; }) - cs;
            }
        }
        floor_[static_cast<size_t>(r)] = overflow ? -std::numeric_limits<float>::infinity() : lo;
    }
}

template <typename Fn>
void ScreenedHead::each_candidate(int64_t r, int threads, float t, Fn&& fn) const {
    const auto n = static_cast<int64_t>(floor_.size());
    for (int64_t th = 0; th < threads; ++th) {
        const size_t slot = static_cast<size_t>(th * n + r);
        const Candidate* c = cand_.data() + slot * kCapacity;
        for (const Candidate* e = c; e < c + count_[slot]; ++e) {
            if (!(e->upper < t)) fn(*e);
        }
    }
}

namespace {

float exact_logit(const quant::RowsI16Fn exact, const uint8_t* row, int64_t n_in, const int16_t* a, const float* da,
                  const float* xs) {
    float y;
    exact(row, n_in, a, da, xs, 1, &y, 1);
    if (std::isnan(y) || y == std::numeric_limits<float>::infinity()) {
        throw std::domain_error("the head: a logit is NaN or +inf");
    }
    return y;
}

}  // namespace

void ScreenedHead::argmax(ThreadPool& pool, const Weight& w, const float* x, int64_t n, const int16_t* a,
                          const float* da, const float* xs, int32_t* idx) {
    screen(pool, w, x, n, a, da, nullptr, nullptr);
    const quant::RowsI16Fn exact = quant::i16_kernels(w.type).rows_of(true);
    const int64_t n_in = w.n_in, nb = n_in / quant::kSpan, halves = n_in / quant::kHalf;
    const auto* rows = static_cast<const uint8_t*>(w.packed);
    for (int64_t r = 0; r < n; ++r) {
        idx[r] = -1;
        const float lo = floor_[static_cast<size_t>(r)];
        if (lo == -std::numeric_limits<float>::infinity()) continue;  // overflowed
        float best = -std::numeric_limits<float>::infinity();
        each_candidate(r, pool.size(), lo, [&](const Candidate& e) {
            const int32_t id = e.id;
            const float y = exact_logit(exact, rows + static_cast<size_t>(id) * w.row_bytes, n_in,
                                        a + r * quant::act_stride(n_in), da + r * nb, xs + r * halves);
            if (y > best || (y == best && idx[r] >= 0 && id < idx[r])) {
                best = y;
                idx[r] = id;
            }
        });
        if (idx[r] < 0) throw std::domain_error("matmul_argmax: every logit is -inf");
    }
}

void ScreenedHead::shortlist(ThreadPool& pool, const Weight& w, const float* x, int64_t n, const int16_t* a,
                             const float* da, const float* xs, const float* margin, const int32_t* keep,
                             const Backend::ShortlistOf& out) {
    screen(pool, w, x, n, a, da, margin, keep);
    const quant::RowsI16Fn exact = quant::i16_kernels(w.type).rows_of(true);
    const int64_t n_in = w.n_in, nb = n_in / quant::kSpan, halves = n_in / quant::kHalf;
    const auto* rows = static_cast<const uint8_t*>(w.packed);
    const int threads = pool.size();
    order_.resize(static_cast<size_t>(threads));
    heap_.resize(static_cast<size_t>(threads));
    listed_.resize(static_cast<size_t>(threads));
    std::atomic<bool> bad{false};
    // A row per unit. Its candidates by upper bound, descending, get exact logits until the next
    // bound falls below what the row must hold (the largest so far minus the margin, and the
    // keep-th largest so far): every id after it is below both for good. The bounds' spread puts
    // 2-3x the ids a row needs above the screen's floor (thousands on a flat row).
    pool.for_each_unit(n, [&](int t, int64_t r) {
        Shortlist& s = out(r);
        s.ids.clear();
        s.logits.clear();
        const float lo = floor_[static_cast<size_t>(r)];
        s.ok = lo != -std::numeric_limits<float>::infinity();
        if (!s.ok) return;
        const float mr = margin[r];
        // Every id left out had an upper bound below its thread's floor at the time, at most this one.
        float thr = lo - mr;
        for (int th = 0; th < threads; ++th) thr = std::max(thr, raised_[static_cast<size_t>(th * n + r)]);
        std::vector<Candidate>& order = order_[static_cast<size_t>(t)];
        order.clear();
        each_candidate(r, threads, thr, [&](const Candidate& e) {
            order.push_back(e);
            if (std::isnan(e.upper)) order.back().upper = std::numeric_limits<float>::infinity();  // always computed
        });
        std::sort(order.begin(), order.end(), [](const Candidate& p, const Candidate& q) { return p.upper > q.upper; });
        const auto want = static_cast<size_t>(keep ? std::max(0, keep[r]) : 0);
        std::vector<float>& heap = heap_[static_cast<size_t>(t)];  // the want largest so far, smallest first
        heap.clear();
        float top = -std::numeric_limits<float>::infinity(), need = top;
        const int16_t* ar = a + r * quant::act_stride(n_in);
        for (size_t j = 0; j < order.size(); ++j) {
            if (order[j].upper < need) {
                thr = std::max(thr, std::nextafter(order[j].upper, std::numeric_limits<float>::infinity()));
                break;
            }
            if (j + kAhead < order.size()) {
                const uint8_t* next = rows + static_cast<size_t>(order[j + kAhead].id) * w.row_bytes;
                for (size_t b = 0; b < w.row_bytes; b += 64) __builtin_prefetch(next + b);
            }
            float y;
            exact(rows + static_cast<size_t>(order[j].id) * w.row_bytes, n_in, ar, da + r * nb, xs + r * halves, 1, &y, 1);
            if (std::isnan(y) || y == std::numeric_limits<float>::infinity()) {
                bad.store(true, std::memory_order_relaxed);
                return;
            }
            s.ids.push_back(order[j].id);
            s.logits.push_back(y);
            top = std::max(top, y);
            if (want > 0) {
                if (heap.size() < want) {
                    heap.push_back(y);
                    std::push_heap(heap.begin(), heap.end(), std::greater<>());
                } else if (y > heap.front()) {
                    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
                    heap.back() = y;
                    std::push_heap(heap.begin(), heap.end(), std::greater<>());
                }
            }
            need = std::max(top - mr, want > 0 && heap.size() == want ? heap.front() : need);
        }
        s.thr = thr;
        // ascending ids, as Shortlist promises
        std::vector<std::pair<int32_t, float>>& listed = listed_[static_cast<size_t>(t)];
        listed.clear();
        for (size_t i = 0; i < s.ids.size(); ++i) listed.emplace_back(s.ids[i], s.logits[i]);
        std::sort(listed.begin(), listed.end());
        for (size_t i = 0; i < listed.size(); ++i) std::tie(s.ids[i], s.logits[i]) = listed[i];
    });
    if (bad.load()) throw std::domain_error("the head: a logit is NaN or +inf");
}

}  // namespace ds4::backend::cpu
