// NEON kernels of the int16 path (int16_gemm.h): the activation quantiser, the GEMMs over decoded
// rows (natural order and block lanes), the few-rows kernels of the natural-order formats from
// their GGUF blocks and of Q8_0 / Q5_0 from their packed rows (packed.h). Every result is the
// scalar reference's bit for bit, as on x86, so decode, verify blocks and prefill agree on ARM too.
//
// NEON has no vpmaddwd: a span's 32 products go into four int32x4 accumulators by position within
// a half (vmlal_s16 / vmlal_high_s16, 4 multiply-adds each), and at the end of a group one
// pairwise add per four lanes (vpaddq_s32) gives the reference's eight lane sums (lane j: the
// positions 2j and 2j + 1 of both halves; integer sums, exact in any order). The float side is
// the reference's: one conversion and fma per group and lane, the same tree, the same minimum
// terms. The block-lane order (block_lanes.h) puts block j's pairs at positions 2j, 2j + 1 of
// each 16-lane vector, so the same accumulators leave each block's sum in its own lane.
#include <arm_neon.h>

#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/int16_gemm.h"
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
inline int32_t total(const Pos& s) {
    return vaddvq_s32(vaddq_s32(vaddq_s32(s.p[0], s.p[1]), vaddq_s32(s.p[2], s.p[3])));
}

inline float f16_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return ref::fp16(h);
}
// Four f16 at p as floats (exact conversions).
inline float32x4_t f16x4_at(const uint8_t* p) { return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p))); }

// ---- the GEMMs over decoded rows ---------------------------------------------------------------

// One weight row x X activation rows over every group of G spans.
template <int X>
void tile(const int16_t* q, const float* sw, int group_spans, const int16_t* a, const float* da, int64_t n, float* y,
          int64_t ldy) {
    const int64_t groups = n / (kSpan * group_spans);
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
    }
    for (int r = 0; r < X; ++r) y[r * ldy] = hsum(acc[r]);
}

// y -= the minimum terms of one weight row and one activation row: c_j = fma(mw_h, xs_h, c_j)
// over the halves h = 8 i + j in order, then hsum(c).
inline float min_term(const float* mw, const float* xs, int64_t halves) {
    F8 c = zero8();
    int64_t h = 0;
    for (; h + 8 <= halves; h += 8) {
        c.lo = vfmaq_f32(c.lo, vld1q_f32(mw + h), vld1q_f32(xs + h));
        c.hi = vfmaq_f32(c.hi, vld1q_f32(mw + h + 4), vld1q_f32(xs + h + 4));
    }
    float cl[8];
    vst1q_f32(cl, c.lo);
    vst1q_f32(cl + 4, c.hi);
    for (int64_t j = 0; h < halves; ++h, ++j) cl[j] = std::fma(mw[h], xs[h], cl[j]);
    return hsum({vld1q_f32(cl), vld1q_f32(cl + 4)});
}

constexpr int kX = 4;  // activation rows per tile: 16 integer and 8 float accumulators

// ---- the block-lane order (Q8_0, Q5_0) -----------------------------------------------------------
//
// A weight source gives, per chunk of 8 blocks from block b0, its 16 vectors (each as the int16
// lanes 0..7 and 8..15: blocks 0..3 and 4..7) to fn(v, lo, hi) and its 8 scales; the same for a
// last chunk of 4 (8 vectors, 4 scales); and for a block left in natural order its two halves
// (16 elements each) and its scale.

// Rows as decode_row / decode_packed_row leave them.
struct Decoded {
    const int16_t* q;
    const float* sw;
    template <class Fn>
    void chunk(int64_t b0, int vectors, Fn&& fn) const {
        for (int v = 0; v < vectors; ++v) fn(v, vld1q_s16(q + 32 * b0 + 16 * v), vld1q_s16(q + 32 * b0 + 16 * v + 8));
    }
    F8 scales(int64_t b0) const { return {vld1q_f32(sw + b0), vld1q_f32(sw + b0 + 4)}; }
    float32x4_t scales4(int64_t b0) const { return vld1q_f32(sw + b0); }
    Span block(int64_t b) const {
        const int16_t* p = q + 32 * b;
        return {{vld1q_s16(p), vld1q_s16(p + 8), vld1q_s16(p + 16), vld1q_s16(p + 24)}};
    }
    float scale(int64_t b) const { return sw[b]; }
};

