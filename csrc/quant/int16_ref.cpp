// The int16 prefill path (int16_gemm.h): per-format integer decoders, the scalar reference of the
// activation quantiser and of the GEMM (the lane arithmetic every SIMD kernel reproduces), and the
// dispatch table.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "quant/blocks.h"
#include "quant/int16_gemm.h"
#include "quant/iq_tables.h"
#include "quant/kernels_ref.h"
#include "quant/packed.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace ds4::quant {

namespace {

// ---- weights: one block -> q, scale and minimum per half ---------------------------------------
//
// Each decoder writes the block's integers t[0..B) in natural order (simple loops over the
// packed fields, which the compiler vectorises), its one group scale sw[0] and, for the formats
// with a minimum, mw[0..B/L) (L = kMinLen, int16_gemm.h) such that the reference weight
// (kernels_ref / ggml) is sw * t - mw exactly as a real number: the K-quants fold their small
// integer sub-block scales into t (d * sc * q = d * (sc * q)). kRange:
// the activation range R (int16_gemm.h) that keeps a group's lane sums (32 products of |t| R for
// a 256-element group) below 2^31.

void legacy_nibbles(const uint8_t* qs, int16_t* t) {
    for (int j = 0; j < 16; ++j) {
        t[j] = static_cast<int16_t>(qs[j] & 0x0F);
        t[j + 16] = static_cast<int16_t>(qs[j] >> 4);
    }
}
void legacy_fifth_bits(const uint8_t* qh, int16_t* t) {
    const uint32_t h = ref::load_u32_le(qh);
    for (int e = 0; e < 32; ++e) t[e] = static_cast<int16_t>(t[e] | ((h >> e) & 1) << 4);
}
void add_all(int16_t* t, int n, int c) {
    for (int e = 0; e < n; ++e) t[e] = static_cast<int16_t>(t[e] + c);
}
void scale_all(int16_t* t, int n, int c) {
    for (int e = 0; e < n; ++e) t[e] = static_cast<int16_t>(t[e] * c);
}

// What the 32-element formats of the block lanes share (|q| <= 128).
struct Lanes32 {
    static constexpr int B = 32;
    static constexpr int kMinLen = 0;
    static constexpr bool kBlockLanes = true;
    static constexpr int kRange = 32767;
};
// The 32-element legacy formats: nibbles, a fifth bit for Q5_*, and either an offset (-8 / -16,
// the _0 formats) or the block's minimum (w = d q + m, the _1 formats).
template <class Blk, bool kFifth, bool kHasMin>
struct Legacy : Lanes32 {
    using Block = Blk;
    static constexpr int kMinLen = kHasMin ? kHalf : 0;  // halves: the block-lane kernels' unit
    static void block(const uint8_t* p, int16_t* t, float* sw, float* mw) {
        const auto& b = *reinterpret_cast<const Block*>(p);
        legacy_nibbles(b.qs, t);
        if constexpr (kFifth) legacy_fifth_bits(b.qh, t);
        sw[0] = ref::fp16(b.d);
        if constexpr (kHasMin) {
            mw[0] = mw[1] = -ref::fp16(b.m);
        } else {
            add_all(t, B, kFifth ? -16 : -8);
        }
    }
};
using Q4_0 = Legacy<block_q4_0, false, false>;
using Q4_1 = Legacy<block_q4_1, false, true>;
using Q5_0 = Legacy<block_q5_0, true, false>;
using Q5_1 = Legacy<block_q5_1, true, true>;
struct Q8_0 : Lanes32 {
    using Block = block_q8_0;
    static void block(const uint8_t* p, int16_t* t, float* sw, float*) {
        const auto& b = *reinterpret_cast<const Block*>(p);
        for (int e = 0; e < B; ++e) t[e] = b.qs[e];
        sw[0] = ref::fp16(b.d);
    }
};
// IQ4_NL / MXFP4 (iq_tables.h: CodeBook): the legacy nibbles mapped through the code book.
template <class Blk>
struct Book : Lanes32 {
    using Block = Blk;
    static void block(const uint8_t* p, int16_t* t, float* sw, float*) {
        const auto& b = *reinterpret_cast<const Block*>(p);
        legacy_nibbles(b.qs, t);
        for (int e = 0; e < B; ++e) t[e] = CodeBook<Blk>::values()[t[e]];
        if constexpr (CodeBook<Blk>::kE8M0) {
            sw[0] = ref::e8m0_to_fp32_half(b.e);
        } else {
            sw[0] = ref::fp16(b.d);
        }
    }
};
// Q2_K / Q3_K: element 128 h + 32 s + l takes bits 2 s.. of qs[32 h + l].
void k_crumbs(const uint8_t* qs, int16_t* t) {
    for (int h = 0; h < 2; ++h)
        for (int s = 0; s < 4; ++s)
            for (int l = 0; l < 32; ++l) t[128 * h + 32 * s + l] = static_cast<int16_t>((qs[32 * h + l] >> (2 * s)) & 3);
}
struct Q2K {
    using Block = block_q2_K;
    static constexpr int B = QK_K;
    static constexpr int kMinLen = kHalf;
    static constexpr int kRange = 32767;
    static void block(const uint8_t* p, int16_t* t, float* sw, float* mw) {
        const auto& b = *reinterpret_cast<const Block*>(p);
        const float d = ref::fp16(b.d), dmin = ref::fp16(b.dmin);
        k_crumbs(b.qs, t);
        for (int h = 0; h < B / kHalf; ++h) {
            scale_all(t + kHalf * h, kHalf, b.scales[h] & 0x0F);
            mw[h] = dmin * static_cast<float>(b.scales[h] >> 4);
        }
        sw[0] = d;
    }
};
struct Q3K {
    using Block = block_q3_K;
    static constexpr int B = QK_K;
    static constexpr int kMinLen = 0;
    static constexpr int kRange = 32767;
    static void block(const uint8_t* p, int16_t* t, float* sw, float*) {
        const auto& b = *reinterpret_cast<const Block*>(p);
        const float d = ref::fp16(b.d);
        k_crumbs(b.qs, t);
        for (int g = 0; g < 8; ++g)  // a clear high bit (bit g of hmask[l]) subtracts 4
            for (int l = 0; l < 32; ++l) t[32 * g + l] = static_cast<int16_t>(t[32 * g + l] - 4 * (1 - ((b.hmask[l] >> g) & 1)));
        for (int k = 0; k < B / kHalf; ++k) scale_all(t + kHalf * k, kHalf, scale_q3_k(b.scales, k));
        sw[0] = d;
    }
};
// IQ4_XS: sub-block j (elements 32 j + l) takes the code book's value at nibble l / 16 of
// qs[16 j + l % 16], times its 6-bit scale minus 32 (low nibble from scales_l, two high bits
// from scales_h).
struct IQ4XS {
    using Block = block_iq4_xs;
    static constexpr int B = QK_K;
    static constexpr int kMinLen = 0;
    static constexpr int kRange = 16383;  // |t| <= 32 * 127: 32 * 4064 * 16383 < 2^31
    static void block(const uint8_t* p, int16_t* t, float* sw, float*) {
        const auto& b = *reinterpret_cast<const Block*>(p);
        for (int j = 0; j < B / 32; ++j) {
            const int ls = scale_iq4_xs(b, j);
            for (int l = 0; l < 16; ++l) {
                t[32 * j + l] = static_cast<int16_t>(ls * kvalues_iq4nl[b.qs[16 * j + l] & 0x0F]);
                t[32 * j + 16 + l] = static_cast<int16_t>(ls * kvalues_iq4nl[b.qs[16 * j + l] >> 4]);
            }
        }
        sw[0] = ref::fp16(b.d);
    }
};
// The grid formats (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S): 256-element blocks in groups of 32
// (or 8), element l of a group c x magnitude(l), negated where minus(l), with one float scale per block.
struct Grid256 {
    static constexpr int B = QK_K;
    static constexpr int kMinLen = 0;
    static constexpr int kRange = 32767;
    static constexpr bool kDecodeOnce = true;
    template <class Mag, class Minus>
    static void run(int16_t* t, int n, int c, Mag&& mag, Minus&& minus) {
        for (int l = 0; l < n; ++l) {
            const int m = mag(l);
            t[l] = static_cast<int16_t>(c * (minus(l) ? -m : m));
        }
    }
    template <class Mag, class Minus>
    static void group(int16_t* t, int c, Mag&& mag, Minus&& minus) { run(t, 32, c, mag, minus); }
    // 8 elements: a grid point's 8 magnitudes (a byte each) with sign bits `signs`.
    static void point8(int16_t* t, int c, uint64_t point, uint8_t signs) {
        run(
            t, 8, c, [&](int j) { return static_cast<int>((point >> (8 * j)) & 0xFF); }, [&](int j) { return (signs >> j) & 1; });
    }
};
// IQ2_XXS: group g takes grid point (idx >> 8 (l / 8)) & 0xFF's magnitude l % 8, its sign bit
// l % 8 of ksigns[(aux >> 7 (l / 8)) & 127], times 2 s + 1 (s: aux's top 4 bits; idx, aux the
// group's two words), with d / 8 for the super-block: the reference's d (0.5 + s) 0.25 as a real
// number. |t| <= 31 * 43: 32 * 1333 * 32767 < 2^31.
struct IQ2XXS : Grid256 {
    using Block = block_iq2_xxs;
    static void block(const uint8_t* p, int16_t* t, float* sw, float*) {
        const auto& b = *reinterpret_cast<const Block*>(p);
        const auto* raw = reinterpret_cast<const uint8_t*>(b.qs);
        for (int g = 0; g < B / 32; ++g) {
            const uint32_t idx = ref::load_u32_le(raw + 8 * g), aux = ref::load_u32_le(raw + 8 * g + 4);
            group(
                t + 32 * g, 2 * static_cast<int>(aux >> 28) + 1,
                [&](int l) { return static_cast<int>((iq2xxs_grid[(idx >> (8 * (l / 8))) & 0xFF] >> (8 * (l % 8))) & 0xFF); },
                [&](int l) { return (ksigns_iq2xs[(aux >> (7 * (l / 8))) & 127] >> (l % 8)) & 1; });
        }
        sw[0] = ref::fp16(b.d) * 0.125f;
    }
};
// IQ3_XXS: group g takes grid point qs[8 g + l / 4]'s magnitude l % 4, its sign as IQ2_XXS's
// (the u32 aux at qs[64 + 4 g]), times 2 s + 1, with d / 4 for the super-block (the reference's
// d (0.5 + s) 0.5). |t| <= 31 * 62: 32 * 1922 * 32767 < 2^31.
struct IQ3XXS : Grid256 {
    using Block = block_iq3_xxs;
    static void block(const uint8_t* p, int16_t* t, float* sw, float*) {
        const auto& b = *reinterpret_cast<const Block*>(p);
        for (int g = 0; g < B / 32; ++g) {
            const uint32_t aux = ref::load_u32_le(b.qs + B / 4 + 4 * g);
            group(
                t + 32 * g, 2 * static_cast<int>(aux >> 28) + 1,
                [&](int l) { return static_cast<int>((iq3xxs_grid[b.qs[8 * g + l / 4]] >> (8 * (l % 4))) & 0xFF); },
                [&](int l) { return (ksigns_iq2xs[(aux >> (7 * (l / 8))) & 127] >> (l % 8)) & 1; });
        }
        sw[0] = ref::fp16(b.d) * 0.25f;
    }
};
// IQ3_S: group g takes grid point qs[8 g + i] | bit i of qh[g] << 8 (i = l / 4), magnitude l % 4,
// the sign bit l % 8 of signs[4 g + l / 8], times 1 + 2 s (s: nibble g % 2 of scales[g / 2]),
// with d for the super-block. |t| <= 31 * 15.
struct IQ3S : Grid256 {
    using Block = block_iq3_s;
    static void block(const uint8_t* p, int16_t* t, float* sw, float*) {
        const auto& b = *reinterpret_cast<const Block*>(p);
        for (int g = 0; g < B / 32; ++g) {
            group(
                t + 32 * g, 1 + 2 * ((b.scales[g / 2] >> (4 * (g % 2))) & 0x0F),
                [&](int l) {
                    const uint32_t point = iq3s_grid[b.qs[8 * g + l / 4] | ((b.qh[g] >> (l / 4)) & 1) << 8];
                    return static_cast<int>((point >> (8 * (l % 4))) & 0xFF);
                },
                [&](int l) { return (b.signs[4 * g + l / 8] >> (l % 8)) & 1; });
        }
        sw[0] = ref::fp16(b.d);
    }
};
// IQ2_XS: grid point qs[i] & 511 (i = 4 g + l / 8), the signs of ksigns[qs[i] >> 9], times the
// odd multiplier of its 16 elements, with d / 8 for the super-block (as IQ2_XXS).
struct IQ2XS : Grid256 {
    using Block = block_iq2_xs;
    static void block(const uint8_t* p, int16_t* t, float* sw, float*) {
        const auto& b = *reinterpret_cast<const Block*>(p);
        for (int i = 0; i < B / 8; ++i)
            point8(t + 8 * i, odd_scale_iq2(b.scales, i / 2), iq2xs_grid[b.qs[i] & 511], ksigns_iq2xs[b.qs[i] >> 9]);
        sw[0] = ref::fp16(b.d) * 0.125f;
    }
};
// IQ2_S: grid point index_iq2_s(i), the sign bits of qs[32 + i], scales as IQ2_XS's.
struct IQ2S : Grid256 {
    using Block = block_iq2_s;
    static void block(const uint8_t* p, int16_t* t, float* sw, float*) {
        const auto& b = *reinterpret_cast<const Block*>(p);
        for (int i = 0; i < B / 8; ++i) point8(t + 8 * i, odd_scale_iq2(b.scales, i / 2), iq2s_grid[index_iq2_s(b, i)], b.qs[B / 8 + i]);
        sw[0] = ref::fp16(b.d) * 0.125f;
    }
};
// The IQ1 formats: t = (2 s + 1) (8 g +- 1) for grid value g (-1, 0, 1) and the shift +-1/8, with
// d / 8 for the super-block: the reference's d (2 s + 1) (g +- 1/8) as a real number. |t| <= 15 * 9.
struct Iq1 {
    static constexpr int B = QK_K;
    static constexpr int kMinLen = 0;
    static constexpr int kRange = 32767;
    static constexpr bool kDecodeOnce = true;
    static void eight(int16_t* t, int c, uint64_t point, bool down) {
        for (int j = 0; j < 8; ++j)
            t[j] = static_cast<int16_t>(c * (8 * static_cast<int8_t>((point >> (8 * j)) & 0xFF) + (down ? -1 : 1)));
    }
};
struct IQ1S : Iq1 {
    using Block = block_iq1_s;
    static void block(const uint8_t* p, int16_t* t, float* sw, float*) {
        const auto& b = *reinterpret_cast<const Block*>(p);
        for (int i = 0; i < B / 8; ++i)
            eight(t + 8 * i, odd_scale_iq1_s(b, i / 4), iq1s_grid[index_iq1_s(b, i)], shift_down_iq1_s(b, i / 4));
        sw[0] = ref::fp16(b.d) * 0.125f;
    }
};
struct IQ1M : Iq1 {
    using Block = block_iq1_m;
    static void block(const uint8_t* p, int16_t* t, float* sw, float*) {
        const auto& b = *reinterpret_cast<const Block*>(p);
        for (int i = 0; i < B / 8; ++i)
            eight(t + 8 * i, odd_scale_iq1_m(b, i / 2), iq1s_grid[index_iq1_m(b, i)], nibble_iq1_m(b, i) & 8);
        sw[0] = ref::fp16(d_iq1_m(b)) * 0.125f;
    }
};
// The ternary formats: t the value (-1 .. 1, TQ2_0 -1 .. 2), d for the super-block.
template <class Blk>
struct Ternary {
    using Block = Blk;
    static constexpr int B = QK_K;
    static constexpr int kMinLen = 0;
    static constexpr int kRange = 32767;
    static constexpr bool kDecodeOnce = true;
    static void block(const uint8_t* p, int16_t* t, float* sw, float*) {
        const auto& b = *reinterpret_cast<const Block*>(p);
        for (int e = 0; e < B; ++e) {
            if constexpr (std::is_same_v<Blk, block_tq1_0>) {
                t[e] = static_cast<int16_t>(digit_tq1_0(b, e));
            } else {
                t[e] = static_cast<int16_t>(value_tq2_0(b, e));
            }
        }
        sw[0] = ref::fp16(b.d);
    }
};
template <bool kFive>
struct Q45K {
    using Block = std::conditional_t<kFive, block_q5_K, block_q4_K>;
    static constexpr int B = QK_K;
    static constexpr int kMinLen = kSpan;  // a minimum per sub-block of 32
    static constexpr int kRange = 32767;
    static void block(const uint8_t* p, int16_t* t, float* sw, float* mw) {
        const auto& b = *reinterpret_cast<const Block*>(p);
        const float d = ref::fp16(b.d), dmin = ref::fp16(b.dmin);
        for (int j = 0; j < B / 32; ++j) {
            int sc, m;
            scale_min_k4(j, b.scales, &sc, &m);
            mw[j] = dmin * static_cast<float>(m);
            const uint8_t* qs = b.qs + 32 * (j / 2);
            const int shift = 4 * (j % 2);
            for (int l = 0; l < 32; ++l) t[32 * j + l] = static_cast<int16_t>((qs[l] >> shift) & 0x0F);
            if constexpr (kFive) {
                for (int l = 0; l < 32; ++l) t[32 * j + l] = static_cast<int16_t>(t[32 * j + l] | ((b.qh[l] >> j) & 1) << 4);
            }
            scale_all(t + 32 * j, 32, sc);
        }
        sw[0] = d;
    }
};
// Q6_K: in half h, element 32 g + l (g = 0..3) takes nibble g / 2 of ql[64 h + 32 (g % 2) + l] and
// bits 2 g of qh[32 h + l]; value q - 32.
struct Q6K {
    using Block = block_q6_K;
    static constexpr int B = QK_K;
    static constexpr int kMinLen = 0;
    static constexpr int kRange = 16383;  // |t| <= 32 * 128: 32 * 4096 * 16383 < 2^31
    static void block(const uint8_t* p, int16_t* t, float* sw, float*) {
        const auto& b = *reinterpret_cast<const Block*>(p);
        const float d = ref::fp16(b.d);
        for (int h = 0; h < 2; ++h)
            for (int g = 0; g < 4; ++g) {
                const uint8_t* ql = b.ql + 64 * h + 32 * (g % 2);
                const uint8_t* qh = b.qh + 32 * h;
                for (int l = 0; l < 32; ++l) {
                    const int lo = (ql[l] >> (4 * (g / 2))) & 0x0F, hi = (qh[l] >> (2 * g)) & 3;
                    t[128 * h + 32 * g + l] = static_cast<int16_t>((lo | hi << 4) - 32);
                }
            }
        for (int k = 0; k < B / kHalf; ++k) scale_all(t + kHalf * k, kHalf, b.scales[k]);
        sw[0] = d;
    }
};

template <class F, class = void>
struct HasBlockLanes : std::false_type {};
template <class F>
struct HasBlockLanes<F, std::void_t<decltype(F::kBlockLanes)>> : std::bool_constant<F::kBlockLanes> {};
// The formats whose decoding costs more than a pass's multiply-adds (the grid and ternary ones:
// kDecodeOnce): decode + GEMM from the first activation row count the rows kernels would take in
// two passes, rather than decoding each weight row once per pass.
template <class F, class = void>
struct DecodeOnce : std::false_type {};
template <class F>
struct DecodeOnce<F, std::void_t<decltype(F::kDecodeOnce)>> : std::bool_constant<F::kDecodeOnce> {};

template <class F>
void decode_row(const void* w, int64_t n, int16_t* q, float* sw, float* mw) {
    const auto* p = static_cast<const uint8_t*>(w);
    for (int64_t i = 0; i < n; i += F::B, p += sizeof(typename F::Block)) {
        if constexpr (F::kMinLen > 0) {
            F::block(p, q + i, sw + i / F::B, mw + i / F::kMinLen);
        } else {
            F::block(p, q + i, sw + i / F::B, nullptr);
        }
    }
    if constexpr (HasBlockLanes<F>::value) BlockLanes(n).to_lanes_in_place(q);
}

}  // namespace

