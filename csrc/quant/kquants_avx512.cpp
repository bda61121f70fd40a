// AVX-512 (F/BW/VL/DQ) kernels for the K-quants: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.  Summation order
// and error bound: simd_x86.h; index maps as in kquants_avx2.cpp (restated per kernel).  Every
// 16-element scale group is exactly one vector, so weights are formed per vector as exact
// products (d sc) q, or fma(d sc, q, -dmin m) rounded as the reference rounds it, and accumulated
// with one fma each.  Q4_K and Q5_K decode through vpermps / vpermt2ps tables (see
// kernels_avx512.cpp).
// GCC 12 warns on its own _mm512_undefined_* inside the conversion intrinsics (GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "quant/blocks.h"
#include "quant/simd_x86.h"
#include "quant/x86_avx512_util.h"

namespace ds4::quant::avx512 {
namespace {


inline float hsum4(const __m512 a[4]) {
    return hsum(_mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])));
}

inline __m512i shr(__m512i v, int c) { return _mm512_srl_epi32(v, _mm_cvtsi32_si128(c)); }

// Q4_K: qs[32j + l] holds element 64j + l (low nibble) and 64j + 32 + l (high nibble).
// f(slot, offset, w) receives 16 weights from element `offset`.
template <class F>
inline void q4_K_block(const uint8_t* p, F&& f) {
    alignas(64) float d1[8], negm1[8];
    k4_scales(p + offsetof(block_q4_K, scales), load_f16(p + offsetof(block_q4_K, d)),
              load_f16(p + offsetof(block_q4_K, dmin)), d1, negm1);
    const uint8_t* qs = p + offsetof(block_q4_K, qs);
    const __m512 iota = iota16();
    #pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
        const __m512 tl = _mm512_fmadd_ps(_mm512_set1_ps(d1[2 * j]), iota, _mm512_set1_ps(negm1[2 * j]));
        const __m512 th = _mm512_fmadd_ps(_mm512_set1_ps(d1[2 * j + 1]), iota, _mm512_set1_ps(negm1[2 * j + 1]));
        const __m512i a0 = u8x16(qs + 32 * j), a1 = u8x16(qs + 32 * j + 16);
        f(0, 64 * j, _mm512_permutexvar_ps(a0, tl));
        f(1, 64 * j + 16, _mm512_permutexvar_ps(a1, tl));
        f(2, 64 * j + 32, _mm512_permutexvar_ps(_mm512_srli_epi32(a0, 4), th));
        f(3, 64 * j + 48, _mm512_permutexvar_ps(_mm512_srli_epi32(a1, 4), th));
    }
}

// Q6_K: dsc[g] = d * scales[g] (exact), one per 16 elements.
inline void q6_K_scales(const uint8_t* p, float* dsc) {
    const __m512i s =
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + offsetof(block_q6_K, scales))));
    _mm512_store_ps(dsc, _mm512_mul_ps(_mm512_set1_ps(load_f16(p + offsetof(block_q6_K, d))), _mm512_cvtepi32_ps(s)));
}

// Q6_K quants (value - 32) of elements 128h + 32j + l0 .. +16, j = 0..3 (l0 = 0 or 16): nibble
// ql[64h + 32(j&1) + l] >> 4(j>>1), high bits (qh[32h + l] >> 2j) & 3.
inline void q6_K_quants(const uint8_t* p, int h, int l0, __m512 q[4]) {
    const uint8_t* ql = p + offsetof(block_q6_K, ql) + 64 * h;
    const uint8_t* qh = p + offsetof(block_q6_K, qh) + 32 * h;
    const __m512i a = u8x16(ql + l0), b = u8x16(ql + 32 + l0), hb = u8x16(qh + l0);
    const __m512i lo4 = _mm512_set1_epi32(0x0F), m48 = _mm512_set1_epi32(0x30), k32 = _mm512_set1_epi32(32);
    const __m512i q0 = _mm512_or_si512(_mm512_and_si512(a, lo4), _mm512_and_si512(_mm512_slli_epi32(hb, 4), m48));
    const __m512i q1 = _mm512_or_si512(_mm512_and_si512(b, lo4), _mm512_and_si512(_mm512_slli_epi32(hb, 2), m48));
    const __m512i q2 = _mm512_or_si512(_mm512_srli_epi32(a, 4), _mm512_and_si512(hb, m48));
    const __m512i q3 = _mm512_or_si512(_mm512_srli_epi32(b, 4), _mm512_and_si512(_mm512_srli_epi32(hb, 2), m48));
    q[0] = _mm512_cvtepi32_ps(_mm512_sub_epi32(q0, k32));
    q[1] = _mm512_cvtepi32_ps(_mm512_sub_epi32(q1, k32));
    q[2] = _mm512_cvtepi32_ps(_mm512_sub_epi32(q2, k32));
    q[3] = _mm512_cvtepi32_ps(_mm512_sub_epi32(q3, k32));
}

}  // namespace

