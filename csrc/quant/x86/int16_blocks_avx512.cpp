// AVX-512 kernels of the block-lane order (block_lanes.h, int16_gemm.h), for the legacy formats: the
// GEMM over decoded int16 rows and the rows kernels over packed rows (packed.h), one or two
// weight rows at a time. A zmm holds two consecutive block-lane vectors of one weight row (lane
// j: block j's pair of vector 2u, lane 8 + j: of vector 2u + 1), so that an activation vector
// is a plain 64-byte load shared by both weight rows: per activation row and 512 weights, 8
// loads and 16 vpdpwssd, where a register of two rows' halves needed 16 broadcast loads. At a
// chunk's end lanes j and 8 + j add into block j's exact sum, the AVX2 kernel's
// (x86/int16_blocks_avx2.cpp), the two rows' sums land in the halves of one register, and from
// there every lane follows that kernel's arithmetic (the same scale products, fmas and final
// lane tree per weight row): the floats are the AVX2 kernel's, bit for bit.

#include <algorithm>
#include <array>
#include <utility>

#include "quant/blocks.h"
#include "quant/int16_gemm.h"
#include "quant/packed.h"
#include "quant/x86/avx512_pairs.h"
#include "quant/x86/int16_spans.h"
#include "quant/x86/prefetch.h"

namespace ds4::quant::avx512 {

namespace {

// A weight source gives, for rows i < NW, the vectors of the chunk of 8 blocks from block b0
// (units u < 8: vectors 2u and 2u + 1) or of a last chunk of 4 (u < 4), kStep units per step
// (step s: units unit(s, k, units), k < kStep); the chunk's 8 scales of both rows (lanes 0..7
// and 8..15; a chunk of 4: lanes 0..3 and 8..11) and, for the formats with a minimum (kMin),
// their halves' weights likewise (halves 0..7 and 8..15 of the chunk; a chunk of 4: 0..7); per
// row, a block left in natural order (x86/int16_spans.h: LegacyBlock's interface). With one row,
// both rows' are that row's.

// The sources of one unit per step: vec(i, b0, u) and vec4(i, b0, u).
template <class Src>
struct OneStep {
    static constexpr int kStep = 1;
    static constexpr int unit(int s, int, int) { return s; }
    void step(int i, int64_t b0, int s, int units, __m512i (&q)[1]) const {
        const auto& w = static_cast<const Src&>(*this);
        q[0] = units == 8 ? w.vec(i, b0, s) : w.vec4(i, b0, s);
    }
};

// Rows as decode_row / decode_packed_row leave them: int16 in the block-lane order, float scales
// and minima.
template <bool kHasMin>
struct Decoded : OneStep<Decoded<kHasMin>> {
    static constexpr bool kMin = kHasMin;
    const int16_t* q[2];
    const float* sw[2];
    const float* mw[2];
    Decoded(const int16_t* q0, const int16_t* q1, const float* s0, const float* s1, const float* m0, const float* m1)
        : q{q0, q1}, sw{s0, s1}, mw{m0, m1} {}
    __m512i vec(int i, int64_t b0, int u) const { return load512(q[i] + 32 * b0 + 32 * u); }
    __m512i vec4(int i, int64_t b0, int u) const { return vec(i, b0, u); }
    __m512 scales(int64_t b0) const { return join(_mm256_loadu_ps(sw[0] + b0), _mm256_loadu_ps(sw[1] + b0)); }
    __m512 scales4(int64_t b0) const {
        return _mm512_insertf32x4(_mm512_castps128_ps512(_mm_loadu_ps(sw[0] + b0)), _mm_loadu_ps(sw[1] + b0), 2);
    }
    __m512 mins(int64_t b0, int k) const {
        return join(_mm256_loadu_ps(mw[0] + 2 * b0 + 8 * k), _mm256_loadu_ps(mw[1] + 2 * b0 + 8 * k));
    }
    __m512 mins4(int64_t b0) const { return mins(b0, 0); }
    DecodedBlock block(int i, int64_t b) const { return {q[i] + 32 * b, sw[i][b], kMin ? mw[i][2 * b] : 0.0f}; }
    void prefetch(int64_t, int) const {}
};

// x86/int16_spans.h's e8m0_half on 16 lanes.
inline __m512 e8m0_half(__m512i e) {
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, one), 23);
    const __m512i subnormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(e, one), subnormal, normal));  // e <= 255: signed
}