namespace ref {

void quantize_i16(const float* x, int64_t n, int group_spans, int range, int min_len, int16_t* a, float* da,
                  float* xs) {
    const int64_t len = int64_t{kSpan} * group_spans;
    for (int64_t g = 0; g < n / len; ++g) {
        const float* xp = x + g * len;
        float amax = 0.0f;
        bool finite = true;
        for (int64_t e = 0; e < len; ++e) {
            finite = finite && std::isfinite(xp[e]);
            amax = std::max(amax, std::fabs(xp[e]));
        }
        // A non-finite activation makes the group's scale NaN, so the results are NaN as the
        // float path's would be, instead of silently clamped.
        const float d = finite ? amax / static_cast<float>(range) : std::numeric_limits<float>::quiet_NaN();
        const float id = finite && amax > 0.0f ? static_cast<float>(range) / amax : 0.0f;
        da[g] = d;
        for (int64_t e0 = 0; e0 < len; e0 += kSpan) {
            int16_t* as = a + g * len + e0;
            int sum[2] = {0, 0};
            for (int e = 0; e < kSpan; ++e) {
                const float r = finite ? std::nearbyint(xp[e0 + e] * id) : 0.0f;
                const auto v = static_cast<int16_t>(std::clamp(r, -32768.0f, 32767.0f));
                as[e] = v;
                sum[e / kHalf] += v;
            }
            store_unit_sums(xs, g * len + e0, min_len, d, sum[0], sum[1]);
        }
    }
}

namespace {
float tree(const float* v) { return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7])); }
// The block lanes' minimum term: hsum(c), c_j = fma(mw_h, xs_h, c_j) over the halves h = 8 i + j
// in order (int16_gemm.h).
float min_term(const float* mw, const float* xs, int64_t halves) {
    float c[8] = {};
    for (int64_t h = 0; h < halves; ++h) c[h % 8] = std::fma(mw[h], xs[h], c[h % 8]);
    return tree(c);
}
}  // namespace

