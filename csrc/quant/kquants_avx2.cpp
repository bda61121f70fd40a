// AVX2 + FMA kernels for the K-quants (256-element super-blocks): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
// Summation order and error bound: simd_x86.h.  Layouts: blocks.h and kernels_ref_k.cpp; each
// kernel below restates the index map it relies on.  Per-block scales are decoded once into a
// small float array so the inner loops only broadcast-load them.
#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "quant/blocks.h"
#include "quant/simd_x86.h"
#include "quant/x86_avx2_util.h"

namespace ds4::quant::avx2 {
namespace {

// Q4_K: qs[32 j + l] holds element 64 j + l (low nibble, sub-block 2j) and 64 j + 32 + l (high
// nibble, sub-block 2j+1).  f(slot, offset, w) receives 8 weights starting at element `offset`;
// slot k < 4 is the k-th 8-lane group of both halves.  Loops are unrolled so that the
// accumulators the caller keeps in f stay in registers.
template <class F>
inline void q4_K_block(const uint8_t* p, F&& f) {
    alignas(32) float d1[8], negm1[8];
    k4_scales(p + offsetof(block_q4_K, scales), load_f16(p + offsetof(block_q4_K, d)),
              load_f16(p + offsetof(block_q4_K, dmin)), d1, negm1);
    const uint8_t* qs = p + offsetof(block_q4_K, qs);
    const __m256i lo4 = _mm256_set1_epi32(0x0F);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
        const __m256 dl = _mm256_broadcast_ss(&d1[2 * j]), ml = _mm256_broadcast_ss(&negm1[2 * j]);
        const __m256 dh = _mm256_broadcast_ss(&d1[2 * j + 1]), mh = _mm256_broadcast_ss(&negm1[2 * j + 1]);
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
            const __m256i a = u8x8(qs + 32 * j + 8 * k);
            f(k, 64 * j + 8 * k, _mm256_fmadd_ps(dl, _mm256_cvtepi32_ps(_mm256_and_si256(a, lo4)), ml));
            f(k, 64 * j + 32 + 8 * k, _mm256_fmadd_ps(dh, _mm256_cvtepi32_ps(_mm256_srli_epi32(a, 4)), mh));
        }
    }
}

// Q6_K: 16 int8 scales (one per 16 elements).  Within each half h (128 elements), element
// 32 j + l (j < 4, l < 32) = (nibble | 2 high bits) - 32 with the nibble ql[64h + 32(j&1) + l]
// >> 4(j>>1) and the high bits (qh[32h + l] >> 2j) & 3.
// dsc[g] = d * scales[g] * f (f a power of two, so every product stays exact).
inline void q6_K_scales(const uint8_t* p, float* dsc, float f) {
    const float d = load_f16(p + offsetof(block_q6_K, d)) * f;
    const uint8_t* sc = p + offsetof(block_q6_K, scales);
    const __m256 dv = _mm256_set1_ps(d);
    for (int k = 0; k < 2; ++k) {
        const __m256i s = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc + 8 * k)));
        _mm256_store_ps(dsc + 8 * k, _mm256_mul_ps(dv, _mm256_cvtepi32_ps(s)));
    }
}

// All 256 quants (value - 32) of a block as int8, decoded 32 at a time with byte-wide ops (4x
// fewer instructions than decoding per 8-lane group); the 16-bit shifts move bits across byte
// boundaries only into positions the masks then clear.
inline void q6_K_quants(const uint8_t* p, int8_t* q) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m48 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);
    for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = p + offsetof(block_q6_K, ql) + 64 * h;
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
        const __m256i hb =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + offsetof(block_q6_K, qh) + 32 * h));
        const __m256i q0 = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m48));
        const __m256i q1 = _mm256_or_si256(_mm256_and_si256(b, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m48));
        const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(hb, m48));
        const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), m4),
                                           _mm256_and_si256(_mm256_srli_epi16(hb, 2), m48));
        auto* out = reinterpret_cast<__m256i*>(q + 128 * h);
        _mm256_storeu_si256(out + 0, _mm256_sub_epi8(q0, k32));
        _mm256_storeu_si256(out + 1, _mm256_sub_epi8(q1, k32));
        _mm256_storeu_si256(out + 2, _mm256_sub_epi8(q2, k32));
        _mm256_storeu_si256(out + 3, _mm256_sub_epi8(q3, k32));
    }
}

