// AVX2 kernels of the block-lane order (block_lanes.h, int16_gemm.h), for the legacy formats: the
// GEMM over decoded int16 rows and the rows kernels over packed rows (packed.h), one template
// for every weight source.
//
// Per chunk of 8 blocks and activation row: 16 vpmaddwd and 16 vpaddd leave the 8 blocks'
// exact sums in the 8 lanes, then one conversion, one multiply (the 8 scale products) and one
// fma: ~4.4 ops per 32 multiply-adds, against ~8 in the natural order (a conversion, a scale
// product, a broadcast and an fma per block). A chunk's weight vectors are decoded once for up
// to 6 activation rows. Measured on Zen 3, one thread, Q8_0 rows of 640, 12 activation rows:
// 31.5 -> 52.9 GMAC/s in cache, 22.9 -> 36.6 from DRAM (natural order 4 rows per pass -> this).
#include <immintrin.h>

#include <algorithm>

#include "quant/blocks.h"
#include "quant/int16_gemm.h"
#include "quant/packed.h"
#include "quant/x86/avx2_util.h"
#include "quant/x86/int16_spans.h"

namespace ds4::quant::DS4_AVX2_NAMESPACE {

namespace {

// A weight source gives, per chunk of 8 blocks from block b0, its 16 vectors in any order to
// fn(v, vector), its 8 scales and, for the formats with a minimum (kMin), its 16 halves' weights
// in two vectors; the same for a last chunk of 4 (8 vectors, 4 scales, 8 halves); and a block
// left in natural order as a block (half(h), d(), mw(): x86/int16_spans.h's LegacyBlock).

// Rows as decode_row / decode_packed_row leave them: int16 in the block-lane order, float scales
// and minima.
template <bool kHasMin>
struct Decoded {
    static constexpr bool kMin = kHasMin;
    const int16_t* q;
    const float* sw;
    const float* mw;
    __m256i at(int64_t e) const { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + e)); }
    template <class F>
    void chunk(int64_t b0, F&& fn) const {
        for (int v = 0; v < 16; ++v) fn(v, at(32 * b0 + 16 * v));
    }
    template <class F>
    void chunk4(int64_t b0, F&& fn) const {
        for (int v = 0; v < 8; ++v) fn(v, at(32 * b0 + 16 * v));
    }
    __m256 scales(int64_t b0) const { return _mm256_loadu_ps(sw + b0); }
    __m128 scales4(int64_t b0) const { return _mm_loadu_ps(sw + b0); }
    void mins(int64_t b0, __m256 (&m)[2]) const {
        m[0] = _mm256_loadu_ps(mw + 2 * b0);
        m[1] = _mm256_loadu_ps(mw + 2 * b0 + 8);
    }
    __m256 mins4(int64_t b0) const { return _mm256_loadu_ps(mw + 2 * b0); }
    DecodedBlock block(int64_t b) const { return {q + 32 * b, sw[b], kMin ? mw[2 * b] : 0.0f}; }
    void prefetch(int64_t) const {}
};

