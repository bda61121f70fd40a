// Weights repacked for the int16 path's few-rows kernels, where the GGUF layout costs more
// vector ops to decode than the memory it saves (measured on Q5_0: ~25 ops per 32 weights and
// one row, compute-bound at ~13 GB/s on two Zen 3 cores against a ~18 GB/s read bandwidth).
//
// A packed matrix has exactly the size of the GGUF one: each tile of kPackRows consecutive
// rows is rewritten in place of those rows, and the rows after the last whole tile are copied
// as they are. A tile interleaves the rows block by block, so one pass over it feeds all its
// rows and every block's scales arrive together.
//
// Q8_0 packs row by row (a tile of one row, so every row is packed): each chunk of 8 blocks
// (and a last chunk of 4) holds its f16 scales, then its quants in the block-lane order of the
// int16 path (block_lanes.h), which the kernels then load as they are; another last chunk
// stays as in GGUF.
//
// Q5_0 tile, per block index b (176 bytes, as 8 GGUF blocks): the 8 rows' f16 scales d, then
// five words of 16 int16 lanes. Half h = 2 rho + s of the block (row rho, elements 16 s ..
// 16 s + 15) holds in lane i the 5-bit two's complement of q - 16 (q the 5-bit quant): halves
// 0..14 in bits 5 (h % 3) .. 5 (h % 3) + 4 of word h / 3, half 15 in bit 15 of the five words
// (bit k of the value in word k). Decoding a half is then two shifts (the sign extension) where
// the GGUF layout needs the nibble split and the fifth bit's mask, and the integers are the
// same, so every result stays bit for bit what the GEMM gives (int16_gemm.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/types.h"

namespace ds4::quant {

constexpr int kPackRows = 8;

// y[r * ldy + i] for the tile's rows i < pack_tile_rows(type) and activation rows r < nx <= the
// format's rows_max (int16_gemm.h): the int16-path dot, bit for bit what the GEMM gives.
using RowsPackedFn = void (*)(const void* tile, int64_t n, const int16_t* a, const float* da, const float* xs,
                              int nx, float* y, int64_t ldy);

// Whether `type` has a packed layout (Q5_0, Q8_0).
bool has_packed_layout(Type type);
// Rows per tile of the packed layout: kPackRows (Q5_0) or 1 (Q8_0); a divisor of kPackRows.
int pack_tile_rows(Type type);
// dst (n_out rows of row_bytes) = src packed: whole tiles rewritten, the remaining rows copied.
void pack_rows(Type type, const void* src, int64_t n_in, int64_t n_out, void* dst);
// The rows of a tile (n_in elements each) back in the GGUF layout, consecutive in dst.
void unpack_tile(Type type, const void* tile, int64_t n_in, void* dst);
// The tile's rows decoded for the int16 GEMM, as DecodeI16Fn (int16_gemm.h) decodes each GGUF
// row: row i to q + i n_in, sw + i (n_in / 32), mw + i (n_in / 16).
void decode_tile(Type type, const void* tile, int64_t n_in, int16_t* q, float* sw, float* mw);

namespace avx2 {
// The packed few-rows kernel of `type`, or nullptr.
RowsPackedFn rows_packed(Type type);
}  // namespace avx2

}  // namespace ds4::quant