// Q3_K: 16 six-bit scales (value - 32): low 4 bits in s[i] (i < 8) or s[i-8] >> 4, top 2 bits
// (s[8 + i%4] >> 2(i/4)) & 3.  dsc[i] = d * (scale - 32), exact.
inline void q3_K_scales(const uint8_t* p, float* dsc) {
    const uint8_t* s = p + offsetof(block_q3_K, scales);
    const float d = load_f16(p + offsetof(block_q3_K, d));
    for (int i = 0; i < 16; ++i) {
        const int lo = i < 8 ? (s[i] & 0x0F) : (s[i - 8] >> 4);
        const int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        dsc[i] = d * static_cast<float>((lo | (hi << 4)) - 32);
    }
}

}  // namespace

float dot_q4_K(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < n / QK_K; ++i, p += sizeof(block_q4_K), x += QK_K) {
        prefetch_block<sizeof(block_q4_K)>(p);
        q4_K_block(p, [&](int slot, int off, __m256 wv) {
            acc[slot] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + off), acc[slot]);
        });
    }
    return hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

void dequant_q4_K(const void* src, float* dst, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / QK_K; ++i, p += sizeof(block_q4_K), dst += QK_K)
        q4_K_block(p, [&](int, int off, __m256 wv) { _mm256_storeu_ps(dst + off, wv); });
}

// Q5_K: as Q4_K plus a fifth bit: element 64j + l takes bit 2j of qh[l], 64j + 32 + l bit 2j+1.
float dot_q5_K(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    const __m256i lo4 = _mm256_set1_epi32(0x0F), one = _mm256_set1_epi32(1);
    __m256 acc[8];
    for (auto& a : acc) a = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; ++i, p += sizeof(block_q5_K), x += QK_K) {
        prefetch_block<sizeof(block_q5_K)>(p);
        alignas(32) float d1[8], negm1[8];
        k4_scales(p + offsetof(block_q5_K, scales), load_f16(p + offsetof(block_q5_K, d)),
                  load_f16(p + offsetof(block_q5_K, dmin)), d1, negm1);
        const uint8_t* qs = p + offsetof(block_q5_K, qs);
        const uint8_t* qh = p + offsetof(block_q5_K, qh);
        #pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
            const __m256 dl = _mm256_broadcast_ss(&d1[2 * j]), ml = _mm256_broadcast_ss(&negm1[2 * j]);
            const __m256 dh = _mm256_broadcast_ss(&d1[2 * j + 1]), mh = _mm256_broadcast_ss(&negm1[2 * j + 1]);
            #pragma GCC unroll 4
            for (int k = 0; k < 4; ++k) {
                const __m256i a = u8x8(qs + 32 * j + 8 * k), h = u8x8(qh + 8 * k);
                const __m256i lo = _mm256_or_si256(_mm256_and_si256(a, lo4),
                                                   _mm256_slli_epi32(_mm256_and_si256(shr(h, 2 * j), one), 4));
                const __m256i hi = _mm256_or_si256(_mm256_srli_epi32(a, 4),
                                                   _mm256_slli_epi32(_mm256_and_si256(shr(h, 2 * j + 1), one), 4));
                const __m256 wl = _mm256_fmadd_ps(dl, _mm256_cvtepi32_ps(lo), ml);
                const __m256 wh = _mm256_fmadd_ps(dh, _mm256_cvtepi32_ps(hi), mh);
                acc[k] = _mm256_fmadd_ps(wl, _mm256_loadu_ps(x + 64 * j + 8 * k), acc[k]);
                acc[4 + k] = _mm256_fmadd_ps(wh, _mm256_loadu_ps(x + 64 * j + 32 + 8 * k), acc[4 + k]);
            }
        }
    }
    return hsum8(acc);
}

// Q6_K: the block's quants are first decoded to int8 (q6_K_quants), then each weight is formed
// exactly as w = (q 2^24)(d sc_g 2^-24) and accumulated with one fma (see fma16_i8); group g of 16
// goes to accumulators 2(g mod 2), 2(g mod 2) + 1.
float dot_q6_K(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < n / QK_K; ++i, p += sizeof(block_q6_K), x += QK_K) {
        prefetch_block<sizeof(block_q6_K)>(p);
        alignas(32) float dsc[16];
        alignas(32) int8_t q[QK_K];
        q6_K_scales(p, dsc, 0x1p-24f);
        q6_K_quants(p, q);
#pragma GCC unroll 16
        for (int g = 0; g < 16; ++g)
            fma16_i8(reinterpret_cast<const uint8_t*>(q + 16 * g), _mm256_broadcast_ss(&dsc[g]), x + 16 * g,
                     acc[2 * (g & 1)], acc[2 * (g & 1) + 1]);
    }
    return hsum4(acc[0], acc[1], acc[2], acc[3]);
}

