// The int16 path: matmuls of integer weights with int16-quantised activations, where the float
// path is bound by its vector ops: a GEMM for batches of many rows (prompts), and fused kernels
// for a few rows (decode, verify blocks) that give the GEMM's floats bit for bit, so that every
// batch size of a model gets the same logits.
// (On Zen 3 vpmaddwd shares the multiply pipes with the FMAs, so the gain comes from its 16
// multiply-adds per instruction and, for the K-quants, from converting once per super-block.)
//
// Why int16 and not int8: llama.cpp quantises activations to 8 bits and lands 0.25 mean |Δlogit|
// from transformers on Gemma 3 270M; int16 activations measure >100x closer (bench/accuracy.py),
// well inside the oracle's criteria, greedy output unchanged.
//
// Spans and groups.  A row of n elements (n % 32 == 0) is cut into spans of 32, each split into
// two halves of 16, and the spans into groups of G spans that share one float scale per weight
// row and per activation row: G = 1 for the 32-element legacy formats, G = 8 (one 256-element
// super-block) for the K-quants and IQ4_XS, whose integer sub-block scales are folded into the
// integer weights so that a whole super-block accumulates in int32. A format with a minimum has one per
// unit of L elements (min_len): L = 32 for Q4_K and Q5_K (their sub-blocks), 16 for Q2_K (its
// sub-blocks) and for Q4_1 / Q5_1 (halves: their block-lane kernels' unit).
//   - A weight row is decoded (exactly) into integers q_e (|q_e| <= 4096), one scale sw_g per
//     group and a minimum mw_u per unit, such that w_e = sw_g q_e - mw_u as the format defines
//     it (mw = 0 for formats without a minimum). Q8_0: q = the quant, sw = d; Q4_K: q = sc q4,
//     sw = d, mw = dmin m; Q6_K: q = sc (q6 - 32), sw = d; IQ4_XS: q = (ls - 32) times the code
//     book's value, sw = d; and so on (int16_ref.cpp).
//   - An activation row is quantised per group: da = max|x_e| / R, a_e = round-to-nearest-even
//     (x_e / da) (|a_e| <= R; an all-zero group has da = 0), xs_u = da * Σ_{e in u} a_e (the
//     integer sum, then one product; L = 0: no xs). R = 32767, or 16383 for Q6_K and IQ4_XS,
//     whichever keeps a group's integer sums below 2^31.
// Spans keep the natural element order: the sum of the vpmaddwd of elements 0..15 and of
// 16..31 has in lane j the products of elements 2j, 2j+1, 2j+16 and 2j+17.
//
// Arithmetic (one order, shared by the scalar reference and every SIMD kernel, so that the int16
// path gives the same floats on every ISA that has it): per (weight row, activation row), eight
// float lanes acc_j, from zero; per group, S_j = the lane's integer products over the group's
// spans, summed exactly in int32; acc_j = fma((float)S_j, sw_g * da_g, acc_j), then, for formats
// with a minimum, acc_{u mod 8} = fma(-mw_u, xs_u, acc_{u mod 8}) over the group's units u in order
// (Q4_K: its eight sub-blocks in the eight lanes, one fma per lane and super-block); finally
// y = hsum(acc) (the AVX2 tree ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))). The minima ride in the
// tiles' own accumulators: a separate pass over the halves with its own lanes and tree took ~11 %
// of a Qwen2.5-Coder 1.5B prefill.
//
// The 32-element legacy formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) take another order, the block lanes
// (block_lanes.h): weights and activations are stored so that each block's 32 products land in one
// lane, summed exactly (T_b, in int32), and block b goes to lane b mod 8: acc_{b mod 8} =
// fma((float)T_b, sw_b * da_b, acc_{b mod 8}), in block order, then y = hsum(acc) and, for Q4_1 /
// Q5_1, y -= hsum(c) where c_j = fma(mw_h, xs_h, c_j) over the halves h = 8 i + j in the natural
// order, whatever the lanes. The blocks a row keeps in the natural order (a last 1..3 or 5..7) take
// the lane sums above, a block per group: acc_j = fma((float)S_j, sw_b * da_b, acc_j) for every j,
// which costs no reduction across lanes (a block's sum into one lane took ~3x the ops of its
// products). Their kernels need ~1.7x fewer ops per multiply-add than the lane sums above (one
// conversion and fma per 8 blocks instead of per block); the head of a tied-embedding model
// (Gemma's 262k x 640 Q8_0) is ~40 % of a verify pass, and Q5_0 most of Gemma's layers.
//
// Against the exact Σ w_e x_e, the result differs by the activation rounding, at most
// Σ_e |w_e| da_g/2, plus float rounding (x86/simd.h); tests/quant/test_int16_gemm.py checks both,
// and that every ISA's kernel equals the reference bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/block_lanes.h"
#include "quant/kernels.h"
#include "quant/packed.h"
#include "quant/types.h"

