// NEON kernels of the int16 path (int16_gemm.h): the activation quantiser, the GEMMs over decoded
// rows (natural order and block lanes), the few-rows kernels and tile decoders of the K-quants,
// IQ4_XS, the grid formats (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) and the ternary
// ones (TQ1_0, TQ2_0) from their GGUF blocks and of the
// block-lane formats from their packed rows (packed.h) or GGUF blocks. Every result is the scalar
// reference's bit for bit, as on x86, so decode, verify blocks and prefill agree on ARM too.
//
// NEON has no vpmaddwd: a span's 32 products go into four int32x4 accumulators by position within
// a half (vmlal_s16 / vmlal_high_s16, 4 multiply-adds each), and at the end of a group one
// pairwise add per four lanes (vpaddq_s32) gives the reference's eight lane sums (lane j: the
// positions 2j and 2j + 1 of both halves; integer sums, exact in any order). The float side is
// the reference's: one conversion and fma per group and lane, the same tree, the same minimum
// terms. The block-lane order (block_lanes.h) puts block j's pairs at positions 2j, 2j + 1 of
// each 16-lane vector, so the same accumulators leave each block's sum in its own lane.
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "quant/blocks.h"
#include "quant/int16_gemm.h"
#include "quant/iq_tables.h"
#include "quant/kernels_ref.h"
#include "quant/packed.h"

namespace ds4::quant::neon {

namespace {

// Eight float lanes: 0..3 and 4..7.
struct F8 {
    float32x4_t lo, hi;
};
inline F8 zero8() { return {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}; }
// The reference's tree ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
inline float hsum(const F8& a) {
    const float32x4_t s = vaddq_f32(a.lo, a.hi);
    const float32x2_t t = vadd_f32(vget_low_f32(s), vget_high_f32(s));
    return vget_lane_f32(t, 0) + vget_lane_f32(t, 1);
}

// Exact integer products by position within a half: positions 0..3, 4..7, 8..11, 12..15.
struct Pos {
    int32x4_t p[4];
};
inline void clear(Pos& s) {
    for (int32x4_t& v : s.p) v = vdupq_n_s32(0);
}
// 16 products: weights w0 (positions 0..7) and w1 (8..15) against a[0..16).
inline void mac16(Pos& s, int16x8_t w0, int16x8_t w1, const int16_t* a) {
    const int16x8_t a0 = vld1q_s16(a), a1 = vld1q_s16(a + 8);
    s.p[0] = vmlal_s16(s.p[0], vget_low_s16(w0), vget_low_s16(a0));
    s.p[1] = vmlal_high_s16(s.p[1], w0, a0);
    s.p[2] = vmlal_s16(s.p[2], vget_low_s16(w1), vget_low_s16(a1));
    s.p[3] = vmlal_high_s16(s.p[3], w1, a1);
}
// A span's 32 weights (elements 0..7, 8..15, 16..23, 24..31) against a[0..32).
struct Span {
    int16x8_t w[4];
};
inline void mac32(Pos& s, const Span& v, const int16_t* a) {
    mac16(s, v.w[0], v.w[1], a);
    mac16(s, v.w[2], v.w[3], a + 16);
}
// acc_j = fma((float) S_j, scale_j, acc_j) with S_j = positions 2j and 2j + 1.
inline void fma_lanes(F8& acc, const Pos& s, float32x4_t scale_lo, float32x4_t scale_hi) {
    acc.lo = vfmaq_f32(acc.lo, vcvtq_f32_s32(vpaddq_s32(s.p[0], s.p[1])), scale_lo);
    acc.hi = vfmaq_f32(acc.hi, vcvtq_f32_s32(vpaddq_s32(s.p[2], s.p[3])), scale_hi);
}

inline float f16_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return ref::fp16(h);
}
// Four f16 at p as floats (exact conversions).
inline float32x4_t f16x4_at(const uint8_t* p) { return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p))); }

// ---- the GEMMs over decoded rows ---------------------------------------------------------------

// One weight row x X activation rows over every group of G spans; U: the minimum units per group
// (int16_gemm.h; mw and xs rows n / 16 apart).
template <int X>
void tile(const int16_t* q, const float* sw, const float* mw, int group_spans, int U, const int16_t* a, const float* da,
          const float* xs, int64_t n, float* y, int64_t ldy) {
    const int64_t groups = n / (kSpan * group_spans), ms = n / kHalf;
    F8 acc[X];
    for (F8& v : acc) v = zero8();
    for (int64_t g = 0; g < groups; ++g) {
        Pos S[X];
        for (Pos& s : S) clear(s);
        for (int s = 0; s < group_spans; ++s) {
            const int64_t e0 = (g * group_spans + s) * kSpan;
            const Span v{{vld1q_s16(q + e0), vld1q_s16(q + e0 + 8), vld1q_s16(q + e0 + 16), vld1q_s16(q + e0 + 24)}};
            for (int r = 0; r < X; ++r) mac32(S[r], v, a + r * act_stride(n) + e0);
        }
        for (int r = 0; r < X; ++r) {
            const float32x4_t scale = vdupq_n_f32(sw[g] * da[r * groups + g]);
            fma_lanes(acc[r], S[r], scale, scale);
        }
        for (int64_t u = g * U; u < (g + 1) * U; u += 8) {
            const float32x4_t lo = vld1q_f32(mw + u), hi = vld1q_f32(mw + u + 4);
            for (int r = 0; r < X; ++r) {
                acc[r].lo = vfmsq_f32(acc[r].lo, lo, vld1q_f32(xs + r * ms + u));
                acc[r].hi = vfmsq_f32(acc[r].hi, hi, vld1q_f32(xs + r * ms + u + 4));
            }
        }
    }
    for (int r = 0; r < X; ++r) y[r * ldy] = hsum(acc[r]);
}

constexpr int kX = 4;  // activation rows per tile: 16 integer and 8 float accumulators

// ---- the block-lane order (the legacy formats) ------------------------------------------------
//
// A weight source gives, per chunk of 8 blocks from block b0, its 16 vectors in any order (each
// as the int16 lanes 0..7 and 8..15: blocks 0..3 and 4..7) to fn(v, lo, hi), its 8 scales and,
// for the formats with a minimum (kMin), its 16 halves' weights; the same for a last chunk of 4
// (8 vectors, 4 scales, 8 halves); and a block left in natural order (span(), d(), mw()).

inline int16x8_t u8_lo(uint8x16_t x) { return vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(x))); }
inline int16x8_t u8_hi(uint8x16_t x) { return vreinterpretq_s16_u16(vmovl_high_u8(x)); }

// The code book's values at the codes in 16 bytes (each < 16), as int16 lanes 0..7 and 8..15.
struct Looked {
    int16x8_t lo, hi;
};
inline Looked book_lookup(const int8_t* values, uint8x16_t codes) {
    const int8x16_t v = vqtbl1q_s8(vld1q_s8(values), codes);
    return {vmovl_s8(vget_low_s8(v)), vmovl_high_s8(v)};
}
// E8M0 exponents as MXFP4 scales: ref::e8m0_to_fp32_half, 2^(e - 128) (e < 2: the subnormals
// 2^-128 and 2^-127).
inline float32x4_t e8m0_half(uint32x4_t e) {
    const uint32x4_t one = vdupq_n_u32(1);
    const uint32x4_t normal = vshlq_n_u32(vsubq_u32(e, one), 23);
    const uint32x4_t subnormal = vshlq_u32(vdupq_n_u32(0x00200000), vreinterpretq_s32_u32(e));
    return vreinterpretq_f32_u32(vbslq_u32(vcgtq_u32(e, one), normal, subnormal));
}
// 4 E8M0 bytes at p.
inline float32x4_t e8m0x4_at(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return e8m0_half(vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(v)))));
}

