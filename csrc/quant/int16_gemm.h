// The int16 prefill path: a GEMM over integer weights and int16-quantised activations, for
// batches of many rows (long prefills), where the float path is bound by its FMA pipes.
//
// Why int16 and not int8: llama.cpp quantises activations to 8 bits and lands 0.25 mean |Δlogit|
// from transformers on Gemma 3 270M; 16 bits per 32-element span keep the error ~256x smaller
// (well inside the oracle's criteria), while vpmaddwd still does 16 multiply-adds per
// instruction on integer pipes that the float path leaves idle.
//
// Spans.  A row of n elements (n % 32 == 0) is cut into spans of 32; each span is split into
// two halves of 16, the unit of the weight scales (the 16-element sub-blocks of Q2_K / Q3_K /
// Q6_K; the other formats have one scale per 32, written twice).
//   - A weight row is decoded (exactly) into integers q_e with |q_e| <= 128, a scale sw_h and a
//     minimum mw_h per half, such that the weight is w_e = sw_h q_e - mw_h, as the format defines
//     it (mw = 0 for formats without a minimum).
//   - An activation row is quantised per span: da = max|x_e| / 32767, a_e = round-to-nearest-even
//     (x_e / da) (|a_e| <= 32767; a zero span has da = 0), and xs_h = da * Σ_{e in h} a_e.
// Within a span, the 32 int16 are stored in the lane order of vpmaddwd: element 16 h + 4 k + m
// (half h, k = 0..3, m = 0..3) sits at position 2 j + m (m < 2) or 16 + 2 j + m - 2 (m >= 2), with
// j = 2 k + h, so that the sum of the vpmaddwd of positions 0..15 and of 16..31 has in lane j
// the four products of elements 16 h + 4 k .. + 3: even lanes hold half 0, odd lanes half 1, and
// the lane scales of a span are one 64-bit broadcast of its two sw.
//
// Arithmetic (one order, shared by the scalar reference and every SIMD kernel, so that the int16
// path gives the same floats on every ISA that has it): per (weight row, activation row), eight
// float lanes acc_j, from zero; per span, S_j = the lane's four integer products summed (exact,
// |S_j| < 2^24, so (float)S_j is exact), acc_j = fma((float)S_j, sw_{j % 2} * da, acc_j); then
// y = hsum(acc) (the AVX2 tree ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))) and, for formats with a
// minimum, y -= hsum(c) where c_j = fma(mw_h, xs_h, c_j) over the halves h = 8 i + j in order.
//
// Against the exact Σ w_e x_e, the result differs by the activation rounding, at most
// Σ_e |w_e| da/2, plus float rounding bounded as in simd_x86.h; tests/quant/test_int16_gemm.py
// checks both, and that every ISA's kernel equals the reference bit for bit.
#pragma once

#include <cstdint>

#include "quant/kernels.h"
#include "quant/types.h"

namespace ds4::quant {

constexpr int kSpan = 32;
constexpr int kHalf = 16;

// One weight row of n elements: q[n] (span lane order), sw[n / 16], mw[n / 16].
using DecodeI16Fn = void (*)(const void* w, int64_t n, int16_t* q, float* sw, float* mw);
// One activation row of n floats: a[n] (span lane order), da[n / 32], xs[n / 16].
using QuantizeI16Fn = void (*)(const float* x, int64_t n, int16_t* a, float* da, float* xs);
// For o < nw, r < nx: y[r * ldy + o] = the int16-path dot of decoded weight row o (q + o * n,
// sw / mw + o * n / 16) with quantised activation row r (a + r * n, da + r * n / 32,
// xs + r * n / 16); has_min says whether to subtract the minimum term.
using GemmI16Fn = void (*)(const int16_t* q, const float* sw, const float* mw, bool has_min, int nw,
                           const int16_t* a, const float* da, const float* xs, int nx, int64_t n, float* y,
                           int64_t ldy);

struct I16Kernels {
    DecodeI16Fn decode = nullptr;  // per format (scalar: decoding is amortised over many rows)
    bool has_min = false;
    QuantizeI16Fn quantize = nullptr;
    GemmI16Fn gemm = nullptr;
};

// The int16-path kernels of `type` for `isa`; members null where the format or the ISA has none
// (then callers use the float path). Formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K.
const I16Kernels& i16_kernels(Type type, Isa isa);
const I16Kernels& i16_kernels(Type type);  // for the active ISA

namespace ref {
void quantize_i16(const float* x, int64_t n, int16_t* a, float* da, float* xs);
void gemm_i16(const int16_t* q, const float* sw, const float* mw, bool has_min, int nw, const int16_t* a,
              const float* da, const float* xs, int nx, int64_t n, float* y, int64_t ldy);
}  // namespace ref
namespace avx2 {
void quantize_i16(const float* x, int64_t n, int16_t* a, float* da, float* xs);
void gemm_i16(const int16_t* q, const float* sw, const float* mw, bool has_min, int nw, const int16_t* a,
              const float* da, const float* xs, int nx, int64_t n, float* y, int64_t ldy);
}  // namespace avx2

}  // namespace ds4::quant