// Packed rows (packed.h) of GGUF block Blk: a chunk from block b0 starts at byte sizeof(Blk) b0
// with its scales (f16; MXFP4: E8M0 bytes), then (kMin) its f16 minima, then its quants.
template <class Blk>
struct PackedRow {
    using Block = Blk;
    static constexpr int kBlock = sizeof(Blk);
    static constexpr bool kMin = LegacyBlock<Blk>::kMin;
    static constexpr bool kE8M0 = std::is_same_v<Blk, block_mxfp4>;
    static constexpr int kScales = (kE8M0 ? 8 : 16) * (kMin ? 2 : 1);  // bytes of a chunk's scales (a chunk of 4: half)
    const uint8_t* p;
    const uint8_t* at(int64_t b0) const { return p + kBlock * b0; }
    const uint8_t* quants(int64_t b0) const { return at(b0) + kScales; }
    const uint8_t* quants4(int64_t b0) const { return at(b0) + kScales / 2; }
    __m256 scales(int64_t b0) const {
        if constexpr (kE8M0) return e8m0_half8(at(b0));
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at(b0))));
    }
    // (MXFP4: the 8 bytes read end inside the chunk's quants)
    __m128 scales4(int64_t b0) const {
        if constexpr (kE8M0) return _mm256_castps256_ps128(e8m0_half8(at(b0)));
        return _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(at(b0))));
    }
    // -m of blocks 0..3 and 4..7, each for its two halves
    void mins(int64_t b0, __m256 (&m)[2]) const {
        const __m256 neg = _mm256_xor_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at(b0) + 16))),
                                         _mm256_set1_ps(-0.0f));
        m[0] = _mm256_permutevar8x32_ps(neg, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
        m[1] = _mm256_permutevar8x32_ps(neg, _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7));
    }
    __m256 mins4(int64_t b0) const {
        const __m128 m = _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(at(b0) + 8)));
        const __m256 neg = _mm256_xor_ps(_mm256_castps128_ps256(m), _mm256_set1_ps(-0.0f));
        return _mm256_permutevar8x32_ps(neg, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
    }
    LegacyBlock<Blk> block(int64_t b) const { return LegacyBlock<Blk>(at(b)); }
    void prefetch(int64_t b0) const { prefetch_block<8 * kBlock>(at(b0)); }
};

inline __m256i widen_i8(const uint8_t* x) {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
}

struct PackedQ8 : PackedRow<block_q8_0> {
    template <class F>
    void chunk(int64_t b0, F&& fn) const {
        for (int v = 0; v < 16; ++v) fn(v, widen_i8(quants(b0) + 16 * v));
    }
    template <class F>
    void chunk4(int64_t b0, F&& fn) const {
        for (int v = 0; v < 8; ++v) fn(v, widen_i8(quants4(b0) + 16 * v));
    }
};

// Q4_0 / Q4_1, IQ4_NL / MXFP4: group g of a chunk of B blocks holds vectors g and g + B (low and
// high nibbles).
template <class Blk>
struct PackedQ4 : PackedRow<Blk> {
    using PackedRow<Blk>::quants;
    using PackedRow<Blk>::quants4;
    template <int B, class F>
    static void groups(const uint8_t* w, F& fn) {
        if constexpr (CodeBook<Blk>::kIs) {
            for (int g = 0; g < B; ++g) {
                const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16 * g));
                fn(g, book_lookup(CodeBook<Blk>::values(), x));
                fn(g + B, book_lookup(CodeBook<Blk>::values(), _mm_srli_epi16(x, 4)));
            }
            return;
        }
        const __m256i off = _mm256_set1_epi16(PackedRow<Blk>::kMin ? 0 : 8);
        for (int g = 0; g < B; ++g) {
            const __m256i x = load_u8x16(w + 16 * g);
            fn(g, _mm256_sub_epi16(_mm256_and_si256(x, _mm256_set1_epi16(0x0F)), off));
            fn(g + B, _mm256_sub_epi16(_mm256_srli_epi16(x, 4), off));
        }
    }
    template <class F>
    void chunk(int64_t b0, F&& fn) const {
        groups<8>(quants(b0), fn);
    }
    template <class F>
    void chunk4(int64_t b0, F&& fn) const {
        groups<4>(quants4(b0), fn);
    }
};

// Q5_0 / Q5_1: the 5-bit field at bit Lo of a word, sign-extended (Q5_0) or not (Q5_1).
template <bool kSigned, int Lo>
inline __m256i field5(__m256i word) {
    if constexpr (kSigned) return _mm256_srai_epi16(_mm256_slli_epi16(word, 11 - Lo), 11);
    return _mm256_and_si256(_mm256_srli_epi16(word, Lo), _mm256_set1_epi16(31));
}
inline __m256i load_word(const uint8_t* w, int k) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w) + k); }
// Bit 15 of a word as bit 4 of a 5-bit value: its sign (Q5_0) or 16 (Q5_1).
template <bool kSigned>
inline __m256i top_bit(__m256i word) {
    if constexpr (kSigned) return _mm256_and_si256(_mm256_srai_epi16(word, 15), _mm256_set1_epi16(-16));
    return _mm256_and_si256(_mm256_srli_epi16(word, 11), _mm256_set1_epi16(16));
}
// Vectors 0 .. 3 words - 1: three 5-bit fields per word.
template <bool kSigned, class F>
inline void q5_words(const uint8_t* w, int words, F& fn) {
    for (int k = 0; k < words; ++k) {
        const __m256i word = load_word(w, k);
        fn(3 * k, field5<kSigned, 0>(word));
        fn(3 * k + 1, field5<kSigned, 5>(word));
        fn(3 * k + 2, field5<kSigned, 10>(word));
    }
}