// Packed rows (packed.h) of GGUF block Blk: a chunk from block b0 starts at byte sizeof(Blk) b0
// with its scales (f16; MXFP4: E8M0 bytes), then (kMin) its f16 minima, then its quants.
template <class Blk>
struct PackedRows {
    static constexpr int kBlock = sizeof(Blk);
    static constexpr bool kMin = LegacyBlock<Blk>::kMin;
    static constexpr bool kE8M0 = std::is_same_v<Blk, block_mxfp4>;
    static constexpr int kScales = (kE8M0 ? 8 : 16) * (kMin ? 2 : 1);  // bytes of a chunk's scales (a chunk of 4: half)
    const uint8_t* p[2];
    const uint8_t* at(int i, int64_t b0) const { return p[i] + kBlock * b0; }
    const uint8_t* quants(int i, int64_t b0) const { return at(i, b0) + kScales; }
    const uint8_t* quants4(int i, int64_t b0) const { return at(i, b0) + kScales / 2; }
    // (a chunk of 4 of MXFP4: lanes 4..7 of a row from its first quant bytes, unused)
    __m512 scales(int64_t b0) const {
        if constexpr (kE8M0) return e8m0_half(_mm512_cvtepu8_epi32(_mm_unpacklo_epi64(load64(at(0, b0)), load64(at(1, b0)))));
        return _mm512_cvtph_ps(join(load128(at(0, b0)), load128(at(1, b0))));
    }
    __m512 scales4(int64_t b0) const {
        if constexpr (kE8M0) return scales(b0);
        return _mm512_cvtph_ps(join(load64(at(0, b0)), load64(at(1, b0))));
    }
    // -m of blocks 4k .. 4k + 3 of both rows, each for its two halves
    __m512 mins(int64_t b0, int k) const {
        const __m512 m = _mm512_cvtph_ps(join(load128(at(0, b0) + 16), load128(at(1, b0) + 16)));
        return negated_pairs(m, 4 * k);
    }
    __m512 mins4(int64_t b0) const {
        return negated_pairs(_mm512_cvtph_ps(join(load64(at(0, b0) + 8), load64(at(1, b0) + 8))), 0);
    }
    LegacyBlock<Blk> block(int i, int64_t b) const { return LegacyBlock<Blk>(at(i, b)); }
    void prefetch(int64_t b0, int nw) const {
        for (int i = 0; i < nw; ++i) prefetch_block<8 * kBlock>(at(i, b0));
    }
    static __m128i load64(const uint8_t* x) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x)); }
    // -lanes j0 .. j0 + 3 of each row's eight, each twice
    static __m512 negated_pairs(__m512 m, int j0) {
        const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(j0),
                                             _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 8, 8, 9, 9, 10, 10, 11, 11));
        return _mm512_xor_ps(_mm512_permutexvar_ps(idx, m), _mm512_set1_ps(-0.0f));
    }
};

struct PackedQ8 : PackedRows<block_q8_0>, OneStep<PackedQ8> {
    __m512i vec(int i, int64_t b0, int u) const { return _mm512_cvtepi8_epi16(load256(quants(i, b0) + 32 * u)); }
    __m512i vec4(int i, int64_t b0, int u) const { return _mm512_cvtepi8_epi16(load256(quants4(i, b0) + 32 * u)); }
};

