// Block layouts of the quantised formats, bit-for-bit as ggml writes them into GGUF files.
// Defined once here and shared by the scalar reference and every SIMD variant.
#pragma once

#include <cstdint>

namespace ds4::quant {

using f16_bits = uint16_t;  // IEEE half, stored as raw bits

constexpr int QK4_0 = 32, QK4_1 = 32, QK5_0 = 32, QK5_1 = 32, QK8_0 = 32, QK4_NL = 32;
constexpr int QK_MXFP4 = 32;
constexpr int QK_K = 256;
constexpr int K_SCALE_SIZE = 12;

struct block_q4_0 { f16_bits d; uint8_t qs[QK4_0 / 2]; };
struct block_q4_1 { f16_bits d, m; uint8_t qs[QK4_1 / 2]; };
struct block_q5_0 { f16_bits d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; };
struct block_q5_1 { f16_bits d, m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; };
struct block_q8_0 { f16_bits d; int8_t qs[QK8_0]; };

struct block_q2_K { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; f16_bits d, dmin; };
struct block_q3_K { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; f16_bits d; };
struct block_q4_K { f16_bits d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; };
struct block_q5_K { f16_bits d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; };
struct block_q6_K { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; f16_bits d; };
struct block_q8_K { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; };

struct block_iq2_xxs { f16_bits d; uint16_t qs[QK_K / 8]; };
// IQ2_XS: per 8 elements a u16 of a 9-bit grid index and a 7-bit sign index; a 4-bit scale per 16.
struct block_iq2_xs { f16_bits d; uint16_t qs[QK_K / 8]; uint8_t scales[QK_K / 32]; };
// IQ2_S: per 8 elements a grid index's low 8 bits (qs[0..31]) and 8 sign bits (qs[32..63]), the
// indices' two top bits (qh), a 4-bit scale per 16.
struct block_iq2_s { f16_bits d; uint8_t qs[QK_K / 4]; uint8_t qh[QK_K / 32]; uint8_t scales[QK_K / 32]; };
// IQ1_S: per 8 elements an 11-bit index into a grid of -1 / 0 / 1 (low 8 bits in qs); per 32 a u16
// of the four indices' top 3 bits, a 3-bit scale and the sign of the shift +-1/8.
struct block_iq1_s { f16_bits d; uint8_t qs[QK_K / 8]; uint16_t qh[QK_K / 32]; };
// IQ1_M: the grid indices as IQ1_S's, per 8 elements a nibble of 3 index bits and the shift's sign,
// a 3-bit scale per 16 in four u16 whose top nibbles hold the f16 d.
struct block_iq1_m { uint8_t qs[QK_K / 8]; uint8_t qh[QK_K / 16]; uint8_t scales[QK_K / 32]; };
// TQ1_0: ternary digits, five per byte of qs and four per byte of qh (base 3, most significant first).
struct block_tq1_0 { uint8_t qs[(QK_K - 4 * QK_K / 64) / 5]; uint8_t qh[QK_K / 64]; f16_bits d; };
// TQ2_0: 2-bit values q - 1 (-1 .. 2), four per byte.
struct block_tq2_0 { uint8_t qs[QK_K / 4]; f16_bits d; };
// IQ3_XXS: 64 grid indices (a byte per 4 elements), then per group of 32 a little-endian u32 of
// four 7-bit sign indices and a 4-bit scale.
struct block_iq3_xxs { f16_bits d; uint8_t qs[3 * QK_K / 8]; };
// IQ3_S: 64 grid indices' low 8 bits, their ninth bits, a sign bit per element, a 4-bit scale per 32.
struct block_iq3_s { f16_bits d; uint8_t qs[QK_K / 4]; uint8_t qh[QK_K / 32]; uint8_t signs[QK_K / 8]; uint8_t scales[QK_K / 64]; };
struct block_iq4_nl { f16_bits d; uint8_t qs[QK4_NL / 2]; };
struct block_iq4_xs { f16_bits d; uint16_t scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; };
struct block_mxfp4 { uint8_t e; uint8_t qs[QK_MXFP4 / 2]; };

// 6-bit scale and min of sub-block j (0..7) of Q4_K / Q5_K, packed in `scales`: j < 4 in the
// low 6 bits of bytes j and j + 4; j >= 4 from the nibbles of byte j + 4 and the top two bits
// of bytes j - 4 (scale) and j (min).
inline void scale_min_k4(int j, const uint8_t* q, int* sc, int* m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// Signed 6-bit scale (bias 32 removed) of 16-element sub-block k (0..15) of Q3_K: low nibble in
// byte k (k < 8) or the high nibble of byte k - 8, top two bits at bits 2 (k / 4) of byte 8 + k % 4.
inline int scale_q3_k(const uint8_t* scales, int k) {
    const int lo = (k < 8 ? scales[k] : scales[k - 8] >> 4) & 0x0F;
    const int hi = (scales[8 + k % 4] >> (2 * (k / 4))) & 3;
    return (lo | hi << 4) - 32;
}
// Signed 6-bit scale (bias 32 removed) of 32-element sub-block j (0..7) of IQ4_XS: low nibble
// from scales_l, two high bits from scales_h.
inline int scale_iq4_xs(const block_iq4_xs& b, int j) {
    return (((b.scales_l[j / 2] >> (4 * (j % 2))) & 0x0F) | ((b.scales_h >> (2 * j)) & 3) << 4) - 32;
}

// The grid formats with a 4-bit scale per 16 elements (IQ2_XS, IQ2_S): scale j's odd multiplier
// 2 s + 1 (the reference's d (0.5 + s) 0.25 = d / 8 (2 s + 1)).
inline int odd_scale_iq2(const uint8_t* scales, int j) { return 2 * ((scales[j / 2] >> (4 * (j % 2))) & 0x0F) + 1; }
// IQ2_S: grid index i (8 elements): qs[i] and bits 2 (i % 4) of qh[i / 4] as bits 8..9.
inline int index_iq2_s(const block_iq2_s& b, int i) { return b.qs[i] | ((b.qh[i / 4] >> (2 * (i % 4))) & 3) << 8; }
// IQ1_S: grid index i (8 elements): qs[i] and bits 3 (i % 4) of qh[i / 4] as bits 8..10; the
// group's (32 elements) odd multiplier 2 s + 1 and shift sign (bit 15: -1/8, else +1/8).
inline int index_iq1_s(const block_iq1_s& b, int i) { return b.qs[i] | ((b.qh[i / 4] >> (3 * (i % 4))) & 7) << 8; }
inline int odd_scale_iq1_s(const block_iq1_s& b, int g) { return 2 * ((b.qh[g] >> 12) & 7) + 1; }
inline bool shift_down_iq1_s(const block_iq1_s& b, int g) { return (b.qh[g] >> 15) & 1; }
// IQ1_M: grid point i's nibble of qh (3 index bits, then the shift's sign), its index, the odd
// multiplier of the 16 elements j, and d: the top nibbles of the four little-endian u16 of scales.
inline int nibble_iq1_m(const block_iq1_m& b, int i) { return (b.qh[i / 2] >> (4 * (i % 2))) & 0x0F; }
inline int index_iq1_m(const block_iq1_m& b, int i) { return b.qs[i] | (nibble_iq1_m(b, i) & 7) << 8; }
inline int odd_scale_iq1_m(const block_iq1_m& b, int j) {
    const int w = b.scales[2 * (j / 4)] | b.scales[2 * (j / 4) + 1] << 8;
    return 2 * ((w >> (3 * (j % 4))) & 7) + 1;
}
inline f16_bits d_iq1_m(const block_iq1_m& b) {
    return static_cast<f16_bits>(b.scales[1] >> 4 | (b.scales[3] & 0xF0) | (b.scales[5] >> 4) << 8 | (b.scales[7] & 0xF0) << 8);
}
// TQ1_0: element e's ternary digit as -1, 0, 1. Elements 0..159 take digit e / 32 of qs[e % 32],
// 160..239 digit (e - 160) / 16 of qs[32 + e % 16], 240..255 digit (e - 240) / 4 of qh[e % 4]; digit
// m of byte x: (x 3^m mod 256) 3 / 256, as ggml stores them (kPow3Tq1[m] = 3^m).
inline constexpr uint8_t kPow3Tq1[5] = {1, 3, 9, 27, 81};
inline int digit_tq1_0(const block_tq1_0& b, int e) {
    const int x = e < 160 ? b.qs[e % 32] : e < 240 ? b.qs[32 + e % 16] : b.qh[e % 4];
    const int m = e < 160 ? e / 32 : e < 240 ? (e - 160) / 16 : (e - 240) / 4;
    return ((static_cast<uint8_t>(x * kPow3Tq1[m]) * 3) >> 8) - 1;
}
// TQ2_0: element e = 128 c + 32 s + l: crumb s of qs[32 c + l], minus 1.
inline int value_tq2_0(const block_tq2_0& b, int e) { return ((b.qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3) - 1; }

// d1[j] = d * scale_j and negm1[j] = -(dmin * min_j) for the 8 sub-blocks: both exact floats
// (11 + 6 bits), so every kernel that builds weights from them rounds like the reference.
inline void k4_scales(const uint8_t* q, float d, float dmin, float* d1, float* negm1) {
    for (int j = 0; j < 8; ++j) {
        int sc, m;
        scale_min_k4(j, q, &sc, &m);
        d1[j] = d * static_cast<float>(sc);
        negm1[j] = -(dmin * static_cast<float>(m));
    }
}

static_assert(sizeof(block_q4_0) == 18, "block_q4_0 size");
static_assert(sizeof(block_q4_1) == 20, "block_q4_1 size");
static_assert(sizeof(block_q5_0) == 22, "block_q5_0 size");
static_assert(sizeof(block_q5_1) == 24, "block_q5_1 size");
static_assert(sizeof(block_q8_0) == 34, "block_q8_0 size");
static_assert(sizeof(block_q2_K) == 84, "block_q2_K size");
static_assert(sizeof(block_q3_K) == 110, "block_q3_K size");
static_assert(sizeof(block_q4_K) == 144, "block_q4_K size");
static_assert(sizeof(block_q5_K) == 176, "block_q5_K size");
static_assert(sizeof(block_q6_K) == 210, "block_q6_K size");
static_assert(sizeof(block_q8_K) == 292, "block_q8_K size");
static_assert(sizeof(block_iq2_xxs) == 66, "block_iq2_xxs size");
static_assert(sizeof(block_iq2_xs) == 74, "block_iq2_xs size");
static_assert(sizeof(block_iq2_s) == 82, "block_iq2_s size");
static_assert(sizeof(block_iq1_s) == 50, "block_iq1_s size");
static_assert(sizeof(block_iq1_m) == 56, "block_iq1_m size");
static_assert(sizeof(block_tq1_0) == 54, "block_tq1_0 size");
static_assert(sizeof(block_tq2_0) == 66, "block_tq2_0 size");
static_assert(sizeof(block_iq3_xxs) == 98, "block_iq3_xxs size");
static_assert(sizeof(block_iq3_s) == 110, "block_iq3_s size");
static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl size");
static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs size");
static_assert(sizeof(block_mxfp4) == 17, "block_mxfp4 size");

}  // namespace ds4::quant
