#include "backend/cpu/screened_head.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "quant/block_lanes.h"
#include "quant/head_screen.h"
#include "quant/int16_gemm.h"

namespace ds4::backend::cpu {

namespace screen = quant::screen;

bool ScreenedHead::serves(const Weight& w, int64_t n) {
    return n >= 2 && w.n_mat == 1 && w.n_out < (int64_t{1} << 31) &&
           screen::available(w.type, w.packed != nullptr, w.n_in);
}

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

void ScreenedHead::argmax(ThreadPool& pool, const Weight& w, const float* x, int64_t n, const int16_t* a,
                          const float* da, const float* xs, int32_t* idx) {
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
            const int64_t k = filter(ys + r * kUnit, wn.data() + o0, m, bound_[static_cast<size_t>(r)], &lo_[slot], kept, ups);
            const float lo = lo_[slot];
            int64_t c = count_[slot];
            Candidate* cs = cand_.data() + slot * kCapacity;
            for (int64_t j = 0; j < k && c >= 0; ++j) {
                if (c == kCapacity) {  // drop those the risen bound rules out
                    c = std::remove_if(cs, cs + c, [lo](const Candidate& e) { return e.upper < lo; }) - cs;
                    if (c == kCapacity) {
                        c = -1;
                        break;
                    }
                }
                cs[c++] = {static_cast<int32_t>(o0 + kept[j]), ups[j]};
            }
            count_[slot] = c;
        }
    });
    const quant::RowsI16Fn exact = quant::i16_kernels(w.type).rows_of(true);
    const int64_t halves = n_in / quant::kHalf;
    for (int64_t r = 0; r < n; ++r) {
        float lo = -std::numeric_limits<float>::infinity();
        bool overflow = false;
        for (int64_t t = 0; t < threads; ++t) {
            lo = std::max(lo, lo_[static_cast<size_t>(t * n + r)]);
            overflow = overflow || count_[static_cast<size_t>(t * n + r)] < 0;
        }
        idx[r] = -1;
        if (overflow) continue;
        float best = -std::numeric_limits<float>::infinity();
        for (int64_t t = 0; t < threads; ++t) {
            const size_t slot = static_cast<size_t>(t * n + r);
            for (const Candidate* c = cand_.data() + slot * kCapacity; c < cand_.data() + slot * kCapacity + count_[slot]; ++c) {
                if (c->upper < lo) continue;
                float y;
                exact(rows + static_cast<size_t>(c->id) * w.row_bytes, n_in, a + r * quant::act_stride(n_in), da + r * nb,
                      xs + r * halves, 1, &y, 1);
                if (std::isnan(y) || y == std::numeric_limits<float>::infinity()) {
                    throw std::domain_error("matmul_argmax: a logit is NaN or +inf");
                }
                if (y > best || (y == best && idx[r] >= 0 && c->id < idx[r])) {
                    best = y;
                    idx[r] = c->id;
                }
            }
        }
        if (idx[r] < 0) throw std::domain_error("matmul_argmax: every logit is -inf");
    }
}

}  // namespace ds4::backend::cpu