// A GGUF block of a legacy or code-book format: byte j of qs holds element j (low nibble) and
// j + 16 (high); span() its 32 int16 q (int16_gemm.h: Q4_0 the nibble - 8, Q5_0 the 5-bit quant
// - 16, IQ4_NL / MXFP4 the code book's value).
template <class Blk>
struct LegacyBlock {
    static constexpr bool kQ8 = std::is_same_v<Blk, block_q8_0>;
    static constexpr bool kFifth = std::is_same_v<Blk, block_q5_0> || std::is_same_v<Blk, block_q5_1>;
    static constexpr bool kMin = std::is_same_v<Blk, block_q4_1> || std::is_same_v<Blk, block_q5_1>;
    const Blk& b;
    explicit LegacyBlock(const uint8_t* p) : b(*reinterpret_cast<const Blk*>(p)) {}
    float d() const {
        if constexpr (std::is_same_v<Blk, block_mxfp4>) {
            return ref::e8m0_to_fp32_half(b.e);
        } else {
            return ref::fp16(b.d);
        }
    }
    float mw() const {
        if constexpr (kMin) return -ref::fp16(b.m);
        return 0.0f;
    }
    Span span() const {
        if constexpr (kQ8) {
            const int8x16_t x0 = vld1q_s8(b.qs), x1 = vld1q_s8(b.qs + 16);
            return {{vmovl_s8(vget_low_s8(x0)), vmovl_high_s8(x0), vmovl_s8(vget_low_s8(x1)), vmovl_high_s8(x1)}};
        } else if constexpr (CodeBook<Blk>::kIs) {
            const uint8x16_t x = vld1q_u8(b.qs);
            const Looked lo = book_lookup(CodeBook<Blk>::values(), vandq_u8(x, vdupq_n_u8(0x0F)));
            const Looked hi = book_lookup(CodeBook<Blk>::values(), vshrq_n_u8(x, 4));
            return {{lo.lo, lo.hi, hi.lo, hi.hi}};
        } else {
            const uint8x16_t x = vld1q_u8(b.qs);
            const uint8x16_t lo = vandq_u8(x, vdupq_n_u8(0x0F)), hi = vshrq_n_u8(x, 4);
            Span v{{u8_lo(lo), u8_hi(lo), u8_lo(hi), u8_hi(hi)}};
            if constexpr (kFifth) {  // q | 16 where bit e of qh is set
                static const uint8_t bits[8] = {1, 2, 4, 8, 16, 32, 64, 128};
                const uint8x8_t bit = vld1_u8(bits);
                for (int i = 0; i < 4; ++i) {
                    const uint8x8_t set = vtst_u8(vdup_n_u8(b.qh[i]), bit);
                    v.w[i] = vorrq_s16(v.w[i], vandq_s16(vreinterpretq_s16_u16(vmovl_u8(set)), vdupq_n_s16(16)));
                }
            }
            if constexpr (!kMin) {
                for (int16x8_t& w : v.w) w = vsubq_s16(w, vdupq_n_s16(kFifth ? 16 : 8));
            }
            return v;
        }
    }
};

// Halves' weights of blocks 0..3 (each twice) from their -m.
inline F8 pairs_of(float32x4_t m) { return {vzip1q_f32(m, m), vzip2q_f32(m, m)}; }

// Rows as decode_row / decode_packed_row leave them.
template <bool kHasMin>
struct Decoded {
    static constexpr bool kMin = kHasMin;
    const int16_t* q;
    const float* sw;
    const float* mw;
    template <class Fn>
    void chunk(int64_t b0, int vectors, Fn&& fn) const {
        for (int v = 0; v < vectors; ++v) fn(v, vld1q_s16(q + 32 * b0 + 16 * v), vld1q_s16(q + 32 * b0 + 16 * v + 8));
    }
    F8 scales(int64_t b0) const { return {vld1q_f32(sw + b0), vld1q_f32(sw + b0 + 4)}; }
    float32x4_t scales4(int64_t b0) const { return vld1q_f32(sw + b0); }
    void mins(int64_t b0, F8 (&m)[2]) const {
        m[0] = mins4(b0);
        m[1] = {vld1q_f32(mw + 2 * b0 + 8), vld1q_f32(mw + 2 * b0 + 12)};
    }
    F8 mins4(int64_t b0) const { return {vld1q_f32(mw + 2 * b0), vld1q_f32(mw + 2 * b0 + 4)}; }
    struct Block {
        const int16_t* p;
        float d_, mw_;
        Span span() const { return {{vld1q_s16(p), vld1q_s16(p + 8), vld1q_s16(p + 16), vld1q_s16(p + 24)}}; }
        float d() const { return d_; }
        float mw() const { return mw_; }
    };
    Block block(int64_t b) const { return {q + 32 * b, sw[b], kMin ? mw[2 * b] : 0.0f}; }
};

// Packed rows of GGUF block Blk: a chunk from block b0 starts at byte sizeof(Blk) b0 with its
// scales (f16; MXFP4: E8M0 bytes), then (kMin) its f16 minima, then its quants; a block left in
// natural order is the GGUF block there.
template <class Blk>
struct PackedRow {
    static constexpr int kBlock = sizeof(Blk);
    static constexpr bool kMin = LegacyBlock<Blk>::kMin;
    static constexpr bool kE8M0 = std::is_same_v<Blk, block_mxfp4>;
    static constexpr int kScale = kE8M0 ? 1 : 2;            // bytes of a block's scale
    static constexpr int kScales = 8 * kScale * (kMin ? 2 : 1);  // bytes of a chunk's scales (a chunk of 4: half)
    const uint8_t* p;
    const uint8_t* at(int64_t b0) const { return p + kBlock * b0; }
    const uint8_t* quants(int64_t b0, int vectors) const { return at(b0) + (vectors == 16 ? kScales : kScales / 2); }
    F8 scales(int64_t b0) const { return {scales4(b0), scales4_at(at(b0) + 4 * kScale)}; }
    float32x4_t scales4(int64_t b0) const { return scales4_at(at(b0)); }
    static float32x4_t scales4_at(const uint8_t* x) {
        if constexpr (kE8M0) {
            return e8m0x4_at(x);
        } else {
            return f16x4_at(x);
        }
    }
    void mins(int64_t b0, F8 (&m)[2]) const {
        m[0] = pairs_of(vnegq_f32(f16x4_at(at(b0) + 16)));
        m[1] = pairs_of(vnegq_f32(f16x4_at(at(b0) + 24)));
    }
    F8 mins4(int64_t b0) const { return pairs_of(vnegq_f32(f16x4_at(at(b0) + 8))); }
    LegacyBlock<Blk> block(int64_t b) const { return LegacyBlock<Blk>(at(b)); }
};

struct PackedQ8 : PackedRow<block_q8_0> {
    template <class Fn>
    void chunk(int64_t b0, int vectors, Fn&& fn) const {
        const uint8_t* w = quants(b0, vectors);
        for (int v = 0; v < vectors; ++v) {
            const int8x16_t x = vld1q_s8(reinterpret_cast<const int8_t*>(w + 16 * v));
            fn(v, vmovl_s8(vget_low_s8(x)), vmovl_high_s8(x));
        }
    }
};

// Q4_0 / Q4_1, IQ4_NL / MXFP4: group g of a chunk of B blocks holds vectors g and g + B (low and
// high nibbles).
template <class Blk>
struct PackedQ4 : PackedRow<Blk> {
    template <class Fn>
    void chunk(int64_t b0, int vectors, Fn&& fn) const {
        const uint8_t* w = this->quants(b0, vectors);
        const int B = vectors / 2;
        if constexpr (CodeBook<Blk>::kIs) {
            for (int g = 0; g < B; ++g) {
                const uint8x16_t x = vld1q_u8(w + 16 * g);
                const Looked lo = book_lookup(CodeBook<Blk>::values(), vandq_u8(x, vdupq_n_u8(0x0F)));
                const Looked hi = book_lookup(CodeBook<Blk>::values(), vshrq_n_u8(x, 4));
                fn(g, lo.lo, lo.hi);
                fn(g + B, hi.lo, hi.hi);
            }
            return;
        }
        const int16x8_t off = vdupq_n_s16(PackedRow<Blk>::kMin ? 0 : 8);
        for (int g = 0; g < B; ++g) {
            const uint8x16_t x = vld1q_u8(w + 16 * g);
            const uint8x16_t lo = vandq_u8(x, vdupq_n_u8(0x0F)), hi = vshrq_n_u8(x, 4);
            fn(g, vsubq_s16(u8_lo(lo), off), vsubq_s16(u8_hi(lo), off));
            fn(g + B, vsubq_s16(u8_lo(hi), off), vsubq_s16(u8_hi(hi), off));
        }
    }
};