// Packed rows: a chunk from block b0 starts at byte kBlock b0 with its f16 scales; a block left in
// natural order is the GGUF block there.
template <int kBlock>
struct PackedRow {
    const uint8_t* p;
    const uint8_t* at(int64_t b0) const { return p + kBlock * b0; }
    F8 scales(int64_t b0) const { return {f16x4_at(at(b0)), f16x4_at(at(b0) + 8)}; }
    float32x4_t scales4(int64_t b0) const { return f16x4_at(at(b0)); }
    float scale(int64_t b) const { return f16_at(at(b)); }
};

struct PackedQ8 : PackedRow<34> {
    template <class Fn>
    void chunk(int64_t b0, int vectors, Fn&& fn) const {
        const uint8_t* w = at(b0) + (vectors == 16 ? 16 : 8);
        for (int v = 0; v < vectors; ++v) {
            const int8x16_t x = vld1q_s8(reinterpret_cast<const int8_t*>(w + 16 * v));
            fn(v, vmovl_s8(vget_low_s8(x)), vmovl_high_s8(x));
        }
    }
    Span block(int64_t b) const {
        const int8x16_t x0 = vld1q_s8(reinterpret_cast<const int8_t*>(at(b) + 2));
        const int8x16_t x1 = vld1q_s8(reinterpret_cast<const int8_t*>(at(b) + 18));
        return {{vmovl_s8(vget_low_s8(x0)), vmovl_high_s8(x0), vmovl_s8(vget_low_s8(x1)), vmovl_high_s8(x1)}};
    }
};

// Q5_0 words: 16 uint16 lanes as two int16x8.
struct Word {
    int16x8_t lo, hi;
};
inline Word load_word(const uint8_t* w, int k) {
    return {vreinterpretq_s16_u8(vld1q_u8(w + 32 * k)), vreinterpretq_s16_u8(vld1q_u8(w + 32 * k + 16))};
}
// The 5-bit field at bit Lo of each lane, sign-extended.
template <int Lo>
inline int16x8_t field5(int16x8_t x) {
    return vshrq_n_s16(vshlq_n_s16(x, 11 - Lo), 11);
}
// Bit 15 of each lane moved to bit K, the others clear.
template <int K>
inline int16x8_t top_bit(int16x8_t x) {
    return vandq_s16(vreinterpretq_s16_u16(vshrq_n_u16(vreinterpretq_u16_s16(x), 15 - K)), vdupq_n_s16(1 << K));
}
inline int16x8_t sign_of(int16x8_t x) { return vandq_s16(vshrq_n_s16(x, 15), vdupq_n_s16(-16)); }

struct PackedQ5 : PackedRow<22> {
    template <class Fn>
    static void words(const uint8_t* w, int n, Fn& fn) {
        for (int k = 0; k < n; ++k) {
            const Word x = load_word(w, k);
            fn(3 * k, field5<0>(x.lo), field5<0>(x.hi));
            fn(3 * k + 1, field5<5>(x.lo), field5<5>(x.hi));
            fn(3 * k + 2, field5<10>(x.lo), field5<10>(x.hi));
        }
    }
    template <class Fn>
    void chunk(int64_t b0, int vectors, Fn&& fn) const {
        if (vectors == 16) {
            const uint8_t* w = at(b0) + 16;
            words(w, 5, fn);
            // vector 15: bit k of the value in bit 15 of word k; bit 4 is the sign
            const Word w0 = load_word(w, 0), w1 = load_word(w, 1), w2 = load_word(w, 2), w3 = load_word(w, 3),
                       w4 = load_word(w, 4);
            const auto last = [](int16x8_t a, int16x8_t b, int16x8_t c, int16x8_t d, int16x8_t e) {
                return vorrq_s16(vorrq_s16(sign_of(e), top_bit<0>(a)),
                                 vorrq_s16(top_bit<1>(b), vorrq_s16(top_bit<2>(c), top_bit<3>(d))));
            };
            fn(15, last(w0.lo, w1.lo, w2.lo, w3.lo, w4.lo), last(w0.hi, w1.hi, w2.hi, w3.hi, w4.hi));
            return;
        }
        const uint8_t* w = at(b0) + 8;
        words(w, 2, fn);
        // vectors 6 and 7: the nibbles of 16 bytes, bit 4 (the sign) in bit 15 of words 0 and 1
        const uint8x16_t nib = vld1q_u8(w + 64);
        const uint8x16_t n6 = vandq_u8(nib, vdupq_n_u8(0x0F)), n7 = vshrq_n_u8(nib, 4);
        const Word w0 = load_word(w, 0), w1 = load_word(w, 1);
        const auto widen = [](uint8x8_t x) { return vreinterpretq_s16_u16(vmovl_u8(x)); };
        fn(6, vorrq_s16(widen(vget_low_u8(n6)), sign_of(w0.lo)), vorrq_s16(widen(vget_high_u8(n6)), sign_of(w0.hi)));
        fn(7, vorrq_s16(widen(vget_low_u8(n7)), sign_of(w1.lo)), vorrq_s16(widen(vget_high_u8(n7)), sign_of(w1.hi)));
    }
    Span block(int64_t b) const {  // a GGUF Q5_0 block: q - 16
        const auto& blk = *reinterpret_cast<const block_q5_0*>(at(b));
        alignas(16) int16_t q[32];
        const uint32_t qh = ref::load_u32_le(blk.qh);
        for (int l = 0; l < 16; ++l) {
            q[l] = static_cast<int16_t>(((blk.qs[l] & 0x0F) | ((qh >> l) & 1) << 4) - 16);
            q[l + 16] = static_cast<int16_t>(((blk.qs[l] >> 4) | ((qh >> (l + 16)) & 1) << 4) - 16);
        }
        return {{vld1q_s16(q), vld1q_s16(q + 8), vld1q_s16(q + 16), vld1q_s16(q + 24)}};
    }
};

