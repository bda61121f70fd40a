// Internals of the x86 SIMD kernels (kernels_avx2.cpp, kquants_avx2.cpp, kernels_avx512.cpp,
// kquants_avx512.cpp): the per-ISA function declarations, and the numerical contract they share.
//
// Weights.  Every kernel forms each weight w_i exactly as the scalar reference (and ggml's
// dequantize_row_*) does in float32.  For the formats without a minimum (Q4_0, Q5_0, Q8_0, Q3_K,
// Q6_K) w_i = d_s * q_i with d_s = d (or d * sc, exact: <= 11 + 8 significant bits) and |q_i| < 128,
// so w_i is an exact float product.  Those kernels either form w_i explicitly (AVX2 Q8_0 / Q6_K,
// all AVX-512 kernels: w_i = (q_i 2^24)(d_s 2^-24), exact, or a table T[q] = d_s (q - c)) and
// accumulate fma(w_i, x_i, acc), or sum q_i x_i over a scale group and multiply by d_s once
// (Σ_s d_s Σ_i q_i x_i: the same exact terms, grouped).  The formats with a minimum (Q4_1, Q5_1,
// Q2_K, Q4_K, Q5_K) compute w_i = fma(d_s, q_i, -m_s) (one rounding, d_s q_i being exact),
// bit-identical to the reference's d_s * q_i - m_s, then accumulate fma(w_i, x_i, acc): no
// factorisation into d_s Σ q x - m_s Σ x, whose cancellation would loosen the bound below from
// Σ|w x| to Σ(|d_s q x| + |m_s x|).  That costs one fma per weight; it is the price of exactness.
//
// Summation order.  A row is processed front to back.  Each of L lanes (8 for AVX2, 16 for
// AVX-512) of A vector accumulators holds a fixed subset of the positions; per scale group a lane
// forms at most G sequential roundings (the partial sum Σ q x, then one fma by d_s into the
// accumulator), accumulators advance once per group, and at the end the A accumulators are added
// pairwise and the L lanes reduced as a tree (log2 A + log2 L additions).  So every product w_i x_i
// passes through at most h roundings on its way to the result, with
//     h <= n / L + 16          (G <= 4 group-internal steps, log2 A <= 3, log2 L <= 4, +1 spare),
// and by the standard bound for any summation tree of depth h (Higham, Accuracy and Stability of
// Numerical Algorithms, 2nd ed., §4.2 and Lemma 3.1):
//     |dot_simd - Σ_i w_i x_i| <= γ_h Σ_i |w_i x_i|,   γ_h = h u / (1 - h u),   u = 2^-24.
// The reference is the exact sum rounded once (kernels_ref.h), so against it
//     |dot_simd - dot_ref| <= γ_h Σ_i |w_i x_i| + u |dot_ref| (+ γ64(n) Σ|w_i x_i|, negligible).
// tests/quant/test_simd_kernels.py and simd_check.cpp check exactly this bound per case; the largest
// error seen there is ~6% of it (random rows, n up to 16384, cancellation cases included).
//
// No kernel here reads past its row, and all loads are unaligned-safe (loadu / memcpy): GGUF gives
// no alignment beyond the block's own size.  (The AVX2 K-quant and legacy kernels issue prefetch
// hints 1 KiB ahead, which may point past the row: hints never fault and are not reads.)
#pragma once

#include <cstdint>

namespace ds4::quant {

#define DS4_X86_DECLARE_KERNELS                                              \
    float dot_f32(const void* w, const float* x, int64_t n);                 \
    float dot_f16(const void* w, const float* x, int64_t n);                 \
    float dot_bf16(const void* w, const float* x, int64_t n);                \
    float dot_q4_0(const void* w, const float* x, int64_t n);                \
    float dot_q4_1(const void* w, const float* x, int64_t n);                \
    float dot_q5_0(const void* w, const float* x, int64_t n);                \
    float dot_q5_1(const void* w, const float* x, int64_t n);                \
    float dot_q8_0(const void* w, const float* x, int64_t n);                \
    float dot_q2_K(const void* w, const float* x, int64_t n);                \
    float dot_q3_K(const void* w, const float* x, int64_t n);                \
    float dot_q4_K(const void* w, const float* x, int64_t n);                \
    float dot_q5_K(const void* w, const float* x, int64_t n);                \
    float dot_q6_K(const void* w, const float* x, int64_t n);                \
    void dequant_q5_0(const void* src, float* dst, int64_t n);               \
    void dequant_q8_0(const void* src, float* dst, int64_t n);               \
    void dequant_q4_K(const void* src, float* dst, int64_t n);               \
    void dequant_q6_K(const void* src, float* dst, int64_t n);

namespace avx2 { DS4_X86_DECLARE_KERNELS }
namespace avx512 { DS4_X86_DECLARE_KERNELS }

#undef DS4_X86_DECLARE_KERNELS

}  // namespace ds4::quant
