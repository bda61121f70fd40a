// AVX-512 (F/BW/VL/DQ) kernels for the K-quants: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, as block decoders
// for the canonical order of x86/simd.h (x86/avx512_util.h).  Groups are the formats' scale
// groups: 32 elements (G = 2 vectors) for Q4_K / Q5_K, 16 (G = 1) for Q2_K / Q3_K / Q6_K.
//   * With a minimum (Q2_K, Q4_K, Q5_K): u = w = fma(d sc, q, -dmin m), rounded as the reference
//     rounds d sc q - dmin m (d sc q exact), through a per-group vpermps table; s = 1.
//   * Without (Q3_K, Q6_K): u = the signed quant, s = d sc (exact).
// The per-block scales are unpacked with vector ops into a 16-float array; each group then
// broadcasts its own.  Index maps as in the scalar reference (kernels_ref_k.cpp), restated per
// format.
// GCC 12 warns on its own _mm512_undefined_* inside the conversion intrinsics (GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "quant/blocks.h"
#include "quant/x86/simd.h"
#include "quant/x86/avx512_util.h"

namespace ds4::quant::avx512 {
namespace {

// Per-256-bit-half constants: byte b0 (or qword c0) in the low half, b1 (c1) in the high half.
inline __m512i halves_epi8(uint8_t b0, uint8_t b1) {
    const auto r0 = static_cast<long long>(0x0101010101010101ull * b0);
    const auto r1 = static_cast<long long>(0x0101010101010101ull * b1);
    return _mm512_set_epi64(r1, r1, r1, r1, r0, r0, r0, r0);
}
inline __m512i halves_epi64(long long c0, long long c1) { return _mm512_set_epi64(c1, c1, c1, c1, c0, c0, c0, c0); }

// 32 bytes at p in both 256-bit halves.
DS4_AVX512_INLINE __m512i bcast32(const uint8_t* p) {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// The 16 groups of a block whose signed quants were assembled as bytes q[0..256): u = the quants,
// s = dsc[g].
template <class F>
DS4_AVX512_INLINE void int8_groups16(const int8_t* q, const float* dsc, F& f) {
    #pragma GCC unroll 16
    for (int g = 0; g < 16; ++g) {
        const __m512 u = _mm512_cvtepi32_ps(i8x16(reinterpret_cast<const uint8_t*>(q) + 16 * g));
        f(16 * g, &u, _mm512_set1_ps(dsc[g]));
    }
}

// ---- Q4_K / Q5_K: 8 sub-blocks of 32 with a 6-bit scale and min each ----

// Lanes 0..7: d * scale_j; lanes 8..15: -(dmin * min_j) (scale_min_k4; exact products).  p is the
// block; d and dmin are its first 4 bytes, the 12 scale bytes follow (16 are read, all inside it).
DS4_AVX512_INLINE __m512 k4_scales(const uint8_t* p) {
    static_assert(offsetof(block_q4_K, scales) == 4 && offsetof(block_q5_K, scales) == 4, "layout");
    const __m512i q = u8x16(p + 4);
    // Low bits: scale_j = q[j] & 63 (j < 4) or q[j + 4] & 15; min_j = q[j + 4] & 63 or q[j + 4] >> 4.
    const __m512i lo = _mm512_and_si512(
        _mm512_srlv_epi32(_mm512_permutexvar_epi32(_mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11), q),
                          _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4)),
        _mm512_setr_epi32(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15));
    // Top bits for j >= 4: bits 6..7 of q[j - 4] (scale) / q[j] (min) as bits 4..5, i.e. (q >> 2) & 0x30.
    const __m512i hi = _mm512_srli_epi32(
        _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 0, 0, 4, 5, 6, 7), q), 2);
    const __m512i hi_mask = _mm512_setr_epi32(0, 0, 0, 0, 0x30, 0x30, 0x30, 0x30, 0, 0, 0, 0, 0x30, 0x30, 0x30, 0x30);
    const __m512i sm = _mm512_ternarylogic_epi32(lo, hi, hi_mask, 0xF8);  // lo | (hi & hi_mask)
    uint32_t dd;
    std::memcpy(&dd, p, sizeof dd);
    // (d, dmin) pairs -> d in lanes 0..7, dmin in 8..15
    const __m512 dm = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                                            _mm512_cvtph_ps(_mm256_set1_epi32(static_cast<int>(dd))));
    const __m512 neg_hi = _mm512_castsi512_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, INT32_MIN, INT32_MIN, INT32_MIN,
                                                                INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN));
    return _mm512_xor_ps(_mm512_mul_ps(dm, _mm512_cvtepi32_ps(sm)), neg_hi);
}