// Q5_0 / Q5_1 words: 16 uint16 lanes as two int16x8.
struct Word {
    int16x8_t lo, hi;
};
inline Word load_word(const uint8_t* w, int k) {
    return {vreinterpretq_s16_u8(vld1q_u8(w + 32 * k)), vreinterpretq_s16_u8(vld1q_u8(w + 32 * k + 16))};
}
// Bit 15 of each lane moved to bit K, the others clear.
template <int K>
inline int16x8_t top_bit(int16x8_t x) {
    return vandq_s16(vreinterpretq_s16_u16(vshrq_n_u16(vreinterpretq_u16_s16(x), 15 - K)), vdupq_n_s16(1 << K));
}
// The 5-bit field at bit Lo of each lane: sign-extended (Q5_0) or not (Q5_1).
template <bool kSigned, int Lo>
inline int16x8_t field5(int16x8_t x) {
    if constexpr (kSigned) return vshrq_n_s16(vshlq_n_s16(x, 11 - Lo), 11);
    return vandq_s16(vreinterpretq_s16_u16(vshrq_n_u16(vreinterpretq_u16_s16(x), Lo)), vdupq_n_s16(31));
}
// Bit 15 of each lane as bit 4 of a 5-bit value: its sign (Q5_0) or 16 (Q5_1).
template <bool kSigned>
inline int16x8_t bit4_of(int16x8_t x) {
    if constexpr (kSigned) return vandq_s16(vshrq_n_s16(x, 15), vdupq_n_s16(-16));
    return top_bit<4>(x);
}

template <class Blk>
struct PackedQ5 : PackedRow<Blk> {
    static constexpr bool kSigned = !PackedRow<Blk>::kMin;
    template <class Fn>
    static void words(const uint8_t* w, int n, Fn& fn) {
        for (int k = 0; k < n; ++k) {
            const Word x = load_word(w, k);
            fn(3 * k, field5<kSigned, 0>(x.lo), field5<kSigned, 0>(x.hi));
            fn(3 * k + 1, field5<kSigned, 5>(x.lo), field5<kSigned, 5>(x.hi));
            fn(3 * k + 2, field5<kSigned, 10>(x.lo), field5<kSigned, 10>(x.hi));
        }
    }
    template <class Fn>
    void chunk(int64_t b0, int vectors, Fn&& fn) const {
        const uint8_t* w = this->quants(b0, vectors);
        if (vectors == 16) {
            words(w, 5, fn);
            // vector 15: bit k of the value in bit 15 of word k
            const Word w0 = load_word(w, 0), w1 = load_word(w, 1), w2 = load_word(w, 2), w3 = load_word(w, 3),
                       w4 = load_word(w, 4);
            const auto last = [](int16x8_t a, int16x8_t b, int16x8_t c, int16x8_t d, int16x8_t e) {
                return vorrq_s16(vorrq_s16(bit4_of<kSigned>(e), top_bit<0>(a)),
                                 vorrq_s16(top_bit<1>(b), vorrq_s16(top_bit<2>(c), top_bit<3>(d))));
            };
            fn(15, last(w0.lo, w1.lo, w2.lo, w3.lo, w4.lo), last(w0.hi, w1.hi, w2.hi, w3.hi, w4.hi));
            return;
        }
        words(w, 2, fn);
        // vectors 6 and 7: the nibbles of 16 bytes, bit 4 in bit 15 of words 0 and 1
        const uint8x16_t nib = vld1q_u8(w + 64);
        const uint8x16_t n6 = vandq_u8(nib, vdupq_n_u8(0x0F)), n7 = vshrq_n_u8(nib, 4);
        const Word w0 = load_word(w, 0), w1 = load_word(w, 1);
        fn(6, vorrq_s16(u8_lo(n6), bit4_of<kSigned>(w0.lo)), vorrq_s16(u8_hi(n6), bit4_of<kSigned>(w0.hi)));
        fn(7, vorrq_s16(u8_lo(n7), bit4_of<kSigned>(w1.lo)), vorrq_s16(u8_hi(n7), bit4_of<kSigned>(w1.hi)));
    }
};

// y[r * ldy] for R activation rows (a, da, xs: rows of n, n / 32 and n / 16).
template <int R, class W>
void block_rows(const W& w, int64_t n, const int16_t* a, const float* da, const float* xs, float* y, int64_t ldy) {
    const BlockLanes bl(n);
    const int64_t halves = n / kHalf;
    F8 acc[R], c[R];
    for (int r = 0; r < R; ++r) acc[r] = c[r] = zero8();
    Pos S[R];
    const auto mac = [&S, n](const int16_t* ac) {
        return [&S, ac, n](int v, int16x8_t lo, int16x8_t hi) {
            for (int r = 0; r < R; ++r) mac16(S[r], lo, hi, ac + r * act_stride(n) + 16 * v);
        };
    };
    // the minimum terms of halves h0 .. h0 + 7
    const auto minima = [&](int64_t h0, const F8& m) {
        for (int r = 0; r < R; ++r) {
            const float* x = xs + r * halves + h0;
            c[r].lo = vfmaq_f32(c[r].lo, m.lo, vld1q_f32(x));
            c[r].hi = vfmaq_f32(c[r].hi, m.hi, vld1q_f32(x + 4));
        }
    };
    for (int64_t b0 = 0; b0 < bl.full; b0 += BlockLanes::kChunk) {
        for (Pos& s : S) clear(s);
        w.chunk(b0, 16, mac(a + 32 * b0));
        const F8 d = w.scales(b0);
        for (int r = 0; r < R; ++r) {
            const float* dr = da + r * bl.nb + b0;
            fma_lanes(acc[r], S[r], vmulq_f32(d.lo, vld1q_f32(dr)), vmulq_f32(d.hi, vld1q_f32(dr + 4)));
        }
        if constexpr (W::kMin) {
            F8 m[2];
            w.mins(b0, m);
            minima(2 * b0, m[0]);
            minima(2 * b0 + 8, m[1]);
        }
    }
    if (bl.tail4()) {  // lanes l and l + 4 hold block l: added exactly, then into lanes 0..3
        const int64_t b0 = bl.full;
        for (Pos& s : S) clear(s);
        w.chunk(b0, 8, mac(a + 32 * b0));
        const float32x4_t d = w.scales4(b0);
        for (int r = 0; r < R; ++r) {
            const int32x4_t T = vaddq_s32(vpaddq_s32(S[r].p[0], S[r].p[1]), vpaddq_s32(S[r].p[2], S[r].p[3]));
            acc[r].lo = vfmaq_f32(acc[r].lo, vcvtq_f32_s32(T), vmulq_f32(d, vld1q_f32(da + r * bl.nb + b0)));
        }
        if constexpr (W::kMin) minima(2 * b0, w.mins4(b0));
    } else if (bl.tail > 0) {  // natural order, and its arithmetic (int16_gemm.h): each block's lane
        // sums, one fma per lane; the blocks decoded once for all activation rows
        Span q[BlockLanes::kChunk - 1];
        float sw[BlockLanes::kChunk - 1], mw[BlockLanes::kChunk - 1];
        for (int64_t b = bl.full; b < bl.nb; ++b) {
            const auto blk = w.block(b);
            q[b - bl.full] = blk.span(), sw[b - bl.full] = blk.d(), mw[b - bl.full] = blk.mw();
        }
        for (int r = 0; r < R; ++r) {
            for (int64_t b = bl.full; b < bl.nb; ++b) {
                Pos s;
                clear(s);
                mac32(s, q[b - bl.full], a + r * act_stride(n) + 32 * b);
                const float32x4_t scale = vdupq_n_f32(sw[b - bl.full] * da[r * bl.nb + b]);
                fma_lanes(acc[r], s, scale, scale);
            }
            if constexpr (W::kMin) {
                float cl[8];
                vst1q_f32(cl, c[r].lo);
                vst1q_f32(cl + 4, c[r].hi);
                for (int64_t h = 2 * bl.full; h < 2 * bl.nb; ++h) cl[h % 8] = std::fma(mw[h / 2 - bl.full], xs[r * halves + h], cl[h % 8]);
                c[r] = {vld1q_f32(cl), vld1q_f32(cl + 4)};
            }
        }
    }
    for (int r = 0; r < R; ++r) y[r * ldy] = W::kMin ? hsum(acc[r]) - hsum(c[r]) : hsum(acc[r]);
}