// Q4_0 / Q4_1, IQ4_NL / MXFP4: 32 bytes at 32 s hold units s (low nibbles) and s + units / 2
// (high nibbles); the code-book formats look their bytes up before widening them.
template <class Blk>
struct PackedQ4 : PackedRows<Blk> {
    using PackedRows<Blk>::quants;
    using PackedRows<Blk>::quants4;
    static constexpr int kStep = 2;
    static constexpr int unit(int s, int k, int units) { return s + k * units / 2; }
    void step(int i, int64_t b0, int s, int units, __m512i (&q)[2]) const {
        const uint8_t* w = (units == 8 ? quants(i, b0) : quants4(i, b0)) + 32 * s;
        if constexpr (CodeBook<Blk>::kIs) {
            const __m256i x = load256(w), nib = _mm256_set1_epi8(0x0F);
            const __m256i book = _mm256_broadcastsi128_si256(load128(CodeBook<Blk>::values()));
            q[0] = _mm512_cvtepi8_epi16(_mm256_shuffle_epi8(book, _mm256_and_si256(x, nib)));
            q[1] = _mm512_cvtepi8_epi16(_mm256_shuffle_epi8(book, _mm256_and_si256(_mm256_srli_epi16(x, 4), nib)));
            return;
        }
        const __m512i x = _mm512_cvtepu8_epi16(load256(w));
        const __m512i off = _mm512_set1_epi16(PackedRows<Blk>::kMin ? 0 : 8);
        q[0] = _mm512_sub_epi16(_mm512_and_si512(x, _mm512_set1_epi16(0x0F)), off);
        q[1] = _mm512_sub_epi16(_mm512_srli_epi16(x, 4), off);
    }
};

// Q5_0 / Q5_1: vectors 3k, 3k + 1 and 3k + 2 are the 5-bit fields at bits 0, 5 and 10 of word k.
// Vectors 2u and 2u + 1 come from one word loaded into both halves (u % 3 != 1) or from words k
// and k + 1 loaded as one zmm (u % 3 == 1), each half shifted left so that its field ends at bit
// 15, then shifted down: arithmetically (Q5_0, sign-extended) or logically (Q5_1).
template <bool kSigned>
inline __m512i fields5(__m512i words, int u) {
    static constexpr int16_t kLo[3][2] = {{0, 5}, {10, 0}, {5, 10}};
    const int16_t* lo = kLo[u % 3];
    const __m512i shift = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(static_cast<int16_t>(11 - lo[0])),
                                                  _mm512_set1_epi16(static_cast<int16_t>(11 - lo[1])));
    const __m512i up = _mm512_sllv_epi16(words, shift);
    return kSigned ? _mm512_srai_epi16(up, 11) : _mm512_srli_epi16(up, 11);
}
inline __m512i words5(const uint8_t* w, int u) {
    const int k = 2 * (u / 3) + (u % 3 == 2);
    return u % 3 == 1 ? load512(w + 32 * k) : _mm512_broadcast_i64x4(load256(w + 32 * k));
}
inline __m256i bits(__m256i word, int shift, int16_t mask) {
    return _mm256_and_si256(_mm256_srli_epi16(word, shift), _mm256_set1_epi16(mask));
}
// bit 15 of a word as bit 4 of a 5-bit value: its sign (Q5_0) or 16 (Q5_1)
template <bool kSigned>
inline __m256i top_bit(__m256i word) {
    if constexpr (kSigned) return _mm256_and_si256(_mm256_srai_epi16(word, 15), _mm256_set1_epi16(-16));
    return bits(word, 11, 16);
}
template <bool kSigned>
inline __m512i top_bit(__m512i word) {
    if constexpr (kSigned) return _mm512_and_si512(_mm512_srai_epi16(word, 15), _mm512_set1_epi16(-16));
    return _mm512_and_si512(_mm512_srli_epi16(word, 11), _mm512_set1_epi16(16));
}

