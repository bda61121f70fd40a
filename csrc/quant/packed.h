// Weights repacked at load for the int16 path (int16_gemm.h): rows of the 32-element legacy
// formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) and code-book formats (IQ4_NL, MXFP4) in the block-lane order (block_lanes.h), so that the
// kernels load a chunk's vectors as they are and each block's products land in one lane. In the
// GGUF layout a vector of the block-lane order would gather from 8 blocks, and Q5_0 costs ~25
// ops per 32 weights to decode.
//
// A packed row has exactly the size of its GGUF row, and every row is packed on its own. Per
// chunk of 8 blocks (and a last chunk of exactly 4, block_lanes.h): the blocks' scales (f16 d;
// MXFP4: the E8M0 bytes e), for Q4_1 / Q5_1 then their f16 minima m, then their quants in the block-lane order, lane i of
// vector v being position 16 v + i of the chunk (v < 16, or 8 for the chunk of 4). Any other
// last chunk stays as in GGUF.
//   - Q8_0: the int8 quants, vector after vector (256 bytes per chunk).
//   - Q4_0, Q4_1, IQ4_NL, MXFP4: the GGUF nibbles q; byte i of group g (16 bytes, g < B = the chunk's blocks)
//     holds lane i of vector g in its low nibble and of vector g + B in its high one: one 16-byte
//     load gives vectors g and g + B (AVX2, NEON), one of 32 bytes vectors 2g, 2g + 1 and
//     2g + B, 2g + B + 1 (AVX-512). The bytes are GGUF's, moved: byte k of a block holds its
//     elements k and k + 16, which sit 16 B positions apart. 128 bytes per chunk.
//   - Q5_0, Q5_1: in lane i of vector v a 5-bit value s (Q5_0: the two's complement of q - 16,
//     Q5_1: q), stored in words of 16 uint16 lanes: vectors 0..14 in bits 5 (v % 3) .. 5 (v % 3)
//     + 4 of word v / 3, vector 15 in bit 15 of words 0..4 (bit k of s in word k); 5 words, 160
//     bytes. The chunk of 4: vectors 0..5 in words 0 and 1 as above, then 16 bytes whose byte i
//     holds the low 4 bits of vector 6's lane i (low nibble) and of vector 7's (high nibble);
//     bit 4 of those two in bit 15 of word 0 (vector 6) and word 1 (vector 7); 80 bytes.
//     Decoding a vector is then two shifts (or a shift and a mask) where the GGUF layout needs
//     the nibble split and the fifth bit's mask.
// The integers are the format's own, so every result is bit for bit what the int16 GEMM gives.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/types.h"

namespace ds4::quant {

// y[r * ldy] for activation rows r < nx <= the format's rows_max (int16_gemm.h), against one
// packed row (activation rows act_stride(n) apart): the int16-path dot, bit for bit what the
// GEMM gives.
using RowsPackedFn = void (*)(const void* row, int64_t n, const int16_t* a, const float* da, const float* xs,
                              int nx, float* y, int64_t ldy);
// The same for two consecutive packed rows, row_bytes apart: y[r * ldy] and y[r * ldy + 1].
using RowsPacked2Fn = void (*)(const void* row, size_t row_bytes, int64_t n, const int16_t* a, const float* da,
                               const float* xs, int nx, float* y, int64_t ldy);

// Whether `type` has a packed layout.
constexpr bool has_packed_layout(Type type) {
    return type == Type::Q4_0 || type == Type::Q4_1 || type == Type::Q5_0 || type == Type::Q5_1 || type == Type::Q8_0 ||
           type == Type::IQ4_NL || type == Type::MXFP4;
}
// n_out rows of n_in elements: dst = src packed, or unpacked back to GGUF (src != dst).
void pack_rows(Type type, const void* src, int64_t n_in, int64_t n_out, void* dst);
void unpack_rows(Type type, const void* src, int64_t n_in, int64_t n_out, void* dst);
// One packed row decoded for the int16 GEMM, as DecodeI16Fn (int16_gemm.h) decodes the GGUF row.
void decode_packed_row(Type type, const void* row, int64_t n_in, int16_t* q, float* sw, float* mw);

namespace avx2 {
// The packed rows kernel of `type`, or nullptr.
RowsPackedFn rows_packed(Type type);
}  // namespace avx2
namespace avxvnni {
RowsPackedFn rows_packed(Type type);  // avx2's, compiled for AVX-VNNI
}  // namespace avxvnni
namespace avx512 {
// The packed rows kernels of `type` (one row, two rows), or nullptr.
RowsPackedFn rows_packed(Type type);
RowsPacked2Fn rows_packed2(Type type);
}  // namespace avx512
namespace neon {
RowsPackedFn rows_packed(Type type);  // the packed rows kernel of `type`, or nullptr
}  // namespace neon

}  // namespace ds4::quant