template <class W>
void block_rows_any(const W& w, int64_t n, const int16_t* a, const float* da, const float* xs, int nx, float* y,
                    int64_t ldy) {
    using Fn = void (*)(const W&, int64_t, const int16_t*, const float*, const float*, float*, int64_t);
    static constexpr Fn fns[kBlockRowsMax] = {&block_rows<1, W>, &block_rows<2, W>, &block_rows<3, W>,
                                              &block_rows<4, W>};
    fns[nx - 1](w, n, a, da, xs, y, ldy);
}

template <class W>
void rows_packed_blocks(const void* row, int64_t n, const int16_t* a, const float* da, const float* xs, int nx,
                        float* y, int64_t ldy) {
    W w;
    w.p = static_cast<const uint8_t*>(row);
    block_rows_any(w, n, a, da, xs, nx, y, ldy);
}

// 4 rows of 4 int32 lanes transposed in place: lane j of r[i] <-> lane i of r[j].
inline void transpose4(int32x4_t (&r)[4]) {
    const int64x2_t t0 = vreinterpretq_s64_s32(vtrn1q_s32(r[0], r[1])), t1 = vreinterpretq_s64_s32(vtrn2q_s32(r[0], r[1]));
    const int64x2_t t2 = vreinterpretq_s64_s32(vtrn1q_s32(r[2], r[3])), t3 = vreinterpretq_s64_s32(vtrn2q_s32(r[2], r[3]));
    r[0] = vreinterpretq_s32_s64(vtrn1q_s64(t0, t2));
    r[1] = vreinterpretq_s32_s64(vtrn1q_s64(t1, t3));
    r[2] = vreinterpretq_s32_s64(vtrn2q_s64(t0, t2));
    r[3] = vreinterpretq_s32_s64(vtrn2q_s64(t1, t3));
}

// GGUF rows of a block-lane format (a MoE's expert stacks, Model(repack=False)), as
// x86/int16_blocks_avx2.cpp's GgufRow: a chunk's blocks decoded in the natural order (span(): its
// int32 lane c of w[q] is the block's pair 4 q + c), then transposed 4 blocks at a time into the
// block lanes (vector v: pair v of blocks 0..3, then of blocks 4..7; a chunk of 4: vector 2 q + m
// pairs 4 q + 2 m, then 4 q + 2 m + 1, of blocks 0..3).
template <class Blk>
struct GgufRow {
    static constexpr bool kMin = LegacyBlock<Blk>::kMin;
    const uint8_t* p;
    LegacyBlock<Blk> block(int64_t b) const { return LegacyBlock<Blk>(p + sizeof(Blk) * b); }
    template <class Fn>
    void chunk(int64_t b0, int vectors, Fn&& fn) const {
        const int blocks = vectors / 2;
        Span s[BlockLanes::kChunk];
        for (int j = 0; j < blocks; ++j) s[j] = block(b0 + j).span();
        for (int q = 0; q < 4; ++q) {
            int32x4_t lo[4], hi[4];
            for (int j = 0; j < 4; ++j) lo[j] = vreinterpretq_s32_s16(s[j].w[q]);
            transpose4(lo);
            if (blocks == 4) {
                for (int m = 0; m < 2; ++m) fn(2 * q + m, vreinterpretq_s16_s32(lo[2 * m]), vreinterpretq_s16_s32(lo[2 * m + 1]));
                continue;
            }
            for (int j = 0; j < 4; ++j) hi[j] = vreinterpretq_s32_s16(s[4 + j].w[q]);
            transpose4(hi);
            for (int c = 0; c < 4; ++c) fn(4 * q + c, vreinterpretq_s16_s32(lo[c]), vreinterpretq_s16_s32(hi[c]));
        }
    }
    F8 scales(int64_t b0) const { return {scales4(b0), scales4(b0 + 4)}; }
    float32x4_t scales4(int64_t b0) const {
        float d[4];
        for (int j = 0; j < 4; ++j) d[j] = block(b0 + j).d();
        return vld1q_f32(d);
    }
    void mins(int64_t b0, F8 (&m)[2]) const {
        m[0] = mins4(b0);
        m[1] = mins4(b0 + 4);
    }
    F8 mins4(int64_t b0) const {
        float w[8];
        for (int j = 0; j < 4; ++j) w[2 * j] = w[2 * j + 1] = block(b0 + j).mw();
        return {vld1q_f32(w), vld1q_f32(w + 4)};
    }
};

// GGUF rows (W: GgufRow): any number of activation rows, in passes of at most kBlockRowsMax.
template <class W>
void rows_gguf_blocks(const void* row, int64_t n, const int16_t* a, const float* da, const float* xs, int nx, float* y,
                      int64_t ldy) {
    const int64_t nb = n / kSpan, halves = n / kHalf;
    W w;
    w.p = static_cast<const uint8_t*>(row);
    for (int r = 0; r < nx; r += kBlockRowsMax) {
        const int m = nx - r < kBlockRowsMax ? nx - r : kBlockRowsMax;
        block_rows_any(w, n, a + r * act_stride(n), da + r * nb, W::kMin ? xs + r * halves : xs, m,
                       y + r * ldy, ldy);
    }
}

// A block-lane row (W: packed, or GgufRow) into the GEMM's int16 tile as the reference's
// decode_packed_row / decode_row write it: the rows kernels' vectors stored (vector v of the chunk
// at b0: 16 values at 32 b0 + 16 v), the natural-order tail blocks as they are.
template <class W>
void decode_blocks(const void* row, int64_t n, int16_t* q, float* sw, float* mw) {
    W w;
    w.p = static_cast<const uint8_t*>(row);
    const BlockLanes bl(n);
    std::fill(mw, mw + n / kHalf, 0.0f);
    const auto store = [q](int64_t b0) {
        return [q, b0](int v, int16x8_t lo, int16x8_t hi) {
            vst1q_s16(q + 32 * b0 + 16 * v, lo);
            vst1q_s16(q + 32 * b0 + 16 * v + 8, hi);
        };
    };
    const auto store8 = [](float* dst, const F8& f) {
        vst1q_f32(dst, f.lo);
        vst1q_f32(dst + 4, f.hi);
    };
    for (int64_t b0 = 0; b0 < bl.full; b0 += BlockLanes::kChunk) {
        w.chunk(b0, 16, store(b0));
        store8(sw + b0, w.scales(b0));
        if constexpr (W::kMin) {
            F8 m[2];
            w.mins(b0, m);
            store8(mw + 2 * b0, m[0]);
            store8(mw + 2 * b0 + 8, m[1]);
        }
    }
    if (bl.tail4()) {
        w.chunk(bl.full, 8, store(bl.full));
        vst1q_f32(sw + bl.full, w.scales4(bl.full));
        if constexpr (W::kMin) store8(mw + 2 * bl.full, w.mins4(bl.full));
        return;
    }
    for (int64_t b = bl.full; b < bl.nb; ++b) {
        const auto blk = w.block(b);
        const Span v = blk.span();
        for (int i = 0; i < 4; ++i) vst1q_s16(q + 32 * b + 8 * i, v.w[i]);
        sw[b] = blk.d();
        mw[2 * b] = mw[2 * b + 1] = blk.mw();
    }
}

// ---- the K-quants, decoded from their GGUF blocks ----------------------------------------------

