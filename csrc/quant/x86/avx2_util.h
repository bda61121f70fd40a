// Small AVX2 helpers shared by x86/float_avx2.cpp and x86/float_kquants_avx2.cpp.  Include only from files
// compiled with the AVX2 flags (*_avx2.cpp).  Everything is in an unnamed namespace, so each
// translation unit has its own copy: no inline function compiled for one ISA can be picked by the
// linker for a file built for another.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/x86/prefetch.h"

// The namespace of this translation unit's AVX2 kernels: avx2, or avxvnni in the files that
// compile the int16 kernels again for AVX-VNNI (x86/int16_*_avxvnni.cpp).
#ifndef DS4_AVX2_NAMESPACE
#define DS4_AVX2_NAMESPACE avx2
#endif

namespace ds4::quant::DS4_AVX2_NAMESPACE {
namespace {

inline float load_f16(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);  // exact, subnormals included
}

// 8 bytes -> 8 int32 lanes.  A 64-bit broadcast load plus an in-lane byte shuffle: cheaper on
// Zen than vpmovzxbd / vpmovsxbd ymm, whose lane-crossing form costs several FP-pipe cycles.
// Lane 0 takes bytes 0..3, lane 1 bytes 4..7 (both lanes hold all 8 after the broadcast).
inline __m256i bcast8(const uint8_t* p) {
    int64_t v;
    std::memcpy(&v, p, sizeof v);
    return _mm256_set1_epi64x(v);
}
inline __m256i u8x8(const uint8_t* p) {
    const __m256i spread = _mm256_setr_epi8(0, -1, -1, -1, 1, -1, -1, -1, 2, -1, -1, -1, 3, -1, -1, -1,
                                            4, -1, -1, -1, 5, -1, -1, -1, 6, -1, -1, -1, 7, -1, -1, -1);
    return _mm256_shuffle_epi8(bcast8(p), spread);
}
// Signed: each byte into the top of its dword, then an arithmetic shift sign-extends it.
inline __m256i i8x8(const uint8_t* p) {
    const __m256i top = _mm256_setr_epi8(-1, -1, -1, 0, -1, -1, -1, 1, -1, -1, -1, 2, -1, -1, -1, 3,
                                         -1, -1, -1, 4, -1, -1, -1, 5, -1, -1, -1, 6, -1, -1, -1, 7);
    return _mm256_srai_epi32(_mm256_shuffle_epi8(bcast8(p), top), 24);
}

// 16 int8 quants (in v, or at p), each in the top byte of an int32 lane, converted: q 2^24 (exact).
inline void i8x16_top_reg(__m128i v, __m256& lo, __m256& hi) {
    const __m256i b = _mm256_broadcastsi128_si256(v);
    const __m256i c_lo = _mm256_setr_epi8(-1, -1, -1, 0, -1, -1, -1, 1, -1, -1, -1, 2, -1, -1, -1, 3,
                                          -1, -1, -1, 4, -1, -1, -1, 5, -1, -1, -1, 6, -1, -1, -1, 7);
    const __m256i c_hi = _mm256_setr_epi8(-1, -1, -1, 8, -1, -1, -1, 9, -1, -1, -1, 10, -1, -1, -1, 11,
                                          -1, -1, -1, 12, -1, -1, -1, 13, -1, -1, -1, 14, -1, -1, -1, 15);
    lo = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(b, c_lo));
    hi = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(b, c_hi));
}

// acc0 += w[0..8) x[0..8), acc1 += w[8..16) x[8..16), w = (q 2^24) * d_scaled with
// d_scaled = d 2^-24: the exact product d q.
inline void fma16_i8_reg(__m128i q, __m256 d_scaled, const float* x, __m256& acc0, __m256& acc1) {
    __m256 lo, hi;
    i8x16_top_reg(q, lo, hi);
    acc0 = _mm256_fmadd_ps(_mm256_mul_ps(lo, d_scaled), _mm256_loadu_ps(x), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_mul_ps(hi, d_scaled), _mm256_loadu_ps(x + 8), acc1);
}
// The same from memory (the 128-bit broadcast then folds into the load).
inline void fma16_i8(const uint8_t* p, __m256 d_scaled, const float* x, __m256& acc0, __m256& acc1) {
    fma16_i8_reg(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), d_scaled, x, acc0, acc1);
}

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline float hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
    return hsum(_mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d)));
}

// Pairwise tree over 8 accumulators, then the lanes.
inline float hsum8(const __m256 a[8]) {
    const __m256 s01 = _mm256_add_ps(a[0], a[1]), s23 = _mm256_add_ps(a[2], a[3]);
    const __m256 s45 = _mm256_add_ps(a[4], a[5]), s67 = _mm256_add_ps(a[6], a[7]);
    return hsum(_mm256_add_ps(_mm256_add_ps(s01, s23), _mm256_add_ps(s45, s67)));
}

inline __m256i shr(__m256i v, int c) { return _mm256_srl_epi32(v, _mm_cvtsi32_si128(c)); }

}  // namespace
}  // namespace ds4::quant::DS4_AVX2_NAMESPACE
