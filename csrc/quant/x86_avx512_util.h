// Small AVX-512 helpers shared by kernels_avx512.cpp and kquants_avx512.cpp.  Include only from
// files compiled with the AVX-512 flags (*_avx512.cpp).  Everything is in an unnamed namespace, so
// each translation unit has its own copy: no inline function compiled for one ISA can be picked by
// the linker for a file built for another.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace ds4::quant::avx512 {
namespace {

inline float load_f16(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));  // exact, subnormals included
}

// 16 bytes -> 16 int32 lanes.
inline __m512i u8x16(const uint8_t* p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Fixed tree: 16 -> 8 lanes, then 8 -> 4 -> 2 -> 1.
inline float hsum(__m512 v) {
    const __m256 lo = _mm512_castps512_ps256(v);
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    const __m256 s8 = _mm256_add_ps(lo, hi);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline __m512 iota16() {
    return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

}  // namespace
}  // namespace ds4::quant::avx512