template <class Blk>
struct PackedQ5 : PackedRows<Blk>, OneStep<PackedQ5<Blk>> {
    static constexpr bool kSigned = !PackedRows<Blk>::kMin;
    using PackedRows<Blk>::quants;
    using PackedRows<Blk>::quants4;
    __m512i vec(int i, int64_t b0, int u) const {
        const uint8_t* w = quants(i, b0);
        if (u < 7) return fields5<kSigned>(words5(w, u), u);
        // vector 14: the field at bit 10 of word 4; vector 15: bit k of the value in bit 15 of
        // word k
        const __m256i w4 = load256(w + 128);
        __m256i v = _mm256_or_si256(top_bit<kSigned>(w4), _mm256_srli_epi16(load256(w), 15));
        v = _mm256_or_si256(v, bits(load256(w + 32), 14, 2));
        v = _mm256_or_si256(v, bits(load256(w + 64), 13, 4));
        v = _mm256_or_si256(v, bits(load256(w + 96), 12, 8));
        const __m256i up = _mm256_slli_epi16(w4, 1);
        return join(kSigned ? _mm256_srai_epi16(up, 11) : _mm256_srli_epi16(up, 11), v);
    }
    __m512i vec4(int i, int64_t b0, int u) const {
        const uint8_t* w = quants4(i, b0);
        if (u < 3) return fields5<kSigned>(words5(w, u), u);
        // vectors 6 and 7: the nibbles of byte i (low: vector 6, high: vector 7), bit 4 in bit 15
        // of words 0 and 1
        const __m512i nib = _mm512_cvtepu8_epi16(_mm256_broadcastsi128_si256(load128(w + 64)));
        const __m512i shift = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_setzero_si512(), _mm512_set1_epi16(4));
        const __m512i low4 = _mm512_and_si512(_mm512_srlv_epi16(nib, shift), _mm512_set1_epi16(0x0F));
        return _mm512_or_si512(low4, top_bit<kSigned>(load512(w)));
    }
};

// The last 1..3 or 5..7 blocks of one or two weight rows (block_lanes.h: the natural order and its
// arithmetic), decoded once for all activation rows: a half block of both rows in one zmm (row w
// in lanes 8 w ..) against the activation half broadcast to both, so that two vpdpwssd give both
// rows' eight lane sums of a block, each the AVX2 kernel's (x86/int16_spans.h: TailBlocks), and
// one fma takes both into the accumulators (row w's lanes 8 w ..).
struct TailPairs {
    int t;
    __m512i q[7][2];
    __m512 sw[7];      // a block's scale of row w in lanes 8 w ..
    __m512 mw[2];      // the weights of halves j and 8 + j of row w in lane 8 w + j
    __m256i hmask[2];  // -1 in the lanes of halves < 2 t
    __mmask16 hlive[2];
    // blk(w, i): block full + i of row w (LegacyBlock's interface); with one row, row 1 is row 0.
    template <class Block>
    TailPairs(int tail, int nw, Block&& blk) : t(tail) {
        alignas(64) float m[2][16] = {};
        for (int i = 0; i < t; ++i) {
            const auto b0 = blk(0, i);
            const auto b1 = blk(nw - 1, i);
            q[i][0] = join(b0.half(0), b1.half(0));
            q[i][1] = join(b0.half(1), b1.half(1));
            sw[i] = join(_mm256_set1_ps(b0.d()), _mm256_set1_ps(b1.d()));
            m[i / 4][2 * (i % 4)] = m[i / 4][2 * (i % 4) + 1] = b0.mw();
            m[i / 4][8 + 2 * (i % 4)] = m[i / 4][8 + 2 * (i % 4) + 1] = b1.mw();
        }
        mw[0] = _mm512_load_ps(m[0]);
        mw[1] = _mm512_load_ps(m[1]);
        const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        for (int k = 0; k < 2; ++k) {
            const int live = std::min(8, std::max(0, 2 * t - 8 * k));
            hmask[k] = _mm256_cmpgt_epi32(_mm256_set1_epi32(live), iota);
            hlive[k] = static_cast<__mmask16>(((1u << live) - 1) * 0x101u);
        }
    }
    // acc[0..16) with the blocks of one activation row added: a, da at the row's first tail
    // element and scale.
    void add(float* acc, const int16_t* a, const float* da) const {
        __m512 v = _mm512_load_ps(acc);
        for (int i = 0; i < t; ++i) {
            const __m512i S = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(_mm512_setzero_si512(), q[i][0], bcast(a + 32 * i)),
                                                  q[i][1], bcast(a + 32 * i + kHalf));
            v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(sw[i], _mm512_set1_ps(da[i])), v);
        }
        _mm512_store_ps(acc, v);
    }
    // c[0..16) with the minimum terms of one activation row added: xs at the row's first tail half.
    void add_min(float* c, const float* xs) const {
        __m512 v = _mm512_load_ps(c);
        for (int k = 0; k < (t > 4 ? 2 : 1); ++k) {
            const __m512 x = _mm512_broadcast_f32x8(_mm256_maskload_ps(xs + 8 * k, hmask[k]));
            v = _mm512_mask_blend_ps(hlive[k], v, _mm512_fmadd_ps(mw[k], x, v));
        }
        _mm512_store_ps(c, v);
    }
};