template <class Blk>
struct PackedQ5 : PackedRow<Blk> {
    static constexpr bool kSigned = !PackedRow<Blk>::kMin;
    using PackedRow<Blk>::quants;
    using PackedRow<Blk>::quants4;
    template <class F>
    void chunk(int64_t b0, F&& fn) const {
        const uint8_t* w = quants(b0);
        q5_words<kSigned>(w, 5, fn);
        // vector 15: bit k of the value in bit 15 of word k
        __m256i v = top_bit<kSigned>(load_word(w, 4));
        v = _mm256_or_si256(v, _mm256_srli_epi16(load_word(w, 0), 15));
        v = _mm256_or_si256(v, _mm256_and_si256(_mm256_srli_epi16(load_word(w, 1), 14), _mm256_set1_epi16(2)));
        v = _mm256_or_si256(v, _mm256_and_si256(_mm256_srli_epi16(load_word(w, 2), 13), _mm256_set1_epi16(4)));
        fn(15, _mm256_or_si256(v, _mm256_and_si256(_mm256_srli_epi16(load_word(w, 3), 12), _mm256_set1_epi16(8))));
    }
    template <class F>
    void chunk4(int64_t b0, F&& fn) const {
        const uint8_t* w = quants4(b0);
        q5_words<kSigned>(w, 2, fn);
        // vectors 6 and 7: the nibbles, bit 4 in bit 15 of words 0 and 1
        const __m256i nib = load_u8x16(w + 64);
        fn(6, _mm256_or_si256(_mm256_and_si256(nib, _mm256_set1_epi16(0x0F)), top_bit<kSigned>(load_word(w, 0))));
        fn(7, _mm256_or_si256(_mm256_srli_epi16(nib, 4), top_bit<kSigned>(load_word(w, 1))));
    }
};