// Q4_K and Q5_K (Blk): element 32 j + l is nibble j % 2 of qs[32 (j / 2) + l] (Q5_K: and bit j
// of qh[l] as the fifth bit) times the 6-bit scale of j.
template <class Blk>
struct Q45K {
    static constexpr bool kMin = true;
    static constexpr int kUnits = 8;
    static constexpr bool kFive = std::is_same_v<Blk, block_q5_K>;
    static constexpr int kBytes = sizeof(Blk);
    const Blk& b;
    int sc[8];
    float mw[8];  // dmin * m per sub-block of 32 (the int16 path's unit)
    explicit Q45K(const uint8_t* p) : b(*reinterpret_cast<const Blk*>(p)) {
        const float dmin = ref::fp16(b.dmin);
        for (int j = 0; j < 8; ++j) {
            int m;
            scale_min_k4(j, b.scales, &sc[j], &m);
            mw[j] = dmin * static_cast<float>(m);
        }
    }
    float d() const { return ref::fp16(b.d); }
    Span span(int k) const {
        const uint8_t* qs = b.qs + 32 * (k / 2);
        Span v;
        for (int i = 0; i < 2; ++i) {
            const uint8x16_t x = vld1q_u8(qs + 16 * i);
            uint8x16_t q = k % 2 ? vshrq_n_u8(x, 4) : vandq_u8(x, vdupq_n_u8(0x0F));
            if constexpr (kFive) {  // bit k of qh[l] to bit 4 (a negative count shifts right)
                const uint8x16_t h = vshlq_u8(vld1q_u8(b.qh + 16 * i), vdupq_n_s8(static_cast<int8_t>(4 - k)));
                q = vorrq_u8(q, vandq_u8(h, vdupq_n_u8(0x10)));
            }
            v.w[2 * i] = vmulq_n_s16(u8_lo(q), static_cast<int16_t>(sc[k]));
            v.w[2 * i + 1] = vmulq_n_s16(u8_hi(q), static_cast<int16_t>(sc[k]));
        }
        return v;
    }
};

// Q6_K: in half h, element 32 g + l takes nibble g / 2 of ql[64 h + 32 (g % 2) + l] and bits 2 g
// of qh[32 h + l]; value q - 32, times scales[(32 g + l) / 16 + 8 h].
struct Q6K {
    static constexpr bool kMin = false;
    static constexpr int kBytes = sizeof(block_q6_K);
    const block_q6_K& b;
    explicit Q6K(const uint8_t* p) : b(*reinterpret_cast<const block_q6_K*>(p)) {}
    float d() const { return ref::fp16(b.d); }
    Span span(int k) const {
        const int h = k / 4, g = k % 4;
        const uint8_t* ql = b.ql + 64 * h + 32 * (g % 2);
        const uint8_t* qh = b.qh + 32 * h;
        Span v;
        for (int i = 0; i < 2; ++i) {
            const uint8x16_t l = vld1q_u8(ql + 16 * i), hb = vld1q_u8(qh + 16 * i);
            const uint8x16_t lo = g < 2 ? vandq_u8(l, vdupq_n_u8(0x0F)) : vshrq_n_u8(l, 4);
            const uint8x16_t hi = vandq_u8(vshlq_u8(hb, vdupq_n_s8(static_cast<int8_t>(4 - 2 * g))), vdupq_n_u8(0x30));
            const int8x16_t q = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, hi)), vdupq_n_s8(32));
            const int16_t s = b.scales[2 * g + i + 8 * h];
            v.w[2 * i] = vmulq_n_s16(vmovl_s8(vget_low_s8(q)), s);
            v.w[2 * i + 1] = vmulq_n_s16(vmovl_high_s8(q), s);
        }
        return v;
    }
};

// Q2_K / Q3_K: elements 16 i .. 16 i + 15 of span k = 4 h + s: crumb s of qs[32 h + 16 i + l].
inline uint8x16_t k_crumbs(const uint8_t* qs, int k, int i) {
    return vandq_u8(vshlq_u8(vld1q_u8(qs + 32 * (k / 4) + 16 * i), vdupq_n_s8(static_cast<int8_t>(-2 * (k % 4)))),
                    vdupq_n_u8(3));
}

// Q3_K: span k = 4 h + s (elements 128 h + 32 s + l): crumb s of qs[32 h + l], minus 4 where bit k
// of hmask[l] is clear, times the 6-bit scale (minus 32) of its 16 elements.
struct Q3K {
    static constexpr bool kMin = false;
    static constexpr int kBytes = sizeof(block_q3_K);
    const block_q3_K& b;
    int16_t sc[16];
    explicit Q3K(const uint8_t* p) : b(*reinterpret_cast<const block_q3_K*>(p)) {
        for (int j = 0; j < 16; ++j) sc[j] = static_cast<int16_t>(scale_q3_k(b.scales, j));
    }
    float d() const { return ref::fp16(b.d); }
    Span span(int k) const {
        Span v;
        for (int i = 0; i < 2; ++i) {
            const uint8x16_t lo = k_crumbs(b.qs, k, i);
            const uint8x16_t hi = vandq_u8(vshlq_u8(vld1q_u8(b.hmask + 16 * i), vdupq_n_s8(static_cast<int8_t>(2 - k))),
                                           vdupq_n_u8(4));
            const int8x16_t q = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, hi)), vdupq_n_s8(4));
            const int16_t c = sc[2 * k + i];
            v.w[2 * i] = vmulq_n_s16(vmovl_s8(vget_low_s8(q)), c);
            v.w[2 * i + 1] = vmulq_n_s16(vmovl_high_s8(q), c);
        }
        return v;
    }
};

// Q2_K: span k = 4 h + s: crumb s of qs[32 h + l] times the 4-bit scale of its 16 elements (low
// nibble of scales[j]); a minimum per 16 elements, dmin times the high nibble.
struct Q2K {
    static constexpr bool kMin = true;
    static constexpr int kUnits = 16;
    static constexpr int kBytes = sizeof(block_q2_K);
    const block_q2_K& b;
    float mw[16];
    explicit Q2K(const uint8_t* p) : b(*reinterpret_cast<const block_q2_K*>(p)) {
        const float dmin = ref::fp16(b.dmin);
        for (int j = 0; j < 16; ++j) mw[j] = dmin * static_cast<float>(b.scales[j] >> 4);
    }
    float d() const { return ref::fp16(b.d); }
    Span span(int k) const {
        Span v;
        for (int i = 0; i < 2; ++i) {
            const uint8x16_t q = k_crumbs(b.qs, k, i);
            const auto c = static_cast<int16_t>(b.scales[2 * k + i] & 0x0F);
            v.w[2 * i] = vmulq_n_s16(u8_lo(q), c);
            v.w[2 * i + 1] = vmulq_n_s16(u8_hi(q), c);
        }
        return v;
    }
};

// IQ4_XS: span k = sub-block k: elements 0..15 the code book's values at the low nibbles of
// qs[16 k + l], 16..31 at the high ones, times the sub-block's 6-bit scale minus 32.
struct IQ4XS {
    static constexpr bool kMin = false;
    static constexpr int kBytes = sizeof(block_iq4_xs);
    const block_iq4_xs& b;
    int16_t sc[8];
    explicit IQ4XS(const uint8_t* p) : b(*reinterpret_cast<const block_iq4_xs*>(p)) {
        for (int j = 0; j < 8; ++j) sc[j] = static_cast<int16_t>(scale_iq4_xs(b, j));
    }
    float d() const { return ref::fp16(b.d); }
    Span span(int k) const {
        const uint8x16_t x = vld1q_u8(b.qs + 16 * k);
        const Looked lo = book_lookup(kvalues_iq4nl, vandq_u8(x, vdupq_n_u8(0x0F)));
        const Looked hi = book_lookup(kvalues_iq4nl, vshrq_n_u8(x, 4));
        return {{vmulq_n_s16(lo.lo, sc[k]), vmulq_n_s16(lo.hi, sc[k]), vmulq_n_s16(hi.lo, sc[k]), vmulq_n_s16(hi.hi, sc[k])}};
    }
};