void gemm_i16(const int16_t* q, const float* sw, const float* mw, int min_len, int group_spans, int nw,
              const int16_t* a, const float* da, const float* xs, int nx, int64_t n, float* y, int64_t ldy) {
    const int64_t len = int64_t{kSpan} * group_spans, groups = n / len, halves = n / kHalf;
    const int64_t per_group = min_len ? len / min_len : 0;  // minimum units per group
    for (int r = 0; r < nx; ++r) {
        const int16_t* ar = a + r * act_stride(n);
        for (int o = 0; o < nw; ++o) {
            const int16_t* qo = q + o * n;
            float acc[8] = {};
            for (int64_t g = 0; g < groups; ++g) {
                int32_t S[8] = {};
                for (int64_t e0 = g * len; e0 < (g + 1) * len; e0 += kSpan) {
                    const int16_t* qs = qo + e0;
                    const int16_t* as = ar + e0;
                    for (int j = 0; j < 8; ++j) {
                        S[j] += qs[2 * j] * as[2 * j] + qs[2 * j + 1] * as[2 * j + 1] +
                                (qs[16 + 2 * j] * as[16 + 2 * j] + qs[17 + 2 * j] * as[17 + 2 * j]);
                    }
                }
                const float scale = sw[o * groups + g] * da[r * groups + g];
                for (int j = 0; j < 8; ++j) acc[j] = std::fma(static_cast<float>(S[j]), scale, acc[j]);
                for (int64_t u = g * per_group; u < (g + 1) * per_group; ++u)
                    acc[u % 8] = std::fma(-mw[o * halves + u], xs[r * halves + u], acc[u % 8]);
            }
            y[r * ldy + o] = tree(acc);
        }
    }
}