// 8 rows of 8 int32 lanes transposed in place: lane j of r[i] <-> lane i of r[j].
inline void transpose8(__m256i (&r)[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {  // t[i], t[i + 1]: rows i, i + 1 interleaved, lanes 0, 1 | 2, 3 of each half
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {  // u[i + c]: column c | c + 4 of rows i .. i + 3
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int c = 0; c < 4; ++c) {
        r[c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x20);
        r[c + 4] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x31);
    }
}

// GGUF rows of a legacy or code-book format (a MoE's expert stacks, which stay in the file, and
// Model(repack=False)): a chunk's blocks decoded in the natural order (LegacyBlock), where lane p
// of half h is a block's pair 8 h + p, then transposed into the block-lane order, where vector
// 8 h + p is that pair of blocks 0..7 (a chunk of 4: vector 4 h + m is pair 8 h + 2 m of blocks
// 0..3, then pair 8 h + 2 m + 1). The vectors are the packed rows', so are the floats.
template <class Blk>
struct GgufRow {
    static constexpr bool kMin = LegacyBlock<Blk>::kMin;
    static constexpr int kBlock = sizeof(Blk);
    const uint8_t* p;
    LegacyBlock<Blk> block(int64_t b) const { return LegacyBlock<Blk>(p + kBlock * b); }
    template <class F>
    void chunk(int64_t b0, F&& fn) const {
        for (int h = 0; h < 2; ++h) {
            __m256i r[8];
            for (int j = 0; j < 8; ++j) r[j] = block(b0 + j).half(h);
            transpose8(r);
            for (int k = 0; k < 8; ++k) fn(8 * h + k, r[k]);
        }
    }
    template <class F>
    void chunk4(int64_t b0, F&& fn) const {
        for (int h = 0; h < 2; ++h) {
            __m256i r[8];
            for (int j = 0; j < 8; ++j) r[j] = j < 4 ? block(b0 + j).half(h) : _mm256_setzero_si256();
            transpose8(r);
            for (int m = 0; m < 4; ++m) fn(4 * h + m, _mm256_permute2x128_si256(r[2 * m], r[2 * m + 1], 0x20));
        }
    }
    // The 16 bits at byte `at` of blocks b0 .. b0 + 7 (a chunk of 4: 0..3), gathered, as floats:
    // the f16 scale (at 0) or minimum (at 2); MXFP4's E8M0 byte (at 0) as its scale.
    template <int kBlocks>
    __m256 gathered(int64_t b0, int at) const {
        const __m256i step = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(kBlock));
        const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(kBlocks), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const auto* base = reinterpret_cast<const int*>(p + kBlock * b0 + at);
        const __m256i x = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), base, step, live, 1);
        if constexpr (std::is_same_v<Blk, block_mxfp4>) {
            return e8m0_half(_mm256_and_si256(x, _mm256_set1_epi32(0xFF)));
        } else {
            // the low 16 bits of each lane, packed into the low 128 bits, converted
            const __m256i packed = _mm256_packus_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0xFFFF)), _mm256_setzero_si256());
            return _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08)));
        }
    }
    __m256 scales(int64_t b0) const { return gathered<8>(b0, 0); }
    __m128 scales4(int64_t b0) const { return _mm256_castps256_ps128(gathered<4>(b0, 0)); }
    // -m of blocks 0..3 and 4..7, each for its two halves
    void mins(int64_t b0, __m256 (&m)[2]) const {
        const __m256 neg = _mm256_xor_ps(gathered<8>(b0, 2), _mm256_set1_ps(-0.0f));
        m[0] = _mm256_permutevar8x32_ps(neg, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
        m[1] = _mm256_permutevar8x32_ps(neg, _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7));
    }
    __m256 mins4(int64_t b0) const {
        const __m256 neg = _mm256_xor_ps(gathered<4>(b0, 2), _mm256_set1_ps(-0.0f));
        return _mm256_permutevar8x32_ps(neg, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
    }
    void prefetch(int64_t b0) const { prefetch_block<8 * kBlock>(p + kBlock * b0); }
};