// 16 signed bytes q widened into w[0], w[1], times c.
inline void times16(int8x16_t q, int c, int16x8_t* w) {
    w[0] = vmulq_n_s16(vmovl_s8(vget_low_s8(q)), static_cast<int16_t>(c));
    w[1] = vmulq_n_s16(vmovl_high_s8(q), static_cast<int16_t>(c));
}
// A span of the grid formats (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S): 32 magnitudes (bytes, <
// 128), negated where bit l of `signs` is set (tested into byte masks), widened and times c0
// (elements 0..15) and c1 (16..31).
inline Span grid_span(const uint8_t* mag, uint32_t signs, int c0, int c1) {
    const uint8x16_t bits = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ull));
    Span v;
    for (int i = 0; i < 2; ++i) {  // elements 16 i .. 16 i + 15: sign bytes 2 i, 2 i + 1
        const int8x16_t m = vreinterpretq_s8_u8(vld1q_u8(mag + 16 * i));
        const uint8x16_t s = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(signs >> (16 * i))),
                                         vdup_n_u8(static_cast<uint8_t>(signs >> (16 * i + 8))));
        times16(vbslq_s8(vtstq_u8(s, bits), vnegq_s8(m), m), i ? c1 : c0, v.w + 2 * i);
    }
    return v;
}
inline Span grid_span(const uint8_t* mag, uint32_t signs, int c) { return grid_span(mag, signs, c, c); }
// The 32 sign bits of IQ2_XXS / IQ3_XXS's four 7-bit sign indices (aux's low 28 bits).
inline uint32_t ksigns4(uint32_t aux) {
    return ksigns_iq2xs[aux & 127] | ksigns_iq2xs[(aux >> 7) & 127] << 8 | ksigns_iq2xs[(aux >> 14) & 127] << 16 |
           static_cast<uint32_t>(ksigns_iq2xs[(aux >> 21) & 127]) << 24;
}

// IQ2_XXS: span k = group k (int16_ref.cpp): its four grid points' 8 magnitudes each, the signs
// of ksigns4, times 2 s + 1; d / 8 the super-block's scale.
struct IQ2XXS {
    static constexpr bool kMin = false;
    static constexpr int kBytes = sizeof(block_iq2_xxs);
    const block_iq2_xxs& b;
    explicit IQ2XXS(const uint8_t* p) : b(*reinterpret_cast<const block_iq2_xxs*>(p)) {}
    float d() const { return ref::fp16(b.d) * 0.125f; }
    Span span(int k) const {
        const auto* raw = reinterpret_cast<const uint8_t*>(b.qs) + 8 * k;
        const uint32_t idx = ref::load_u32_le(raw), aux = ref::load_u32_le(raw + 4);
        uint64_t mag[4];
        for (int i = 0; i < 4; ++i) mag[i] = iq2xxs_grid[(idx >> (8 * i)) & 0xFF];
        return grid_span(reinterpret_cast<const uint8_t*>(mag), ksigns4(aux), static_cast<int16_t>(2 * (aux >> 28) + 1));
    }
};
// IQ3_XXS: span k = group k: grid points qs[8 k + i] (4 magnitudes each), the signs and scale as
// IQ2_XXS's from the u32 at qs[64 + 4 k]; d / 4 the super-block's scale.
struct IQ3XXS {
    static constexpr bool kMin = false;
    static constexpr int kBytes = sizeof(block_iq3_xxs);
    const block_iq3_xxs& b;
    explicit IQ3XXS(const uint8_t* p) : b(*reinterpret_cast<const block_iq3_xxs*>(p)) {}
    float d() const { return ref::fp16(b.d) * 0.25f; }
    Span span(int k) const {
        const uint32_t aux = ref::load_u32_le(b.qs + QK_K / 4 + 4 * k);
        uint32_t mag[8];
        for (int i = 0; i < 8; ++i) mag[i] = iq3xxs_grid[b.qs[8 * k + i]];
        return grid_span(reinterpret_cast<const uint8_t*>(mag), ksigns4(aux), static_cast<int16_t>(2 * (aux >> 28) + 1));
    }
};
// IQ3_S: span k = group k: grid points qs[8 k + i] | bit i of qh[k] << 8, the sign bits of
// signs[4 k ..], times 1 + 2 s; d the super-block's scale.
struct IQ3S {
    static constexpr bool kMin = false;
    static constexpr int kBytes = sizeof(block_iq3_s);
    const block_iq3_s& b;
    explicit IQ3S(const uint8_t* p) : b(*reinterpret_cast<const block_iq3_s*>(p)) {}
    float d() const { return ref::fp16(b.d); }
    Span span(int k) const {
        uint32_t mag[8];
        for (int i = 0; i < 8; ++i) mag[i] = iq3s_grid[b.qs[8 * k + i] | ((b.qh[k] >> i) & 1) << 8];
        return grid_span(reinterpret_cast<const uint8_t*>(mag), ref::load_u32_le(b.signs + 4 * k),
                         static_cast<int16_t>(1 + 2 * ((b.scales[k / 2] >> (4 * (k % 2))) & 0x0F)));
    }
};