void dequant_q6_K(const void* src, float* dst, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / QK_K; ++i, p += sizeof(block_q6_K), dst += QK_K) {
        alignas(32) float dsc[16];
        alignas(32) int8_t q[QK_K];
        q6_K_scales(p, dsc, 1.0f);
        q6_K_quants(p, q);
        for (int e = 0; e < QK_K; e += 8) {
            const __m256 qf = _mm256_cvtepi32_ps(i8x8(reinterpret_cast<const uint8_t*>(q + e)));
            _mm256_storeu_ps(dst + e, _mm256_mul_ps(_mm256_broadcast_ss(&dsc[e / 16]), qf));
        }
    }
}

// Q3_K: within half h, element 32j + l = ((qs[32h + l] >> 2j) & 3) - (bit 4h+j of hmask[l] ? 0 : 4).
float dot_q3_K(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    const __m256i three = _mm256_set1_epi32(3), four = _mm256_set1_epi32(4), one = _mm256_set1_epi32(1);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < n / QK_K; ++i, p += sizeof(block_q3_K), x += QK_K) {
        prefetch_block<sizeof(block_q3_K)>(p);
        alignas(32) float dsc[16];
        q3_K_scales(p, dsc);
        const uint8_t* hm = p + offsetof(block_q3_K, hmask);
        #pragma GCC unroll 4
        for (int h = 0; h < 2; ++h) {
            const uint8_t* qs = p + offsetof(block_q3_K, qs) + 32 * h;
            __m256i a[4], hb[4];
            #pragma GCC unroll 4
            for (int k = 0; k < 4; ++k) {
                a[k] = u8x8(qs + 8 * k);
                hb[k] = u8x8(hm + 8 * k);
            }
            #pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                __m256 q[4];
                #pragma GCC unroll 4
                for (int k = 0; k < 4; ++k) {
                    const __m256i lo = _mm256_and_si256(shr(a[k], 2 * j), three);
                    const __m256i hi = _mm256_slli_epi32(_mm256_and_si256(shr(hb[k], 4 * h + j), one), 2);
                    q[k] = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_or_si256(lo, hi), four));
                }
                const float* xj = x + 128 * h + 32 * j;
                #pragma GCC unroll 4
                for (int g = 0; g < 2; ++g) {
                    __m256 s = _mm256_mul_ps(q[2 * g], _mm256_loadu_ps(xj + 16 * g));
                    s = _mm256_fmadd_ps(q[2 * g + 1], _mm256_loadu_ps(xj + 16 * g + 8), s);
                    acc[2 * (j & 1) + g] =
                        _mm256_fmadd_ps(_mm256_broadcast_ss(&dsc[8 * h + 2 * j + g]), s, acc[2 * (j & 1) + g]);
                }
            }
        }
    }
    return hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

// Q2_K: scales[g] = sc | m << 4 per 16 elements; within half h element 32j + l =
// (qs[32h + l] >> 2j) & 3, weight d sc q - dmin m formed with one fma as the reference rounds it.
float dot_q2_K(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    const __m256i three = _mm256_set1_epi32(3);
    __m256 acc[8];
    for (auto& a : acc) a = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; ++i, p += sizeof(block_q2_K), x += QK_K) {
        prefetch_block<sizeof(block_q2_K)>(p);
        const float d = load_f16(p + offsetof(block_q2_K, d)), dmin = load_f16(p + offsetof(block_q2_K, dmin));
        const uint8_t* sc = p + offsetof(block_q2_K, scales);
        alignas(32) float dl[16], negml[16];
        #pragma GCC unroll 4
        for (int g = 0; g < 16; ++g) {
            dl[g] = d * static_cast<float>(sc[g] & 0x0F);
            negml[g] = -(dmin * static_cast<float>(sc[g] >> 4));
        }
        #pragma GCC unroll 4
        for (int h = 0; h < 2; ++h) {
            const uint8_t* qs = p + offsetof(block_q2_K, qs) + 32 * h;
            __m256i a[4];
            #pragma GCC unroll 4
            for (int k = 0; k < 4; ++k) a[k] = u8x8(qs + 8 * k);
            #pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                #pragma GCC unroll 4
                for (int k = 0; k < 4; ++k) {
                    const int g = 8 * h + 2 * j + k / 2;
                    const __m256 q = _mm256_cvtepi32_ps(_mm256_and_si256(shr(a[k], 2 * j), three));
                    const __m256 wv = _mm256_fmadd_ps(_mm256_broadcast_ss(&dl[g]), q, _mm256_broadcast_ss(&negml[g]));
                    const int slot = 4 * (j & 1) + k;
                    acc[slot] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + 128 * h + 32 * j + 8 * k), acc[slot]);
                }
            }
        }
    }
    return hsum8(acc);
}

}  // namespace ds4::quant::avx2
