// AVX2 kernels of the int16 prefill path (int16_gemm.h): the activation quantiser and the tiled
// GEMM, both bit-identical to the scalar reference in int16_ref.cpp.
//
// Per (weight row, activation row) and span: two vpmaddwd and one vpaddd give the eight exact
// lane sums, then vcvtdq2ps, one multiply for the lane scales sw * da and one FMA into the lane
// accumulators: six ops per 32 multiply-adds, of which only two need the FMA pipes (the float
// path's five per 32 all do), so the integer and conversion pipes carry the rest.
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "quant/int16_gemm.h"
#include "quant/x86_avx2_util.h"

namespace ds4::quant::avx2 {

namespace {

// The lane scales of span s of a weight row: sw of half 0 in the even lanes, of half 1 in the odd.
inline __m256 lane_scales(const float* sw, int64_t s) {
    return _mm256_castpd_ps(_mm256_broadcast_sd(reinterpret_cast<const double*>(sw + 2 * s)));
}

// W weight rows x X activation rows over every span; accumulators and the weight vectors of
// the span stay in registers, each activation vector is loaded once for the W rows.
template <int W, int X>
void tile(const int16_t* q, const float* sw, const float* mw, bool has_min, const int16_t* a, const float* da,
          const float* xs, int64_t n, float* y, int64_t ldy) {
    const int64_t spans = n / kSpan, halves = n / kHalf;
    __m256 acc[W][X];
    for (int o = 0; o < W; ++o)
        for (int r = 0; r < X; ++r) acc[o][r] = _mm256_setzero_ps();
    for (int64_t s = 0; s < spans; ++s) {
        __m256i qv[W][2];
        __m256 sv[W];
        for (int o = 0; o < W; ++o) {
            const auto* qp = reinterpret_cast<const __m256i*>(q + o * n + s * kSpan);
            qv[o][0] = _mm256_loadu_si256(qp);
            qv[o][1] = _mm256_loadu_si256(qp + 1);
            sv[o] = lane_scales(sw + o * halves, s);
        }
        for (int r = 0; r < X; ++r) {
            const auto* ap = reinterpret_cast<const __m256i*>(a + r * n + s * kSpan);
            const __m256i a0 = _mm256_loadu_si256(ap), a1 = _mm256_loadu_si256(ap + 1);
            const __m256 d = _mm256_broadcast_ss(da + r * spans + s);
            for (int o = 0; o < W; ++o) {
                const __m256i S = _mm256_add_epi32(_mm256_madd_epi16(qv[o][0], a0), _mm256_madd_epi16(qv[o][1], a1));
                acc[o][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S), _mm256_mul_ps(sv[o], d), acc[o][r]);
            }
        }
    }
    for (int o = 0; o < W; ++o) {
        for (int r = 0; r < X; ++r) {
            float out = hsum(acc[o][r]);
            if (has_min) {
                const float* m = mw + o * halves;
                const float* x = xs + r * halves;
                __m256 c = _mm256_setzero_ps();
                int64_t h = 0;
                for (; h + 8 <= halves; h += 8) c = _mm256_fmadd_ps(_mm256_loadu_ps(m + h), _mm256_loadu_ps(x + h), c);
                alignas(32) float cl[8];
                _mm256_store_ps(cl, c);
                for (int j = 0; h < halves; ++h, ++j) cl[j] = std::fma(m[h], x[h], cl[j]);
                out -= hsum(_mm256_load_ps(cl));
            }
            y[r * ldy + o] = out;
        }
    }
}

using TileFn = void (*)(const int16_t*, const float*, const float*, bool, const int16_t*, const float*, const float*,
                        int64_t, float*, int64_t);

// Tile shape, measured on Zen 3 (24 weight rows x 36 activation rows, n = 640 / 2048, best of
// 6 alternating runs, GMAC/s per thread): 1 x 6 36 / 30, 2 x 3 33 / 30, 2 x 4 33 / 22, 1 x 8 28 / 21.
constexpr int kW = 1, kX = 6;

template <int W, int X>
TileFn pick(int w, int x) {
    if constexpr (W > 1) {
        if (w < W) return pick<W - 1, X>(w, x);
    }
    if constexpr (X > 1) {
        if (x < X) return pick<W, X - 1>(w, x);
    }
    return &tile<W, X>;
}

}  // namespace

