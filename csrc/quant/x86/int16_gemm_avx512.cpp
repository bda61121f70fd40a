// AVX-512 GEMM of the int16 prefill path (int16_gemm.h) for the formats in the natural order
// (the K-quants; the legacy formats take the block lanes, x86/int16_blocks_avx512.cpp), two
// weight rows at a time.
// Every lane does the AVX2 tile's arithmetic (x86/int16_gemm_avx2.cpp: the same integer group
// sums, scale products, one fma per group, the same final lane tree and minimum terms), so the
// floats are its floats, bit for bit.
//   - K-quants (groups of 8 spans): the tile in pairs (I16Kernels::decode_pair): a zmm holds a
//     16-element half of rows o and o + 1, against the activation half broadcast to both, whose
//     lane sums are the AVX2 lanes of both rows with no fold per group; 3 pairs x 6 activation
//     rows per tile, each broadcast serving 3 instructions (Intel Xeon, 48 x 36 tiles from L2:
//     145 GMAC/s against 118 for the fold layout at 1,536 columns, 142 against 98 at 8,960, where
//     6 activation rows leave L1). An odd last row: a zmm of 32 consecutive weights against one
//     plain activation load, lanes j and j + 8 folded at a group's end (avx512_pairs.h).
//   - The minimum terms (Q4_K, Q5_K, Q2_K): two rows' c_j in the halves of one zmm,
//     8 weight rows per pass so that each loaded activation vector serves four instructions.

#include <algorithm>
#include <array>
#include <utility>

#include "quant/int16_gemm.h"
#include "quant/x86/avx512_pairs.h"

namespace ds4::quant::avx512 {

namespace {

constexpr int kXSuper = 6;    // activation rows per K-quant tile ...
constexpr int kPairs = 3;     // ... and weight-row pairs: 18 sums, 3 weight vectors, 1 activation
constexpr int kMinX = 6;      // activation rows per pass of the minimum terms ...
constexpr int kMinPairs = 4;  // ... and weight-row pairs: 24 sums, 4 weight vectors, 1 activation

using TileFn = void (*)(const int16_t*, const int16_t*, const float*, const float*, int, const int16_t*, const float*,
                        int64_t, float*, int64_t);

// Weight rows q0 and q1 (the same row when nw == 1) x X activation rows, over groups of 8 spans.
template <int X>
void tile_super(const int16_t* q0, const int16_t* q1, const float* sw0, const float* sw1, int nw, const int16_t* a,
                const float* da, int64_t n, float* y, int64_t ldy) {
    constexpr int G = 8;
    const int64_t groups = n / (kSpan * G);
    __m512 acc[X];
    for (int r = 0; r < X; ++r) acc[r] = _mm512_setzero_ps();
    int64_t stride = act_stride(n);
    opaque(stride);
    for (int64_t g = 0; g < groups; ++g) {
        __m512i S[2][X];
        for (int r = 0; r < X; ++r) S[0][r] = S[1][r] = _mm512_setzero_si512();
        const int64_t e0 = g * G * kSpan;
#pragma GCC unroll 8
        for (int s = 0; s < G; ++s) {
            __m512i w0 = load512(q0 + e0 + s * kSpan), w1 = load512(q1 + e0 + s * kSpan);
            in_register(w0);
            in_register(w1);
            for (int r = 0; r < X; ++r) {
                __m512i x = load512(a + r * stride + e0 + s * kSpan);
                in_register(x);
                S[0][r] = _mm512_dpwssd_epi32(S[0][r], w0, x);
                S[1][r] = _mm512_dpwssd_epi32(S[1][r], w1, x);
            }
        }
        const __m512 sw = join(_mm256_set1_ps(sw0[g]), _mm256_set1_ps(sw1[g]));
        for (int r = 0; r < X; ++r) {
            const __m512 scale = _mm512_mul_ps(sw, _mm512_set1_ps(da[r * groups + g]));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(fold(S[0][r], S[1][r])), scale, acc[r]);
        }
    }
    store_hsums(acc, nw, y, ldy);
}

// Weight rows 0 .. 2P - 1 in the paired layout (q, their sw rows consecutive) x X activation rows,
// over groups of 8 spans.
template <int P, int X>
void tile_pairs(const int16_t* q, const float* sw, const int16_t* a, const float* da, int64_t n, float* y,
                int64_t ldy) {
    constexpr int G = 8;
    const int64_t groups = n / (kSpan * G);
    __m512 acc[P][X];
    for (int p = 0; p < P; ++p)
        for (int r = 0; r < X; ++r) acc[p][r] = _mm512_setzero_ps();
    int64_t stride = act_stride(n);
    opaque(stride);
    for (int64_t g = 0; g < groups; ++g) {
        __m512i S[P][X];
        for (int p = 0; p < P; ++p)
            for (int r = 0; r < X; ++r) S[p][r] = _mm512_setzero_si512();
        const int64_t e0 = g * G * kSpan;
#pragma GCC unroll 16
        for (int h = 0; h < 2 * G; ++h) {
            __m512i w[P];
            for (int p = 0; p < P; ++p) {
                w[p] = load512(q + 2 * p * n + 2 * (e0 + h * kHalf));
                in_register(w[p]);
            }
            for (int r = 0; r < X; ++r) {
                __m512i x = bcast(a + r * stride + e0 + h * kHalf);
                in_register(x);
                for (int p = 0; p < P; ++p) S[p][r] = _mm512_dpwssd_epi32(S[p][r], w[p], x);
            }
        }
        for (int p = 0; p < P; ++p) {
            const __m512 s = join(_mm256_set1_ps(sw[2 * p * groups + g]), _mm256_set1_ps(sw[(2 * p + 1) * groups + g]));
            for (int r = 0; r < X; ++r) {
                const __m512 scale = _mm512_mul_ps(s, _mm512_set1_ps(da[r * groups + g]));
                acc[p][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[p][r]), scale, acc[p][r]);
            }
        }
    }
    for (int p = 0; p < P; ++p) store_hsums(acc[p], 2, y + 2 * p, ldy);
}

