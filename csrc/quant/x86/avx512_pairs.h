// Helpers of the AVX-512 int16 kernels that take two weight rows at a time (x86/int16_gemm_avx512.cpp,
// x86/int16_blocks_avx512.cpp, x86/int16_rows_avx512.cpp). Two layouts: a zmm of row o in its low
// 256 bits and row o + 1 in its high ones against activations broadcast to both halves, or a zmm
// of 32 consecutive weights of one row against a plain load of the activations (shared by both
// rows), folded (fold) into the first layout at a group's end. Either way each half ends in the
// AVX2 kernels' 8-lane sums, so that every lane does the AVX2 kernels' arithmetic. Include only
// from files compiled with the AVX-512 flags; everything is in an unnamed namespace (one copy per
// translation unit, compiled for its ISA).
#pragma once

// GCC 12 warns on its own _mm512_undefined_* inside the insert / cast intrinsics (GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

namespace ds4::quant {
namespace {

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
inline __m256i join(__m128i lo, __m128i hi) { return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1); }
inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
inline __m512 join(__m256 lo, __m256 hi) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}
// 16 int16 activations in both halves.
inline __m512i bcast(const int16_t* p) { return _mm512_broadcast_i64x4(load256(p)); }

// Lanes j and 8 + j of a into lane j and those of b into lane 8 + j, exact int32 sums: where a
// zmm holds 32 consecutive int16 of one weight row, lane j and j + 8 sum what lane j of the AVX2
// kernels' 16-element vectors sums, so this gives two rows' AVX2 lane sums in the two halves.
inline __m512i fold(__m512i a, __m512i b) {
    return _mm512_add_epi32(_mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                            _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
}
// An activation-row stride the compiler cannot see through: knowing it, GCC keeps a pointer per
// activation row and vector of an unrolled loop, more than the registers hold.
inline void opaque(int64_t& v) { asm("" : "+r"(v)); }
// A vector kept in a register where it is loaded: GCC would fold the load into each instruction
// that uses it, run short of registers and spill it to the stack between them.
inline void in_register(__m512i& v) {
#if defined(__AVX512F__)
    asm("" : "+v"(v));
#else
    (void)v;
#endif
}

// The dword at p in every lane, by a load: vpbroadcastd from memory takes a load port only, from
// a register the shuffle port that decoding the weights needs (GCC forwards a stored value to
// the broadcast unless it must read memory).
inline __m512i broadcast_load(const int32_t* p) {
#if defined(__AVX512F__)
    __m512i v;
    asm("vpbroadcastd %1, %0" : "=v"(v) : "m"(*p));
    return v;
#else
    return _mm512_set1_epi32(*p);
#endif
}

// The AVX2 kernels' sum of 8 lanes: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
// ... of row o's half and of row o + 1's.
inline float hsum_lo(__m512 v) { return hsum8(_mm512_castps512_ps256(v)); }
inline float hsum_hi(__m512 v) { return hsum8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))); }

// hsum_lo and hsum_hi of R accumulators (activation rows r), stored as y[r * ldy] and, when
// nw == 2, y[r * ldy + 1] (Subtract: subtracted from them): the same adds in the same order,
// eight accumulators' sixteen halves per three levels of shuffles and adds instead of one tree
// each. Level 1 puts each half's (a_j + a_j+4) in a 128-bit lane, level 2 its (s0 + s2, s1 + s3)
// and level 3 its t0 + t1; eight accumulators A..H come out as
// [A C E G lo | A C E G hi | B D F H lo | B D F H hi].
template <bool Subtract = false, int R>
inline void store_hsums(const __m512 (&acc)[R], int nw, float* y, int64_t ldy) {
    const auto put = [](float& dst, float v) { dst = Subtract ? dst - v : v; };
    const auto level1 = [](__m512 a, __m512 b) {
        return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
    };
    const auto level2 = [](__m512 s, __m512 t) {
        return _mm512_add_ps(_mm512_shuffle_ps(s, t, _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(s, t, _MM_SHUFFLE(3, 2, 3, 2)));
    };
    const auto level3 = [](__m512 s, __m512 t) {
        return _mm512_add_ps(_mm512_shuffle_ps(s, t, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_ps(s, t, _MM_SHUFFLE(3, 1, 3, 1)));
    };
    for (int r0 = 0; r0 < R; r0 += 8) {
        __m512 a[8];
        for (int i = 0; i < 8; ++i) a[i] = r0 + i < R ? acc[r0 + i] : _mm512_setzero_ps();
        const __m512 out = level3(level2(level1(a[0], a[1]), level1(a[2], a[3])),
                                  level2(level1(a[4], a[5]), level1(a[6], a[7])));
        alignas(64) float v[16];
        _mm512_store_ps(v, out);
        for (int i = 0; i < 8 && r0 + i < R; ++i) {
            const int lane = 2 * (i & 1), k = i >> 1;  // A C E G in lanes 0 / 1, B D F H in 2 / 3
            put(y[(r0 + i) * ldy], v[4 * lane + k]);
            if (nw == 2) put(y[(r0 + i) * ldy + 1], v[4 * (lane + 1) + k]);
        }
    }
}

}  // namespace
}  // namespace ds4::quant
