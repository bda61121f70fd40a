// Vectorised row ops of the CPU backend: the (chunked) softmax of attention scores, the gated activations
// (GELU-tanh, SiLU) of the feed-forward block, the argmax of a block of logits (greedy head),
// the exponentials of a row of logits at a temperature (the sampler's weights) and the f16
// conversion of the rows stored in an f16 KV cache.
//
// Batch invariance: every element is computed by the same instruction sequence wherever it sits
// in a row (tails go through the same vector code, padded and masked), and the softmax of a row
// depends only on that row; so results never depend on how rows are batched or split over
// threads. The SIMD exp is the classic range reduction + degree-6 polynomial (within ~2 ulp of
// the correctly rounded value on the inputs these ops can produce); tanh is an odd polynomial
// near 0 and 1 - 2 / (e^2x + 1) elsewhere.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "quant/kernels.h"

namespace ds4::backend::cpu {

struct VecMath {
    // The softmax of a chunk of attention scores, unnormalised: with v_j = cap(scale * s[j])
    // (cap(v) = tanh(v / softcap) * softcap when softcap > 0), s[j] <- e^(v_j - max), *max = the
    // largest v_j, *sum = the sum of the exps. softmax(v) is s / sum; attention merges chunks by
    // their (max, sum) (cpu_backend.cpp).
    void (*softmax_part)(float* s, int64_t n, float scale, float softcap, float* max, float* sum);
    // y[i] = act(gate[i]) * up[i] for i < n (act: SiLU, or GELU with the tanh approximation).
    void (*glu)(const float* gate, const float* up, int64_t n, Act act, float* y);
    // The index of the first largest value of v[0..n) (n >= 1) and that value in *max; *finite is
    // set false if some v is NaN or +inf (the index is then meaningless).
    int64_t (*argmax)(const float* v, int64_t n, float* max, bool* finite);
    // out[i] = e^((x[i] - max) / t) for i < n (t > 0, max >= every x[i]; out may be x), the
    // argument in float arithmetic; below a float's normal range (and for -inf) exactly what
    // std::exp gives: denormals, then 0.
    void (*exp_scaled)(const float* x, int64_t n, float max, float t, float* out);
    // y[i] = x[i] as an IEEE half, rounded to nearest even: quant::f32_to_f16's bits (a NaN
    // stays a quiet NaN with the top bits of its payload) on every ISA.
    void (*to_f16)(const float* x, int64_t n, uint16_t* y);
};

const VecMath& vec_math_scalar();
#if defined(DS4_X86)
const VecMath& vec_math_avx2();    // vmath_avx2.cpp (F16C included); also the AVX-VNNI level's
const VecMath& vec_math_avx512();  // vmath_avx512.cpp: vmath_avx2.cpp's floats, 16 lanes at a time
#elif defined(DS4_ARM64)
const VecMath& vec_math_neon();  // vmath_neon.cpp
#endif
// The kernels of `isa` (scalar where no SIMD variant exists); vec_math() those of the active ISA.
const VecMath& vec_math(quant::Isa isa);
const VecMath& vec_math();

}  // namespace ds4::backend::cpu