void gemm_i16_blocks(const int16_t* q, const float* sw, const float* mw, int min_len, int, int nw, const int16_t* a,
                     const float* da, const float* xs, int nx, int64_t n, float* y, int64_t ldy) {
    const BlockLanes bl(n);
    const int64_t halves = n / kHalf;
    for (int r = 0; r < nx; ++r) {
        const int16_t* ar = a + r * act_stride(n);
        for (int o = 0; o < nw; ++o) {
            const int16_t* qo = q + o * n;
            float acc[8] = {};
            for (int64_t b = 0; b < bl.nb; ++b) {
                const float scale = sw[o * bl.nb + b] * da[r * bl.nb + b];
                if (bl.natural(b)) {  // the natural order's lane sums
                    const int16_t* qs = qo + 32 * b;
                    const int16_t* as = ar + 32 * b;
                    for (int j = 0; j < 8; ++j) {
                        const int32_t S = qs[2 * j] * as[2 * j] + qs[2 * j + 1] * as[2 * j + 1] +
                                          (qs[16 + 2 * j] * as[16 + 2 * j] + qs[17 + 2 * j] * as[17 + 2 * j]);
                        acc[j] = std::fma(static_cast<float>(S), scale, acc[j]);
                    }
                    continue;
                }
                int32_t T = 0;
                for (int k = 0; k < 32; ++k) {
                    const int64_t p = bl.position(b, k);
                    T += qo[p] * ar[p];
                }
                acc[b % 8] = std::fma(static_cast<float>(T), scale, acc[b % 8]);
            }
            y[r * ldy + o] = min_len ? tree(acc) - min_term(mw + o * halves, xs + r * halves, halves) : tree(acc);
        }
    }
}

}  // namespace ref

