// AVX2 kernels of the int16 prefill path (int16_gemm.h): the activation quantiser and the tiled
// GEMM, both bit-identical to the scalar reference in int16_ref.cpp.
//
// Per (weight row, activation row) and span: two vpmaddwd and one vpaddd give the eight exact
// lane sums, then vcvtdq2ps, one multiply for the lane scales sw * da and one FMA into the lane
// accumulators: six ops per 32 multiply-adds, of which only two need the FMA pipes (the float
// path's five per 32 all do), so the integer and conversion pipes carry the rest.
#include <immintrin.h>

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
// float accumulators take one conversion and one fma per group, then the group's U minimum
// units (0, 8 or 16; int16_gemm.h), 8 per fma: mw and xs rows n / 16 apart.
constexpr int G = 8;

template <int X, int U>
void tile(const int16_t* q, const float* sw, const float* mw, const int16_t* a, const float* da, const float* xs,
          int64_t n, float* y, int64_t ldy) {
    const int64_t groups = n / (kSpan * G), ms = n / kHalf;
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
        for (int k = 0; k < U; k += 8) {
            const __m256 m = _mm256_loadu_ps(mw + g * U + k);
            for (int r = 0; r < X; ++r) acc[r] = _mm256_fnmadd_ps(m, _mm256_loadu_ps(xs + r * ms + g * U + k), acc[r]);
        }
    }
    for (int r = 0; r < X; ++r) y[r * ldy] = hsum(acc[r]);
}

using TileFn = void (*)(const int16_t*, const float*, const float*, const int16_t*, const float*, const float*, int64_t,
                        float*, int64_t);

// Activation rows per tile, measured on Zen 3 (24 weight rows x 36 activation rows, n = 640 /
// 2048, best of 6 alternating runs, GMAC/s per thread, groups of one span): 1 x 6 36 / 30, 2 x 3
// 33 / 30, 2 x 4 33 / 22, 1 x 8 28 / 21.
constexpr int kX = 6;

template <int X, int U>
TileFn pick(int x) {
    if constexpr (X > 1) {
        if (x < X) return pick<X - 1, U>(x);
    }
    return &tile<X, U>;
}

}  // namespace

void quantize_i16(const float* x, int64_t n, int group_spans, int range, int min_len, int16_t* a, float* da,
                  float* xs) {
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
            fill_unit_sums(xs, g * len, (g + 1) * len, min_len, da[g]);
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
            if (min_len) {
                const __m256i one = _mm256_set1_epi16(1);
                store_unit_sums(xs, e0, min_len, d, hsum_epi32(_mm256_madd_epi16(p0, one)),
                                hsum_epi32(_mm256_madd_epi16(p1, one)));
            }
        }
    }
}

void gemm_i16(const int16_t* q, const float* sw, const float* mw, int min_len, int, int nw, const int16_t* a,
              const float* da, const float* xs, int nx, int64_t n, float* y, int64_t ldy) {
    const int64_t groups = n / (int64_t{kSpan} * G), ms = n / kHalf;
    const int units = min_len ? kSpan * G / min_len : 0;
    for (int r = 0; r < nx; r += kX) {
        const int xr = nx - r < kX ? nx - r : kX;
        const TileFn fn = units == 16 ? pick<kX, 16>(xr) : units == 8 ? pick<kX, 8>(xr) : pick<kX, 0>(xr);
        for (int o = 0; o < nw; ++o) {
            fn(q + o * n, sw + o * groups, mw + o * ms, a + r * act_stride(n), da + r * groups, xs + r * ms, n,
               y + r * ldy + o, ldy);
        }
    }
}

}  // namespace ds4::quant::DS4_AVX2_NAMESPACE
