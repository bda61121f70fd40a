// AVX2 kernels over packed tiles (packed.h). Per block index the tile's 8 scales convert in one
// instruction, and a half of 16 weights decodes in two shifts, so a 32-weight block of one row
// costs ~10 vector ops against ~25 in the GGUF layout: the weights stream at the memory's pace.
#include <immintrin.h>

#include <utility>

#include "quant/int16_gemm.h"
#include "quant/kernels.h"
#include "quant/packed.h"
#include "quant/x86_avx2_util.h"

namespace ds4::quant::avx2 {

namespace {

constexpr int kQ5TileBlock = 176;  // 8 f16 scales, then five words of 16 int16 lanes
constexpr int kScaleBytes = 16;

// Half H of a packed Q5_0 block (words w) as 16 int16 lanes q - 16.
template <int H>
inline __m256i q5_half(const uint8_t* w) {
    const auto word = [w](int k) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w) + k); };
    if constexpr (H < 15) {
        constexpr int lo = 5 * (H % 3);
        return _mm256_srai_epi16(_mm256_slli_epi16(word(H / 3), 11 - lo), 11);
    } else {
        // bit k of the value in bit 15 of word k; bit 4 is the sign
        __m256i v = _mm256_and_si256(_mm256_srai_epi16(word(4), 15), _mm256_set1_epi16(-16));
        v = _mm256_or_si256(v, _mm256_srli_epi16(word(0), 15));
        v = _mm256_or_si256(v, _mm256_and_si256(_mm256_srli_epi16(word(1), 14), _mm256_set1_epi16(2)));
        v = _mm256_or_si256(v, _mm256_and_si256(_mm256_srli_epi16(word(2), 13), _mm256_set1_epi16(4)));
        return _mm256_or_si256(v, _mm256_and_si256(_mm256_srli_epi16(word(3), 12), _mm256_set1_epi16(8)));
    }
}

// Row rho of a tile block (words w, scales sc) against R activation rows (a at the block).
template <int R, int Rho>
inline void q5_0_row(const uint8_t* w, const int16_t* a, int64_t n, const float (&sc)[R][8], __m256 (&acc)[R]) {
    const __m256i v0 = q5_half<2 * Rho>(w), v1 = q5_half<2 * Rho + 1>(w);
    for (int r = 0; r < R; ++r) {
        const auto* ap = reinterpret_cast<const __m256i*>(a + r * n);
        const __m256i S = _mm256_add_epi32(_mm256_madd_epi16(v0, _mm256_loadu_si256(ap)),
                                           _mm256_madd_epi16(v1, _mm256_loadu_si256(ap + 1)));
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S), _mm256_broadcast_ss(&sc[r][Rho]), acc[r]);
    }
}

// Rows Rho0 .. Rho0 + G - 1 of the tile against R activation rows; the same per-lane integer
// sums, conversion, fma and final sum as rows_legacy (int16_rows_avx2.cpp) for the GGUF rows.
template <int R, int G, int Rho0, int... Gs>
void q5_0_pass(const uint8_t* tile, int64_t n, const int16_t* a, const float* da, float* y, int64_t ldy,
               std::integer_sequence<int, Gs...>) {
    const int64_t nb = n / 32;
    __m256 acc[G][R];
    for (int g = 0; g < G; ++g)
        for (int r = 0; r < R; ++r) acc[g][r] = _mm256_setzero_ps();
    for (int64_t bi = 0; bi < nb; ++bi) {
        const uint8_t* p = tile + bi * kQ5TileBlock;
        if constexpr (Rho0 == 0) prefetch_block<kQ5TileBlock, 2048>(p);
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        alignas(32) float sc[R][8];
        for (int r = 0; r < R; ++r) _mm256_store_ps(sc[r], _mm256_mul_ps(d, _mm256_broadcast_ss(da + r * nb + bi)));
        (q5_0_row<R, Rho0 + Gs>(p + kScaleBytes, a + bi * 32, n, sc, acc[Gs]), ...);
    }
    for (int g = 0; g < G; ++g)
        for (int r = 0; r < R; ++r) y[r * ldy + Rho0 + g] = hsum(acc[g][r]);
}

// G rows per pass so that the G x R accumulators stay in registers.
template <int R>
void q5_0_rows(const void* tile, int64_t n, const int16_t* a, const float* da, const float* /*xs*/, float* y,
               int64_t ldy) {
    const auto* t = static_cast<const uint8_t*>(tile);
    constexpr int G = R == 1 ? 8 : R == 2 ? 4 : 2;
    using Seq = std::make_integer_sequence<int, G>;
    q5_0_pass<R, G, 0>(t, n, a, da, y, ldy, Seq{});
    if constexpr (G <= 4) q5_0_pass<R, G, G>(t, n, a, da, y, ldy, Seq{});
    if constexpr (G <= 2) {
        q5_0_pass<R, G, 4>(t, n, a, da, y, ldy, Seq{});
        q5_0_pass<R, G, 6>(t, n, a, da, y, ldy, Seq{});
    }
}

void q5_0_any(const void* tile, int64_t n, const int16_t* a, const float* da, const float* xs, int nx, float* y,
              int64_t ldy) {
    using Fn = void (*)(const void*, int64_t, const int16_t*, const float*, const float*, float*, int64_t);
    static constexpr Fn fns[kDotRowsMax] = {&q5_0_rows<1>, &q5_0_rows<2>, &q5_0_rows<3>, &q5_0_rows<4>};
    fns[nx - 1](tile, n, a, da, xs, y, ldy);
}

}  // namespace

RowsPackedFn rows_packed(Type type) {
    switch (type) {
        case Type::Q5_0: return &q5_0_any;
        case Type::Q8_0: return &rows_packed_q8_0;
        default: return nullptr;
    }
}

}  // namespace ds4::quant::avx2
