// Scalar reference decoders of the code-book formats: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S (grid +
// signs), IQ1_S, IQ1_M (a grid of -1 / 0 / 1 and a shift), TQ1_0, TQ2_0 (ternary), IQ4_NL and IQ4_XS
// (non-linear 4-bit values), MXFP4 (E2M1 with a power-of-two E8M0 scale). Bit-exact with ggml's
// dequantize_row_*; tables in iq_tables.cpp.
#include "quant/iq_tables.h"
#include "quant/kernels_ref.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace ds4::quant::ref {

// IQ2_XXS: 8 groups of 32. Each group is two little-endian u32: the first holds 4 grid
// indices (one byte per 8 elements); the second holds four 7-bit sign indices and, in its
// top 4 bits, the group scale: d * (0.5 + s) * 0.25.
void decode_iq2_xxs(const block_iq2_xxs& b, float* y) {
    const float d = fp16(b.d);
    uint8_t raw[sizeof b.qs];
    std::memcpy(raw, b.qs, sizeof raw);
    for (int g = 0; g < QK_K / 32; ++g) {
        const uint32_t idx = load_u32_le(raw + 8 * g);
        const uint32_t aux = load_u32_le(raw + 8 * g + 4);
        const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.25f;
        for (int l = 0; l < 4; ++l) {
            const uint64_t grid = iq2xxs_grid[(idx >> (8 * l)) & 0xFF];
            const uint8_t signs = ksigns_iq2xs[(aux >> (7 * l)) & 127];
            for (int j = 0; j < 8; ++j) {
                const float mag = static_cast<float>((grid >> (8 * j)) & 0xFF);
                y[32 * g + 8 * l + j] = db * mag * ((signs >> j) & 1 ? -1.0f : 1.0f);
            }
        }
    }
}

// IQ3_XXS: 8 groups of 32. Group g: grid points qs[8 g + i] (4 elements each) and the u32 at
// qs[64 + 4 g]: four 7-bit sign indices (one per 8 elements) and, in its top 4 bits, the scale:
// d * (0.5 + s) * 0.5.
void decode_iq3_xxs(const block_iq3_xxs& b, float* y) {
    const float d = fp16(b.d);
    for (int g = 0; g < QK_K / 32; ++g) {
        const uint32_t aux = load_u32_le(b.qs + QK_K / 4 + 4 * g);
        const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
        for (int l = 0; l < 32; ++l) {
            const float mag = static_cast<float>((iq3xxs_grid[b.qs[8 * g + l / 4]] >> (8 * (l % 4))) & 0xFF);
            const bool minus = (ksigns_iq2xs[(aux >> (7 * (l / 8))) & 127] >> (l % 8)) & 1;
            y[32 * g + l] = db * mag * (minus ? -1.0f : 1.0f);
        }
    }
}

// IQ3_S: 8 groups of 32. Group g: grid points qs[8 g + i] | bit i of qh[g] << 8 (4 elements
// each), element l's sign bit l % 8 of signs[4 g + l / 8], the scale nibble g % 2 of
// scales[g / 2]: d * (1 + 2 s).
void decode_iq3_s(const block_iq3_s& b, float* y) {
    const float d = fp16(b.d);
    for (int g = 0; g < QK_K / 32; ++g) {
        const float db = d * static_cast<float>(1 + 2 * ((b.scales[g / 2] >> (4 * (g % 2))) & 0x0F));
        for (int l = 0; l < 32; ++l) {
            const int i = l / 4;
            const uint32_t point = iq3s_grid[b.qs[8 * g + i] | ((b.qh[g] >> i) & 1) << 8];
            const float mag = static_cast<float>((point >> (8 * (l % 4))) & 0xFF);
            const bool minus = (b.signs[4 * g + l / 8] >> (l % 8)) & 1;
            y[32 * g + l] = db * mag * (minus ? -1.0f : 1.0f);
        }
    }
}

// IQ2_XS / IQ2_S: 8 elements (grid point `grid`, sign bits `signs`) at y, d * (0.5 + s) * 0.25 for
// the scale s of their 16 elements (nibble (i / 2) % 2 of scales[i / 4]).
inline void iq2_eight(float d, const uint8_t* scales, int i, uint64_t grid, uint8_t signs, float* y) {
    const int s = (scales[i / 4] >> (4 * (i / 2 % 2))) & 0x0F;
    const float db = d * (0.5f + static_cast<float>(s)) * 0.25f;
    for (int j = 0; j < 8; ++j) {
        const float mag = static_cast<float>((grid >> (8 * j)) & 0xFF);
        y[j] = db * mag * ((signs >> j) & 1 ? -1.0f : 1.0f);
    }
}