// Q4_K: sub-block 2c is the low nibbles of qs[32c .. 32c + 32), sub-block 2c + 1 the high ones.
struct Q4_K {
    static constexpr int kElems = QK_K, kBytes = sizeof(block_q4_K), kGroup = 32;
    static constexpr bool kUnitScale = true;
    template <class F>
    static DS4_AVX512_INLINE void block(const uint8_t* p, F&& f) {
        alignas(64) float sm[16];
        _mm512_store_ps(sm, k4_scales(p));
        keep_in_memory(sm);
        const uint8_t* qs = p + offsetof(block_q4_K, qs);
        const __m512 iota = iota16(), one = _mm512_set1_ps(1.0f);
        #pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
            const __m512i a0 = u8x16(qs + 32 * c), a1 = u8x16(qs + 32 * c + 16);
            const __m512 tl = _mm512_fmadd_ps(_mm512_set1_ps(sm[2 * c]), iota, _mm512_set1_ps(sm[8 + 2 * c]));
            const __m512 ul[2] = {_mm512_permutexvar_ps(a0, tl), _mm512_permutexvar_ps(a1, tl)};
            f(64 * c, ul, one);
            const __m512 th = _mm512_fmadd_ps(_mm512_set1_ps(sm[2 * c + 1]), iota, _mm512_set1_ps(sm[9 + 2 * c]));
            const __m512 uh[2] = {_mm512_permutexvar_ps(_mm512_srli_epi32(a0, 4), th),
                                  _mm512_permutexvar_ps(_mm512_srli_epi32(a1, 4), th)};
            f(64 * c + 32, uh, one);
        }
    }
};

// Q5_K: Q4_K plus a fifth bit, bit j of qh[l] for element l of sub-block j.  The 5-bit quants are
// assembled as bytes, two sub-blocks (64) per step: the nibbles by a per-half qword shift of qs,
// the fifth bit rotated to bit 4 per half, merged by one vpternlogd; bits 5..7 keep junk, which
// vpermt2ps ignores (it reads 5 index bits).  Each 16 weights are then one zero-extension and one
// two-table permute of fma(d, q, m), q = 0..31.
struct Q5_K {
    static constexpr int kElems = QK_K, kBytes = sizeof(block_q5_K), kGroup = 32;
    static constexpr bool kUnitScale = true;
    template <class F>
    static DS4_AVX512_INLINE void block(const uint8_t* p, F&& f) {
        alignas(64) float sm[16];
        _mm512_store_ps(sm, k4_scales(p));
        keep_in_memory(sm);
        alignas(64) uint8_t q[QK_K];
        const __m512i qh = bcast32(p + offsetof(block_q5_K, qh));
        #pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {  // sub-blocks 2c (low nibbles, bit 2c) and 2c + 1 (high, bit 2c + 1)
            const __m512i nib = _mm512_srlv_epi64(bcast32(p + offsetof(block_q5_K, qs) + 32 * c), halves_epi64(0, 4));
            const __m512i fifth = _mm512_rolv_epi64(qh, halves_epi64((4 - 2 * c) & 63, (3 - 2 * c) & 63));
            _mm512_store_si512(q + 64 * c, _mm512_ternarylogic_epi32(nib, fifth, _mm512_set1_epi8(0x0F), 0xE4));
        }
        keep_in_memory(q);
        const __m512 iota = iota16(), iota_hi = _mm512_add_ps(iota16(), _mm512_set1_ps(16.0f));
        const __m512 one = _mm512_set1_ps(1.0f);
        #pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
            const __m512 d = _mm512_set1_ps(sm[j]), m = _mm512_set1_ps(sm[8 + j]);
            const __m512 t0 = _mm512_fmadd_ps(d, iota, m), t1 = _mm512_fmadd_ps(d, iota_hi, m);
            const __m512 u[2] = {_mm512_permutex2var_ps(t0, u8x16(q + 32 * j), t1),
                                 _mm512_permutex2var_ps(t0, u8x16(q + 32 * j + 16), t1)};
            f(32 * j, u, one);
        }
    }
};

// ---- Q2_K / Q3_K / Q6_K: 16 groups of 16 ----

