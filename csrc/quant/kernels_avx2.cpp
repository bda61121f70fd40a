// AVX2 + FMA + F16C kernels for the float formats and the 32-element legacy blocks, and the AVX2
// kernel table (the K-quants live in kquants_avx2.cpp).  Summation order and error bound:
// simd_x86.h.  8 float lanes; each kernel keeps 2-4 vector accumulators so that consecutive
// FMAs into one accumulator (4-cycle latency) do not serialise the loop.
#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "quant/blocks.h"
#include "quant/isa_tables.h"
#include "quant/simd_x86.h"
#include "quant/x86_avx2_util.h"

namespace ds4::quant {
namespace avx2 {
namespace {

// Folds f(i, acc) over the blocks i < nb, alternating between two accumulators that stay in
// registers (an array indexed by i & 1 would live in memory and put a store-forward on the chain).
template <class F>
inline __m256 two_acc(int64_t nb, F&& f) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        a0 = f(i, a0);
        a1 = f(i + 1, a1);
    }
    if (i < nb) a0 = f(i, a0);
    return _mm256_add_ps(a0, a1);
}

// Float formats: load8(p) gives 8 weights as float.  4 accumulators x 8 lanes; the tail (< 32)
// goes through a zero-padded copy so nothing past the row is read.
template <int Bytes, __m256 (*Load8)(const uint8_t*)>
float dot_float_format(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(Load8(p + i * Bytes), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(Load8(p + (i + 8) * Bytes), _mm256_loadu_ps(x + i + 8), a1);
        a2 = _mm256_fmadd_ps(Load8(p + (i + 16) * Bytes), _mm256_loadu_ps(x + i + 16), a2);
        a3 = _mm256_fmadd_ps(Load8(p + (i + 24) * Bytes), _mm256_loadu_ps(x + i + 24), a3);
    }
    for (; i < n; i += 8) {  // tail (< 32) into a0: at most 4 more steps on its chains
        const int64_t m = n - i < 8 ? n - i : 8;
        alignas(32) uint8_t wb[8 * Bytes] = {};
        alignas(32) float xb[8] = {};
        std::memcpy(wb, p + i * Bytes, static_cast<size_t>(m) * Bytes);
        std::memcpy(xb, x + i, static_cast<size_t>(m) * sizeof(float));
        a0 = _mm256_fmadd_ps(Load8(wb), _mm256_load_ps(xb), a0);
    }
    return hsum4(a0, a1, a2, a3);
}

inline __m256 load8_f32(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
inline __m256 load8_f16(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load8_bf16(const uint8_t* p) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));  // bf16 is the top half of an f32
}

}  // namespace

float dot_f32(const void* w, const float* x, int64_t n) { return dot_float_format<4, load8_f32>(w, x, n); }
float dot_f16(const void* w, const float* x, int64_t n) { return dot_float_format<2, load8_f16>(w, x, n); }
float dot_bf16(const void* w, const float* x, int64_t n) { return dot_float_format<2, load8_bf16>(w, x, n); }

// Q8_0: w = d q (exact), accumulated with one fma per weight into four accumulators.  The int8
// quants are not sign-extended: a byte shuffle puts each into the top byte of its dword, whose
// exact int32 -> float conversion is q 2^24, and the scale is applied as d 2^-24 (exact, a power
// of two), so w = (q 2^24)(d 2^-24) = d q exactly.  This trades the shift for a multiply on the
// otherwise idle FP multiply pipes (Zen: shuffles and shifts share two pipes).
float dot_q8_0(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < n / QK8_0; ++i, p += sizeof(block_q8_0), x += QK8_0) {
        prefetch_block<sizeof(block_q8_0)>(p);
        const __m256 d = _mm256_set1_ps(load_f16(p) * 0x1p-24f);
        const uint8_t* qs = p + offsetof(block_q8_0, qs);
        fma16_i8(qs, d, x, acc[0], acc[1]);
        fma16_i8(qs + 16, d, x + 16, acc[2], acc[3]);
    }
    return hsum4(acc[0], acc[1], acc[2], acc[3]);
}

void dequant_q8_0(const void* src, float* dst, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / QK8_0; ++i, p += sizeof(block_q8_0), dst += QK8_0) {
        const __m256 d = _mm256_set1_ps(load_f16(p));
        const uint8_t* qs = p + offsetof(block_q8_0, qs);
        for (int k = 0; k < 4; ++k)
            _mm256_storeu_ps(dst + 8 * k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(i8x8(qs + 8 * k))));
    }
}

