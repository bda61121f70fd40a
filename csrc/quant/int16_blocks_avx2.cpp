// AVX2 kernels of the block-lane order (block_lanes.h, int16_gemm.h), for Q8_0: the GEMM over
// decoded int16 rows and the rows kernel over packed rows (packed.h), one template for both.
//
// Per chunk of 8 blocks and activation row: 16 vpmaddwd and 16 vpaddd leave the 8 blocks'
// exact sums in the 8 lanes, then one conversion, one multiply (the 8 scale products) and one
// fma: ~4.4 ops per 32 multiply-adds, against ~8 in the natural order (a conversion, a scale
// product, a broadcast and an fma per block). Measured on Zen 3, one thread, 2400 x 640 rows
// in cache, 12 activation rows: 31.5 GMAC/s (natural order, 4 rows per pass) -> 52.9 (6 rows).
#include <immintrin.h>

#include <type_traits>

#include "quant/blocks.h"
#include "quant/int16_gemm.h"
#include "quant/x86_avx2_util.h"

namespace ds4::quant::avx2 {

namespace {

// Weights as decode_row leaves them: int16 in the block-lane order, float scales.
struct Decoded {
    const int16_t* q;
    const float* sw;
    __m256i chunk_vec(int64_t b0, int v) const { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * b0 + 16 * v)); }
    __m256 chunk_scales(int64_t b0) const { return _mm256_loadu_ps(sw + b0); }
    __m128 tail4_scales(int64_t b0) const { return _mm_loadu_ps(sw + b0); }
    __m256i block_half(int64_t b, int h) const { return chunk_vec(b, h); }
    float block_scale(int64_t b) const { return sw[b]; }
    void prefetch(int64_t) const {}
};

// A packed Q8_0 row: per chunk of m blocks (byte 34 b0) m f16 scales, then the quants.
struct Packed {
    const uint8_t* p;
    static __m256i widen(const uint8_t* x) { return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))); }
    __m256i chunk_vec(int64_t b0, int v) const { return widen(p + 34 * b0 + 16 + 16 * v); }
    __m256 chunk_scales(int64_t b0) const { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 34 * b0))); }
    // the tail chunk of 4: 8 bytes of scales, then the quants
    __m128 tail4_scales(int64_t b0) const { return _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 34 * b0))); }
    __m256i tail4_vec(int64_t b0, int v) const { return widen(p + 34 * b0 + 8 + 16 * v); }
    __m256i block_half(int64_t b, int h) const { return widen(p + 34 * b + 2 + 16 * h); }
    float block_scale(int64_t b) const { return _cvtsh_ss(*reinterpret_cast<const uint16_t*>(p + 34 * b)); }
    void prefetch(int64_t b0) const { prefetch_block<272, 2048>(p + 34 * b0); }
};

template <class W>
__m256i tail4_vec(const W& w, int64_t b0, int v) {
    if constexpr (std::is_same_v<W, Packed>) {
        return w.tail4_vec(b0, v);
    } else {
        return w.chunk_vec(b0, v);
    }
}

