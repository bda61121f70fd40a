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
#include "quant/x86/avx2_util.h"
#include "quant/x86/madd.h"

namespace ds4::quant::DS4_AVX2_NAMESPACE {

namespace {

int32_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1)));
}

// One weight row x X activation rows over every group of G spans (the K-quants' super-block: the
// legacy formats take the block lanes, x86/int16_blocks_avx2.cpp): per span the weight vectors
// are loaded once for the X rows; the X integer lane sums of a group stay in registers, and the
// float accumulators take one conversion and one fma per group.
constexpr int G = 8;

template <int X>
void tile(const int16_t* q, const float* sw, const int16_t* a, const float* da, int64_t n, float* y, int64_t ldy) {
    const int64_t groups = n / (kSpan * G);
    __m256 acc[X];
    for (int r = 0; r < X; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
        __m256i S[X];
        for (int r = 0; r < X; ++r) S[r] = _mm256_setzero_si256();
        for (int s = 0; s < G; ++s) {
            const int64_t e0 = (g * G + s) * kSpan;
            const auto* qp = reinterpret_cast<const __m256i*>(q + e0);
            const __m256i q0 = _mm256_loadu_si256(qp), q1 = _mm256_loadu_si256(qp + 1);
            for (int r = 0; r < X; ++r) {
                const auto* ap = reinterpret_cast<const __m256i*>(a + r * act_stride(n) + e0);
                const __m256i p = madd2(q0, _mm256_loadu_si256(ap), q1, _mm256_loadu_si256(ap + 1));
                S[r] = _mm256_add_epi32(S[r], p);
            }
        }
        for (int r = 0; r < X; ++r) {
            const __m256 scale = _mm256_set1_ps(sw[g] * da[r * groups + g]);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S[r]), scale, acc[r]);
        }
    }
    for (int r = 0; r < X; ++r) y[r * ldy] = hsum(acc[r]);
}

// The minimum terms of a block of weight rows x activation rows, subtracted from y: per pair,
// c_j = fma(mw_h, xs_h, c_j) over the halves h = 8 i + j in order, then y -= hsum(c), as the
// reference does it after hsum(acc). Register-tiled (WR x XR pairs share each loaded vector):
// inside tile() each pair loaded both of its operands for every fma.
template <int WR, int XR>
void min_block(const float* mw, const float* xs, int64_t halves, float* y, int64_t ldy) {
    __m256 c[WR][XR];
    for (int o = 0; o < WR; ++o)
        for (int r = 0; r < XR; ++r) c[o][r] = _mm256_setzero_ps();
    int64_t h = 0;
    for (; h + 8 <= halves; h += 8) {
        __m256 x[XR];
        for (int r = 0; r < XR; ++r) x[r] = _mm256_loadu_ps(xs + r * halves + h);
        for (int o = 0; o < WR; ++o) {
            const __m256 m = _mm256_loadu_ps(mw + o * halves + h);
            for (int r = 0; r < XR; ++r) c[o][r] = _mm256_fmadd_ps(m, x[r], c[o][r]);
        }
    }
    for (int o = 0; o < WR; ++o) {
        for (int r = 0; r < XR; ++r) {
            alignas(32) float cl[8];
            _mm256_store_ps(cl, c[o][r]);
            for (int64_t t = h, j = 0; t < halves; ++t, ++j) cl[j] = std::fma(mw[o * halves + t], xs[r * halves + t], cl[j]);
            y[r * ldy + o] -= hsum(_mm256_load_ps(cl));
        }
    }
}

// y[r * ldy + o] -= the minimum terms of weight rows o < nw and activation rows r < nx (the
// reference's order).
void min_terms(const float* mw, int nw, const float* xs, int nx, int64_t halves, float* y, int64_t ldy) {
    constexpr int kWR = 2, kXR = 4;  // 8 accumulators and 5 operands: no spills
    int o = 0;
    for (; o + kWR <= nw; o += kWR) {
        int r = 0;
        for (; r + kXR <= nx; r += kXR) min_block<kWR, kXR>(mw + o * halves, xs + r * halves, halves, y + r * ldy + o, ldy);
        for (; r < nx; ++r) min_block<kWR, 1>(mw + o * halves, xs + r * halves, halves, y + r * ldy + o, ldy);
    }
    for (; o < nw; ++o)
        for (int r = 0; r < nx; ++r) min_block<1, 1>(mw + o * halves, xs + r * halves, halves, y + r * ldy + o, ldy);
}