float dot_q4_K(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t i = 0; i < n / QK_K; ++i, p += sizeof(block_q4_K), x += QK_K) {
        q4_K_block(p, [&](int slot, int off, __m512 wv) {
            acc[slot] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + off), acc[slot]);
        });
    }
    return hsum4(acc);
}

void dequant_q4_K(const void* src, float* dst, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / QK_K; ++i, p += sizeof(block_q4_K), dst += QK_K)
        q4_K_block(p, [&](int, int off, __m512 wv) { _mm512_storeu_ps(dst + off, wv); });
}

// Q5_K: 32-entry tables; element 64j + l takes bit 2j of qh[l] as its fifth bit, 64j + 32 + l
// bit 2j+1; the bits become lane masks (vptestmd) that OR 16 into the nibble.
float dot_q5_K(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    const __m512 iota = iota16(), iota_hi = _mm512_add_ps(iota16(), _mm512_set1_ps(16.0f));
    const __m512i lo4 = _mm512_set1_epi32(0x0F), k16 = _mm512_set1_epi32(16);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t i = 0; i < n / QK_K; ++i, p += sizeof(block_q5_K), x += QK_K) {
        alignas(64) float d1[8], negm1[8];
        k4_scales(p + offsetof(block_q5_K, scales), load_f16(p + offsetof(block_q5_K, d)),
                  load_f16(p + offsetof(block_q5_K, dmin)), d1, negm1);
        const uint8_t* qs = p + offsetof(block_q5_K, qs);
        const __m512i h0 = u8x16(p + offsetof(block_q5_K, qh)), h1 = u8x16(p + offsetof(block_q5_K, qh) + 16);
        #pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
            const __m512 dl = _mm512_set1_ps(d1[2 * j]), ml = _mm512_set1_ps(negm1[2 * j]);
            const __m512 dh = _mm512_set1_ps(d1[2 * j + 1]), mh = _mm512_set1_ps(negm1[2 * j + 1]);
            const __m512 tl0 = _mm512_fmadd_ps(dl, iota, ml), tl1 = _mm512_fmadd_ps(dl, iota_hi, ml);
            const __m512 th0 = _mm512_fmadd_ps(dh, iota, mh), th1 = _mm512_fmadd_ps(dh, iota_hi, mh);
            const __m512i bl = _mm512_set1_epi32(1 << (2 * j)), bh = _mm512_set1_epi32(2 << (2 * j));
            const __m512i a0 = u8x16(qs + 32 * j), a1 = u8x16(qs + 32 * j + 16);
            const __m512i lo0 = _mm512_and_si512(a0, lo4), lo1 = _mm512_and_si512(a1, lo4);
            const __m512i hi0 = _mm512_srli_epi32(a0, 4), hi1 = _mm512_srli_epi32(a1, 4);
            const __m512i q0 = _mm512_mask_or_epi32(lo0, _mm512_test_epi32_mask(h0, bl), lo0, k16);
            const __m512i q1 = _mm512_mask_or_epi32(lo1, _mm512_test_epi32_mask(h1, bl), lo1, k16);
            const __m512i q2 = _mm512_mask_or_epi32(hi0, _mm512_test_epi32_mask(h0, bh), hi0, k16);
            const __m512i q3 = _mm512_mask_or_epi32(hi1, _mm512_test_epi32_mask(h1, bh), hi1, k16);
            const float* xj = x + 64 * j;
            acc[0] = _mm512_fmadd_ps(_mm512_permutex2var_ps(tl0, q0, tl1), _mm512_loadu_ps(xj), acc[0]);
            acc[1] = _mm512_fmadd_ps(_mm512_permutex2var_ps(tl0, q1, tl1), _mm512_loadu_ps(xj + 16), acc[1]);
            acc[2] = _mm512_fmadd_ps(_mm512_permutex2var_ps(th0, q2, th1), _mm512_loadu_ps(xj + 32), acc[2]);
            acc[3] = _mm512_fmadd_ps(_mm512_permutex2var_ps(th0, q3, th1), _mm512_loadu_ps(xj + 48), acc[3]);
        }
    }
    return hsum4(acc);
}

// Q6_K: w = (d sc_g) q exact; accumulator j takes quarter j of each half.
float dot_q6_K(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t i = 0; i < n / QK_K; ++i, p += sizeof(block_q6_K), x += QK_K) {
        alignas(64) float dsc[16];
        q6_K_scales(p, dsc);
        #pragma GCC unroll 4
        for (int h = 0; h < 2; ++h) {
            #pragma GCC unroll 4
            for (int l0 = 0; l0 < 32; l0 += 16) {
                __m512 q[4];
                q6_K_quants(p, h, l0, q);
                #pragma GCC unroll 4
                for (int j = 0; j < 4; ++j) {
                    const int e = 128 * h + 32 * j + l0;
                    const __m512 wv = _mm512_mul_ps(_mm512_set1_ps(dsc[e / 16]), q[j]);
                    acc[j] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + e), acc[j]);
                }
            }
        }
    }
    return hsum4(acc);
}