// IQ2_XS: span k = group k: four u16 of a 9-bit grid index and a 7-bit sign index (ksigns), the
// odd multipliers of its two halves; d / 8 the super-block's scale.
struct IQ2XS {
    static constexpr bool kMin = false;
    static constexpr int kBytes = sizeof(block_iq2_xs);
    const block_iq2_xs& b;
    explicit IQ2XS(const uint8_t* p) : b(*reinterpret_cast<const block_iq2_xs*>(p)) {}
    float d() const { return ref::fp16(b.d) * 0.125f; }
    Span span(int k) const {
        uint64_t mag[4];
        uint32_t signs = 0;
        for (int i = 0; i < 4; ++i) {
            const uint16_t q = b.qs[4 * k + i];
            mag[i] = iq2xs_grid[q & 511];
            signs |= static_cast<uint32_t>(ksigns_iq2xs[q >> 9]) << (8 * i);
        }
        return grid_span(reinterpret_cast<const uint8_t*>(mag), signs, odd_scale_iq2(b.scales, 2 * k),
                         odd_scale_iq2(b.scales, 2 * k + 1));
    }
};
// IQ2_S: span k = group k: grid points index_iq2_s(4 k + i), the sign bits of qs[32 + 4 k ..],
// scales as IQ2_XS's.
struct IQ2S {
    static constexpr bool kMin = false;
    static constexpr int kBytes = sizeof(block_iq2_s);
    const block_iq2_s& b;
    explicit IQ2S(const uint8_t* p) : b(*reinterpret_cast<const block_iq2_s*>(p)) {}
    float d() const { return ref::fp16(b.d) * 0.125f; }
    Span span(int k) const {
        uint64_t mag[4];
        for (int i = 0; i < 4; ++i) mag[i] = iq2s_grid[index_iq2_s(b, 4 * k + i)];
        return grid_span(reinterpret_cast<const uint8_t*>(mag), ref::load_u32_le(b.qs + QK_K / 8 + 4 * k),
                         odd_scale_iq2(b.scales, 2 * k), odd_scale_iq2(b.scales, 2 * k + 1));
    }
};
// The IQ1 formats: 16 values 8 g +- 1 (int16_ref.cpp) from two grid points (g = -1, 0, 1 as int8)
// and their shifts (+1 or -1 per byte), times c.
inline void iq1_half(uint64_t p0, uint64_t p1, int8x16_t shift, int c, int16x8_t* w) {
    const int8x16_t g = vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(p0), vcreate_u64(p1)));
    times16(vaddq_s8(vshlq_n_s8(g, 3), shift), c, w);
}
inline int8x16_t iq1_shifts(bool down0, bool down1) {
    return vcombine_s8(vdup_n_s8(down0 ? -1 : 1), vdup_n_s8(down1 ? -1 : 1));
}
// IQ1_S: span k = group k: grid points index_iq1_s(4 k + i), one shift sign and odd multiplier.
struct IQ1S {
    static constexpr bool kMin = false;
    static constexpr int kBytes = sizeof(block_iq1_s);
    const block_iq1_s& b;
    explicit IQ1S(const uint8_t* p) : b(*reinterpret_cast<const block_iq1_s*>(p)) {}
    float d() const { return ref::fp16(b.d) * 0.125f; }
    Span span(int k) const {
        const bool down = shift_down_iq1_s(b, k);
        const int c = odd_scale_iq1_s(b, k);
        Span v;
        for (int i = 0; i < 2; ++i)
            iq1_half(iq1s_grid[index_iq1_s(b, 4 * k + 2 * i)], iq1s_grid[index_iq1_s(b, 4 * k + 2 * i + 1)],
                     iq1_shifts(down, down), c, v.w + 2 * i);
        return v;
    }
};
// IQ1_M: span k = group k: grid points index_iq1_m(4 k + i) with a shift sign each, the odd
// multipliers of the two halves; d / 8 the super-block's scale.
struct IQ1M {
    static constexpr bool kMin = false;
    static constexpr int kBytes = sizeof(block_iq1_m);
    const block_iq1_m& b;
    explicit IQ1M(const uint8_t* p) : b(*reinterpret_cast<const block_iq1_m*>(p)) {}
    float d() const { return ref::fp16(d_iq1_m(b)) * 0.125f; }
    Span span(int k) const {
        Span v;
        for (int i = 0; i < 2; ++i) {
            const int p = 4 * k + 2 * i;
            iq1_half(iq1s_grid[index_iq1_m(b, p)], iq1s_grid[index_iq1_m(b, p + 1)],
                     iq1_shifts(nibble_iq1_m(b, p) & 8, nibble_iq1_m(b, p + 1) & 8), odd_scale_iq1_m(b, 2 * k + i), v.w + 2 * i);
        }
        return v;
    }
};
// TQ2_0: span k = 4 c + s: crumb s of qs[32 c + l], minus 1.
struct TQ20 {
    static constexpr bool kMin = false;
    static constexpr int kBytes = sizeof(block_tq2_0);
    const block_tq2_0& b;
    explicit TQ20(const uint8_t* p) : b(*reinterpret_cast<const block_tq2_0*>(p)) {}
    float d() const { return ref::fp16(b.d); }
    Span span(int k) const {
        Span v;
        for (int i = 0; i < 2; ++i)
            times16(vsubq_s8(vreinterpretq_s8_u8(k_crumbs(b.qs, k, i)), vdupq_n_s8(1)), 1, v.w + 2 * i);
        return v;
    }
};
// TQ1_0: 16 ternary digits from bytes x and each one's power of 3, m: (x m mod 256) 3 / 256 - 1
// (blocks.h: digit_tq1_0).
inline void tq1_digits(uint8x16_t x, uint8x16_t m, int16x8_t* w) {
    const uint8x16_t q = vmulq_u8(x, m);  // mod 256
    w[0] = vsubq_s16(vreinterpretq_s16_u16(vshrq_n_u16(vmull_u8(vget_low_u8(q), vdup_n_u8(3)), 8)), vdupq_n_s16(1));
    w[1] = vsubq_s16(vreinterpretq_s16_u16(vshrq_n_u16(vmull_high_u8(q, vdupq_n_u8(3)), 8)), vdupq_n_s16(1));
}
// TQ1_0: span k < 5: digit k of qs[0..31]; spans 5 and 6: digits 2 (k - 5) and 2 (k - 5) + 1 of
// qs[32..47]; span 7: digit 4 of qs[32..47], then digit l / 4 of qh[l % 4].
struct TQ10 {
    static constexpr bool kMin = false;
    static constexpr int kBytes = sizeof(block_tq1_0);
    const block_tq1_0& b;
    explicit TQ10(const uint8_t* p) : b(*reinterpret_cast<const block_tq1_0*>(p)) {}
    float d() const { return ref::fp16(b.d); }
    Span span(int k) const {
        Span v;
        if (k < 5) {
            tq1_digits(vld1q_u8(b.qs), vdupq_n_u8(kPow3Tq1[k]), v.w);
            tq1_digits(vld1q_u8(b.qs + 16), vdupq_n_u8(kPow3Tq1[k]), v.w + 2);
        } else if (k < 7) {
            tq1_digits(vld1q_u8(b.qs + 32), vdupq_n_u8(kPow3Tq1[2 * (k - 5)]), v.w);
            tq1_digits(vld1q_u8(b.qs + 32), vdupq_n_u8(kPow3Tq1[2 * (k - 5) + 1]), v.w + 2);
        } else {
            static constexpr uint8_t kQh[16] = {1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27};
            tq1_digits(vld1q_u8(b.qs + 32), vdupq_n_u8(kPow3Tq1[4]), v.w);
            tq1_digits(vreinterpretq_u8_u32(vdupq_n_u32(ref::load_u32_le(b.qh))), vld1q_u8(kQh), v.w + 2);
        }
        return v;
    }
};

// y[r * ldy] for R activation rows against one GGUF row of format F: the integer lane sums and the
// fma per group as the GEMM takes them, then for the formats with a minimum the super-block's
// eight sub-blocks' minima (as decode_row writes them) out of the same lanes.
template <class F, int R>
void rows(const void* w, int64_t n, const int16_t* a, const float* da, const float* xs, float* y, int64_t ldy) {
    const auto* p = static_cast<const uint8_t*>(w);
    const int64_t nb = n / QK_K, stride = n / kHalf;
    F8 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = zero8();
    for (int64_t bi = 0; bi < nb; ++bi) {
        const F f(p + bi * F::kBytes);
        Pos S[R];
        for (Pos& s : S) clear(s);
        for (int k = 0; k < 8; ++k) {
            const Span v = f.span(k);
            for (int r = 0; r < R; ++r) mac32(S[r], v, a + r * act_stride(n) + bi * QK_K + 32 * k);
        }
        const float d = f.d();
        for (int r = 0; r < R; ++r) {
            const float32x4_t scale = vdupq_n_f32(d * da[r * nb + bi]);
            fma_lanes(acc[r], S[r], scale, scale);
        }
        if constexpr (F::kMin)  // the minimum units kUnits bi .. kUnits (bi + 1) - 1, 8 at a time
            for (int i = 0; i < F::kUnits / 8; ++i) {
                const float32x4_t lo = vld1q_f32(f.mw + 8 * i), hi = vld1q_f32(f.mw + 8 * i + 4);
                for (int r = 0; r < R; ++r) {
                    const float* x = xs + r * stride + F::kUnits * bi + 8 * i;
                    acc[r].lo = vfmsq_f32(acc[r].lo, lo, vld1q_f32(x));
                    acc[r].hi = vfmsq_f32(acc[r].hi, hi, vld1q_f32(x + 4));
                }
            }
    }
    for (int r = 0; r < R; ++r) y[r * ldy] = hsum(acc[r]);
}

template <class F>
void rows_any(const void* w, int64_t n, const int16_t* a, const float* da, const float* xs, int nx, float* y,
              int64_t ldy) {
    using Fn = void (*)(const void*, int64_t, const int16_t*, const float*, const float*, float*, int64_t);
    static constexpr Fn fns[kDotRowsMax] = {&rows<F, 1>, &rows<F, 2>, &rows<F, 3>, &rows<F, 4>};
    fns[nx - 1](w, n, a, da, xs, y, ldy);
}

// A K-quant, IQ4_XS or grid-format row into the GEMM's int16 tile as decode_row writes it (each span's weights times its
// sub-block scale, d per super-block, the minimum units): the rows kernel's spans stored.
template <class F>
void decode_spans(const void* w, int64_t n, int16_t* q, float* sw, float* mw) {
    const auto* p = static_cast<const uint8_t*>(w);
    for (int64_t bi = 0; bi < n / QK_K; ++bi) {
        const F f(p + bi * F::kBytes);
        for (int k = 0; k < 8; ++k) {
            const Span v = f.span(k);
            for (int i = 0; i < 4; ++i) vst1q_s16(q + bi * QK_K + 32 * k + 8 * i, v.w[i]);
        }
        sw[bi] = f.d();
        if constexpr (F::kMin) std::copy(f.mw, f.mw + F::kUnits, mw + bi * F::kUnits);
    }
}

}  // namespace

