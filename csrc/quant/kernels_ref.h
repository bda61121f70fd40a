// Internals of the scalar reference kernels (kernels_ref*.cpp); not for other callers.
//
// Each block format supplies one decoder, `decode(const Block&, float* y)`, that writes the
// block's values exactly as ggml's dequantize_row_* does: the same float32 operations in the
// same order (e.g. (d * sc) * q - dmin * m), so results are bit-identical to ggml and to
// gguf.quants. The row kernels below are built from the decoder:
//
//   dequant: decode every block into dst.
//   dot:     decode a block into a buffer, then accumulate w[i] * x[i] in double.
//
// Error of dot (the reference's contract, checked by tests/quant/test_dot.py): each product
// of two floats is exact in double (24 + 24 significant bits < 53), so the only roundings
// are the n - 1 double additions and the final conversion to float:
//     |dot - sum_i w_i x_i| <= u32 * |sum| + gamma64(n - 1) * sum_i |w_i x_i|,
// with u32 = 2^-24 and gamma64(k) = k u64 / (1 - k u64), u64 = 2^-53. For any row the second
// term is ~1e-16 n relative, i.e. the reference is the exact dot rounded once to float.
//
// Blocks are copied out of the (arbitrarily aligned) source with memcpy: no unaligned or
// type-punned loads. Multi-byte fields are little-endian, as GGUF stores them.
#pragma once

#include <cstdint>
#include <cstring>

#include "quant/blocks.h"
#include "quant/kernels.h"

// a * b + c must round twice, as in ggml's C reference; clang would otherwise fuse it.
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace ds4::quant::ref {

inline float fp16(f16_bits h) { return f16_to_f32(h); }

inline uint32_t load_u32_le(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

template <class Block, int QK, void (*Decode)(const Block&, float*)>
void dequant_blocks(const void* src, float* dst, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / QK; ++i) {
        Block b;
        std::memcpy(&b, p + i * sizeof(Block), sizeof(Block));
        Decode(b, dst + i * QK);
    }
}

template <class Block, int QK, void (*Decode)(const Block&, float*)>
float dot_blocks(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    double acc = 0.0;
    float buf[QK];
    for (int64_t i = 0; i < n / QK; ++i) {
        Block b;
        std::memcpy(&b, p + i * sizeof(Block), sizeof(Block));
        Decode(b, buf);
        const float* xb = x + i * QK;
        for (int j = 0; j < QK; ++j) acc += static_cast<double>(buf[j]) * static_cast<double>(xb[j]);
    }
    return static_cast<float>(acc);
}

template <class Block, int QK, void (*Decode)(const Block&, float*)>
constexpr Kernels block_kernels() {
    return Kernels{&dequant_blocks<Block, QK, Decode>, &dot_blocks<Block, QK, Decode>};
}

// Decoders, one per format (kernels_ref.cpp: legacy 32-blocks; kernels_ref_k.cpp: K-quants;
// kernels_ref_iq.cpp: codebook formats).
void decode_q4_0(const block_q4_0& b, float* y);
void decode_q4_1(const block_q4_1& b, float* y);
void decode_q5_0(const block_q5_0& b, float* y);
void decode_q5_1(const block_q5_1& b, float* y);
void decode_q8_0(const block_q8_0& b, float* y);
void decode_q2_K(const block_q2_K& b, float* y);
void decode_q3_K(const block_q3_K& b, float* y);
void decode_q4_K(const block_q4_K& b, float* y);
void decode_q5_K(const block_q5_K& b, float* y);
void decode_q6_K(const block_q6_K& b, float* y);
void decode_iq2_xxs(const block_iq2_xxs& b, float* y);
void decode_iq2_xs(const block_iq2_xs& b, float* y);
void decode_iq2_s(const block_iq2_s& b, float* y);
void decode_iq1_s(const block_iq1_s& b, float* y);
void decode_iq1_m(const block_iq1_m& b, float* y);
void decode_tq1_0(const block_tq1_0& b, float* y);
void decode_tq2_0(const block_tq2_0& b, float* y);
void decode_iq3_xxs(const block_iq3_xxs& b, float* y);
void decode_iq3_s(const block_iq3_s& b, float* y);
void decode_iq4_nl(const block_iq4_nl& b, float* y);
void decode_iq4_xs(const block_iq4_xs& b, float* y);
void decode_mxfp4(const block_mxfp4& b, float* y);

// Scale of an MXFP4 block: 2^(e - 127) / 2 (the code book is doubled), as ggml's
// ggml_e8m0_to_fp32_half; e < 2 gives the subnormals 2^-128 and 2^-127.
inline float e8m0_to_fp32_half(uint8_t e) {
    const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

}  // namespace ds4::quant::ref
