// AVX-512 kernels of the block-lane order (block_lanes.h, int16_gemm.h), for Q8_0 and Q5_0: the
// GEMM over decoded int16 rows and the rows kernels over packed rows (packed.h), one or two
// weight rows at a time. A zmm holds two consecutive block-lane vectors of one weight row (lane
// j: block j's pair of vector 2u, lane 8 + j: of vector 2u + 1), so that an activation vector
// is a plain 64-byte load shared by both weight rows: per activation row and 512 weights, 8
// loads and 16 vpdpwssd, where a register of two rows' halves needed 16 broadcast loads. At a
// chunk's end lanes j and 8 + j add into block j's exact sum, the AVX2 kernel's
// (x86/int16_blocks_avx2.cpp), the two rows' sums land in the halves of one register, and from
// there every lane follows that kernel's arithmetic (the same scale products, fmas and final
// lane tree per weight row): the floats are the AVX2 kernel's, bit for bit.

#include <array>
#include <cstring>
#include <utility>

#include "quant/blocks.h"
#include "quant/int16_gemm.h"
#include "quant/packed.h"
#include "quant/x86/avx512_pairs.h"
#include "quant/x86/int16_spans.h"
#include "quant/x86/prefetch.h"

namespace ds4::quant::avx512 {

namespace {

// A weight source gives, for rows i < NW, vectors 2u and 2u + 1 of the chunk of 8 blocks from
// block b0 (u < 8) or of a last chunk of 4 (u < 4); the chunk's 8 scales of both rows (lanes
// 0..7 and 8..15; a chunk of 4: lanes 0..3 and 8..11); per row, for a block left in natural
// order, its two halves and its scale. With one row, both rows' scales are that row's.

inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }
// Rows as decode_row / decode_packed_row leave them: int16 in the block-lane order, float scales.
struct Decoded {
    const int16_t* q[2];
    const float* sw[2];
    __m512i vec(int i, int64_t b0, int u) const { return load512(q[i] + 32 * b0 + 32 * u); }
    __m512i vec4(int i, int64_t b0, int u) const { return vec(i, b0, u); }
    __m512 scales(int64_t b0) const { return join(_mm256_loadu_ps(sw[0] + b0), _mm256_loadu_ps(sw[1] + b0)); }
    __m512 scales4(int64_t b0) const {
        return _mm512_insertf32x4(_mm512_castps128_ps512(_mm_loadu_ps(sw[0] + b0)), _mm_loadu_ps(sw[1] + b0), 2);
    }
    __m256i half(int i, int64_t b, int h) const { return load256(q[i] + 32 * b + 16 * h); }
    float scale(int i, int64_t b) const { return sw[i][b]; }
    void prefetch(int64_t, int) const {}
};

// Packed rows (packed.h): a chunk from block b0 starts at byte kBlock b0 with its f16 scales.
template <int kBlock>
struct PackedRows {
    const uint8_t* p[2];
    const uint8_t* at(int i, int64_t b0) const { return p[i] + kBlock * b0; }
    __m512 scales(int64_t b0) const { return _mm512_cvtph_ps(join(load128(at(0, b0)), load128(at(1, b0)))); }
    __m512 scales4(int64_t b0) const {
        return _mm512_cvtph_ps(join(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(at(0, b0))),
                                    _mm_loadl_epi64(reinterpret_cast<const __m128i*>(at(1, b0)))));
    }
    float scale(int i, int64_t b) const {
        uint16_t d;
        std::memcpy(&d, at(i, b), sizeof d);
        return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(d)));
    }
    void prefetch(int64_t b0, int nw) const {
        for (int i = 0; i < nw; ++i) prefetch_block<8 * kBlock>(at(i, b0));
    }
};

struct PackedQ8 : PackedRows<34> {
    __m512i vec(int i, int64_t b0, int u) const { return _mm512_cvtepi8_epi16(load256(at(i, b0) + 16 + 32 * u)); }
    __m512i vec4(int i, int64_t b0, int u) const { return _mm512_cvtepi8_epi16(load256(at(i, b0) + 8 + 32 * u)); }
    __m256i half(int i, int64_t b, int h) const { return _mm256_cvtepi8_epi16(load128(at(i, b) + 2 + 16 * h)); }
};