void dequant_q6_K(const void* src, float* dst, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / QK_K; ++i, p += sizeof(block_q6_K), dst += QK_K) {
        alignas(64) float dsc[16];
        q6_K_scales(p, dsc);
        #pragma GCC unroll 4
        for (int h = 0; h < 2; ++h) {
            #pragma GCC unroll 4
            for (int l0 = 0; l0 < 32; l0 += 16) {
                __m512 q[4];
                q6_K_quants(p, h, l0, q);
                #pragma GCC unroll 4
                for (int j = 0; j < 4; ++j) {
                    const int e = 128 * h + 32 * j + l0;
                    _mm512_storeu_ps(dst + e, _mm512_mul_ps(_mm512_set1_ps(dsc[e / 16]), q[j]));
                }
            }
        }
    }
}

// Q3_K: within half h, element 32j + l = ((qs[32h + l] >> 2j) & 3) - (bit 4h+j of hmask[l] ? 0 : 4);
// scales as in kquants_avx2.cpp.
float dot_q3_K(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    const __m512i three = _mm512_set1_epi32(3), four = _mm512_set1_epi32(4);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t i = 0; i < n / QK_K; ++i, p += sizeof(block_q3_K), x += QK_K) {
        const uint8_t* s = p + offsetof(block_q3_K, scales);
        const float d = load_f16(p + offsetof(block_q3_K, d));
        alignas(64) float dsc[16];
        #pragma GCC unroll 4
        for (int g = 0; g < 16; ++g) {
            const int lo = g < 8 ? (s[g] & 0x0F) : (s[g - 8] >> 4);
            const int hi = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
            dsc[g] = d * static_cast<float>((lo | (hi << 4)) - 32);
        }
        const __m512i hm[2] = {u8x16(p + offsetof(block_q3_K, hmask)), u8x16(p + offsetof(block_q3_K, hmask) + 16)};
        #pragma GCC unroll 4
        for (int h = 0; h < 2; ++h) {
            const uint8_t* qs = p + offsetof(block_q3_K, qs) + 32 * h;
            const __m512i a[2] = {u8x16(qs), u8x16(qs + 16)};
            #pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                const __m512i bit = _mm512_set1_epi32(1 << (4 * h + j));
                #pragma GCC unroll 4
                for (int g = 0; g < 2; ++g) {
                    const __m512i v = _mm512_and_si512(shr(a[g], 2 * j), three);
                    const __m512i q = _mm512_mask_sub_epi32(v, _mm512_testn_epi32_mask(hm[g], bit), v, four);
                    const int e = 128 * h + 32 * j + 16 * g;
                    const __m512 wv = _mm512_mul_ps(_mm512_set1_ps(dsc[e / 16]), _mm512_cvtepi32_ps(q));
                    const int slot = 2 * (j & 1) + g;
                    acc[slot] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + e), acc[slot]);
                }
            }
        }
    }
    return hsum4(acc);
}

// Q2_K: scales[g] = sc | m << 4; within half h element 32j + l = (qs[32h + l] >> 2j) & 3.
float dot_q2_K(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    const __m512i three = _mm512_set1_epi32(3);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t i = 0; i < n / QK_K; ++i, p += sizeof(block_q2_K), x += QK_K) {
        const float d = load_f16(p + offsetof(block_q2_K, d)), dmin = load_f16(p + offsetof(block_q2_K, dmin));
        const uint8_t* sc = p + offsetof(block_q2_K, scales);
        #pragma GCC unroll 4
        for (int h = 0; h < 2; ++h) {
            const uint8_t* qs = p + offsetof(block_q2_K, qs) + 32 * h;
            const __m512i a[2] = {u8x16(qs), u8x16(qs + 16)};
            #pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                #pragma GCC unroll 4
                for (int g = 0; g < 2; ++g) {
                    const int e = 128 * h + 32 * j + 16 * g;
                    const float dl = d * static_cast<float>(sc[e / 16] & 0x0F);
                    const float negml = -(dmin * static_cast<float>(sc[e / 16] >> 4));
                    const __m512 q = _mm512_cvtepi32_ps(_mm512_and_si512(shr(a[g], 2 * j), three));
                    const __m512 wv = _mm512_fmadd_ps(_mm512_set1_ps(dl), q, _mm512_set1_ps(negml));
                    const int slot = 2 * (j & 1) + g;
                    acc[slot] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + e), acc[slot]);
                }
            }
        }
    }
    return hsum4(acc);
}

}  // namespace ds4::quant::avx512
