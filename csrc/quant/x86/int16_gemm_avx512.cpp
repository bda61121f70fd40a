// AVX-512 GEMM of the int16 prefill path (int16_gemm.h) for the formats in the natural order
// (the legacy 32-element formats but Q8_0 / Q5_0, and the K-quants): the AVX2 tile
// (x86/int16_gemm_avx2.cpp) over two weight rows at a time, their span vectors joined in one zmm (row o
// low, row o + 1 high), each activation vector broadcast to both halves and vpdpwssd summing the
// exact lane sums. Every lane does the AVX2 tile's arithmetic (the same integer group sums, scale
// products, one fma per group, the same final lane tree and minimum terms), so the floats are
// its floats, bit for bit; 12 activation rows per tile (AVX2: 6).

#include <array>
#include <utility>

#include "quant/int16_gemm.h"
#include "quant/x86/avx512_pairs.h"

namespace ds4::quant::avx512 {

namespace {

constexpr int kX = 12;  // activation rows per tile

// Weight rows q0 and q1 (the same row when nw == 1) x X activation rows over every group of G spans.
template <int X, int G>
void tile(const int16_t* q0, const int16_t* q1, const float* sw0, const float* sw1, int nw, const int16_t* a,
          const float* da, int64_t n, float* y, int64_t ldy) {
    const int64_t groups = n / (kSpan * G);
    __m512 acc[X];
    for (int r = 0; r < X; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
        __m512i S[X];
        for (int r = 0; r < X; ++r) S[r] = _mm512_setzero_si512();
        for (int s = 0; s < G; ++s) {
            const int64_t e0 = (g * G + s) * kSpan;
            const __m512i w0 = join(q0 + e0, q1 + e0), w1 = join(q0 + e0 + kHalf, q1 + e0 + kHalf);
            for (int r = 0; r < X; ++r) {
                const int16_t* ap = a + r * n + e0;
                S[r] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(S[r], w0, bcast(ap)), w1, bcast(ap + kHalf));
            }
        }
        const __m512 sw = join(_mm256_set1_ps(sw0[g]), _mm256_set1_ps(sw1[g]));
        for (int r = 0; r < X; ++r) {
            const __m512 scale = _mm512_mul_ps(sw, _mm512_set1_ps(da[r * groups + g]));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[r]), scale, acc[r]);
        }
    }
    store_hsums(acc, nw, y, ldy);
}

using TileFn = void (*)(const int16_t*, const int16_t*, const float*, const float*, int, const int16_t*, const float*,
                        int64_t, float*, int64_t);

template <int G, size_t... I>
constexpr std::array<TileFn, sizeof...(I)> tiles(std::index_sequence<I...>) {
    return {&tile<static_cast<int>(I) + 1, G>...};
}

}  // namespace

void gemm_i16(const int16_t* q, const float* sw, const float* mw, bool has_min, int group_spans, int nw,
              const int16_t* a, const float* da, const float* xs, int nx, int64_t n, float* y, int64_t ldy) {
    static constexpr auto one = tiles<1>(std::make_index_sequence<kX>());
    static constexpr auto super = tiles<8>(std::make_index_sequence<kX>());
    const int64_t groups = n / (int64_t{kSpan} * group_spans);
    for (int r = 0; r < nx; r += kX) {
        const int xr = nx - r < kX ? nx - r : kX;
        const TileFn fn = (group_spans == 1 ? one : super)[static_cast<size_t>(xr - 1)];
        for (int o = 0; o < nw; o += 2) {
            const int two = nw - o >= 2 ? 2 : 1, last = o + two - 1;
            fn(q + o * n, q + last * n, sw + o * groups, sw + last * groups, two, a + r * n, da + r * groups, n,
               y + r * ldy + o, ldy);
        }
    }
    if (has_min) avx2::min_terms(mw, nw, xs, nx, n / kHalf, y, ldy);
}

}  // namespace ds4::quant::avx512
