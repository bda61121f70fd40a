// AVX-512 (F/BW/VL/DQ) kernels for the float formats and the 32-element legacy blocks, and the
// AVX-512 kernel table (the K-quants live in kquants_avx512.cpp).  Summation order and error
// bound: simd_x86.h.  16 float lanes.
//
// The 4- and 5-bit formats decode through a register table instead of int->float conversion:
// vpermps (16 entries) / vpermt2ps (32 entries) maps a quant to its weight T[q] = fma(d, q, m),
// built once per block, so each 16 weights cost one zero-extension, one permute and one fma.
// T[q] is rounded exactly as the reference rounds d * q + m, so the weights are bit-identical.
// vpermps reads only the low 4 index bits (vpermt2ps the low 5), which is what lets the low
// nibble be used without masking.
// GCC 12 warns on its own _mm512_undefined_* inside the conversion intrinsics (GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "quant/blocks.h"
#include "quant/isa_tables.h"
#include "quant/simd_x86.h"
#include "quant/x86_avx512_util.h"

namespace ds4::quant {
namespace avx512 {
namespace {

inline __m512i i8x16(const uint8_t* p) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}


inline float hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
    return hsum(_mm512_add_ps(_mm512_add_ps(a, b), _mm512_add_ps(c, d)));
}

// Folds body(i, a, b) over the blocks i < nb; block i feeds the accumulator pair (a0, a1) or
// (a2, a3) by parity.  Named accumulators stay in registers (an array indexed by i & 1 would be
// kept in memory, putting a store-forward on every accumulation chain).
template <class F>
inline float fold_blocks(int64_t nb, F&& body) {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        body(i, a0, a1);
        body(i + 1, a2, a3);
    }
    if (i < nb) body(i, a0, a1);
    return hsum4(a0, a1, a2, a3);
}

// Float formats: 4 accumulators x 16 lanes; the tail (< 64) via a zero-padded copy.
template <int Bytes, __m512 (*Load16)(const uint8_t*)>
float dot_float_format(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_fmadd_ps(Load16(p + i * Bytes), _mm512_loadu_ps(x + i), a0);
        a1 = _mm512_fmadd_ps(Load16(p + (i + 16) * Bytes), _mm512_loadu_ps(x + i + 16), a1);
        a2 = _mm512_fmadd_ps(Load16(p + (i + 32) * Bytes), _mm512_loadu_ps(x + i + 32), a2);
        a3 = _mm512_fmadd_ps(Load16(p + (i + 48) * Bytes), _mm512_loadu_ps(x + i + 48), a3);
    }
    for (; i < n; i += 16) {  // tail (< 64) into a0
        const int64_t m = n - i < 16 ? n - i : 16;
        alignas(64) uint8_t wb[16 * Bytes] = {};
        alignas(64) float xb[16] = {};
        std::memcpy(wb, p + i * Bytes, static_cast<size_t>(m) * Bytes);
        std::memcpy(xb, x + i, static_cast<size_t>(m) * sizeof(float));
        a0 = _mm512_fmadd_ps(Load16(wb), _mm512_load_ps(xb), a0);
    }
    return hsum4(a0, a1, a2, a3);
}

inline __m512 load16_f32(const uint8_t* p) { return _mm512_loadu_ps(reinterpret_cast<const float*>(p)); }
inline __m512 load16_f16(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load16_bf16(const uint8_t* p) {
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
}

// One 32-element block of a 4-bit format through the table t (t[q] = weight of quant q):
// elements 0..15 are the low nibbles, 16..31 the high nibbles.  Two accumulators per block.
inline void nibble_block(const uint8_t* qs, __m512 t, const float* x, __m512& acc_lo, __m512& acc_hi) {
    const __m512i a = u8x16(qs);
    acc_lo = _mm512_fmadd_ps(_mm512_permutexvar_ps(a, t), _mm512_loadu_ps(x), acc_lo);
    acc_hi = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(a, 4), t), _mm512_loadu_ps(x + 16), acc_hi);
}

