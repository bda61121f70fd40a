// AVX-512 helpers shared by x86/float_avx512.cpp, x86/float_kquants_avx512.cpp and x86/float_gemm_avx512.cpp, and the
// one implementation of the canonical summation order (x86/simd.h, L = 16) that every AVX-512
// dot, dot_rows and decode_groups is built from.  Include only from files compiled with the
// AVX-512 flags (*_avx512.cpp).  Everything is in an unnamed namespace, so each translation unit
// has its own copy: no inline function compiled for one ISA can be picked by the linker for a file
// built for another.
//
// A quantised format is a struct with
//     kElems, kBytes   elements and bytes per block,
//     kGroup           group_len (32: G = 2 vectors per group; 16: G = 1),
//     kUnitScale       true when u = w and s = 1 (the formats with a minimum),
//     block(p, f)      decodes the block at p, calling f(off, u, s) once per group in element
//                      order: u[0..G) the group's exact floats for elements off .. off + kGroup of
//                      the block, s its scale broadcast to 16 lanes.
// dot, dot_rows, decode_groups and dequant below all consume block(), so they see the same floats.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/kernels.h"

#define DS4_AVX512_INLINE inline __attribute__((always_inline))

namespace ds4::quant::avx512 {
namespace {

inline uint16_t load_u16(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return h;
}

// The f16 at p, converted (exactly, subnormals included) and broadcast to 16 lanes.
DS4_AVX512_INLINE __m512 bcast_f16(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(load_u16(p))));
}

// 16 bytes -> 16 int32 lanes.
DS4_AVX512_INLINE __m512i u8x16(const uint8_t* p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
DS4_AVX512_INLINE __m512i i8x16(const uint8_t* p) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline __m512 iota16() {
    return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

// After storing a block's per-group scales (or quants) to a small array: makes the compiler
// treat the array as changed in memory, so each group's broadcast / widening load from it stays a
// load (one load-port uop, or folded into the fma as {1to16}); GCC would otherwise forward the
// stored vector through lane permutes (vpermd / vextracti32x4), a shuffle and an index register each.
template <class T>
DS4_AVX512_INLINE void keep_in_memory(T& a) {
    asm("" : "+m"(a));
}

// The fixed lane tree of the canonical order: 16 -> 8 lanes, then 8 -> 4 -> 2 -> 1.
DS4_AVX512_INLINE float hsum(__m512 v) {
    const __m256 lo = _mm512_castps512_ps256(v);
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    const __m256 s8 = _mm256_add_ps(lo, hi);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// One group step of the canonical order for R activation rows: t = u_0 x_0, t = fma(u_j, x_j, t),
// acc_r = fma(t, s, acc_r).  xv(r, j) loads the 16 activations of row r matching u[j].
template <int G, int R, class LoadX>
DS4_AVX512_INLINE void group_step(__m512 (&acc)[R], const __m512* u, __m512 s, LoadX&& xv) {
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
        __m512 t = _mm512_mul_ps(u[0], xv(r, 0));
        #pragma GCC unroll 2
        for (int j = 1; j < G; ++j) t = _mm512_fmadd_ps(u[j], xv(r, j), t);
        acc[r] = _mm512_fmadd_ps(t, s, acc[r]);
    }
}

template <int R>
DS4_AVX512_INLINE void store_hsums(const __m512 (&acc)[R], float* y, int64_t ldy) {
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) y[r * ldy] = hsum(acc[r]);
}

// R activation rows (x + r ldx) against one weight row of format Fmt; each block decoded once.
template <class Fmt, int R>
void quant_rows(const uint8_t* p, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy) {
    constexpr int G = Fmt::kGroup / 16;
    __m512 acc[R];
    for (auto& a : acc) a = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / Fmt::kElems; ++i, p += Fmt::kBytes, x += Fmt::kElems) {
        Fmt::block(p, [&](int off, const __m512* u, __m512 s) {
            group_step<G, R>(acc, u, s, [&](int r, int j) { return _mm512_loadu_ps(x + r * ldx + off + 16 * j); });
        });
    }
    store_hsums(acc, y, ldy);
}

template <class Fmt>
float quant_dot(const void* w, const float* x, int64_t n) {
    float y;
    quant_rows<Fmt, 1>(static_cast<const uint8_t*>(w), x, 0, n, &y, 0);
    return y;
}

template <class Fmt>
void quant_dot_rows(const void* w, const float* x, int64_t ldx, int nx, int64_t n, float* y, int64_t ldy) {
    const auto* p = static_cast<const uint8_t*>(w);
    static_assert(kDotRowsMax == 4, "one instance per row count");
    switch (nx) {
        case 1: return quant_rows<Fmt, 1>(p, x, ldx, n, y, ldy);
        case 2: return quant_rows<Fmt, 2>(p, x, ldx, n, y, ldy);
        case 3: return quant_rows<Fmt, 3>(p, x, ldx, n, y, ldy);
        default: return quant_rows<Fmt, 4>(p, x, ldx, n, y, ldy);
    }
}

template <class Fmt>
void quant_groups(const void* w, int64_t n, float* u, float* scales) {
    constexpr int G = Fmt::kGroup / 16;
    const auto* p = static_cast<const uint8_t*>(w);
    for (int64_t i = 0; i < n / Fmt::kElems; ++i, p += Fmt::kBytes, u += Fmt::kElems) {
        Fmt::block(p, [&](int off, const __m512* uv, __m512 s) {
            #pragma GCC unroll 2
            for (int j = 0; j < G; ++j) _mm512_storeu_ps(u + off + 16 * j, uv[j]);
            *scales++ = _mm_cvtss_f32(_mm512_castps512_ps128(s));
        });
    }
}

// w = u s: for the formats without a minimum the exact product the reference forms (d_s q).
template <class Fmt>
void quant_dequant(const void* src, float* dst, int64_t n) {
    constexpr int G = Fmt::kGroup / 16;
    const auto* p = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / Fmt::kElems; ++i, p += Fmt::kBytes, dst += Fmt::kElems) {
        Fmt::block(p, [&](int off, const __m512* u, __m512 s) {
            #pragma GCC unroll 2
            for (int j = 0; j < G; ++j)
                _mm512_storeu_ps(dst + off + 16 * j, Fmt::kUnitScale ? u[j] : _mm512_mul_ps(u[j], s));
        });
    }
}

}  // namespace
}  // namespace ds4::quant::avx512

// dot_<fmt>, dot_rows_<fmt> and groups_<fmt> of x86/simd.h for the format struct Fmt.
#define DS4_AVX512_QUANT_KERNELS(fmt, Fmt)                                                              \
    float dot_##fmt(const void* w, const float* x, int64_t n) { return quant_dot<Fmt>(w, x, n); }       \
    void dot_rows_##fmt(const void* w, const float* x, int64_t ldx, int nx, int64_t n, float* y,        \
                        int64_t ldy) {                                                                  \
        quant_dot_rows<Fmt>(w, x, ldx, nx, n, y, ldy);                                                  \
    }                                                                                                   \
    void groups_##fmt(const void* w, int64_t n, float* u, float* scales) { quant_groups<Fmt>(w, n, u, scales); }