namespace {

template <Type T>
void decode_packed_ref(const void* row, int64_t n, int16_t* q, float* sw, float* mw) {
    decode_packed_row(T, row, n, q, sw, mw);
}
template <Type T>
constexpr DecodeI16Fn packed_ref() {
    return has_packed_layout(T) ? &decode_packed_ref<T> : nullptr;
}

// The SIMD GEMM needs only AVX2 (AVX-512 machines run it too, and their own kernels for the
// block-lane formats) or NEON (arm/int16_neon.cpp); the scalar ISA runs the reference.
// Every format takes the int16 path at every batch size, on every ISA (the scalar one through
// decode + gemm), so that decode, verify blocks and prefill give the same floats.
template <class F, Type T>
const I16Kernels& table(Isa isa) {
    static const I16Kernels none{};
    constexpr bool lanes = HasBlockLanes<F>::value;
    static const I16Kernels scalar{&decode_row<F>, F::kMinLen, F::B / kSpan, F::kRange, &ref::quantize_i16,
                                   lanes ? &ref::gemm_i16_blocks : &ref::gemm_i16,
                                   nullptr, nullptr, lanes, kDotRowsMax, packed_ref<T>()};
#if defined(DS4_X86)
    // The block-lane formats' GGUF rows (a MoE's expert stacks, repack=False): decoded and
    // multiplied in registers, the packed rows' vectors.
    static const I16Kernels simd = [] {
        I16Kernels k{lanes ? avx2::decode_gguf(T) : avx2::decode_i16(T),
                     F::kMinLen,
                     F::B / kSpan,
                     F::kRange,
                     &avx2::quantize_i16,
                     lanes ? &avx2::gemm_i16_blocks : &avx2::gemm_i16,
                     lanes ? avx2::rows_gguf(T) : avx2::rows_i16(T),
                     avx2::rows_packed(T),
                     lanes,
                     lanes ? avx2::kBlockRowsMax : kDotRowsMax,
                     avx2::decode_packed(T)};
        // Qwen2.5-Coder 1.5B with random IQ2_XS blocks, DS4_SIMD=avx2, Intel Xeon: 5 rows 205 ->
        // 160 ms, 16 rows 525 -> 302 ms (TQ2_0, the cheapest decoder: 5 rows 1.05x the time, 6-8 level)
        if constexpr (DecodeOnce<F>::value) k.gemm_from = kDotRowsMax + 1;
        return k;
    }();
    if (isa == Isa::avx2) return simd;
    // AVX-VNNI: the AVX2 kernels with vpdpwssd (x86/madd.h).
    static const I16Kernels vnni = [] {
        I16Kernels k = simd;
        k.quantize = &avxvnni::quantize_i16;
        k.gemm = lanes ? &avxvnni::gemm_i16_blocks : &avxvnni::gemm_i16;
        k.rows = lanes ? avxvnni::rows_gguf(T) : avxvnni::rows_i16(T);
        k.rows_packed = avxvnni::rows_packed(T);
        return k;
    }();
    if (isa == Isa::avxvnni) return vnni;
    // AVX-512: two weight rows at a time (the GEMMs, the block-lane formats' packed rows kernels,
    // the K-quants' rows kernels, each with more activation rows per pass); the rest is AVX2's.
    static const I16Kernels wide = [] {
        I16Kernels k = simd;
        k.gemm = lanes ? &avx512::gemm_i16_blocks : &avx512::gemm_i16;
        if (lanes) {
            k.quantize_lanes = avx512::quantize_i16_lanes(F::kMinLen > 0);
            k.rows_packed = avx512::rows_packed(T);
            k.rows_packed2 = avx512::rows_packed2(T);
            k.rows2_one_row = intel_cpu();
            k.rows_max = avx512::kBlockRowsMax;
        } else if (avx512::rows2_i16(T)) {
            k.rows = avx512::rows_i16(T);
            k.rows2 = avx512::rows2_i16(T);
            // the K-quants (Qwen2.5-Coder 1.5B decode 1.17x, Intel Xeon); the span formats' one row
            // runs faster by itself (avx512::rows2_one_row)
            k.rows2_one_row = avx512::rows2_one_row(T);
            k.rows_max = avx512::kRowsMax;
            if (const DecodeI16Fn decode = avx512::decode_i16(T)) {
                k.decode = decode;
                // Qwen2.5-Coder 1.5B, Intel Xeon, the GEMM (few_rows_tile) against the rows kernels'
                // passes: 8 rows 1.15x the time, 9 to 12 rows 0.98-1.0x, 13 rows 0.91x, 14 rows 0.94-0.96x;
                // the same with random IQ2_XS blocks: 9 rows 204 -> 152 ms, IQ1_M 297 -> 191, TQ2_0 100 -> 92
                k.gemm_from = DecodeOnce<F>::value ? avx512::kRowsMax + 1 : 13;
            }
        }
        if constexpr (F::B > kSpan) {  // the K-quants' GEMM reads its tile in pairs
            k.decode_pair = avx512::decode_pair_i16(T);
            k.few_rows_tile = avx512::kPairedTileRows;
        }
        return k;
    }();
    if (isa == Isa::avx512) return wide;
#elif defined(DS4_ARM64)
    static const I16Kernels simd = [] {
        I16Kernels k{lanes ? neon::decode_gguf(T) : neon::decode_i16(T),
                     F::kMinLen,
                     F::B / kSpan,
                     F::kRange,
                     &neon::quantize_i16,
                     lanes ? &neon::gemm_i16_blocks : &neon::gemm_i16,
                     lanes ? neon::rows_gguf(T) : neon::rows_i16(T),
                     neon::rows_packed(T),
                     lanes,
                     lanes ? neon::kBlockRowsMax : kDotRowsMax,
                     neon::decode_packed(T)};
        if constexpr (DecodeOnce<F>::value) k.gemm_from = kDotRowsMax + 1;  // as on AVX2 (untimed on ARM)
        return k;
    }();
    if (isa == Isa::neon) return simd;
#endif
    return isa == Isa::scalar ? scalar : none;
}

}  // namespace