// Q5 blocks: quants 0..31 (low nibble | fifth bit << 4) for elements 0..15 and 16..31; the
// fifth bits are bits 0..15 / 16..31 of qh, used directly as a lane mask.
inline void q5_block(const uint8_t* qs, const uint8_t* qhp, __m512 tlo, __m512 thi, const float* x,
                     __m512& acc_lo, __m512& acc_hi) {
    uint32_t qh;
    std::memcpy(&qh, qhp, sizeof qh);
    const __m512i a = u8x16(qs), lo4 = _mm512_set1_epi32(0x0F), k16 = _mm512_set1_epi32(16);
    const __m512i lo = _mm512_and_si512(a, lo4), hi = _mm512_srli_epi32(a, 4);
    const __m512i q0 = _mm512_mask_or_epi32(lo, static_cast<__mmask16>(qh & 0xFFFF), lo, k16);
    const __m512i q1 = _mm512_mask_or_epi32(hi, static_cast<__mmask16>(qh >> 16), hi, k16);
    acc_lo = _mm512_fmadd_ps(_mm512_permutex2var_ps(tlo, q0, thi), _mm512_loadu_ps(x), acc_lo);
    acc_hi = _mm512_fmadd_ps(_mm512_permutex2var_ps(tlo, q1, thi), _mm512_loadu_ps(x + 16), acc_hi);
}

}  // namespace

float dot_f32(const void* w, const float* x, int64_t n) { return dot_float_format<4, load16_f32>(w, x, n); }
float dot_f16(const void* w, const float* x, int64_t n) { return dot_float_format<2, load16_f16>(w, x, n); }
float dot_bf16(const void* w, const float* x, int64_t n) { return dot_float_format<2, load16_bf16>(w, x, n); }

// Q8_0: w = d q (exact product), one fma per weight.
float dot_q8_0(const void* w, const float* x, int64_t n) {
    const auto* base = static_cast<const uint8_t*>(w);
    return fold_blocks(n / QK8_0, [&](int64_t i, __m512& a, __m512& b) {
        const uint8_t* p = base + i * sizeof(block_q8_0);
        const uint8_t* qs = p + offsetof(block_q8_0, qs);
        const float* xb = x + i * QK8_0;
        const __m512 d = _mm512_set1_ps(load_f16(p));
        a = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(i8x16(qs))), _mm512_loadu_ps(xb), a);
        b = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(i8x16(qs + 16))), _mm512_loadu_ps(xb + 16), b);
    });
}

void dequant_q8_0(const void* src, float* dst, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / QK8_0; ++i, p += sizeof(block_q8_0), dst += QK8_0) {
        const __m512 d = _mm512_set1_ps(load_f16(p));
        const uint8_t* qs = p + offsetof(block_q8_0, qs);
        _mm512_storeu_ps(dst, _mm512_mul_ps(d, _mm512_cvtepi32_ps(i8x16(qs))));
        _mm512_storeu_ps(dst + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(i8x16(qs + 16))));
    }
}

// Q4_0: table d * (q - 8), exact.
float dot_q4_0(const void* w, const float* x, int64_t n) {
    const auto* base = static_cast<const uint8_t*>(w);
    const __m512 centred = _mm512_sub_ps(iota16(), _mm512_set1_ps(8.0f));
    return fold_blocks(n / QK4_0, [&](int64_t i, __m512& a, __m512& b) {
        const uint8_t* p = base + i * sizeof(block_q4_0);
        const __m512 t = _mm512_mul_ps(_mm512_set1_ps(load_f16(p)), centred);
        nibble_block(p + offsetof(block_q4_0, qs), t, x + i * QK4_0, a, b);
    });
}

// Q4_1: table fma(d, q, m) = the reference's d * q + m (d * q exact).
float dot_q4_1(const void* w, const float* x, int64_t n) {
    const auto* base = static_cast<const uint8_t*>(w);
    const __m512 iota = iota16();
    return fold_blocks(n / QK4_1, [&](int64_t i, __m512& a, __m512& b) {
        const uint8_t* p = base + i * sizeof(block_q4_1);
        const __m512 d = _mm512_set1_ps(load_f16(p + offsetof(block_q4_1, d)));
        const __m512 m = _mm512_set1_ps(load_f16(p + offsetof(block_q4_1, m)));
        nibble_block(p + offsetof(block_q4_1, qs), _mm512_fmadd_ps(d, iota, m), x + i * QK4_1, a, b);
    });
}