// y[r * ldy] for R activation rows (a, da: rows of n and of n / 32).
template <int R, class W>
void block_rows(const W& w, int64_t n, const int16_t* a, const float* da, float* y, int64_t ldy) {
    const BlockLanes bl(n);
    F8 acc[R];
    for (F8& v : acc) v = zero8();
    Pos S[R];
    const auto mac = [&S, n](const int16_t* ac) {
        return [&S, ac, n](int v, int16x8_t lo, int16x8_t hi) {
            for (int r = 0; r < R; ++r) mac16(S[r], lo, hi, ac + r * act_stride(n) + 16 * v);
        };
    };
    for (int64_t b0 = 0; b0 < bl.full; b0 += BlockLanes::kChunk) {
        for (Pos& s : S) clear(s);
        w.chunk(b0, 16, mac(a + 32 * b0));
        const F8 d = w.scales(b0);
        for (int r = 0; r < R; ++r) {
            const float* dr = da + r * bl.nb + b0;
            fma_lanes(acc[r], S[r], vmulq_f32(d.lo, vld1q_f32(dr)), vmulq_f32(d.hi, vld1q_f32(dr + 4)));
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
    } else if (bl.tail > 0) {  // natural order: a block's products summed exactly, one fma per block;
        // the blocks decoded once for all activation rows
        Span q[BlockLanes::kChunk - 1];
        float sw[BlockLanes::kChunk - 1];
        for (int64_t b = bl.full; b < bl.nb; ++b) q[b - bl.full] = w.block(b), sw[b - bl.full] = w.scale(b);
        for (int r = 0; r < R; ++r) {
            float lanes[8];
            vst1q_f32(lanes, acc[r].lo);
            vst1q_f32(lanes + 4, acc[r].hi);
            for (int64_t b = bl.full; b < bl.nb; ++b) {
                Pos s;
                clear(s);
                mac32(s, q[b - bl.full], a + r * act_stride(n) + 32 * b);
                lanes[b % 8] = std::fma(static_cast<float>(total(s)), sw[b - bl.full] * da[r * bl.nb + b], lanes[b % 8]);
            }
            acc[r] = {vld1q_f32(lanes), vld1q_f32(lanes + 4)};
        }
    }
    for (int r = 0; r < R; ++r) y[r * ldy] = hsum(acc[r]);
}

template <class W>
void block_rows_any(const W& w, int64_t n, const int16_t* a, const float* da, int nx, float* y, int64_t ldy) {
    using Fn = void (*)(const W&, int64_t, const int16_t*, const float*, float*, int64_t);
    static constexpr Fn fns[kBlockRowsMax] = {&block_rows<1, W>, &block_rows<2, W>, &block_rows<3, W>,
                                              &block_rows<4, W>};
    fns[nx - 1](w, n, a, da, y, ldy);
}

template <class W>
void rows_packed_blocks(const void* row, int64_t n, const int16_t* a, const float* da, const float*, int nx, float* y,
                        int64_t ldy) {
    block_rows_any(W{{static_cast<const uint8_t*>(row)}}, n, a, da, nx, y, ldy);
}

// ---- the natural-order formats, decoded from their GGUF blocks ---------------------------------

inline int16x8_t u8_lo(uint8x16_t x) { return vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(x))); }
inline int16x8_t u8_hi(uint8x16_t x) { return vreinterpretq_s16_u16(vmovl_high_u8(x)); }