void quantize_i16(const float* x, int64_t n, int16_t* a, float* da, float* xs) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    for (int64_t s = 0; s < n / kSpan; ++s) {
        const float* xp = x + s * kSpan;
        __m256 v[4];
        __m256 amax = _mm256_setzero_ps();
        __m256 finite = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
        for (int k = 0; k < 4; ++k) {
            v[k] = _mm256_loadu_ps(xp + 8 * k);
            amax = _mm256_max_ps(amax, _mm256_and_ps(v[k], abs_mask));
            // v - v is 0 exactly for finite v, NaN for an infinity or a NaN.
            finite = _mm256_and_ps(finite, _mm256_cmp_ps(_mm256_sub_ps(v[k], v[k]), _mm256_setzero_ps(), _CMP_EQ_OQ));
        }
        int16_t* ap = a + s * kSpan;
        if (_mm256_movemask_ps(finite) != 0xFF) {
            std::memset(ap, 0, kSpan * sizeof(int16_t));
            da[s] = xs[2 * s] = xs[2 * s + 1] = std::numeric_limits<float>::quiet_NaN();
            continue;
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float mx = _mm_cvtss_f32(m4);
        const float d = mx / 32767.0f;
        const __m256 id = _mm256_set1_ps(mx > 0.0f ? 32767.0f / mx : 0.0f);
        __m256i i[4];
        for (int k = 0; k < 4; ++k) i[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], id));
        // Dword k holds elements 2k, 2k+1. packs works per 128-bit lane: P = [d0 d1 d4 d5 | d2 d3 d6
        // d7] and Q likewise with d8..d15; reordered to [d0 d2 d1 d3 | d4 d6 d5 d7], the per-lane
        // unpacks give [d0 d8 d2 d10 | d4 d12 d6 d14] (positions 0..15) and [d1 d9 d3 d11 | d5 d13
        // d7 d15] (16..31), the lane order of int16_gemm.h.
        const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        const __m256i P = _mm256_permutevar8x32_epi32(_mm256_packs_epi32(i[0], i[1]), order);
        const __m256i Q = _mm256_permutevar8x32_epi32(_mm256_packs_epi32(i[2], i[3]), order);
        const __m256i p0 = _mm256_unpacklo_epi32(P, Q), p1 = _mm256_unpackhi_epi32(P, Q);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(ap), p0);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(ap) + 1, p1);
        // Sums of the stored (saturated) values, as the reference takes them: even lanes half 0.
        const __m256i lanes = _mm256_add_epi32(_mm256_madd_epi16(p0, _mm256_set1_epi16(1)),
                                               _mm256_madd_epi16(p1, _mm256_set1_epi16(1)));
        const __m128i h4 = _mm_add_epi32(_mm256_castsi256_si128(lanes), _mm256_extracti128_si256(lanes, 1));
        const int32_t sum0 = _mm_cvtsi128_si32(h4) + _mm_extract_epi32(h4, 2);
        const int32_t sum1 = _mm_extract_epi32(h4, 1) + _mm_extract_epi32(h4, 3);
        da[s] = d;
        xs[2 * s] = d * static_cast<float>(sum0);
        xs[2 * s + 1] = d * static_cast<float>(sum1);
    }
}

void gemm_i16(const int16_t* q, const float* sw, const float* mw, bool has_min, int nw, const int16_t* a,
              const float* da, const float* xs, int nx, int64_t n, float* y, int64_t ldy) {
    const int64_t spans = n / kSpan, halves = n / kHalf;
    for (int r = 0; r < nx; r += kX) {
        const int xr = nx - r < kX ? nx - r : kX;
        for (int o = 0; o < nw; o += kW) {
            const int w = nw - o < kW ? nw - o : kW;
            pick<kW, kX>(w, xr)(q + o * n, sw + o * halves, mw + o * halves, has_min, a + r * n, da + r * spans,
                                xs + r * halves, n, y + r * ldy + o, ldy);
        }
    }
}

}  // namespace ds4::quant::avx2