// Q5_0: 32-entry table d * (q - 16), exact.
float dot_q5_0(const void* w, const float* x, int64_t n) {
    const auto* base = static_cast<const uint8_t*>(w);
    const __m512 iota = iota16();
    const __m512 qlo = _mm512_sub_ps(iota, _mm512_set1_ps(16.0f));  // q - 16 for q < 16; q >= 16 gives iota
    return fold_blocks(n / QK5_0, [&](int64_t i, __m512& a, __m512& b) {
        const uint8_t* p = base + i * sizeof(block_q5_0);
        const __m512 d = _mm512_set1_ps(load_f16(p));
        q5_block(p + offsetof(block_q5_0, qs), p + offsetof(block_q5_0, qh), _mm512_mul_ps(d, qlo),
                 _mm512_mul_ps(d, iota), x + i * QK5_0, a, b);
    });
}

void dequant_q5_0(const void* src, float* dst, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    const __m512 iota = iota16(), qlo = _mm512_sub_ps(iota16(), _mm512_set1_ps(16.0f));
    for (int64_t i = 0; i < n / QK5_0; ++i, p += sizeof(block_q5_0), dst += QK5_0) {
        const __m512 d = _mm512_set1_ps(load_f16(p));
        const __m512 tlo = _mm512_mul_ps(d, qlo), thi = _mm512_mul_ps(d, iota);
        uint32_t qh;
        std::memcpy(&qh, p + offsetof(block_q5_0, qh), sizeof qh);
        const __m512i a = u8x16(p + offsetof(block_q5_0, qs)), k16 = _mm512_set1_epi32(16);
        const __m512i lo = _mm512_and_si512(a, _mm512_set1_epi32(0x0F)), hi = _mm512_srli_epi32(a, 4);
        const __m512i q0 = _mm512_mask_or_epi32(lo, static_cast<__mmask16>(qh & 0xFFFF), lo, k16);
        const __m512i q1 = _mm512_mask_or_epi32(hi, static_cast<__mmask16>(qh >> 16), hi, k16);
        _mm512_storeu_ps(dst, _mm512_permutex2var_ps(tlo, q0, thi));
        _mm512_storeu_ps(dst + 16, _mm512_permutex2var_ps(tlo, q1, thi));
    }
}

float dot_q5_1(const void* w, const float* x, int64_t n) {
    const auto* base = static_cast<const uint8_t*>(w);
    const __m512 iota = iota16(), iota_hi = _mm512_add_ps(iota16(), _mm512_set1_ps(16.0f));
    return fold_blocks(n / QK5_1, [&](int64_t i, __m512& a, __m512& b) {
        const uint8_t* p = base + i * sizeof(block_q5_1);
        const __m512 d = _mm512_set1_ps(load_f16(p + offsetof(block_q5_1, d)));
        const __m512 m = _mm512_set1_ps(load_f16(p + offsetof(block_q5_1, m)));
        q5_block(p + offsetof(block_q5_1, qs), p + offsetof(block_q5_1, qh), _mm512_fmadd_ps(d, iota, m),
                 _mm512_fmadd_ps(d, iota_hi, m), x + i * QK5_1, a, b);
    });
}

}  // namespace avx512

const Kernels& avx512_kernels(Type type) {
    static const Kernels none;
    static const Kernels f32{nullptr, &avx512::dot_f32}, f16{nullptr, &avx512::dot_f16},
        bf16{nullptr, &avx512::dot_bf16}, q4_0{nullptr, &avx512::dot_q4_0}, q4_1{nullptr, &avx512::dot_q4_1},
        q5_0{&avx512::dequant_q5_0, &avx512::dot_q5_0}, q5_1{nullptr, &avx512::dot_q5_1},
        q8_0{&avx512::dequant_q8_0, &avx512::dot_q8_0}, q2_K{nullptr, &avx512::dot_q2_K},
        q3_K{nullptr, &avx512::dot_q3_K}, q4_K{&avx512::dequant_q4_K, &avx512::dot_q4_K},
        q5_K{nullptr, &avx512::dot_q5_K}, q6_K{&avx512::dequant_q6_K, &avx512::dot_q6_K};
    switch (type) {
        case Type::F32: return f32;
        case Type::F16: return f16;
        case Type::BF16: return bf16;
        case Type::Q4_0: return q4_0;
        case Type::Q4_1: return q4_1;
        case Type::Q5_0: return q5_0;
        case Type::Q5_1: return q5_1;
        case Type::Q8_0: return q8_0;
        case Type::Q2_K: return q2_K;
        case Type::Q3_K: return q3_K;
        case Type::Q4_K: return q4_K;
        case Type::Q5_K: return q5_K;
        case Type::Q6_K: return q6_K;
        default: return none;
    }
}

}  // namespace ds4::quant
