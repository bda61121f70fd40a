// Scalar reference decoders of the K-quants (super-blocks of 256 elements with 16 or 8
// sub-block scales), bit-exact with ggml's dequantize_row_q{2..6}_K.
#include "quant/kernels_ref.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace ds4::quant::ref {

// Q2_K: 16 sub-blocks of 16, each with a 4-bit scale (low nibble) and 4-bit min (high).
// Element e = 128 h + 32 s + l takes bits 2s..2s+1 of qs[32 h + l].
void decode_q2_K(const block_q2_K& b, float* y) {
    const float d = fp16(b.d), dmin = fp16(b.dmin);
    for (int e = 0; e < QK_K; ++e) {
        const int h = e / 128, s = (e / 32) % 4, l = e % 32;
        const uint8_t sc = b.scales[e / 16];
        const float dl = d * static_cast<float>(sc & 0x0F);
        const float ml = dmin * static_cast<float>(sc >> 4);
        const int q = (b.qs[32 * h + l] >> (2 * s)) & 3;
        y[e] = dl * static_cast<float>(q) - ml;
    }
}

// Q3_K: 2 low bits as in Q2_K plus a high bit in hmask; a *clear* high bit subtracts 4.
// Sixteen 6-bit signed scales (bias 32): low nibbles in bytes 0..7 (sub-blocks 0..7 low
// nibble, 8..15 high nibble), top two bits in bytes 8..11 (sub-block k: byte 8 + k % 4,
// bits 2 (k / 4)).
void decode_q3_K(const block_q3_K& b, float* y) {
    const float d = fp16(b.d);
    float dl[16];
    for (int k = 0; k < 16; ++k) dl[k] = d * static_cast<float>(scale_q3_k(b.scales, k));
    for (int e = 0; e < QK_K; ++e) {
        const int h = e / 128, s = (e / 32) % 4, l = e % 32;
        const int lo = (b.qs[32 * h + l] >> (2 * s)) & 3;
        const int hbit = (b.hmask[l] >> (e / 32)) & 1;
        y[e] = dl[e / 16] * static_cast<float>(lo - (hbit ? 0 : 4));
    }
}

// Q4_K: 8 sub-blocks of 32; sub-block j = 2 c + s is nibble s of qs[32 c .. 32 c + 31].
void decode_q4_K(const block_q4_K& b, float* y) {
    const float d = fp16(b.d), dmin = fp16(b.dmin);
    for (int j = 0; j < QK_K / 32; ++j) {
        int sc, m;
        scale_min_k4(j, b.scales, &sc, &m);
        const float dj = d * static_cast<float>(sc);
        const float mj = dmin * static_cast<float>(m);
        const uint8_t* q = b.qs + 32 * (j / 2);
        const int shift = 4 * (j % 2);
        for (int l = 0; l < 32; ++l) {
            y[32 * j + l] = dj * static_cast<float>((q[l] >> shift) & 0x0F) - mj;
        }
    }
}

// Q5_K: Q4_K plus a fifth bit: bit j of qh[l] for element l of sub-block j.
void decode_q5_K(const block_q5_K& b, float* y) {
    const float d = fp16(b.d), dmin = fp16(b.dmin);
    for (int j = 0; j < QK_K / 32; ++j) {
        int sc, m;
        scale_min_k4(j, b.scales, &sc, &m);
        const float dj = d * static_cast<float>(sc);
        const float mj = dmin * static_cast<float>(m);
        const uint8_t* q = b.qs + 32 * (j / 2);
        const int shift = 4 * (j % 2);
        for (int l = 0; l < 32; ++l) {
            const int v = ((q[l] >> shift) & 0x0F) | (((b.qh[l] >> j) & 1) << 4);
            y[32 * j + l] = dj * static_cast<float>(v) - mj;
        }
    }
}

// Q6_K: two halves of 128. In a half, element r takes nibble r / 64 of ql[r % 64] and bits
// 2 (r / 32) of qh[r % 32]; value (q - 32) times d * scales[e / 16] (signed 8-bit scales).
void decode_q6_K(const block_q6_K& b, float* y) {
    const float d = fp16(b.d);
    for (int e = 0; e < QK_K; ++e) {
        const int h = e / 128, r = e % 128;
        const int lo = (b.ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0F;
        const int hi = (b.qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
        const float dl = d * static_cast<float>(b.scales[e / 16]);
        y[e] = dl * static_cast<float>((lo | (hi << 4)) - 32);
    }
}

}  // namespace ds4::quant::ref