// y[r * ldy] (row 0) and, when NW == 2, y[r * ldy + 1] (row 1) for R activation rows (a, da,
// xs: rows of n, n / 32 and n / 16).
template <int R, int NW, class W>
void block_rows(const W& w, int64_t n, const int16_t* a, const float* da, const float* xs, float* y, int64_t ldy) {
    const BlockLanes bl(n);
    const int64_t halves = n / kHalf;
    // The float accumulators stay in memory (one load and store per chunk): the registers go
    // to the sums, the weight vectors and the activation vector.
    alignas(64) float acc[R][16] = {};
    alignas(64) float c[R][16] = {};  // the minimum terms (kMin)
    __m512i S[NW][R];
    constexpr int K = W::kStep;
    const auto sums = [&](int64_t b0, int units) {
        for (int i = 0; i < NW; ++i)
            for (int r = 0; r < R; ++r) S[i][r] = _mm512_setzero_si512();
        const int16_t* x = a + 32 * b0;
        int64_t stride = act_stride(n);
        opaque(stride);
#pragma GCC unroll 8
        for (int s = 0; s < units / K; ++s) {
            __m512i q[NW][K];
            for (int i = 0; i < NW; ++i) w.step(i, b0, s, units, q[i]);
            for (int k = 0; k < K; ++k) {
                const int u = W::unit(s, k, units);
                for (int r = 0; r < R; ++r) {
                    __m512i xv = load512(x + r * stride + 32 * u);
                    in_register(xv);
                    for (int i = 0; i < NW; ++i) S[i][r] = _mm512_dpwssd_epi32(S[i][r], q[i][k], xv);
                }
            }
        }
    };
    // the minimum terms of halves 2 b0 + 8 k .. 2 b0 + 8 k + 7 of both rows
    const auto minima = [&](int64_t b0, int k, __m512 m) {
        for (int r = 0; r < R; ++r) {
            const __m512 x = _mm512_broadcast_f32x8(_mm256_loadu_ps(xs + r * halves + 2 * b0 + 8 * k));
            _mm512_store_ps(c[r], _mm512_fmadd_ps(m, x, _mm512_load_ps(c[r])));
        }
    };
    for (int64_t b0 = 0; b0 < bl.full; b0 += BlockLanes::kChunk) {
        w.prefetch(b0, NW);
        sums(b0, 8);
        const __m512 d = w.scales(b0);
        for (int r = 0; r < R; ++r) {
            const __m512i T = fold(S[0][r], S[NW - 1][r]);
            const __m512 scale = _mm512_mul_ps(d, _mm512_broadcast_f32x8(_mm256_loadu_ps(da + r * bl.nb + b0)));
            _mm512_store_ps(acc[r], _mm512_fmadd_ps(_mm512_cvtepi32_ps(T), scale, _mm512_load_ps(acc[r])));
        }
        if constexpr (W::kMin) {
            minima(b0, 0, w.mins(b0, 0));
            minima(b0, 1, w.mins(b0, 1));
        }
    }
    if (bl.tail4()) {  // lanes l, l + 4, l + 8 and l + 12 of a row hold block l: added exactly into lane l
        const int64_t b0 = bl.full;
        sums(b0, 4);
        const __m512 d = w.scales4(b0);
        for (int r = 0; r < R; ++r) {
            const __m512i F = fold(S[0][r], S[NW - 1][r]);
            const __m512i T = _mm512_add_epi32(F, _mm512_shuffle_i32x4(F, F, _MM_SHUFFLE(2, 3, 0, 1)));
            const __m512 scale = _mm512_mul_ps(d, _mm512_broadcast_f32x4(_mm_loadu_ps(da + r * bl.nb + b0)));
            const __m512 sum = _mm512_load_ps(acc[r]);
            _mm512_store_ps(acc[r], _mm512_mask_blend_ps(0x0F0F, sum, _mm512_fmadd_ps(_mm512_cvtepi32_ps(T), scale, sum)));
        }
        if constexpr (W::kMin) minima(b0, 0, w.mins4(b0));
    } else if (bl.tail > 0) {  // natural order: the natural order's lane sums, both rows at once
        const TailPairs tail(static_cast<int>(bl.tail), NW, [&](int i, int j) { return w.block(i, bl.full + j); });
        for (int r = 0; r < R; ++r) {
            tail.add(acc[r], a + r * act_stride(n) + 32 * bl.full, da + r * bl.nb + bl.full);
            if constexpr (W::kMin) tail.add_min(c[r], xs + r * halves + 2 * bl.full);
        }
    }
    __m512 sums_of[R];
    for (int r = 0; r < R; ++r) sums_of[r] = _mm512_load_ps(acc[r]);
    store_hsums(sums_of, NW, y, ldy);
    if constexpr (W::kMin) {
        for (int r = 0; r < R; ++r) sums_of[r] = _mm512_load_ps(c[r]);
        store_hsums<true>(sums_of, NW, y, ldy);
    }
}

