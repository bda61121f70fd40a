// AVX2 tiled GEMM over decoded weight rows (decode_groups output), bit-identical to the AVX2
// dot kernels: every (weight row, activation row) pair follows the canonical order of
// simd_x86.h (per group t = u_0 x_0, t = fma(u_j, x_j, t), acc = fma(t, s, acc); hsum at the end).
// A register tile of kTileW weight rows x kTileX activation rows shares each loaded vector:
// per 8 elements, kTileW + kTileX loads feed kTileW * kTileX FMAs, which keeps the FMA pipes
// busy where a one-pair dot is bound by its loads and its decode.
#include <immintrin.h>

#include <cstdint>

#include "quant/simd_x86.h"
#include "quant/x86_avx2_util.h"

namespace ds4::quant {
namespace avx2 {
namespace {

constexpr int kTileW = 2;  // weight rows per register tile
constexpr int kTileX = 4;  // activation rows per register tile

// The group sums t (8 ymm) and the activation vectors (4) stay in registers; the accumulators,
// touched once per group, live in L1 (one load + store per pair and group), which leaves the
// registers to the FMA chains that run every vector.
template <int G, int W, int X>
void tile(const float* u, const float* s, int64_t n, const float* x, int64_t ldx, float* y, int64_t ldy) {
    constexpr int64_t g = 8 * G;
    const int64_t ng = n / g;
    alignas(32) float acc[W][X][8] = {};
    for (int64_t k = 0; k < ng; ++k) {
        __m256 t[W][X];
        for (int j = 0; j < G; ++j) {
            __m256 xv[X];
            for (int r = 0; r < X; ++r) xv[r] = _mm256_loadu_ps(x + r * ldx + k * g + 8 * j);
            for (int o = 0; o < W; ++o) {
                const __m256 uv = _mm256_loadu_ps(u + o * n + k * g + 8 * j);
                for (int r = 0; r < X; ++r)
                    t[o][r] = j == 0 ? _mm256_mul_ps(uv, xv[r]) : _mm256_fmadd_ps(uv, xv[r], t[o][r]);
            }
        }
        for (int o = 0; o < W; ++o) {
            const __m256 sv = _mm256_broadcast_ss(s + o * ng + k);
            for (int r = 0; r < X; ++r)
                _mm256_store_ps(acc[o][r], _mm256_fmadd_ps(t[o][r], sv, _mm256_load_ps(acc[o][r])));
        }
        // Keeps acc in memory: promoted to registers it would push the t chains or the x
        // vectors out of them (measured 3x slower).
        asm volatile("" ::: "memory");
    }
    for (int o = 0; o < W; ++o)
        for (int r = 0; r < X; ++r) y[r * ldy + o] = hsum(_mm256_load_ps(acc[o][r]));
}

using TileFn = void (*)(const float*, const float*, int64_t, const float*, int64_t, float*, int64_t);

template <int G>
TileFn tile_fn(int w, int xr) {
    static const TileFn table[kTileW][kTileX] = {{&tile<G, 1, 1>, &tile<G, 1, 2>, &tile<G, 1, 3>, &tile<G, 1, 4>},
                                                 {&tile<G, 2, 1>, &tile<G, 2, 2>, &tile<G, 2, 3>, &tile<G, 2, 4>}};
    return table[w - 1][xr - 1];
}

template <int G>
void gemm(const float* u, const float* s, int nw, const float* x, int64_t ldx, int nx, int64_t n, float* y,
          int64_t ldy) {
    const int64_t ng = n / (8 * G);
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
        case 16: return gemm<2>(u, scales, nw, x, ldx, nx, n, y, ldy);
        case 32: return gemm<4>(u, scales, nw, x, ldx, nx, n, y, ldy);
        default: return;  // no table declares another group length
    }
}

}  // namespace avx2
}  // namespace ds4::quant
