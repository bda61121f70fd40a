// AVX2 tiled GEMM over decoded weight rows (decode_groups output), bit-identical to the AVX2
// dot kernels: every (weight row, activation row) pair follows the canonical order of
// x86/simd.h (per group t = u_0 x_0, t = fma(u_j, x_j, t), acc = fma(t, s, acc); hsum at the end).
// A register tile of W weight rows x X activation rows shares each loaded vector: per 8
// elements, W + X loads feed W X FMAs, which keeps the FMA pipes busy where a one-pair dot is
// bound by its loads and its decode.
#include <immintrin.h>

#include <cstdint>

#include "quant/x86/simd.h"
#include "quant/x86/avx2_util.h"

namespace ds4::quant {
namespace avx2 {
namespace {

// Tile shape per group length (G vectors of 8), measured on Zen 3 (n = 640, 24 x 32 rows, best
// of 7, MAC / cycle): G = 4: 2 x 4 with the accumulators in L1 8.2 (3 x 3: 7.8; 2 x 5: 7.0; 1 x 4
// with them in registers: 5.8); G = 2, whose accumulators move every 2 vectors: 1 x 4 in
// registers 6.3 (2 x 4 in L1: 3.9).
template <int G>
struct Shape;
template <>
struct Shape<4> {
    static constexpr int W = 2, X = 4;
    static constexpr bool kAccInL1 = true;
};
template <>
struct Shape<2> {
    static constexpr int W = 1, X = 4;
    static constexpr bool kAccInL1 = false;
};

// The group sums t (W X ymm) and the activation vectors (X) stay in registers. With kAccInL1 the
// accumulators, touched once per group, live in L1 (one load + store per pair and group),
// leaving the registers to the FMA chains that run every vector.
template <int G, int W, int X, bool kAccInL1>
void tile(const float* u, const float* s, int64_t n, const float* x, int64_t ldx, float* y, int64_t ldy) {
    constexpr int64_t g = 8 * G;
    const int64_t ng = n / g;
    alignas(32) float mem[W][X][8];  // the accumulators when kAccInL1 (vector-zeroed: `= {}` became rep stos)
    __m256 reg[W][X];                // ... otherwise
    for (int o = 0; o < W; ++o)
        for (int r = 0; r < X; ++r) {
            reg[o][r] = _mm256_setzero_ps();
            if (kAccInL1) _mm256_store_ps(mem[o][r], reg[o][r]);
        }
    for (int64_t k = 0; k < ng; ++k) {
        __m256 t[W][X];
        for (int j = 0; j < G; ++j) {
            __m256 xv[X];
            for (int r = 0; r < X; ++r) {
                xv[r] = _mm256_loadu_ps(x + r * ldx + k * g + 8 * j);
                asm("" : "+x"(xv[r]));  // one load per vector, reused by every weight row (GCC
                                        // otherwise re-reads it as an FMA memory operand: ~1.3x)
            }
            for (int o = 0; o < W; ++o) {
                const __m256 uv = _mm256_loadu_ps(u + o * n + k * g + 8 * j);
                for (int r = 0; r < X; ++r)
                    t[o][r] = j == 0 ? _mm256_mul_ps(uv, xv[r]) : _mm256_fmadd_ps(uv, xv[r], t[o][r]);
            }
        }
        for (int o = 0; o < W; ++o) {
            const __m256 sv = _mm256_broadcast_ss(s + o * ng + k);
            for (int r = 0; r < X; ++r) {
                if (kAccInL1) {
                    _mm256_store_ps(mem[o][r], _mm256_fmadd_ps(t[o][r], sv, _mm256_load_ps(mem[o][r])));
                } else {
                    reg[o][r] = _mm256_fmadd_ps(t[o][r], sv, reg[o][r]);
                }
            }
        }
        // Keeps the L1 accumulators in memory: promoted to registers they push the t chains
        // or the x vectors out of them (measured ~1.3x slower).
        if (kAccInL1) asm volatile("" ::: "memory");
    }
    for (int o = 0; o < W; ++o)
        for (int r = 0; r < X; ++r) y[r * ldy + o] = hsum(kAccInL1 ? _mm256_load_ps(mem[o][r]) : reg[o][r]);
}

using TileFn = void (*)(const float*, const float*, int64_t, const float*, int64_t, float*, int64_t);

// tile<G, w, xr> for an edge shape w <= W, xr <= X (every shape instantiated once).
template <int G, int W, int X>
TileFn pick(int w, int xr) {
    if constexpr (W > 1) {
        if (w < W) return pick<G, W - 1, X>(w, xr);
    }
    if constexpr (X > 1) {
        if (xr < X) return pick<G, W, X - 1>(w, xr);
    }
    return &tile<G, W, X, Shape<G>::kAccInL1>;
}

template <int G>
void gemm(const float* u, const float* s, int nw, const float* x, int64_t ldx, int nx, int64_t n, float* y,
          int64_t ldy) {
    using S = Shape<G>;
    const int64_t ng = n / (8 * G);
    // Activation rows outer: a tile of X rows stays in L1 while the decoded weight rows stream.
    for (int r = 0; r < nx; r += S::X) {
        const int xr = nx - r < S::X ? nx - r : S::X;
        for (int o = 0; o < nw; o += S::W) {
            const int w = nw - o < S::W ? nw - o : S::W;
            pick<G, S::W, S::X>(w, xr)(u + o * n, s + o * ng, n, x + r * ldx, ldx, y + r * ldy + o, ldy);
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
