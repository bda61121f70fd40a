// The int16 path's multiply-add of int16 pairs into 32-bit lanes, for the kernels on ymm
// registers (AVX2, and the same kernels compiled for AVX-VNNI). In an unnamed namespace: each
// translation unit keeps the variant of its own flags.
#pragma once

#include <immintrin.h>

namespace ds4::quant {
namespace {

// acc + the products of a and b summed in pairs per 32-bit lane: vpmaddwd and vpaddd, or one
// vpdpwssd where the file compiles the kernels for AVX-VNNI (DS4_I16_VNNI) or AVX-512 VNNI: the
// same exact int32 sums (the activations never reach -32768, so no pair overflows either way).
inline __m256i madd_acc(__m256i acc, __m256i a, __m256i b) {
#if defined(DS4_I16_VNNI)
    return _mm256_dpwssd_avx_epi32(acc, a, b);
#elif defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpwssd_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}
// The products of a0, b0 and of a1, b1, summed in pairs per lane, both pairs into one lane.
inline __m256i madd2(__m256i a0, __m256i b0, __m256i a1, __m256i b1) {
    return madd_acc(_mm256_madd_epi16(a0, b0), a1, b1);
}

}  // namespace
}  // namespace ds4::quant