using TileFn = void (*)(const int16_t*, const float*, const int16_t*, const float*, int64_t, float*, int64_t);

// Activation rows per tile, measured on Zen 3 (24 weight rows x 36 activation rows, n = 640 /
// 2048, best of 6 alternating runs, GMAC/s per thread, groups of one span): 1 x 6 36 / 30, 2 x 3
// 33 / 30, 2 x 4 33 / 22, 1 x 8 28 / 21.
constexpr int kX = 6;

template <int X>
TileFn pick(int x) {
    if constexpr (X > 1) {
        if (x < X) return pick<X - 1>(x);
    }
    return &tile<X>;
}

}  // namespace

void quantize_i16(const float* x, int64_t n, int group_spans, int range, int16_t* a, float* da, float* xs) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const int64_t len = int64_t{kSpan} * group_spans;
    for (int64_t g = 0; g < n / len; ++g) {
        const float* xg = x + g * len;
        __m256 amax = _mm256_setzero_ps();
        __m256 finite = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
        for (int64_t e = 0; e < len; e += 8) {
            const __m256 v = _mm256_loadu_ps(xg + e);
            amax = _mm256_max_ps(amax, _mm256_and_ps(v, abs_mask));
            // v - v is 0 exactly for finite v, NaN for an infinity or a NaN.
            finite = _mm256_and_ps(finite, _mm256_cmp_ps(_mm256_sub_ps(v, v), _mm256_setzero_ps(), _CMP_EQ_OQ));
        }
        if (_mm256_movemask_ps(finite) != 0xFF) {
            std::memset(a + g * len, 0, static_cast<size_t>(len) * sizeof(int16_t));
            da[g] = std::numeric_limits<float>::quiet_NaN();
            for (int64_t h = g * len / kHalf; h < (g + 1) * len / kHalf; ++h) xs[h] = da[g];
            continue;
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float mx = _mm_cvtss_f32(m4);
        const float d = mx / static_cast<float>(range);
        da[g] = d;
        for (int64_t e0 = g * len; e0 < (g + 1) * len; e0 += kSpan) {
            const float* xp = x + e0;
            int16_t* ap = a + e0;
            const __m256 id = _mm256_set1_ps(mx > 0.0f ? static_cast<float>(range) / mx : 0.0f);
            __m256i i[4];
            for (int k = 0; k < 4; ++k) i[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xp + 8 * k), id));
            // packs works per 128-bit lane: [i0 i1 | i0' i1'] -> elements [0..3 8..11 | 4..7 12..15]
            // as qwords 0 2 1 3 of the natural order.
            const __m256i p0 = _mm256_permute4x64_epi64(_mm256_packs_epi32(i[0], i[1]), 0xD8);
            const __m256i p1 = _mm256_permute4x64_epi64(_mm256_packs_epi32(i[2], i[3]), 0xD8);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(ap), p0);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(ap) + 1, p1);
            // Sums of the stored (saturated) values, as the reference takes them: p0 is half 0, p1 half 1.
            const int32_t sum0 = hsum_epi32(_mm256_madd_epi16(p0, _mm256_set1_epi16(1)));
            const int32_t sum1 = hsum_epi32(_mm256_madd_epi16(p1, _mm256_set1_epi16(1)));
            xs[e0 / kHalf] = d * static_cast<float>(sum0);
            xs[e0 / kHalf + 1] = d * static_cast<float>(sum1);
        }
    }
}

void gemm_i16(const int16_t* q, const float* sw, const float* mw, bool has_min, int, int nw, const int16_t* a,
              const float* da, const float* xs, int nx, int64_t n, float* y, int64_t ldy) {
    const int64_t groups = n / (int64_t{kSpan} * G), halves = n / kHalf;
    for (int r = 0; r < nx; r += kX) {
        const int xr = nx - r < kX ? nx - r : kX;
        const TileFn fn = pick<kX>(xr);
        for (int o = 0; o < nw; ++o) fn(q + o * n, sw + o * groups, a + r * act_stride(n), da + r * groups, n, y + r * ldy + o, ldy);
    }
    if (has_min) min_terms(mw, nw, xs, nx, halves, y, ldy);
}

}  // namespace ds4::quant::DS4_AVX2_NAMESPACE