// y[r * ldy] for R activation rows (a, da, xs: rows of n, n / 32 and n / 16).
template <int R, class W>
void block_rows(const W& w, int64_t n, const int16_t* a, const float* da, const float* xs, float* y, int64_t ldy) {
    const BlockLanes bl(n);
    const int64_t halves = n / kHalf;
    __m256 acc[R], c[W::kMin ? R : 1];  // c: the minimum terms (kMin)
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    if constexpr (W::kMin) {
        for (int r = 0; r < R; ++r) c[r] = _mm256_setzero_ps();
    }
    __m256i S[R];
    const auto mac = [&](const int16_t* ac) {
        return [&S, ac, n](int v, __m256i q) {
            for (int r = 0; r < R; ++r) {
                const auto* ap = reinterpret_cast<const __m256i*>(ac + r * act_stride(n) + 16 * v);
                S[r] = madd_acc(S[r], q, _mm256_loadu_si256(ap));
            }
        };
    };
    // the minimum terms of halves 2 b0 .. 2 b0 + 8 k - 1, k vectors of weights
    const auto minima = [&](int64_t b0, const __m256* m, auto k) {
        for (int r = 0; r < R; ++r)
            for (int i = 0; i < k; ++i) c[r] = _mm256_fmadd_ps(m[i], _mm256_loadu_ps(xs + r * halves + 2 * b0 + 8 * i), c[r]);
    };
    for (int64_t b0 = 0; b0 < bl.full; b0 += BlockLanes::kChunk) {
        w.prefetch(b0);
        for (int r = 0; r < R; ++r) S[r] = _mm256_setzero_si256();
        w.chunk(b0, mac(a + 32 * b0));
        const __m256 d = w.scales(b0);
        for (int r = 0; r < R; ++r) {
            const __m256 scale = _mm256_mul_ps(d, _mm256_loadu_ps(da + r * bl.nb + b0));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S[r]), scale, acc[r]);
        }
        if constexpr (W::kMin) {
            __m256 m[2];
            w.mins(b0, m);
            minima(b0, m, 2);
        }
    }
    if (bl.tail4()) {  // lanes l and l + 4 hold block l: added exactly, then into lanes 0..3
        const int64_t b0 = bl.full;
        for (int r = 0; r < R; ++r) S[r] = _mm256_setzero_si256();
        w.chunk4(b0, mac(a + 32 * b0));
        const __m128 d = w.scales4(b0);
        for (int r = 0; r < R; ++r) {
            const __m128i T = _mm_add_epi32(_mm256_castsi256_si128(S[r]), _mm256_extracti128_si256(S[r], 1));
            const __m128 scale = _mm_mul_ps(d, _mm_loadu_ps(da + r * bl.nb + b0));
            const __m128 lo = _mm_fmadd_ps(_mm_cvtepi32_ps(T), scale, _mm256_castps256_ps128(acc[r]));
            acc[r] = _mm256_insertf128_ps(acc[r], lo, 0);
        }
        if constexpr (W::kMin) {
            const __m256 m = w.mins4(b0);
            minima(b0, &m, 1);
        }
    } else if (bl.tail > 0) {  // natural order: its lane sums, one fma per block over the 8 lanes
        const TailBlocks tail(static_cast<int>(bl.tail), [&](int i) { return w.block(bl.full + i); });
        for (int r = 0; r < R; ++r) {
            acc[r] = tail.add(acc[r], a + r * act_stride(n) + 32 * bl.full, da + r * bl.nb + bl.full);
            if constexpr (W::kMin) c[r] = tail.add_min(c[r], xs + r * halves + 2 * bl.full);
        }
    }
    for (int r = 0; r < R; ++r) {
        if constexpr (W::kMin) {
            y[r * ldy] = hsum(acc[r]) - hsum(c[r]);
        } else {
            y[r * ldy] = hsum(acc[r]);
        }
    }
}

template <class W>
void block_rows_any(const W& w, int64_t n, const int16_t* a, const float* da, const float* xs, int nx, float* y,
                    int64_t ldy) {
    using Fn = void (*)(const W&, int64_t, const int16_t*, const float*, const float*, float*, int64_t);
    static constexpr Fn fns[kBlockRowsMax] = {&block_rows<1, W>, &block_rows<2, W>, &block_rows<3, W>,
                                              &block_rows<4, W>, &block_rows<5, W>, &block_rows<6, W>};
    fns[nx - 1](w, n, a, da, xs, y, ldy);
}

// The packed source W over the row at `row`.
template <class W>
W packed(const void* row) {
    W w;
    w.p = static_cast<const uint8_t*>(row);
    return w;
}

template <class W>
void rows_packed_blocks(const void* row, int64_t n, const int16_t* a, const float* da, const float* xs, int nx,
                        float* y, int64_t ldy) {
    block_rows_any(packed<W>(row), n, a, da, xs, nx, y, ldy);
}

// A packed row into the block-lane int16 order, vectors stored as the kernels decode them.
template <class W>
void decode_packed_blocks(const void* row, int64_t n, int16_t* q, float* sw, float* mw) {
    const W w = packed<W>(row);
    const BlockLanes bl(n);
    std::fill(mw, mw + n / kHalf, 0.0f);
    const auto store = [q](int64_t b0) {
        return [q, b0](int v, __m256i x) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * b0 + 16 * v), x); };
    };
    for (int64_t b0 = 0; b0 < bl.full; b0 += BlockLanes::kChunk) {
        w.chunk(b0, store(b0));
        _mm256_storeu_ps(sw + b0, w.scales(b0));
        if constexpr (W::kMin) {
            __m256 m[2];
            w.mins(b0, m);
            _mm256_storeu_ps(mw + 2 * b0, m[0]);
            _mm256_storeu_ps(mw + 2 * b0 + 8, m[1]);
        }
    }
    if (bl.tail4()) {
        w.chunk4(bl.full, store(bl.full));
        _mm_storeu_ps(sw + bl.full, w.scales4(bl.full));
        if constexpr (W::kMin) _mm256_storeu_ps(mw + 2 * bl.full, w.mins4(bl.full));
        return;
    }
    for (int64_t b = bl.full; b < bl.nb; ++b) {
        const auto blk = w.block(b);
        for (int h = 0; h < 2; ++h) _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * b + 16 * h), blk.half(h));
        sw[b] = blk.d();
        mw[2 * b] = mw[2 * b + 1] = blk.mw();
    }
}