// Q2_K: scales[g] = sc | m << 4; element 128h + 32j + l takes bits 2j..2j+1 of qs[32h + l].  The
// table repeats the 4 weights of the group so that vpermps can index with the 4 bits from 2j up.
struct Q2_K {
    static constexpr int kElems = QK_K, kBytes = sizeof(block_q2_K), kGroup = 16;
    static constexpr bool kUnitScale = true;
    template <class F>
    static DS4_AVX512_INLINE void block(const uint8_t* p, F&& f) {
        const __m512i sc = u8x16(p + offsetof(block_q2_K, scales));
        const __m512 neg_dmin = _mm512_xor_ps(bcast_f16(p + offsetof(block_q2_K, dmin)), _mm512_set1_ps(-0.0f));
        alignas(64) float dl[16], neg_ml[16];  // d sc, -(dmin m): exact
        _mm512_store_ps(dl, _mm512_mul_ps(bcast_f16(p + offsetof(block_q2_K, d)),
                                          _mm512_cvtepi32_ps(_mm512_and_si512(sc, _mm512_set1_epi32(0x0F)))));
        _mm512_store_ps(neg_ml, _mm512_mul_ps(neg_dmin, _mm512_cvtepi32_ps(_mm512_srli_epi32(sc, 4))));
        keep_in_memory(dl);
        keep_in_memory(neg_ml);
        const __m512 q4 = _mm512_setr_ps(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);
        const __m512 one = _mm512_set1_ps(1.0f);
        #pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
            const uint8_t* qs = p + offsetof(block_q2_K, qs) + 32 * h;
            const __m512i a[2] = {u8x16(qs), u8x16(qs + 16)};
            #pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                #pragma GCC unroll 2
                for (int g = 0; g < 2; ++g) {
                    const int e = 128 * h + 32 * j + 16 * g;
                    const __m512 t = _mm512_fmadd_ps(_mm512_set1_ps(dl[e / 16]), q4, _mm512_set1_ps(neg_ml[e / 16]));
                    const __m512 u = _mm512_permutexvar_ps(j ? _mm512_srli_epi32(a[g], 2 * j) : a[g], t);
                    f(e, &u, one);
                }
            }
        }
    }
};

// Q3_K: d * (6-bit scale - 32) per group: low nibbles in scales[0..8) (groups 0..7 low nibble,
// 8..15 high nibble), top two bits of group k in scales[8 + k % 4] >> 2 (k / 4).  p + 94 is the
// 16-byte window ending at the block's end, so scales[k] is lane k + 2.
DS4_AVX512_INLINE __m512 q3_K_scales(const uint8_t* p) {
    static_assert(offsetof(block_q3_K, scales) == 96 && sizeof(block_q3_K) == 110, "layout");
    const __m512i v = u8x16(p + 94);
    const __m512i lo = _mm512_and_si512(
        _mm512_srlv_epi32(_mm512_permutexvar_epi32(_mm512_setr_epi32(2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5, 6, 7, 8, 9), v),
                          _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4)),
        _mm512_set1_epi32(0x0F));
    const __m512i hi = _mm512_srlv_epi32(
        _mm512_permutexvar_epi32(_mm512_setr_epi32(10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13), v),
        _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6));
    const __m512i sc = _mm512_ternarylogic_epi32(lo, _mm512_slli_epi32(hi, 4), _mm512_set1_epi32(0x30), 0xF8);
    return _mm512_mul_ps(bcast_f16(p + offsetof(block_q3_K, d)),
                         _mm512_cvtepi32_ps(_mm512_sub_epi32(sc, _mm512_set1_epi32(32))));
}