template <class W>
using BlockRowsFn = void (*)(const W&, int64_t, const int16_t*, const float*, const float*, float*, int64_t);

template <int NW, class W, size_t... I>
constexpr std::array<BlockRowsFn<W>, sizeof...(I)> block_rows_table(std::index_sequence<I...>) {
    return {&block_rows<static_cast<int>(I) + 1, NW, W>...};
}

template <class W>
void block_rows_any(const W& w, int nw, int64_t n, const int16_t* a, const float* da, const float* xs, int nx, float* y,
                    int64_t ldy) {
    static constexpr auto one = block_rows_table<1, W>(std::make_index_sequence<kBlockRowsMax>());
    static constexpr auto two = block_rows_table<2, W>(std::make_index_sequence<kBlockRowsMax>());
    (nw == 2 ? two : one)[static_cast<size_t>(nx - 1)](w, n, a, da, xs, y, ldy);
}

template <class W>
W packed(const uint8_t* p0, const uint8_t* p1) {
    W w;
    w.p[0] = p0;
    w.p[1] = p1;
    return w;
}

// One weight row: a decode step's (one activation row) is the AVX2 kernel's but on Intel CPUs:
// it measured ~10 % faster streaming Q8_0 / Q5_0 rows from DRAM on Zen 4, while on an Intel Xeon
// this kernel (two rows at a time, I16Kernels::rows2_one_row) made a whole decode step 0.90-0.95x
// the time (SmolLM2-135M Q4_1, Qwen2.5-Coder 0.5B, Gemma 3 270M).
template <class W, Type T>
void rows_packed_blocks(const void* row, int64_t n, const int16_t* a, const float* da, const float* xs, int nx,
                        float* y, int64_t ldy) {
    static const bool avx2_one_row = !intel_cpu();
    if (nx == 1 && avx2_one_row) return avx2::rows_packed(T)(row, n, a, da, xs, nx, y, ldy);
    const auto* p = static_cast<const uint8_t*>(row);
    block_rows_any(packed<W>(p, p), 1, n, a, da, xs, nx, y, ldy);
}