namespace ds4::quant {

constexpr int kSpan = 32;
constexpr int kHalf = 16;

// Elements from one quantised activation row to the next (every kernel's `a` and the callers'
// buffers): n rounded up to an odd number of 64-byte lines. Rows a multiple of 4 KiB apart
// (n = 2048, 4096) fall in one L1 set, and the 8 to 12 rows of a pass then evict each other
// from an 8-way L1 and stream from L2 (Q6_K, 2048 columns, AVX-512 GEMM: 29 GMAC/s, 59 padded).
constexpr int64_t act_stride(int64_t n) { return (n / kSpan) % 2 ? n : n + kSpan; }

// A quantiser's xs for the span at element e0 whose halves' integer sums are sum0 and sum1, group
// scale d: one value per minimum unit of min_len elements (none for 0).
inline void store_unit_sums(float* xs, int64_t e0, int min_len, float d, int32_t sum0, int32_t sum1) {
    if (min_len == kSpan) {
        xs[e0 / kSpan] = d * static_cast<float>(sum0 + sum1);
    } else if (min_len == kHalf) {
        xs[e0 / kHalf] = d * static_cast<float>(sum0);
        xs[e0 / kHalf + 1] = d * static_cast<float>(sum1);
    }
}
// xs of the elements [e0, e1) all v (a non-finite group's NaN).
inline void fill_unit_sums(float* xs, int64_t e0, int64_t e1, int min_len, float v) {
    if (min_len)
        for (int64_t u = e0 / min_len; u < e1 / min_len; ++u) xs[u] = v;
}

// Activation rows of the next pass of at most `most` when `left` remain: the fewest passes, of
// equal size (12 rows at most 8 per pass are 6 + 6, not 8 + 4: a pass reads its weight rows once
// whatever its size, and the kernels' rate rises with their activation rows).
constexpr int even_rows(int64_t left, int most) {
    const int64_t passes = (left + most - 1) / most;
    return static_cast<int>((left + passes - 1) / passes);
}

// One weight row of n elements: q[n], sw[n / (32 G)], mw[n / L] (callers give every row n / 16
// floats of mw and xs, the most any L needs).
using DecodeI16Fn = void (*)(const void* w, int64_t n, int16_t* q, float* sw, float* mw);
// One activation row of n floats, groups of `group_spans` spans, range R, minimum unit L
// (min_len; 0: xs not written): a[n], da[n / (32 G)], xs[n / L].
using QuantizeI16Fn = void (*)(const float* x, int64_t n, int group_spans, int range, int min_len, int16_t* a,
                               float* da, float* xs);
// The same for a block-lane format (groups of one span), a[n] in the block-lane order; xs (the
// half sums, in the natural order) written only by the quantisers of formats with a minimum.
using QuantizeLanesFn = void (*)(const float* x, int64_t n, int range, int16_t* a, float* da, float* xs);
// Rows o and o + 1 at w and w + row_bytes decoded as decode does, into the paired layout
// (I16Kernels::decode_pair): q[2n], sw[2 n / (32 G)] and mw (row o's at mw, row o + 1's at
// mw + n / 16).
using DecodePairI16Fn = void (*)(const void* w, size_t row_bytes, int64_t n, int16_t* q, float* sw, float* mw);
// For o < nw, r < nx: y[r * ldy + o] = the int16-path dot of decoded weight row o and quantised
// activation row r (weight rows of n elements in the layout decode_rows writes, activation rows
// act_stride(n) apart, the per-group arrays consecutive, mw and xs n / 16 apart per row; min_len:
// the format's L, 0 without a minimum).
using GemmI16Fn = void (*)(const int16_t* q, const float* sw, const float* mw, int min_len, int group_spans, int nw,
                           const int16_t* a, const float* da, const float* xs, int nx, int64_t n, float* y,
                           int64_t ldy);

// For r < nx <= kDotRowsMax: y[r * ldy] = the int16-path dot of weight row w (in its block format,
// decoded in registers) with quantised activation row r (act_stride(n) apart); bit-identical to
// gemm over decode's output.
using RowsI16Fn = void (*)(const void* w, int64_t n, const int16_t* a, const float* da, const float* xs, int nx,
                           float* y, int64_t ldy);

struct I16Kernels {
    DecodeI16Fn decode = nullptr;  // per format (scalar: decoding is amortised over many rows)
    int min_len = 0;               // L (0: no minimum)
    int group_spans = 1;           // G
    int range = 32767;             // R
    QuantizeI16Fn quantize = nullptr;
    GemmI16Fn gemm = nullptr;
    // A fused kernel for a few rows (optional acceleration of decode + gemm).
    RowsI16Fn rows = nullptr;
    // The same over a tile of packed rows (packed.h), for the formats that have a packed layout.
    RowsPackedFn rows_packed = nullptr;
    // The block-lane order (the legacy formats): decode and quantize_row write it, gemm and
    // rows_packed read it.
    bool block_lanes = false;
    // Most activation rows per call of rows / rows_packed.
    int rows_max = kDotRowsMax;
    // Activation rows of the next call when `left` rows remain (even_rows).
    int pass_rows(int64_t left) const { return even_rows(left, rows_max); }
    // One packed row (packed.h) decoded as `decode` decodes the GGUF row, for the formats with a
    // packed layout.
    DecodeI16Fn decode_packed = nullptr;
    // rows_packed, and rows, over two rows at once (row_bytes apart: consecutive rows, or rows of
    // two weight streams), where the ISA has such kernels; at most kPairRowsMax activation rows
    // per call.
    RowsPacked2Fn rows_packed2 = nullptr;
    RowsPacked2Fn rows2 = nullptr;
    // rows2 (rows_packed2) for one activation row as well (a decode step): the K-quants' pairs
    // kernels on AVX-512, whose group-end work serves both rows at once, and the block-lane ones
    // on Intel CPUs (x86/int16_blocks_avx512.cpp).
    bool rows2_one_row = false;
    // quantize then the block-lane order in one pass, where the ISA has it (xs written for the
    // formats with a minimum).
    QuantizeLanesFn quantize_lanes = nullptr;
    // Activation rows from which decode + gemm beats the fused kernels (0: the backend's default,
    // backend::kInt16GemmRows).
    int gemm_from = 0;
    // The paired layout of the GEMM's weight tile (AVX-512's K-quant GEMM), where set: rows o and
    // o + 1 (o even) fill q[o n, (o + 2) n) with their 16-element halves alternating, row o's
    // first, so that one plain load gives both rows' half against an activation half broadcast to
    // both (no fold of lanes per group, one activation load for several weight-row pairs); an odd
    // last row stays as decode writes it.
    DecodePairI16Fn decode_pair = nullptr;
    // Weight rows decoded at a time by a GEMM pass of few activation rows (backend::kInt16FewRows;
    // 0: the backend's tile), where set: AVX-512's register tile of the K-quants (3 pairs), whose
    // decoded rows then stay in L1 across the pass's activation rows and are read from there just
    // after they are written (Qwen2.5-Coder 1.5B, Intel Xeon: a 16-row verify pass 0.94x the
    // time of 48 rows decoded at a time, 32 rows 0.96x; from 96 rows on, the activations' reads
    // from L2 per tile cost more than that).
    int few_rows_tile = 0;