// Q3_K: element 128h + 32j + l = ((qs[32h + l] >> 2j) & 3) - (bit 4h + j of hmask[l] ? 0 : 4);
// u = that quant, s = d sc.  The quants are assembled as int8 bytes, two j (64) per step: a
// per-half qword shift brings the two low bits to bits 0..1, and with B = 0xFF where the high bit
// is set (vptestmb + vpmovm2b) one vpternlogd forms lo | (B ? 0 : 0xFC), which is lo - 4 where the
// bit is clear.
struct Q3_K {
    static constexpr int kElems = QK_K, kBytes = sizeof(block_q3_K), kGroup = 16;
    static constexpr bool kUnitScale = false;
    template <class F>
    static DS4_AVX512_INLINE void block(const uint8_t* p, F&& f) {
        alignas(64) float dsc[16];
        _mm512_store_ps(dsc, q3_K_scales(p));
        keep_in_memory(dsc);
        alignas(64) int8_t q[QK_K];
        const __m512i hm = bcast32(p + offsetof(block_q3_K, hmask));
        #pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
            const __m512i qs = bcast32(p + offsetof(block_q3_K, qs) + 32 * h);
            #pragma GCC unroll 2
            for (int j = 0; j < 4; j += 2) {  // j (low half) and j + 1 (high half)
                const __m512i lo = _mm512_srlv_epi64(qs, halves_epi64(2 * j, 2 * j + 2));
                const __mmask64 set = _mm512_test_epi8_mask(
                    hm, halves_epi8(static_cast<uint8_t>(1 << (4 * h + j)), static_cast<uint8_t>(1 << (4 * h + j + 1))));
                _mm512_store_si512(q + 128 * h + 32 * j,
                                   _mm512_ternarylogic_epi32(lo, _mm512_movm_epi8(set), _mm512_set1_epi8(3), 0xB1));
            }
        }
        keep_in_memory(q);
        int8_groups16(q, dsc, f);
    }
};

// Q6_K: in half h, element 128h + r takes nibble r / 64 of ql[64h + r % 64] and bits 2 (r / 32)
// of qh[32h + r % 32]; u = q - 32, s = d * scales[e / 16].  The 6-bit quants are assembled 64 at a
// time as bytes: with qh in both 256-bit halves, masking with 0x33 (low half) / 0xCC (high half)
// and a per-half qword shift puts the wanted two bits at 4..5 with zeros above them, and one
// vpternlogd takes bits 0..3 from the nibbles, the rest from there.  The bytes then widen per group.
struct Q6_K {
    static constexpr int kElems = QK_K, kBytes = sizeof(block_q6_K), kGroup = 16;
    static constexpr bool kUnitScale = false;
    template <class F>
    static DS4_AVX512_INLINE void block(const uint8_t* p, F&& f) {
        alignas(64) float dsc[16];
        _mm512_store_ps(dsc, _mm512_mul_ps(bcast_f16(p + offsetof(block_q6_K, d)),
                                           _mm512_cvtepi32_ps(i8x16(p + offsetof(block_q6_K, scales)))));
        keep_in_memory(dsc);
        const __m512i nib = _mm512_set1_epi8(0x0F), k32 = _mm512_set1_epi8(32);
        alignas(64) int8_t q[QK_K];
        #pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
            const __m512i ql = _mm512_loadu_si512(p + offsetof(block_q6_K, ql) + 64 * h);
            const __m512i m = _mm512_and_si512(bcast32(p + offsetof(block_q6_K, qh) + 32 * h), halves_epi8(0x33, 0xCC));
            // r < 64: low nibbles; qh bits 0..1 (r < 32) / 2..3 (r >= 32) up to 4..5
            const __m512i b01 = _mm512_sllv_epi64(m, halves_epi64(4, 2));
            // r >= 64: high nibbles; qh bits 4..5 (r < 96) / 6..7 (r >= 96) to 4..5
            const __m512i b23 = _mm512_srlv_epi64(m, halves_epi64(0, 2));
            const __m512i q01 = _mm512_ternarylogic_epi32(ql, b01, nib, 0xE4);  // nib ? ql : b01
            const __m512i q23 = _mm512_ternarylogic_epi32(_mm512_srli_epi64(ql, 4), b23, nib, 0xE4);
            _mm512_store_si512(q + 128 * h, _mm512_sub_epi8(q01, k32));
            _mm512_store_si512(q + 128 * h + 64, _mm512_sub_epi8(q23, k32));
        }
        keep_in_memory(q);
        int8_groups16(q, dsc, f);
    }
};

}  // namespace

DS4_AVX512_QUANT_KERNELS(q2_K, Q2_K)
DS4_AVX512_QUANT_KERNELS(q3_K, Q3_K)
DS4_AVX512_QUANT_KERNELS(q4_K, Q4_K)
DS4_AVX512_QUANT_KERNELS(q5_K, Q5_K)
DS4_AVX512_QUANT_KERNELS(q6_K, Q6_K)

void dequant_q4_K(const void* src, float* dst, int64_t n) { quant_dequant<Q4_K>(src, dst, n); }
void dequant_q6_K(const void* src, float* dst, int64_t n) { quant_dequant<Q6_K>(src, dst, n); }

}  // namespace ds4::quant::avx512