// Q5_0: vectors 3k, 3k + 1 and 3k + 2 are the 5-bit fields at bits 0, 5 and 10 of word k. Vectors
// 2u and 2u + 1 come from one word loaded into both halves (u % 3 != 1) or from words k and k + 1
// loaded as one zmm (u % 3 == 1), each half shifted left so that its field ends at bit 15, then
// sign-extended down.
inline __m512i fields5(__m512i words, int u) {
    static constexpr int16_t kLo[3][2] = {{0, 5}, {10, 0}, {5, 10}};
    const int16_t* lo = kLo[u % 3];
    const __m512i shift = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(static_cast<int16_t>(11 - lo[0])),
                                                  _mm512_set1_epi16(static_cast<int16_t>(11 - lo[1])));
    return _mm512_srai_epi16(_mm512_sllv_epi16(words, shift), 11);
}
inline __m512i words5(const uint8_t* w, int u) {
    const int k = 2 * (u / 3) + (u % 3 == 2);
    return u % 3 == 1 ? load512(w + 32 * k) : _mm512_broadcast_i64x4(load256(w + 32 * k));
}
inline __m256i bits(__m256i word, int shift, int16_t mask) {
    return _mm256_and_si256(_mm256_srli_epi16(word, shift), _mm256_set1_epi16(mask));
}
inline __m256i sign_of(__m256i word) {  // bit 15 of a word as the sign of a 5-bit value
    return _mm256_and_si256(_mm256_srai_epi16(word, 15), _mm256_set1_epi16(-16));
}

struct PackedQ5 : PackedRows<22> {
    __m512i vec(int i, int64_t b0, int u) const {
        const uint8_t* w = at(i, b0) + 16;
        if (u < 7) return fields5(words5(w, u), u);
        // vector 14: the field at bit 10 of word 4; vector 15: bit k of the value in bit 15 of
        // word k, bit 4 being the sign
        const __m256i w4 = load256(w + 128);
        __m256i v = _mm256_or_si256(sign_of(w4), _mm256_srli_epi16(load256(w), 15));
        v = _mm256_or_si256(v, bits(load256(w + 32), 14, 2));
        v = _mm256_or_si256(v, bits(load256(w + 64), 13, 4));
        v = _mm256_or_si256(v, bits(load256(w + 96), 12, 8));
        return join(_mm256_srai_epi16(_mm256_slli_epi16(w4, 1), 11), v);
    }
    __m512i vec4(int i, int64_t b0, int u) const {
        const uint8_t* w = at(i, b0) + 8;
        if (u < 3) return fields5(words5(w, u), u);
        // vectors 6 and 7: the nibbles of byte i (low: vector 6, high: vector 7), bit 4 (the
        // sign) in bit 15 of words 0 and 1
        const __m512i nib = _mm512_cvtepu8_epi16(_mm256_broadcastsi128_si256(load128(w + 64)));
        const __m512i shift = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_setzero_si512(), _mm512_set1_epi16(4));
        const __m512i low4 = _mm512_and_si512(_mm512_srlv_epi16(nib, shift), _mm512_set1_epi16(0x0F));
        const __m512i sign = _mm512_and_si512(_mm512_srai_epi16(load512(w), 15), _mm512_set1_epi16(-16));
        return _mm512_or_si512(low4, sign);
    }
    __m256i half(int i, int64_t b, int h) const { return q5_0_half(at(i, b), h); }
};

// y[r * ldy] (row 0) and, when NW == 2, y[r * ldy + 1] (row 1) for R activation rows (a, da:
// rows of n and of n / 32).
template <int R, int NW, class W>
void block_rows(const W& w, int64_t n, const int16_t* a, const float* da, float* y, int64_t ldy) {
    const BlockLanes bl(n);
    // The float accumulators stay in memory (one load and store per chunk): the registers go
    // to the sums, the weight vectors and the activation vector.
    alignas(64) float acc[R][16] = {};
    __m512i S[NW][R];
    const auto sums = [&](int64_t b0, int vectors, auto&& vec) {
        for (int i = 0; i < NW; ++i)
            for (int r = 0; r < R; ++r) S[i][r] = _mm512_setzero_si512();
        const int16_t* x = a + 32 * b0;
        int64_t stride = act_stride(n);
        opaque(stride);
#pragma GCC unroll 8
        for (int u = 0; u < vectors; ++u) {
            __m512i q[NW];
            for (int i = 0; i < NW; ++i) q[i] = vec(i, b0, u);
            for (int r = 0; r < R; ++r) {
                __m512i xv = load512(x + r * stride + 32 * u);
                in_register(xv);
                for (int i = 0; i < NW; ++i) S[i][r] = _mm512_dpwssd_epi32(S[i][r], q[i], xv);
            }
        }
    };
    for (int64_t b0 = 0; b0 < bl.full; b0 += BlockLanes::kChunk) {
        w.prefetch(b0, NW);
        sums(b0, 8, [&w](int i, int64_t b, int u) { return w.vec(i, b, u); });
        const __m512 d = w.scales(b0);
        for (int r = 0; r < R; ++r) {
            const __m512i T = fold(S[0][r], S[NW - 1][r]);
            const __m512 scale = _mm512_mul_ps(d, _mm512_broadcast_f32x8(_mm256_loadu_ps(da + r * bl.nb + b0)));
            _mm512_store_ps(acc[r], _mm512_fmadd_ps(_mm512_cvtepi32_ps(T), scale, _mm512_load_ps(acc[r])));
        }
    }
    if (bl.tail4()) {  // lanes l, l + 4, l + 8 and l + 12 of a row hold block l: added exactly into lane l
        const int64_t b0 = bl.full;
        sums(b0, 4, [&w](int i, int64_t b, int u) { return w.vec4(i, b, u); });
        const __m512 d = w.scales4(b0);
        for (int r = 0; r < R; ++r) {
            const __m512i F = fold(S[0][r], S[NW - 1][r]);
            const __m512i T = _mm512_add_epi32(F, _mm512_shuffle_i32x4(F, F, _MM_SHUFFLE(2, 3, 0, 1)));
            const __m512 scale = _mm512_mul_ps(d, _mm512_broadcast_f32x4(_mm_loadu_ps(da + r * bl.nb + b0)));
            const __m512 sum = _mm512_load_ps(acc[r]);
            _mm512_store_ps(acc[r], _mm512_mask_blend_ps(0x0F0F, sum, _mm512_fmadd_ps(_mm512_cvtepi32_ps(T), scale, sum)));
        }
    } else if (bl.tail > 0) {  // natural order: one fma per block, lane b % 8 of each row's half
        for (int i = 0; i < NW; ++i) {
            const TailBlocks tail(
                static_cast<int>(bl.tail), [&](int j, int h) { return w.half(i, bl.full + j, h); },
                [&](int j) { return w.scale(i, bl.full + j); });
            for (int r = 0; r < R; ++r) {
                float* lanes = acc[r] + 8 * i;
                _mm256_store_ps(lanes, tail.add(_mm256_load_ps(lanes), a + r * act_stride(n) + 32 * bl.full,
                                                da + r * bl.nb + bl.full));
            }
        }
    }
    __m512 sums_of[R];
    for (int r = 0; r < R; ++r) sums_of[r] = _mm512_load_ps(acc[r]);
    store_hsums(sums_of, NW, y, ldy);
}