// IQ2_XS: per 8 elements a u16 of grid index (low 9 bits) and sign index (ksigns).
void decode_iq2_xs(const block_iq2_xs& b, float* y) {
    for (int i = 0; i < QK_K / 8; ++i)
        iq2_eight(fp16(b.d), b.scales, i, iq2xs_grid[b.qs[i] & 511], ksigns_iq2xs[b.qs[i] >> 9], y + 8 * i);
}

// IQ2_S: per 8 elements grid point index_iq2_s and the sign byte qs[32 + i].
void decode_iq2_s(const block_iq2_s& b, float* y) {
    for (int i = 0; i < QK_K / 8; ++i) iq2_eight(fp16(b.d), b.scales, i, iq2s_grid[index_iq2_s(b, i)], b.qs[QK_K / 8 + i], y + 8 * i);
}

// The IQ1 formats' value: dl * (grid value + the shift +-1/8).
inline float iq1_value(float dl, uint64_t grid, int j, bool down) {
    const auto g = static_cast<float>(static_cast<int8_t>((grid >> (8 * j)) & 0xFF));
    return dl * (g + (down ? -0.125f : 0.125f));
}

// IQ1_S: per 32 elements (group g) dl = d * (2 s + 1) and the shift's sign; per 8 a grid point.
void decode_iq1_s(const block_iq1_s& b, float* y) {
    const float d = fp16(b.d);
    for (int i = 0; i < QK_K / 8; ++i) {
        const float dl = d * static_cast<float>(odd_scale_iq1_s(b, i / 4));
        const uint64_t grid = iq1s_grid[index_iq1_s(b, i)];
        for (int j = 0; j < 8; ++j) y[8 * i + j] = iq1_value(dl, grid, j, shift_down_iq1_s(b, i / 4));
    }
}

// IQ1_M: per 16 elements dl = d * (2 s + 1); per 8 a grid point and the shift's sign.
void decode_iq1_m(const block_iq1_m& b, float* y) {
    const float d = fp16(d_iq1_m(b));
    for (int i = 0; i < QK_K / 8; ++i) {
        const float dl = d * static_cast<float>(odd_scale_iq1_m(b, i / 2));
        const uint64_t grid = iq1s_grid[index_iq1_m(b, i)];
        for (int j = 0; j < 8; ++j) y[8 * i + j] = iq1_value(dl, grid, j, nibble_iq1_m(b, i) & 8);
    }
}

void decode_tq1_0(const block_tq1_0& b, float* y) {
    const float d = fp16(b.d);
    for (int e = 0; e < QK_K; ++e) y[e] = d * static_cast<float>(digit_tq1_0(b, e));
}

void decode_tq2_0(const block_tq2_0& b, float* y) {
    const float d = fp16(b.d);
    for (int e = 0; e < QK_K; ++e) y[e] = d * static_cast<float>(value_tq2_0(b, e));
}

void decode_iq4_nl(const block_iq4_nl& b, float* y) {
    const float d = fp16(b.d);
    for (int j = 0; j < QK4_NL / 2; ++j) {
        y[j] = d * static_cast<float>(kvalues_iq4nl[b.qs[j] & 0x0F]);
        y[j + QK4_NL / 2] = d * static_cast<float>(kvalues_iq4nl[b.qs[j] >> 4]);
    }
}

// IQ4_XS: 8 sub-blocks of 32 with 6-bit scales (bias 32): low nibble from scales_l, two high
// bits from scales_h; values as IQ4_NL, 16 bytes per sub-block.
void decode_iq4_xs(const block_iq4_xs& b, float* y) {
    const float d = fp16(b.d);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        const float dl = d * static_cast<float>(scale_iq4_xs(b, ib));
        const uint8_t* q = b.qs + 16 * ib;
        for (int j = 0; j < 16; ++j) {
            y[32 * ib + j] = dl * static_cast<float>(kvalues_iq4nl[q[j] & 0x0F]);
            y[32 * ib + j + 16] = dl * static_cast<float>(kvalues_iq4nl[q[j] >> 4]);
        }
    }
}

void decode_mxfp4(const block_mxfp4& b, float* y) {
    const float d = e8m0_to_fp32_half(b.e);
    for (int j = 0; j < QK_MXFP4 / 2; ++j) {
        y[j] = d * static_cast<float>(kvalues_mxfp4[b.qs[j] & 0x0F]);
        y[j + QK_MXFP4 / 2] = d * static_cast<float>(kvalues_mxfp4[b.qs[j] >> 4]);
    }
}

}  // namespace ds4::quant::ref
