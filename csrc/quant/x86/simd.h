// Internals of the x86 SIMD kernels (kernels_, kquants_ and x86/float_gemm_avx2.cpp / _avx512.cpp): the
// per-ISA function declarations, and the numerical contract they share.
//
// Weights.  Every kernel forms each weight w_i exactly as the scalar reference (and ggml's
// dequantize_row_*) does in float32.  For the formats without a minimum (Q4_0, Q5_0, Q8_0, Q3_K,
// Q6_K) w_i = d_s * q_i with d_s = d (or d * sc, exact: <= 11 + 8 significant bits) and |q_i| < 128,
// so w_i is an exact float product.  Those kernels sum u_i x_i over a scale group, u_i an exact
// float standing for q_i (q_i itself, q_i - c, or q_i 2^24), and multiply by the group's scale
// once (Σ_s d_s Σ_i q_i x_i: the same exact terms, grouped).  The formats with a minimum (Q4_1, Q5_1,
// Q2_K, Q4_K, Q5_K) compute w_i = fma(d_s, q_i, -m_s) (one rounding, d_s q_i being exact),
// bit-identical to the reference's d_s * q_i - m_s, then accumulate w_i x_i by fma: no
// factorisation into d_s Σ q x - m_s Σ x, whose cancellation would loosen the bound below from
// Σ|w x| to Σ(|d_s q x| + |m_s x|).  That costs one fma per weight; it is the price of exactness.
//
// Summation order (one canonical order per ISA, shared by dot, dot_rows and gemm_groups, so that
// decode, verify blocks and prefill agree bit for bit).  With L lanes (8 for AVX2, 16 for
// AVX-512), a row of a quantised format is cut into groups of g elements (g = the format's
// group_len: 32, or 16 for Q2_K / Q3_K / Q6_K); group k is G = g / L vectors u_0..u_{G-1} of
// exactly representable floats and one scale s_k (u = q 2^24 with s = d_s 2^-24, or u = q - c with
// s = d_s, or for the formats with a minimum u = w itself and s = 1).  For one activation row x:
//     t   = u_0 * x_0;   t = fma(u_j, x_j, t) for j = 1..G-1      (lane-wise, in order)
//     acc = fma(t, s_k, acc)                                     (one accumulator, from zero)
// and the result is the lanes of acc reduced by hsum (x86/avx2_util.h / x86/avx512_util.h).
// The float formats use the same form with g = 32, u = w, s = 1, and a zero-padded last group.
// Per group a lane forms at most G + 1 <= 5 roundings and the accumulator advances once, so every
// product w_i x_i passes through at most h roundings on its way to the result, with
//     h <= n / L + 16          (G + 1 <= 5 group steps, log2 L <= 4 lane-tree steps, + spare),
// and by the standard bound for any summation tree of depth h (Higham, Accuracy and Stability of
// Numerical Algorithms, 2nd ed., §4.2 and Lemma 3.1):
//     |dot_simd - Σ_i w_i x_i| <= γ_h Σ_i |w_i x_i|,   γ_h = h u / (1 - h u),   u = 2^-24.
// The reference is the exact sum rounded once (kernels_ref.h), so against it
//     |dot_simd - dot_ref| <= γ_h Σ_i |w_i x_i| + u |dot_ref| (+ γ64(n) Σ|w_i x_i|, negligible).
// tests/quant/test_simd_kernels.py and simd_check.cpp check exactly this bound per case, and that
// dot_rows and gemm_groups reproduce dot bit for bit.
//
// No kernel here reads past its row, and all loads are unaligned-safe (loadu / memcpy): GGUF gives
// no alignment beyond the block's own size.  (The AVX2 K-quant and legacy kernels issue prefetch
// hints 1 KiB ahead, which may point past the row: hints never fault and are not reads.)
#pragma once

#include <cstdint>

namespace ds4::quant {

#define DS4_X86_DECLARE_ROWS(fmt) \
    void dot_rows_##fmt(const void* w, const float* x, int64_t ldx, int nx, int64_t n, float* y, int64_t ldy);
#define DS4_X86_DECLARE_GROUPS(fmt) void groups_##fmt(const void* w, int64_t n, float* u, float* scales);

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
    void dequant_q6_K(const void* src, float* dst, int64_t n); \
    DS4_X86_DECLARE_ROWS(f32) DS4_X86_DECLARE_ROWS(f16) DS4_X86_DECLARE_ROWS(bf16)     \
    DS4_X86_DECLARE_ROWS(q4_0) DS4_X86_DECLARE_ROWS(q4_1) DS4_X86_DECLARE_ROWS(q5_0)   \
    DS4_X86_DECLARE_ROWS(q5_1) DS4_X86_DECLARE_ROWS(q8_0) DS4_X86_DECLARE_ROWS(q2_K)   \
    DS4_X86_DECLARE_ROWS(q3_K) DS4_X86_DECLARE_ROWS(q4_K) DS4_X86_DECLARE_ROWS(q5_K)   \
    DS4_X86_DECLARE_ROWS(q6_K)                                                         \
    DS4_X86_DECLARE_GROUPS(q4_0) DS4_X86_DECLARE_GROUPS(q4_1) DS4_X86_DECLARE_GROUPS(q5_0) \
    DS4_X86_DECLARE_GROUPS(q5_1) DS4_X86_DECLARE_GROUPS(q8_0) DS4_X86_DECLARE_GROUPS(q2_K) \
    DS4_X86_DECLARE_GROUPS(q3_K) DS4_X86_DECLARE_GROUPS(q4_K) DS4_X86_DECLARE_GROUPS(q5_K) \
    DS4_X86_DECLARE_GROUPS(q6_K)                                                       \
    void gemm_groups(const float* u, const float* scales, int nw, const float* x, int64_t ldx, int nx, \
                     int64_t n, int group_len, float* y, int64_t ldy);

namespace avx2 { DS4_X86_DECLARE_KERNELS }
namespace avx512 { DS4_X86_DECLARE_KERNELS }

#undef DS4_X86_DECLARE_KERNELS

}  // namespace ds4::quant
