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
//   - The minima (Q4_K, Q5_K, Q2_K) in the tiles' accumulators at each group's end: a pair's two
//     rows in the halves of one zmm against the activation row's sums broadcast to both.

#include <algorithm>
#include <array>
#include <utility>

#include "quant/int16_gemm.h"
#include "quant/x86/avx512_pairs.h"

namespace ds4::quant::avx512 {

namespace {

constexpr int kXSuper = 6;    // activation rows per K-quant tile ...
constexpr int kPairs = kPairedTileRows / 2;  // ... and weight-row pairs: 18 sums, 3 weight vectors, 1 activation

// Weight rows 0 .. 2P - 1 (mw rows n / 16 apart) against X activation rows (xs rows as far
// apart): acc[p][r] -= the minima of group g's U units (0, 8 or 16; int16_gemm.h), each pair's
// two rows in the halves of one zmm, 8 units per fma.
template <int U, int P, int X>
inline void minima(const float* const (&m)[2 * P], const float* xs, int64_t ms, int64_t g, __m512 (&acc)[P][X]) {
    for (int k = 0; k < U; k += 8) {
        __m512 mp[P];
        for (int p = 0; p < P; ++p) mp[p] = join(_mm256_loadu_ps(m[2 * p] + g * U + k), _mm256_loadu_ps(m[2 * p + 1] + g * U + k));
        for (int r = 0; r < X; ++r) {
            const __m512 x = _mm512_broadcast_f32x8(_mm256_loadu_ps(xs + r * ms + g * U + k));
            for (int p = 0; p < P; ++p) acc[p][r] = _mm512_fnmadd_ps(mp[p], x, acc[p][r]);
        }
    }
}

using TileFn = void (*)(const int16_t*, const int16_t*, const float*, const float*, const float*, const float*, int,
                        const int16_t*, const float*, const float*, int64_t, float*, int64_t);

// Weight rows q0 and q1 (the same row when nw == 1) x X activation rows, over groups of 8 spans.
template <int U, int X>
void tile_super(const int16_t* q0, const int16_t* q1, const float* sw0, const float* sw1, const float* mw0,
                const float* mw1, int nw, const int16_t* a, const float* da, const float* xs, int64_t n, float* y,
                int64_t ldy) {
    constexpr int G = 8;
    const int64_t groups = n / (kSpan * G), ms = n / kHalf;
    const float* const m[2] = {mw0, mw1};
    __m512 acc[1][X];
    for (int r = 0; r < X; ++r) acc[0][r] = _mm512_setzero_ps();
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
            acc[0][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(fold(S[0][r], S[1][r])), scale, acc[0][r]);
        }
        minima<U>(m, xs, ms, g, acc);
    }
    store_hsums(acc[0], nw, y, ldy);
}

// Weight rows 0 .. 2P - 1 in the paired layout (q, their sw rows consecutive, their mw rows n / 16
// apart) x X activation rows, over groups of 8 spans.
template <int U, int P, int X>
void tile_pairs(const int16_t* q, const float* sw, const float* mw, const int16_t* a, const float* da, const float* xs,
                int64_t n, float* y, int64_t ldy) {
    constexpr int G = 8;
    const int64_t groups = n / (kSpan * G), ms = n / kHalf;
    const float* m[2 * P];
    for (int i = 0; i < 2 * P; ++i) m[i] = mw + i * ms;
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
        minima<U>(m, xs, ms, g, acc);
    }
    for (int p = 0; p < P; ++p) store_hsums(acc[p], 2, y + 2 * p, ldy);
}

using PairsFn = void (*)(const int16_t*, const float*, const float*, const int16_t*, const float*, const float*, int64_t,
                         float*, int64_t);

template <int U, size_t... I>
constexpr std::array<TileFn, sizeof...(I)> super_tiles(std::index_sequence<I...>) {
    return {&tile_super<U, static_cast<int>(I) + 1>...};
}
template <int U, int P, size_t... I>
constexpr std::array<PairsFn, sizeof...(I)> pairs_row(std::index_sequence<I...>) {
    return {&tile_pairs<U, P, static_cast<int>(I) + 1>...};
}
template <int U, size_t... P>
constexpr std::array<std::array<PairsFn, kXSuper>, sizeof...(P)> pairs_tiles(std::index_sequence<P...>) {
    return {pairs_row<U, static_cast<int>(P) + 1>(std::make_index_sequence<kXSuper>())...};
}

// The tiles of a format with U minimum units per group.
template <int U>
void gemm_units(const int16_t* q, const float* sw, const float* mw, int nw, const int16_t* a, const float* da,
                const float* xs, int nx, int64_t n, float* y, int64_t ldy) {
    static constexpr auto super = super_tiles<U>(std::make_index_sequence<kXSuper>());
    static constexpr auto pairs = pairs_tiles<U>(std::make_index_sequence<kPairs>());
    const int64_t groups = n / (int64_t{kSpan} * 8), ms = n / kHalf;
    for (int r = 0; r < nx;) {
        const int xr = even_rows(nx - r, kXSuper);
        const int16_t* ar = a + r * act_stride(n);
        const float* dr = da + r * groups;
        const float* xr_s = xs + r * ms;
        float* yr = y + r * ldy;
        int o = 0;
        for (; o + 1 < nw;) {  // the paired layout: pairs, then an odd last row alone
            const int p = std::min(kPairs, (nw - o) / 2);
            pairs[static_cast<size_t>(p - 1)][static_cast<size_t>(xr - 1)](q + o * n, sw + o * groups, mw + o * ms, ar,
                                                                          dr, xr_s, n, yr + o, ldy);
            o += 2 * p;
        }
        const TileFn fn = super[static_cast<size_t>(xr - 1)];
        for (; o < nw; o += 2) {
            const int two = nw - o >= 2 ? 2 : 1, last = o + two - 1;
            fn(q + o * n, q + last * n, sw + o * groups, sw + last * groups, mw + o * ms, mw + last * ms, two, ar, dr,
               xr_s, n, yr + o, ldy);
        }
        r += xr;
    }
}

}  // namespace

void gemm_i16(const int16_t* q, const float* sw, const float* mw, int min_len, int, int nw, const int16_t* a,
              const float* da, const float* xs, int nx, int64_t n, float* y, int64_t ldy) {
    switch (min_len ? kSpan * 8 / min_len : 0) {
        case 16: return gemm_units<16>(q, sw, mw, nw, a, da, xs, nx, n, y, ldy);
        case 8: return gemm_units<8>(q, sw, mw, nw, a, da, xs, nx, n, y, ldy);
        default: return gemm_units<0>(q, sw, mw, nw, a, da, xs, nx, n, y, ldy);
    }
}

}  // namespace ds4::quant::avx512