template <class W>
void rows_packed2_blocks(const void* row, size_t row_bytes, int64_t n, const int16_t* a, const float* da,
                         const float* xs, int nx, float* y, int64_t ldy) {
    const auto* p = static_cast<const uint8_t*>(row);
    block_rows_any(packed<W>(p, p + row_bytes), 2, n, a, da, xs, nx, y, ldy);
}

template <bool kMin>
void gemm_blocks(const int16_t* q, const float* sw, const float* mw, int nw, const int16_t* a, const float* da,
                 const float* xs, int nx, int64_t n, float* y, int64_t ldy) {
    const int64_t nb = n / kSpan, halves = n / kHalf;
    for (int r = 0, m = 0; r < nx; r += m) {
        m = even_rows(nx - r, kBlockRowsMax);
        for (int o = 0; o < nw; o += 2) {
            const int two = nw - o >= 2 ? 2 : 1, last = o + two - 1;
            const Decoded<kMin> w(q + o * n, q + last * n, sw + o * nb, sw + last * nb, kMin ? mw + o * halves : mw,
                                  kMin ? mw + last * halves : mw);
            block_rows_any(w, two, n, a + r * act_stride(n), da + r * nb, kMin ? xs + r * halves : xs, m,
                           y + r * ldy + o, ldy);
        }
    }
}

}  // namespace

void gemm_i16_blocks(const int16_t* q, const float* sw, const float* mw, int min_len, int, int nw, const int16_t* a,
                     const float* da, const float* xs, int nx, int64_t n, float* y, int64_t ldy) {
    (min_len ? &gemm_blocks<true> : &gemm_blocks<false>)(q, sw, mw, nw, a, da, xs, nx, n, y, ldy);
}

RowsPackedFn rows_packed(Type type) {
    switch (type) {
        case Type::Q4_0: return &rows_packed_blocks<PackedQ4<block_q4_0>, Type::Q4_0>;
        case Type::Q4_1: return &rows_packed_blocks<PackedQ4<block_q4_1>, Type::Q4_1>;
        case Type::Q5_0: return &rows_packed_blocks<PackedQ5<block_q5_0>, Type::Q5_0>;
        case Type::Q5_1: return &rows_packed_blocks<PackedQ5<block_q5_1>, Type::Q5_1>;
        case Type::Q8_0: return &rows_packed_blocks<PackedQ8, Type::Q8_0>;
        case Type::IQ4_NL: return &rows_packed_blocks<PackedQ4<block_iq4_nl>, Type::IQ4_NL>;
        case Type::MXFP4: return &rows_packed_blocks<PackedQ4<block_mxfp4>, Type::MXFP4>;
        default: return nullptr;
    }
}

RowsPacked2Fn rows_packed2(Type type) {
    switch (type) {
        case Type::Q4_0: return &rows_packed2_blocks<PackedQ4<block_q4_0>>;
        case Type::Q4_1: return &rows_packed2_blocks<PackedQ4<block_q4_1>>;
        case Type::Q5_0: return &rows_packed2_blocks<PackedQ5<block_q5_0>>;
        case Type::Q5_1: return &rows_packed2_blocks<PackedQ5<block_q5_1>>;
        case Type::Q8_0: return &rows_packed2_blocks<PackedQ8>;
        case Type::IQ4_NL: return &rows_packed2_blocks<PackedQ4<block_iq4_nl>>;
        case Type::MXFP4: return &rows_packed2_blocks<PackedQ4<block_mxfp4>>;
        default: return nullptr;
    }
}

}  // namespace ds4::quant::avx512