template <class W>
using BlockRowsFn = void (*)(const W&, int64_t, const int16_t*, const float*, float*, int64_t);

template <int NW, class W, size_t... I>
constexpr std::array<BlockRowsFn<W>, sizeof...(I)> block_rows_table(std::index_sequence<I...>) {
    return {&block_rows<static_cast<int>(I) + 1, NW, W>...};
}

template <class W>
void block_rows_any(const W& w, int nw, int64_t n, const int16_t* a, const float* da, int nx, float* y, int64_t ldy) {
    static constexpr auto one = block_rows_table<1, W>(std::make_index_sequence<kBlockRowsMax>());
    static constexpr auto two = block_rows_table<2, W>(std::make_index_sequence<kBlockRowsMax>());
    (nw == 2 ? two : one)[static_cast<size_t>(nx - 1)](w, n, a, da, y, ldy);
}

// One weight row: a decode step's (one activation row) is the AVX2 kernel's, which measured
// ~10 % faster streaming Q8_0 / Q5_0 rows from DRAM on Zen 4.
template <class W, Type T>
void rows_packed_blocks(const void* row, int64_t n, const int16_t* a, const float* da, const float* xs, int nx,
                        float* y, int64_t ldy) {
    if (nx == 1) return avx2::rows_packed(T)(row, n, a, da, xs, nx, y, ldy);
    const auto* p = static_cast<const uint8_t*>(row);
    block_rows_any(W{{{p, p}}}, 1, n, a, da, nx, y, ldy);
}

template <class W>
void rows_packed2_blocks(const void* row, size_t row_bytes, int64_t n, const int16_t* a, const float* da, const float*,
                         int nx, float* y, int64_t ldy) {
    const auto* p = static_cast<const uint8_t*>(row);
    block_rows_any(W{{{p, p + row_bytes}}}, 2, n, a, da, nx, y, ldy);
}

}  // namespace

void gemm_i16_blocks(const int16_t* q, const float* sw, const float*, bool, int, int nw, const int16_t* a,
                     const float* da, const float*, int nx, int64_t n, float* y, int64_t ldy) {
    const int64_t nb = n / kSpan;
    for (int r = 0, m = 0; r < nx; r += m) {
        m = even_rows(nx - r, kBlockRowsMax);
        for (int o = 0; o < nw; o += 2) {
            const int two = nw - o >= 2 ? 2 : 1, last = o + two - 1;
            const Decoded w{{q + o * n, q + last * n}, {sw + o * nb, sw + last * nb}};
            block_rows_any(w, two, n, a + r * act_stride(n), da + r * nb, m, y + r * ldy + o, ldy);
        }
    }
}

RowsPackedFn rows_packed(Type type) {
    switch (type) {
        case Type::Q8_0: return &rows_packed_blocks<PackedQ8, Type::Q8_0>;
        case Type::Q5_0: return &rows_packed_blocks<PackedQ5, Type::Q5_0>;
        default: return nullptr;
    }
}

RowsPacked2Fn rows_packed2(Type type) {
    switch (type) {
        case Type::Q8_0: return &rows_packed2_blocks<PackedQ8>;
        case Type::Q5_0: return &rows_packed2_blocks<PackedQ5>;
        default: return nullptr;
    }
}

}  // namespace ds4::quant::avx512