    int64_t groups(int64_t n) const { return n / (kSpan * group_spans); }
    // The fused kernel of one weight row (GGUF or packed), and of two where the ISA has one and
    // the call has more than one activation row, or one where rows2_one_row says so.
    RowsI16Fn rows_of(bool packed) const { return packed ? rows_packed : rows; }
    RowsPacked2Fn pairs_of(bool packed, int64_t activation_rows) const {
        return activation_rows > 1 || rows2_one_row ? (packed ? rows_packed2 : rows2) : nullptr;
    }
    void quantize_row(const float* x, int64_t n, int16_t* a, float* da, float* xs) const {
        if (quantize_lanes) return quantize_lanes(x, n, range, a, da, xs);
        quantize(x, n, group_spans, range, min_len, a, da, xs);
        if (block_lanes) BlockLanes(n).to_lanes_in_place(a);
    }
    // Weight rows 0 .. nw - 1 (row_bytes apart, GGUF or packed) decoded into the GEMM's tile.
    void decode_rows(const uint8_t* w, size_t row_bytes, bool packed, int nw, int64_t n, int16_t* q, float* sw,
                     float* mw) const {
        const int64_t g = groups(n), h = n / kHalf;
        int o = 0;
        if (decode_pair && !packed) {
            for (; o + 1 < nw; o += 2) decode_pair(w + o * row_bytes, row_bytes, n, q + o * n, sw + o * g, mw + o * h);
        }
        for (; o < nw; ++o) (packed ? decode_packed : decode)(w + o * row_bytes, n, q + o * n, sw + o * g, mw + o * h);
    }
    void gemm_rows(const int16_t* q, const float* sw, const float* mw, int nw, const int16_t* a, const float* da,
                   const float* xs, int nx, int64_t n, float* y, int64_t ldy) const {
        gemm(q, sw, mw, min_len, group_spans, nw, a, da, xs, nx, n, y, ldy);
    }
};

// The most activation rows per call of any pairs kernel (I16Kernels::rows2, rows_packed2).
constexpr int kPairRowsMax = 8;

// The int16-path kernels of `type` for `isa`; members null where the format or the ISA has none
// (then callers use the float path). Formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4, Q2_K..Q6_K, IQ4_XS,
// IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, TQ1_0, TQ2_0.
const I16Kernels& i16_kernels(Type type, Isa isa);
const I16Kernels& i16_kernels(Type type);  // for the active ISA

#define DS4_I16_DECLARE                                                                                        \
    void quantize_i16(const float* x, int64_t n, int group_spans, int range, int min_len, int16_t* a, float* da, \
                      float* xs);                                                                               \
    void gemm_i16(const int16_t* q, const float* sw, const float* mw, int min_len, int group_spans, int nw,    \
                  const int16_t* a, const float* da, const float* xs, int nx, int64_t n, float* y, int64_t ldy);
#define DS4_I16_BLOCKS_DECLARE                                                                                 \
    void gemm_i16_blocks(const int16_t* q, const float* sw, const float* mw, int min_len, int group_spans,      \
                         int nw, const int16_t* a, const float* da, const float* xs, int nx, int64_t n, float* y, \
                         int64_t ldy);
namespace ref {
DS4_I16_DECLARE
DS4_I16_BLOCKS_DECLARE
}  // namespace ref
// The ymm kernels: AVX2, and the same compiled for AVX-VNNI (x86/int16_*_avxvnni.cpp).
#define DS4_I16_YMM_DECLARE                                                                                       \
    DS4_I16_DECLARE                                                                                               \
    DS4_I16_BLOCKS_DECLARE                                                                                        \
    /* Activation rows per pass of the block-lane kernels (rows_max of their formats). */                       \
    constexpr int kBlockRowsMax = 6;                                                                              \
    /* decode_packed of `type` (the block-lane formats), or nullptr. */                                         \
    DecodeI16Fn decode_packed(Type type);                                                                         \
    /* decode, and the fused rows kernel (any number of rows), of the block-lane formats' GGUF rows. */           \
    DecodeI16Fn decode_gguf(Type type);                                                                           \
    RowsI16Fn rows_gguf(Type type);                                                                               \
    /* The fused few-rows kernel of `type` (the K-quants), or nullptr. */                                         \
    RowsI16Fn rows_i16(Type type);                                                                                \
    /* decode of the K-quants in registers (decode_row's values), or nullptr. */                                  \
    DecodeI16Fn decode_i16(Type type);
namespace avx2 {
DS4_I16_YMM_DECLARE
}  // namespace avx2
namespace avxvnni {
DS4_I16_YMM_DECLARE
}  // namespace avxvnni
namespace avx512 {
DS4_I16_BLOCKS_DECLARE
void gemm_i16(const int16_t* q, const float* sw, const float* mw, int min_len, int group_spans, int nw, const int16_t* a,
              const float* da, const float* xs, int nx, int64_t n, float* y, int64_t ldy);
// Activation rows per pass of the block-lane kernels: the sums of two weight rows and 8
// activation rows take 16 of the 32 registers; more rows spill, and their activations leave L1
// on long rows (8 rows of 2048 fill its 32 KiB).
constexpr int kBlockRowsMax = 8;
// Activation rows per pass of the K-quants' rows kernels (AVX2: kDotRowsMax).
constexpr int kRowsMax = 8;
// Weight rows of the K-quant GEMM's register tile (3 pairs in the paired layout).
constexpr int kPairedTileRows = 6;
// The fused rows kernels of the 256-element formats, one row and two at a time, or nullptr.
RowsI16Fn rows_i16(Type type);
RowsPacked2Fn rows2_i16(Type type);
// Whether one activation row runs faster two weight rows at a time (rows2_i16: the K-quants and
// IQ4_XS, whose decoders fill a zmm natively) than one (the span formats).
bool rows2_one_row(Type type);
// decode of the K-quants in registers (decode_row's values), or nullptr.
DecodeI16Fn decode_i16(Type type);
// decode_pair of the K-quants in registers, or nullptr.
DecodePairI16Fn decode_pair_i16(Type type);
// quantize_lanes, writing the half sums xs (formats with a minimum) or not.
QuantizeLanesFn quantize_i16_lanes(bool half_sums);
static_assert(kRowsMax <= kPairRowsMax && kBlockRowsMax <= kPairRowsMax, "the pairs kernels' passes");
}  // namespace avx512
namespace neon {
DS4_I16_DECLARE
DS4_I16_BLOCKS_DECLARE
// Activation rows per pass of the block-lane kernels.
constexpr int kBlockRowsMax = 4;
// The fused rows kernels of the K-quants, and their decode in registers (decode_row's values), or
// nullptr.
RowsI16Fn rows_i16(Type type);
DecodeI16Fn decode_i16(Type type);
// The fused rows kernel of the block-lane formats' GGUF rows (any number of rows), their decode
// and that of their packed rows (decode_packed), or nullptr.
RowsI16Fn rows_gguf(Type type);
DecodeI16Fn decode_gguf(Type type);
DecodeI16Fn decode_packed(Type type);
}  // namespace neon
#undef DS4_I16_DECLARE
#undef DS4_I16_BLOCKS_DECLARE
#undef DS4_I16_YMM_DECLARE

}  // namespace ds4::quant