// The minimum terms of `rows` (2P - 1 or 2P) weight rows and X activation rows, subtracted from
// y: each pair's c_j in the halves of one zmm, every lane the AVX2 min_terms' fmas in its order.
template <int P, int X>
void min_block(const float* mw, int rows, const float* xs, int64_t halves, float* y, int64_t ldy) {
    const float* m[2 * P];
    for (int i = 0; i < 2 * P; ++i) m[i] = mw + (i < rows ? i : rows - 1) * halves;
    __m512 c[P][X];
    for (int p = 0; p < P; ++p)
        for (int r = 0; r < X; ++r) c[p][r] = _mm512_setzero_ps();
    for (int64_t h = 0; h < halves; h += 8) {  // a K-quant row: 16 halves per super-block
        __m512 mp[P];
        for (int p = 0; p < P; ++p) mp[p] = join(_mm256_loadu_ps(m[2 * p] + h), _mm256_loadu_ps(m[2 * p + 1] + h));
        for (int r = 0; r < X; ++r) {
            const __m512 x = _mm512_broadcast_f32x8(_mm256_loadu_ps(xs + r * halves + h));
            for (int p = 0; p < P; ++p) c[p][r] = _mm512_fmadd_ps(mp[p], x, c[p][r]);
        }
    }
    for (int p = 0; p < P; ++p) store_hsums<true>(c[p], rows - 2 * p >= 2 ? 2 : 1, y + 2 * p, ldy);
}

using MinFn = void (*)(const float*, int, const float*, int64_t, float*, int64_t);
using PairsFn = void (*)(const int16_t*, const float*, const int16_t*, const float*, int64_t, float*, int64_t);

template <size_t... I>
constexpr std::array<TileFn, sizeof...(I)> super_tiles(std::index_sequence<I...>) {
    return {&tile_super<static_cast<int>(I) + 1>...};
}
template <int P, size_t... I>
constexpr std::array<PairsFn, sizeof...(I)> pairs_row(std::index_sequence<I...>) {
    return {&tile_pairs<P, static_cast<int>(I) + 1>...};
}
template <size_t... P>
constexpr std::array<std::array<PairsFn, kXSuper>, sizeof...(P)> pairs_tiles(std::index_sequence<P...>) {
    return {pairs_row<static_cast<int>(P) + 1>(std::make_index_sequence<kXSuper>())...};
}
template <int P, size_t... I>
constexpr std::array<MinFn, sizeof...(I)> min_row(std::index_sequence<I...>) {
    return {&min_block<P, static_cast<int>(I) + 1>...};
}
template <size_t... P>
constexpr std::array<std::array<MinFn, kMinX>, sizeof...(P)> min_table(std::index_sequence<P...>) {
    return {min_row<static_cast<int>(P) + 1>(std::make_index_sequence<kMinX>())...};
}

void min_terms(const float* mw, int nw, const float* xs, int nx, int64_t halves, float* y, int64_t ldy) {
    static constexpr auto mins = min_table(std::make_index_sequence<kMinPairs>());
    for (int r = 0; r < nx; r += kMinX) {
        const int xr = nx - r < kMinX ? nx - r : kMinX;
        for (int o = 0; o < nw; o += 2 * kMinPairs) {
            const int rows = nw - o < 2 * kMinPairs ? nw - o : 2 * kMinPairs;
            mins[static_cast<size_t>((rows + 1) / 2 - 1)][static_cast<size_t>(xr - 1)](mw + o * halves, rows,
                                                                                     xs + r * halves, halves,
                                                                                     y + r * ldy + o, ldy);
        }
    }
}

}  // namespace

void gemm_i16(const int16_t* q, const float* sw, const float* mw, bool has_min, int group_spans, int nw,
              const int16_t* a, const float* da, const float* xs, int nx, int64_t n, float* y, int64_t ldy) {
    static constexpr auto super = super_tiles(std::make_index_sequence<kXSuper>());
    static constexpr auto pairs = pairs_tiles(std::make_index_sequence<kPairs>());
    const int64_t groups = n / (int64_t{kSpan} * group_spans);
    for (int r = 0; r < nx;) {
        const int xr = even_rows(nx - r, kXSuper);
        const int16_t* ar = a + r * act_stride(n);
        const float* dr = da + r * groups;
        float* yr = y + r * ldy;
        int o = 0;
        for (; o + 1 < nw;) {  // the paired layout: pairs, then an odd last row alone
            const int p = std::min(kPairs, (nw - o) / 2);
            pairs[static_cast<size_t>(p - 1)][static_cast<size_t>(xr - 1)](q + o * n, sw + o * groups, ar, dr, n,
                                                                          yr + o, ldy);
            o += 2 * p;
        }
        const TileFn fn = super[static_cast<size_t>(xr - 1)];
        for (; o < nw; o += 2) {
            const int two = nw - o >= 2 ? 2 : 1, last = o + two - 1;
            fn(q + o * n, q + last * n, sw + o * groups, sw + last * groups, two, ar, dr, n, yr + o, ldy);
        }
        r += xr;
    }
    if (has_min) min_terms(mw, nw, xs, nx, n / kHalf, y, ldy);
}

}  // namespace ds4::quant::avx512