// The 32-element legacy formats: byte j of qs holds element j (low nibble) and j + 16 (high).
template <class Blk, bool kFifth, bool kHasMin>
struct Legacy {
    static constexpr bool kSuper = false;
    static constexpr bool kMin = kHasMin;
    static constexpr int kBytes = sizeof(Blk);
    const Blk& b;
    explicit Legacy(const uint8_t* p) : b(*reinterpret_cast<const Blk*>(p)) {}
    float d() const { return ref::fp16(b.d); }
    float mw() const {
        if constexpr (kHasMin) return -ref::fp16(b.m);
        return 0.0f;
    }
    Span span() const {
        static_assert(!kFifth || kHasMin, "Q5_0 takes the block lanes");
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
        } else if constexpr (!kHasMin) {
            for (int16x8_t& w : v.w) w = vsubq_s16(w, vdupq_n_s16(8));
        }
        return v;
    }
};

// Q4_K: element 32 j + l is nibble j % 2 of qs[32 (j / 2) + l] times the 6-bit scale of j.
struct Q4K {
    static constexpr bool kSuper = true;
    static constexpr bool kMin = true;
    static constexpr int kBytes = sizeof(block_q4_K);
    const block_q4_K& b;
    int sc[8];
    float mw[8];  // dmin * m per sub-block of 32 (both its halves)
    explicit Q4K(const uint8_t* p) : b(*reinterpret_cast<const block_q4_K*>(p)) {
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
            const uint8x16_t q = k % 2 ? vshrq_n_u8(x, 4) : vandq_u8(x, vdupq_n_u8(0x0F));
            v.w[2 * i] = vmulq_n_s16(u8_lo(q), static_cast<int16_t>(sc[k]));
            v.w[2 * i + 1] = vmulq_n_s16(u8_hi(q), static_cast<int16_t>(sc[k]));
        }
        return v;
    }
};

// Q6_K: in half h, element 32 g + l takes nibble g / 2 of ql[64 h + 32 (g % 2) + l] and bits 2 g
// of qh[32 h + l]; value q - 32, times scales[(32 g + l) / 16 + 8 h].
struct Q6K {
    static constexpr bool kSuper = true;
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

// y[r * ldy] for R activation rows against one GGUF row of format F: the integer lane sums and the
// fma per group as the GEMM takes them; for the formats with a minimum, the blocks' minimum per
// half (as decode_row writes it) gathered eight at a time into their own accumulators, in the
// reference's order (half h into lane h % 8).
template <class F, int R>
void rows(const void* w, int64_t n, const int16_t* a, const float* da, const float* xs, float* y, int64_t ldy) {
    const auto* p = static_cast<const uint8_t*>(w);
    constexpr int64_t kB = F::kSuper ? QK_K : kSpan;
    const int64_t nb = n / kB, halves = n / kHalf;
    F8 acc[R], c[R];
    for (int r = 0; r < R; ++r) acc[r] = c[r] = zero8();
    float mw[8];   // minimums of the halves h0 .. h0 + fill - 1
    int64_t h0 = 0;
    int fill = 0;
    const auto push = [&](float m) {
        mw[fill++] = m;
        if (fill < 8) return;
        const float32x4_t m0 = vld1q_f32(mw), m1 = vld1q_f32(mw + 4);
        for (int r = 0; r < R; ++r) {
            c[r].lo = vfmaq_f32(c[r].lo, m0, vld1q_f32(xs + r * halves + h0));
            c[r].hi = vfmaq_f32(c[r].hi, m1, vld1q_f32(xs + r * halves + h0 + 4));
        }
        h0 += 8;
        fill = 0;
    };
    for (int64_t bi = 0; bi < nb; ++bi) {
        const F f(p + bi * F::kBytes);
        Pos S[R];
        for (Pos& s : S) clear(s);
        if constexpr (F::kSuper) {
            for (int k = 0; k < 8; ++k) {
                const Span v = f.span(k);
                for (int r = 0; r < R; ++r) mac32(S[r], v, a + r * act_stride(n) + bi * kB + 32 * k);
            }
        } else {
            const Span v = f.span();
            for (int r = 0; r < R; ++r) mac32(S[r], v, a + r * act_stride(n) + bi * kB);
        }
        const float d = f.d();
        for (int r = 0; r < R; ++r) {
            const float32x4_t scale = vdupq_n_f32(d * da[r * nb + bi]);
            fma_lanes(acc[r], S[r], scale, scale);
        }
        if constexpr (F::kMin && F::kSuper) {
            for (int j = 0; j < 16; ++j) push(f.mw[j / 2]);
        } else if constexpr (F::kMin) {
            push(f.mw());
            push(f.mw());
        }
    }
    for (int r = 0; r < R; ++r) {
        y[r * ldy] = hsum(acc[r]);
        if constexpr (F::kMin) {
            float cl[8];
            vst1q_f32(cl, c[r].lo);
            vst1q_f32(cl + 4, c[r].hi);
            for (int j = 0; j < fill; ++j) cl[j] = std::fma(mw[j], xs[r * halves + h0 + j], cl[j]);
            y[r * ldy] -= hsum({vld1q_f32(cl), vld1q_f32(cl + 4)});
        }
    }
}

template <class F>
void rows_any(const void* w, int64_t n, const int16_t* a, const float* da, const float* xs, int nx, float* y,
              int64_t ldy) {
    using Fn = void (*)(const void*, int64_t, const int16_t*, const float*, const float*, float*, int64_t);
    static constexpr Fn fns[kDotRowsMax] = {&rows<F, 1>, &rows<F, 2>, &rows<F, 3>, &rows<F, 4>};
    fns[nx - 1](w, n, a, da, xs, y, ldy);
}

}  // namespace