const I16Kernels& i16_kernels(Type type, Isa isa) {
    static const I16Kernels none{};
    switch (type) {
        case Type::Q4_0: return table<Q4_0, Type::Q4_0>(isa);
        case Type::Q4_1: return table<Q4_1, Type::Q4_1>(isa);
        case Type::Q5_0: return table<Q5_0, Type::Q5_0>(isa);
        case Type::Q5_1: return table<Q5_1, Type::Q5_1>(isa);
        case Type::Q8_0: return table<Q8_0, Type::Q8_0>(isa);
        case Type::Q2_K: return table<Q2K, Type::Q2_K>(isa);
        case Type::Q3_K: return table<Q3K, Type::Q3_K>(isa);
        case Type::Q4_K: return table<Q45K<false>, Type::Q4_K>(isa);
        case Type::Q5_K: return table<Q45K<true>, Type::Q5_K>(isa);
        case Type::Q6_K: return table<Q6K, Type::Q6_K>(isa);
        case Type::IQ4_XS: return table<IQ4XS, Type::IQ4_XS>(isa);
        case Type::IQ2_XXS: return table<IQ2XXS, Type::IQ2_XXS>(isa);
        case Type::IQ2_XS: return table<IQ2XS, Type::IQ2_XS>(isa);
        case Type::IQ2_S: return table<IQ2S, Type::IQ2_S>(isa);
        case Type::IQ1_S: return table<IQ1S, Type::IQ1_S>(isa);
        case Type::IQ1_M: return table<IQ1M, Type::IQ1_M>(isa);
        case Type::TQ1_0: return table<Ternary<block_tq1_0>, Type::TQ1_0>(isa);
        case Type::TQ2_0: return table<Ternary<block_tq2_0>, Type::TQ2_0>(isa);
        case Type::IQ3_XXS: return table<IQ3XXS, Type::IQ3_XXS>(isa);
        case Type::IQ3_S: return table<IQ3S, Type::IQ3_S>(isa);
        case Type::IQ4_NL: return table<Book<block_iq4_nl>, Type::IQ4_NL>(isa);
        case Type::MXFP4: return table<Book<block_mxfp4>, Type::MXFP4>(isa);
        default: return none;
    }
}

const I16Kernels& i16_kernels(Type type) { return i16_kernels(type, active_isa()); }

}  // namespace ds4::quant