// y[r * ldy] for R activation rows (a, da: rows of n and of n / 32).
template <int R, class W>
void block_rows(const W& w, int64_t n, const int16_t* a, const float* da, float* y, int64_t ldy) {
    const BlockLanes bl(n);
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < bl.full; b0 += BlockLanes::kChunk) {
        w.prefetch(b0);
        __m256i S[R];
        for (int r = 0; r < R; ++r) S[r] = _mm256_setzero_si256();
        const int16_t* ac = a + 32 * b0;
#pragma GCC unroll 4
        for (int v = 0; v < 16; ++v) {
            const __m256i q = w.chunk_vec(b0, v);
            for (int r = 0; r < R; ++r) {
                const auto* ap = reinterpret_cast<const __m256i*>(ac + r * n + 16 * v);
                S[r] = _mm256_add_epi32(S[r], _mm256_madd_epi16(q, _mm256_loadu_si256(ap)));
            }
        }
        const __m256 d = w.chunk_scales(b0);
        for (int r = 0; r < R; ++r) {
            const __m256 scale = _mm256_mul_ps(d, _mm256_loadu_ps(da + r * bl.nb + b0));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S[r]), scale, acc[r]);
        }
    }
    if (bl.tail4()) {  // lanes l and l + 4 hold block l: added exactly, then into lanes 0..3
        const int64_t b0 = bl.full;
        __m256i S[R];
        for (int r = 0; r < R; ++r) S[r] = _mm256_setzero_si256();
        for (int v = 0; v < 8; ++v) {
            const __m256i q = tail4_vec(w, b0, v);
            for (int r = 0; r < R; ++r) {
                const auto* ap = reinterpret_cast<const __m256i*>(a + r * n + 32 * b0 + 16 * v);
                S[r] = _mm256_add_epi32(S[r], _mm256_madd_epi16(q, _mm256_loadu_si256(ap)));
            }
        }
        const __m128 d = w.tail4_scales(b0);
        for (int r = 0; r < R; ++r) {
            const __m128i T = _mm_add_epi32(_mm256_castsi256_si128(S[r]), _mm256_extracti128_si256(S[r], 1));
            const __m128 scale = _mm_mul_ps(d, _mm_loadu_ps(da + r * bl.nb + b0));
            const __m128 lo = _mm_fmadd_ps(_mm_cvtepi32_ps(T), scale, _mm256_castps256_ps128(acc[r]));
            acc[r] = _mm256_insertf128_ps(acc[r], lo, 0);
        }
    } else if (bl.tail > 0) {  // natural order: a block's lanes summed exactly, one fma per block
        for (int r = 0; r < R; ++r) {
            alignas(32) float lanes[8];
            _mm256_store_ps(lanes, acc[r]);
            for (int64_t b = bl.full; b < bl.nb; ++b) {
                const auto* ap = reinterpret_cast<const __m256i*>(a + r * n + 32 * b);
                const __m256i S = _mm256_add_epi32(_mm256_madd_epi16(w.block_half(b, 0), _mm256_loadu_si256(ap)),
                                                   _mm256_madd_epi16(w.block_half(b, 1), _mm256_loadu_si256(ap + 1)));
                __m128i s = _mm_add_epi32(_mm256_castsi256_si128(S), _mm256_extracti128_si256(S, 1));
                s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
                s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
                const float T = static_cast<float>(_mm_cvtsi128_si32(s));
                lanes[b % 8] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(T), _mm_set_ss(w.block_scale(b) * da[r * bl.nb + b]),
                                                          _mm_set_ss(lanes[b % 8])));
            }
            acc[r] = _mm256_load_ps(lanes);
        }
    }
    for (int r = 0; r < R; ++r) y[r * ldy] = hsum(acc[r]);
}

template <class W>
using BlockRowsFn = void (*)(const W&, int64_t, const int16_t*, const float*, float*, int64_t);
template <class W>
constexpr BlockRowsFn<W> kBlockRows[kBlockRowsMax] = {&block_rows<1, W>, &block_rows<2, W>, &block_rows<3, W>,
                                                      &block_rows<4, W>, &block_rows<5, W>, &block_rows<6, W>};

}  // namespace

void gemm_i16_blocks(const int16_t* q, const float* sw, const float*, bool, int, int nw, const int16_t* a,
                     const float* da, const float*, int nx, int64_t n, float* y, int64_t ldy) {
    const int64_t nb = n / kSpan;
    for (int r = 0; r < nx; r += kBlockRowsMax) {
        const int m = nx - r < kBlockRowsMax ? nx - r : kBlockRowsMax;
        for (int o = 0; o < nw; ++o) {
            kBlockRows<Decoded>[m - 1](Decoded{q + o * n, sw + o * nb}, n, a + r * n, da + r * nb, y + r * ldy + o, ldy);
        }
    }
}

void rows_packed_q8_0(const void* w, int64_t n, const int16_t* a, const float* da, const float*, int nx, float* y,
                      int64_t ldy) {
    kBlockRows<Packed>[nx - 1](Packed{static_cast<const uint8_t*>(w)}, n, a, da, y, ldy);
}

}  // namespace ds4::quant::avx2