void quantize_i16(const float* x, int64_t n, int group_spans, int range, int16_t* a, float* da, float* xs) {
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
            for (int64_t h = g * len / kHalf; h < (g + 1) * len / kHalf; ++h) xs[h] = da[g];
            continue;
        }
        const float mx = vmaxvq_f32(amax);
        const float d = mx / static_cast<float>(range);
        da[g] = d;
        const float32x4_t id = vdupq_n_f32(mx > 0.0f ? static_cast<float>(range) / mx : 0.0f);
        for (int64_t e0 = g * len; e0 < (g + 1) * len; e0 += kSpan) {
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
                const int32_t sum = vaddvq_s32(vaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1)));
                xs[(e0 + kHalf * h) / kHalf] = d * static_cast<float>(sum);
            }
        }
    }
}

void gemm_i16(const int16_t* q, const float* sw, const float* mw, bool has_min, int group_spans, int nw,
              const int16_t* a, const float* da, const float* xs, int nx, int64_t n, float* y, int64_t ldy) {
    using TileFn = void (*)(const int16_t*, const float*, int, const int16_t*, const float*, int64_t, float*, int64_t);
    static constexpr TileFn tiles[kX] = {&tile<1>, &tile<2>, &tile<3>, &tile<4>};
    const int64_t groups = n / (int64_t{kSpan} * group_spans), halves = n / kHalf;
    for (int r = 0; r < nx; r += kX) {
        const int xr = nx - r < kX ? nx - r : kX;
        for (int o = 0; o < nw; ++o) {
            tiles[xr - 1](q + o * n, sw + o * groups, group_spans, a + r * act_stride(n), da + r * groups, n, y + r * ldy + o, ldy);
        }
    }
    if (!has_min) return;
    for (int r = 0; r < nx; ++r)
        for (int o = 0; o < nw; ++o) y[r * ldy + o] -= min_term(mw + o * halves, xs + r * halves, halves);
}

void gemm_i16_blocks(const int16_t* q, const float* sw, const float*, bool, int, int nw, const int16_t* a,
                     const float* da, const float*, int nx, int64_t n, float* y, int64_t ldy) {
    const int64_t nb = n / kSpan;
    for (int r = 0; r < nx; r += kBlockRowsMax) {
        const int m = nx - r < kBlockRowsMax ? nx - r : kBlockRowsMax;
        for (int o = 0; o < nw; ++o) block_rows_any(Decoded{q + o * n, sw + o * nb}, n, a + r * act_stride(n), da + r * nb, m, y + r * ldy + o, ldy);
    }
}

RowsI16Fn rows_i16(Type type) {
    switch (type) {
        case Type::Q4_0: return &rows_any<Legacy<block_q4_0, false, false>>;
        case Type::Q4_1: return &rows_any<Legacy<block_q4_1, false, true>>;
        case Type::Q5_1: return &rows_any<Legacy<block_q5_1, true, true>>;
        case Type::Q4_K: return &rows_any<Q4K>;
        case Type::Q6_K: return &rows_any<Q6K>;
        default: return nullptr;
    }
}

RowsPackedFn rows_packed(Type type) {
    switch (type) {
        case Type::Q8_0: return &rows_packed_blocks<PackedQ8>;
        case Type::Q5_0: return &rows_packed_blocks<PackedQ5>;
        default: return nullptr;
    }
}

}  // namespace ds4::quant::neon