void quantize_i16(const float* x, int64_t n, int group_spans, int range, int min_len, int16_t* a, float* da,
                  float* xs) {
    const int64_t len = int64_t{kSpan} * group_spans;
    for (int64_t g = 0; g < n / len; ++g) {
        const float* xg = x + g * len;
        float32x4_t amax = vdupq_n_f32(0.0f);
        uint32x4_t finite = vdupq_n_u32(~0u);
        for (int64_t e = 0; e < len; e += 4) {
            const float32x4_t v = vld1q_f32(xg + e);
            amax = vmaxq_f32(amax, vabsq_f32(v));
            // v - v is 0 exactly for finite v, NaN for an infinity or a NaN
            finite = vandq_u32(finite, vceqq_f32(vsubq_f32(v, v), vdupq_n_f32(0.0f)));
        }
        if (vminvq_u32(finite) == 0) {
            std::memset(a + g * len, 0, static_cast<size_t>(len) * sizeof(int16_t));
            da[g] = NAN;
            fill_unit_sums(xs, g * len, (g + 1) * len, min_len, da[g]);
            continue;
        }
        const float mx = vmaxvq_f32(amax);
        const float d = mx / static_cast<float>(range);
        da[g] = d;
        const float32x4_t id = vdupq_n_f32(mx > 0.0f ? static_cast<float>(range) / mx : 0.0f);
        for (int64_t e0 = g * len; e0 < (g + 1) * len; e0 += kSpan) {
            int32_t sums[2];
            for (int h = 0; h < 2; ++h) {
                const float* xp = x + e0 + kHalf * h;
                int16_t* ap = a + e0 + kHalf * h;
                int32x4_t i[4];
                for (int k = 0; k < 4; ++k) i[k] = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(xp + 4 * k), id));  // to nearest even
                const int16x8_t p0 = vcombine_s16(vqmovn_s32(i[0]), vqmovn_s32(i[1]));
                const int16x8_t p1 = vcombine_s16(vqmovn_s32(i[2]), vqmovn_s32(i[3]));
                vst1q_s16(ap, p0);
                vst1q_s16(ap + 8, p1);
                // the sum of the stored (saturated) values, as the reference takes it
                sums[h] = vaddvq_s32(vaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1)));
            }
            store_unit_sums(xs, e0, min_len, d, sums[0], sums[1]);
        }
    }
}

void gemm_i16(const int16_t* q, const float* sw, const float* mw, int min_len, int group_spans, int nw,
              const int16_t* a, const float* da, const float* xs, int nx, int64_t n, float* y, int64_t ldy) {
    using TileFn = void (*)(const int16_t*, const float*, const float*, int, int, const int16_t*, const float*,
                            const float*, int64_t, float*, int64_t);
    static constexpr TileFn tiles[kX] = {&tile<1>, &tile<2>, &tile<3>, &tile<4>};
    const int64_t groups = n / (int64_t{kSpan} * group_spans), ms = n / kHalf;
    const int units = min_len ? kSpan * group_spans / min_len : 0;
    for (int r = 0; r < nx; r += kX) {
        const int xr = nx - r < kX ? nx - r : kX;
        for (int o = 0; o < nw; ++o) {
            tiles[xr - 1](q + o * n, sw + o * groups, mw + o * ms, group_spans, units, a + r * act_stride(n),
                          da + r * groups, xs + r * ms, n, y + r * ldy + o, ldy);
        }
    }
}

void gemm_i16_blocks(const int16_t* q, const float* sw, const float* mw, int min_len, int, int nw, const int16_t* a,
                     const float* da, const float* xs, int nx, int64_t n, float* y, int64_t ldy) {
    const int64_t nb = n / kSpan, halves = n / kHalf;
    for (int r = 0; r < nx; r += kBlockRowsMax) {
        const int m = nx - r < kBlockRowsMax ? nx - r : kBlockRowsMax;
        const int16_t* ar = a + r * act_stride(n);
        for (int o = 0; o < nw; ++o) {
            float* yo = y + r * ldy + o;
            if (min_len) {  // Q4_1, Q5_1: per half
                block_rows_any(Decoded<true>{q + o * n, sw + o * nb, mw + o * halves}, n, ar, da + r * nb, xs + r * halves, m, yo, ldy);
            } else {
                block_rows_any(Decoded<false>{q + o * n, sw + o * nb, mw}, n, ar, da + r * nb, xs, m, yo, ldy);
            }
        }
    }
}

namespace {

// Fn<F>::get() for the decoder F of `type`: the 256-element formats' span decoders
// (super_blocks), the block-lane formats' GGUF rows (gguf_blocks) and packed rows (packed_blocks).
template <template <class> class Fn, class R>
R super_blocks(Type type) {
    switch (type) {
        case Type::Q2_K: return Fn<Q2K>::get();
        case Type::Q3_K: return Fn<Q3K>::get();
        case Type::Q4_K: return Fn<Q45K<block_q4_K>>::get();
        case Type::Q5_K: return Fn<Q45K<block_q5_K>>::get();
        case Type::Q6_K: return Fn<Q6K>::get();
        case Type::IQ4_XS: return Fn<IQ4XS>::get();
        case Type::IQ2_XXS: return Fn<IQ2XXS>::get();
        case Type::IQ2_XS: return Fn<IQ2XS>::get();
        case Type::IQ2_S: return Fn<IQ2S>::get();
        case Type::IQ1_S: return Fn<IQ1S>::get();
        case Type::IQ1_M: return Fn<IQ1M>::get();
        case Type::TQ1_0: return Fn<TQ10>::get();
        case Type::TQ2_0: return Fn<TQ20>::get();
        case Type::IQ3_XXS: return Fn<IQ3XXS>::get();
        case Type::IQ3_S: return Fn<IQ3S>::get();
        default: return nullptr;
    }
}
template <template <class> class Fn, class R>
R gguf_blocks(Type type) {
    switch (type) {
        case Type::Q4_0: return Fn<GgufRow<block_q4_0>>::get();
        case Type::Q4_1: return Fn<GgufRow<block_q4_1>>::get();
        case Type::Q5_0: return Fn<GgufRow<block_q5_0>>::get();
        case Type::Q5_1: return Fn<GgufRow<block_q5_1>>::get();
        case Type::Q8_0: return Fn<GgufRow<block_q8_0>>::get();
        case Type::IQ4_NL: return Fn<GgufRow<block_iq4_nl>>::get();
        case Type::MXFP4: return Fn<GgufRow<block_mxfp4>>::get();
        default: return nullptr;
    }
}
template <template <class> class Fn, class R>
R packed_blocks(Type type) {
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
template <class F>
struct RowsOf {
    static RowsI16Fn get() { return &rows_any<F>; }
};
template <class F>
struct DecodeOf {
    static DecodeI16Fn get() { return &decode_spans<F>; }
};
template <class W>
struct GgufRowsOf {
    static RowsI16Fn get() { return &rows_gguf_blocks<W>; }
};
template <class W>
struct PackedRowsOf {
    static RowsPackedFn get() { return &rows_packed_blocks<W>; }
};
template <class W>
struct BlocksDecodeOf {
    static DecodeI16Fn get() { return &decode_blocks<W>; }
};

}  // namespace

RowsI16Fn rows_i16(Type type) { return super_blocks<RowsOf, RowsI16Fn>(type); }
DecodeI16Fn decode_i16(Type type) { return super_blocks<DecodeOf, DecodeI16Fn>(type); }
RowsI16Fn rows_gguf(Type type) { return gguf_blocks<GgufRowsOf, RowsI16Fn>(type); }
DecodeI16Fn decode_gguf(Type type) { return gguf_blocks<BlocksDecodeOf, DecodeI16Fn>(type); }
RowsPackedFn rows_packed(Type type) { return packed_blocks<PackedRowsOf, RowsPackedFn>(type); }
DecodeI16Fn decode_packed(Type type) { return packed_blocks<BlocksDecodeOf, DecodeI16Fn>(type); }

}  // namespace ds4::quant::neon
