// AVX-512 tiled GEMM over decoded weight rows (decode_groups output), bit-identical to the AVX-512
// dot kernels: every (weight row, activation row) pair follows the canonical order of x86/simd.h
// with 16 lanes (per group t = u_0 x_0, t = fma(u_j, x_j, t), acc = fma(t, s, acc); hsum at the
// end).  A register tile of kTileW weight rows x kTileX activation rows shares each loaded
// vector: per group the G kTileX activation vectors stay in registers while each weight row's G
// vectors are loaded once and feed kTileX pairs, so 16 accumulators + 8 activations + 2 weights
// + t + scale fit the 32 zmm registers.
// GCC 12 warns on its own _mm512_undefined_* inside the conversion intrinsics (GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

#include "quant/x86/simd.h"
#include "quant/x86/avx512_util.h"

namespace ds4::quant {
namespace avx512 {
namespace {

constexpr int kTileW = 4;  // weight rows per register tile
constexpr int kTileX = 4;  // activation rows per register tile

template <int G, int W, int X>
void tile(const float* u, const float* s, int64_t n, const float* x, int64_t ldx, float* y, int64_t ldy) {
    constexpr int64_t g = 16 * G;
    const int64_t ng = n / g;
    __m512 acc[W][X];
    for (auto& a : acc)
        for (auto& v : a) v = _mm512_setzero_ps();
    for (int64_t k = 0; k < ng; ++k) {
        __m512 xv[G][X];
        for (int j = 0; j < G; ++j)
            for (int r = 0; r < X; ++r) xv[j][r] = _mm512_loadu_ps(x + r * ldx + k * g + 16 * j);
        for (int o = 0; o < W; ++o) {
            __m512 uv[G];
            for (int j = 0; j < G; ++j) uv[j] = _mm512_loadu_ps(u + o * n + k * g + 16 * j);
            const __m512 sv = _mm512_set1_ps(s[o * ng + k]);
            for (int r = 0; r < X; ++r) {
                __m512 t = _mm512_mul_ps(uv[0], xv[0][r]);
                for (int j = 1; j < G; ++j) t = _mm512_fmadd_ps(uv[j], xv[j][r], t);
                acc[o][r] = _mm512_fmadd_ps(t, sv, acc[o][r]);
            }
        }
    }
    for (int o = 0; o < W; ++o)
        for (int r = 0; r < X; ++r) y[r * ldy + o] = hsum(acc[o][r]);
}

using TileFn = void (*)(const float*, const float*, int64_t, const float*, int64_t, float*, int64_t);

template <int G>
TileFn tile_fn(int w, int xr) {
    static const TileFn table[kTileW][kTileX] = {
        {&tile<G, 1, 1>, &tile<G, 1, 2>, &tile<G, 1, 3>, &tile<G, 1, 4>},
        {&tile<G, 2, 1>, &tile<G, 2, 2>, &tile<G, 2, 3>, &tile<G, 2, 4>},
        {&tile<G, 3, 1>, &tile<G, 3, 2>, &tile<G, 3, 3>, &tile<G, 3, 4>},
        {&tile<G, 4, 1>, &tile<G, 4, 2>, &tile<G, 4, 3>, &tile<G, 4, 4>}};
    return table[w - 1][xr - 1];
}

template <int G>
void gemm(const float* u, const float* s, int nw, const float* x, int64_t ldx, int nx, int64_t n, float* y,
          int64_t ldy) {
    const int64_t ng = n / (16 * G);
    for (int o = 0; o < nw; o += kTileW) {
        const int w = nw - o < kTileW ? nw - o : kTileW;
        for (int r = 0; r < nx; r += kTileX) {
            const int xr = nx - r < kTileX ? nx - r : kTileX;
            tile_fn<G>(w, xr)(u + o * n, s + o * ng, n, x + r * ldx, ldx, y + r * ldy + o, ldy);
        }
    }
}

}  // namespace

void gemm_groups(const float* u, const float* scales, int nw, const float* x, int64_t ldx, int nx, int64_t n,
                 int group_len, float* y, int64_t ldy) {
    switch (group_len) {
        case 16: return gemm<1>(u, scales, nw, x, ldx, nx, n, y, ldy);
        case 32: return gemm<2>(u, scales, nw, x, ldx, nx, n, y, ldy);
        default: return;  // no table declares another group length
    }
}

}  // namespace avx512
}  // namespace ds4::quant