// Q4_0: element j < 16 is the low nibble of qs[j], element j + 16 the high nibble; value q - 8.
float dot_q4_0(const void* w, const float* x, int64_t n) {
    const auto* base = static_cast<const uint8_t*>(w);
    const __m256i lo4 = _mm256_set1_epi32(0x0F), eight = _mm256_set1_epi32(8);
    return hsum(two_acc(n / QK4_0, [&](int64_t i, __m256 acc) {
        const uint8_t* p = base + i * sizeof(block_q4_0);
        prefetch_block<sizeof(block_q4_0)>(p);
        const uint8_t* qs = p + offsetof(block_q4_0, qs);
        const float* xb = x + i * QK4_0;
        const __m256i a0 = u8x8(qs), a1 = u8x8(qs + 8);
        const __m256 q0 = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(a0, lo4), eight));
        const __m256 q1 = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(a1, lo4), eight));
        const __m256 q2 = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(a0, 4), eight));
        const __m256 q3 = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(a1, 4), eight));
        __m256 s = _mm256_mul_ps(q0, _mm256_loadu_ps(xb));
        s = _mm256_fmadd_ps(q1, _mm256_loadu_ps(xb + 8), s);
        s = _mm256_fmadd_ps(q2, _mm256_loadu_ps(xb + 16), s);
        s = _mm256_fmadd_ps(q3, _mm256_loadu_ps(xb + 24), s);
        return _mm256_fmadd_ps(_mm256_set1_ps(load_f16(p)), s, acc);
    }));
}

// Q4_1: w = d q + m, formed with one fma exactly as the reference rounds it (d q is exact).
float dot_q4_1(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    const int64_t nb = n / QK4_1;
    const __m256i lo4 = _mm256_set1_epi32(0x0F);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < nb; ++i, p += sizeof(block_q4_1), x += QK4_1) {
        prefetch_block<sizeof(block_q4_1)>(p);
        const __m256 d = _mm256_set1_ps(load_f16(p + offsetof(block_q4_1, d)));
        const __m256 m = _mm256_set1_ps(load_f16(p + offsetof(block_q4_1, m)));
        const uint8_t* qs = p + offsetof(block_q4_1, qs);
        const __m256i a0 = u8x8(qs), a1 = u8x8(qs + 8);
        const __m256i q[4] = {_mm256_and_si256(a0, lo4), _mm256_and_si256(a1, lo4), _mm256_srli_epi32(a0, 4),
                              _mm256_srli_epi32(a1, 4)};
        for (int k = 0; k < 4; ++k) {
            const __m256 wk = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q[k]), m);
            acc[k] = _mm256_fmadd_ps(wk, _mm256_loadu_ps(x + 8 * k), acc[k]);
        }
    }
    return hsum4(acc[0], acc[1], acc[2], acc[3]);
}

namespace {

// Q5 fifth bits: lanes j0..j0+7 get bit (j0 + lane) of qh, moved to bit 4.
inline __m256i q5_high(__m256i qh, __m256i shifts) {
    return _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(qh, shifts), _mm256_set1_epi32(1)), 4);
}

// The four 8-element groups of a Q5_0 / Q5_1 block as int32 lanes in 0..31.
inline void q5_unpack(const uint8_t* qs, const uint8_t* qhp, __m256i q[4]) {
    uint32_t qh32;
    std::memcpy(&qh32, qhp, sizeof qh32);
    const __m256i qh = _mm256_set1_epi32(static_cast<int>(qh32));
    const __m256i s0 = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), eight = _mm256_set1_epi32(8);
    const __m256i s1 = _mm256_add_epi32(s0, eight), s2 = _mm256_add_epi32(s1, eight),
                  s3 = _mm256_add_epi32(s2, eight);
    const __m256i lo4 = _mm256_set1_epi32(0x0F);
    const __m256i a0 = u8x8(qs), a1 = u8x8(qs + 8);
    q[0] = _mm256_or_si256(_mm256_and_si256(a0, lo4), q5_high(qh, s0));
    q[1] = _mm256_or_si256(_mm256_and_si256(a1, lo4), q5_high(qh, s1));
    q[2] = _mm256_or_si256(_mm256_srli_epi32(a0, 4), q5_high(qh, s2));
    q[3] = _mm256_or_si256(_mm256_srli_epi32(a1, 4), q5_high(qh, s3));
}

}  // namespace