// f<W>() for the packed source W of `type`, or nullptr.
template <template <class> class Fn, class R>
R by_format(Type type) {
    switch (type) {
        case Type::Q4_0: return Fn<PackedQ4<block_q4_0>>::get();
        case Type::Q4_1: return Fn<PackedQ4<block_q4_1>>::get();
        case Type::Q5_0: return Fn<PackedQ5<block_q5_0>>::get();
        case Type::Q5_1: return Fn<PackedQ5<block_q5_1>>::get();
        case Type::Q8_0: return Fn<PackedQ8>::get();
        case Type::IQ4_NL: return Fn<PackedQ4<block_iq4_nl>>::get();
        case Type::MXFP4: return Fn<PackedQ4<block_mxfp4>>::get();
        default: return nullptr;
    }
}
template <class W>
struct DecodeOf {
    static DecodeI16Fn get() { return &decode_packed_blocks<W>; }
};
template <class W>
struct RowsOf {
    static RowsPackedFn get() { return &rows_packed_blocks<W>; }
};

// GGUF rows: any number of activation rows, in passes of at most kBlockRowsMax (the AVX-512
// table's rows_max is its own kernels').
template <class W>
void rows_gguf_blocks(const void* row, int64_t n, const int16_t* a, const float* da, const float* xs, int nx, float* y,
                      int64_t ldy) {
    const int64_t nb = n / kSpan, halves = n / kHalf;
    for (int r = 0; r < nx; r += kBlockRowsMax) {
        const int m = std::min(nx - r, kBlockRowsMax);
        block_rows_any(packed<W>(row), n, a + r * act_stride(n), da + r * nb, W::kMin ? xs + r * halves : xs, m,
                       y + r * ldy, ldy);
    }
}
template <class W>
struct GgufDecodeOf {
    static DecodeI16Fn get() { return &decode_packed_blocks<GgufRow<typename W::Block>>; }
};
template <class W>
struct GgufRowsOf {
    static RowsI16Fn get() { return &rows_gguf_blocks<GgufRow<typename W::Block>>; }
};

}  // namespace

DecodeI16Fn decode_packed(Type type) { return by_format<DecodeOf, DecodeI16Fn>(type); }
DecodeI16Fn decode_gguf(Type type) { return by_format<GgufDecodeOf, DecodeI16Fn>(type); }
RowsI16Fn rows_gguf(Type type) { return by_format<GgufRowsOf, RowsI16Fn>(type); }

void gemm_i16_blocks(const int16_t* q, const float* sw, const float* mw, int min_len, int, int nw, const int16_t* a,
                     const float* da, const float* xs, int nx, int64_t n, float* y, int64_t ldy) {
    const int64_t nb = n / kSpan, halves = n / kHalf;
    for (int r = 0; r < nx; r += kBlockRowsMax) {
        const int m = nx - r < kBlockRowsMax ? nx - r : kBlockRowsMax;
        const int16_t* ar = a + r * act_stride(n);
        for (int o = 0; o < nw; ++o) {
            const int16_t* qo = q + o * n;
            float* yo = y + r * ldy + o;
            if (min_len) {  // Q4_1, Q5_1: per half
                block_rows_any(Decoded<true>{qo, sw + o * nb, mw + o * halves}, n, ar, da + r * nb, xs + r * halves, m, yo, ldy);
            } else {
                block_rows_any(Decoded<false>{qo, sw + o * nb, mw}, n, ar, da + r * nb, xs, m, yo, ldy);
            }
        }
    }
}

RowsPackedFn rows_packed(Type type) { return by_format<RowsOf, RowsPackedFn>(type); }

}  // namespace ds4::quant::DS4_AVX2_NAMESPACE
