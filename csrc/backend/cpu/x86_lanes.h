// Reductions of an 8-lane float accumulator, in the one tree the x86 kernels of the CPU backend
// (attention, row ops) use on every width, so that a zmm kernel keeping an AVX2 kernel's 8-lane
// accumulator gives its floats. Include only from files compiled with at least the AVX2 flags.
#pragma once

#include <immintrin.h>

namespace ds4::backend::cpu {
namespace {

// (a0 + a4) + (a2 + a6) + ((a1 + a5) + (a3 + a7)), as a float.
inline float hsum8(__m256 v) {
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
    return _mm_cvtss_f32(s4);
}
// The largest lane by the same tree (exact, so the tree matters only where a NaN is in play:
// vmaxps keeps its second operand).
inline float hmax8(__m256 v) {
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    return _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
}

}  // namespace
}  // namespace ds4::backend::cpu