// Q5_0 decoded 16 bytes at a time: the fifth bits are spread to bytes (byte j of the result
// holds qh byte j/8, tested against bit j%8), giving q - 16 as int8; then as Q8_0 (fma16 path).
inline void q5_0_bytes(const uint8_t* p, __m128i& q_lo, __m128i& q_hi) {
    uint32_t qh;
    std::memcpy(&qh, p + offsetof(block_q5_0, qh), sizeof qh);
    const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + offsetof(block_q5_0, qs)));
    const __m128i m4 = _mm_set1_epi8(0x0F), k16 = _mm_set1_epi8(16);
    const __m128i bits = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
    const __m128i h = _mm_cvtsi32_si128(static_cast<int>(qh));
    const __m128i h0 = _mm_shuffle_epi8(h, _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
    const __m128i h1 = _mm_shuffle_epi8(h, _mm_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    // set bit -> q = nibble; clear bit -> q = nibble - 16 (i.e. (nibble | bit << 4) - 16)
    const __m128i set0 = _mm_cmpeq_epi8(_mm_and_si128(h0, bits), bits);
    const __m128i set1 = _mm_cmpeq_epi8(_mm_and_si128(h1, bits), bits);
    q_lo = _mm_sub_epi8(_mm_and_si128(qs, m4), _mm_andnot_si128(set0, k16));
    q_hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(qs, 4), m4), _mm_andnot_si128(set1, k16));
}

float dot_q5_0(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < n / QK5_0; ++i, p += sizeof(block_q5_0), x += QK5_0) {
        prefetch_block<sizeof(block_q5_0)>(p);
        __m128i q_lo, q_hi;
        q5_0_bytes(p, q_lo, q_hi);
        const __m256 d = _mm256_set1_ps(load_f16(p) * 0x1p-24f);
        fma16_i8_reg(q_lo, d, x, acc[0], acc[1]);
        fma16_i8_reg(q_hi, d, x + 16, acc[2], acc[3]);
    }
    return hsum4(acc[0], acc[1], acc[2], acc[3]);
}

void dequant_q5_0(const void* src, float* dst, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / QK5_0; ++i, p += sizeof(block_q5_0), dst += QK5_0) {
        __m128i q[2];
        q5_0_bytes(p, q[0], q[1]);
        const __m256 d = _mm256_set1_ps(load_f16(p) * 0x1p-24f);
        for (int k = 0; k < 2; ++k) {
            __m256 lo, hi;
            i8x16_top_reg(q[k], lo, hi);  // (q 2^24)(d 2^-24) = d q, exact as the reference's
            _mm256_storeu_ps(dst + 16 * k, _mm256_mul_ps(lo, d));
            _mm256_storeu_ps(dst + 16 * k + 8, _mm256_mul_ps(hi, d));
        }
    }
}

float dot_q5_1(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    const int64_t nb = n / QK5_1;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < nb; ++i, p += sizeof(block_q5_1), x += QK5_1) {
        const __m256 d = _mm256_set1_ps(load_f16(p + offsetof(block_q5_1, d)));
        const __m256 m = _mm256_set1_ps(load_f16(p + offsetof(block_q5_1, m)));
        __m256i q[4];
        q5_unpack(p + offsetof(block_q5_1, qs), p + offsetof(block_q5_1, qh), q);
        for (int k = 0; k < 4; ++k) {
            const __m256 wk = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q[k]), m);
            acc[k] = _mm256_fmadd_ps(wk, _mm256_loadu_ps(x + 8 * k), acc[k]);
        }
    }
    return hsum4(acc[0], acc[1], acc[2], acc[3]);
}

}  // namespace avx2

const Kernels& avx2_kernels(Type type) {
    static const Kernels none;
    static const Kernels f32{nullptr, &avx2::dot_f32}, f16{nullptr, &avx2::dot_f16},
        bf16{nullptr, &avx2::dot_bf16}, q4_0{nullptr, &avx2::dot_q4_0}, q4_1{nullptr, &avx2::dot_q4_1},
        q5_0{&avx2::dequant_q5_0, &avx2::dot_q5_0}, q5_1{nullptr, &avx2::dot_q5_1},
        q8_0{&avx2::dequant_q8_0, &avx2::dot_q8_0};
    static const Kernels q2_K{nullptr, &avx2::dot_q2_K, &avx2::dot_rows_q2_K, &avx2::groups_q2_K, &avx2::gemm_groups, 16};
    static const Kernels q3_K{nullptr, &avx2::dot_q3_K, &avx2::dot_rows_q3_K, &avx2::groups_q3_K, &avx2::gemm_groups, 16};
    static const Kernels q4_K{&avx2::dequant_q4_K, &avx2::dot_q4_K, &avx2::dot_rows_q4_K, &avx2::groups_q4_K, &avx2::gemm_groups, 32};
    static const Kernels q5_K{nullptr, &avx2::dot_q5_K, &avx2::dot_rows_q5_K, &avx2::groups_q5_K, &avx2::gemm_groups, 32};
    static const Kernels q6_K{&avx2::dequant_q6_K, &avx2::dot_q6_K, &avx2::dot_rows_q6_K, &avx2::groups_q6_K, &avx2::gemm_groups, 16};
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
