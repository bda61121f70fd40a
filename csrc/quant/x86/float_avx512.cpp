// AVX-512 (F/BW/VL/DQ) kernels for the float formats and the 32-element legacy blocks, and the
// AVX-512 kernel table (the K-quants live in x86/float_kquants_avx512.cpp, the tiled GEMM in
// x86/float_gemm_avx512.cpp).  Every dot follows the canonical order of x86/simd.h with 16 lanes, through
// the block decoders below and x86/avx512_util.h; so do dot_rows and decode_groups.
//
// Legacy blocks are one group of 32 (G = 2 vectors).  The 4- and 5-bit formats decode through a
// register table instead of int->float conversion: vpermps maps a quant to its float, reading only
// the low 4 index bits (which is what lets the low nibble be used without masking).  Without a
// minimum the table is a constant, u = q - c, and the block's d is the group scale; with one
// (Q4_1, Q5_1) the table is built per block as T[q] = fma(d, q, m), rounded exactly as the
// reference rounds d * q + m, and the scale is 1.  The fifth bit of Q5 quants is bit l of qh,
// used directly as a lane mask.
// GCC 12 warns on its own _mm512_undefined_* inside the conversion intrinsics (GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cstddef>

#include "quant/blocks.h"
#include "quant/isa_tables.h"
#include "quant/x86/simd.h"
#include "quant/x86/avx512_util.h"

namespace ds4::quant {
namespace avx512 {
namespace {

// ---- float formats: u = w, s = 1, groups of 32; the last partial group under a lane mask ----

struct F32 {
    static constexpr int kBytes = 4;
    static DS4_AVX512_INLINE __m512 load(const uint8_t* p) { return _mm512_loadu_ps(p); }
    static DS4_AVX512_INLINE __m512 load(const uint8_t* p, __mmask16 k) { return _mm512_maskz_loadu_ps(k, p); }
};
struct F16 {
    static constexpr int kBytes = 2;
    static DS4_AVX512_INLINE __m512 load(const uint8_t* p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    static DS4_AVX512_INLINE __m512 load(const uint8_t* p, __mmask16 k) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, p));
    }
};
struct BF16 {
    static constexpr int kBytes = 2;
    static DS4_AVX512_INLINE __m512 widen(__m256i h) {
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    static DS4_AVX512_INLINE __m512 load(const uint8_t* p) {
        return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    static DS4_AVX512_INLINE __m512 load(const uint8_t* p, __mmask16 k) { return widen(_mm256_maskz_loadu_epi16(k, p)); }
};

// Lanes [0, m) of a 16-lane vector, m clamped to 0..16.
inline __mmask16 first_lanes(int64_t m) {
    return m >= 16 ? static_cast<__mmask16>(0xFFFF) : m <= 0 ? 0 : static_cast<__mmask16>((1u << m) - 1);
}

template <class E, int R>
void float_rows(const uint8_t* p, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy) {
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 acc[R];
    for (auto& a : acc) a = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 u[2] = {E::load(p + i * E::kBytes), E::load(p + (i + 16) * E::kBytes)};
        group_step<2, R>(acc, u, one, [&](int r, int j) { return _mm512_loadu_ps(x + r * ldx + i + 16 * j); });
    }
    if (i < n) {  // zero-padded: masked-off lanes are neither read nor nonzero
        const __mmask16 k[2] = {first_lanes(n - i), first_lanes(n - i - 16)};
        const __m512 u[2] = {E::load(p + i * E::kBytes, k[0]), E::load(p + (i + 16) * E::kBytes, k[1])};
        group_step<2, R>(acc, u, one,
                         [&](int r, int j) { return _mm512_maskz_loadu_ps(k[j], x + r * ldx + i + 16 * j); });
    }
    store_hsums(acc, y, ldy);
}

template <class E>
float float_dot(const void* w, const float* x, int64_t n) {
    float y;
    float_rows<E, 1>(static_cast<const uint8_t*>(w), x, 0, n, &y, 0);
    return y;
}

template <class E>
void float_dot_rows(const void* w, const float* x, int64_t ldx, int nx, int64_t n, float* y, int64_t ldy) {
    const auto* p = static_cast<const uint8_t*>(w);
    switch (nx) {
        case 1: return float_rows<E, 1>(p, x, ldx, n, y, ldy);
        case 2: return float_rows<E, 2>(p, x, ldx, n, y, ldy);
        case 3: return float_rows<E, 3>(p, x, ldx, n, y, ldy);
        default: return float_rows<E, 4>(p, x, ldx, n, y, ldy);
    }
}

// ---- legacy blocks (format structs: see x86/avx512_util.h) ----

// Q8_0: u = q, s = d.
struct Q8_0 {
    static constexpr int kElems = QK8_0, kBytes = sizeof(block_q8_0), kGroup = 32;
    static constexpr bool kUnitScale = false;
    template <class F>
    static DS4_AVX512_INLINE void block(const uint8_t* p, F&& f) {
        const uint8_t* qs = p + offsetof(block_q8_0, qs);
        const __m512 u[2] = {_mm512_cvtepi32_ps(i8x16(qs)), _mm512_cvtepi32_ps(i8x16(qs + 16))};
        f(0, u, bcast_f16(p + offsetof(block_q8_0, d)));
    }
};

// Q4_0: u = q - 8 by table, s = d; elements 0..15 are the low nibbles, 16..31 the high ones.
struct Q4_0 {
    static constexpr int kElems = QK4_0, kBytes = sizeof(block_q4_0), kGroup = 32;
    static constexpr bool kUnitScale = false;
    template <class F>
    static DS4_AVX512_INLINE void block(const uint8_t* p, F&& f) {
        const __m512 table = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
        const __m512i a = u8x16(p + offsetof(block_q4_0, qs));
        const __m512 u[2] = {_mm512_permutexvar_ps(a, table), _mm512_permutexvar_ps(_mm512_srli_epi32(a, 4), table)};
        f(0, u, bcast_f16(p + offsetof(block_q4_0, d)));
    }
};

// Q4_1: u = w = T[q], T = fma(d, iota, m); s = 1.
struct Q4_1 {
    static constexpr int kElems = QK4_1, kBytes = sizeof(block_q4_1), kGroup = 32;
    static constexpr bool kUnitScale = true;
    template <class F>
    static DS4_AVX512_INLINE void block(const uint8_t* p, F&& f) {
        const __m512 table =
            _mm512_fmadd_ps(bcast_f16(p + offsetof(block_q4_1, d)), iota16(), bcast_f16(p + offsetof(block_q4_1, m)));
        const __m512i a = u8x16(p + offsetof(block_q4_1, qs));
        const __m512 u[2] = {_mm512_permutexvar_ps(a, table), _mm512_permutexvar_ps(_mm512_srli_epi32(a, 4), table)};
        f(0, u, _mm512_set1_ps(1.0f));
    }
};

// The fifth bits of a Q5 block: bits 0..15 of qh for elements 0..15, bits 16..31 for 16..31
// (two 16-bit loads straight into mask registers).
DS4_AVX512_INLINE void q5_masks(const uint8_t* qhp, __mmask16& k0, __mmask16& k1) {
    k0 = static_cast<__mmask16>(load_u16(qhp));
    k1 = static_cast<__mmask16>(load_u16(qhp + 2));
}

// Q5_0: u = q - 16 from two constant tables, nibble - 16 and nibble (fifth bit set), the second
// picked by a masked vpermps (a masked add of 16 costs GCC an extra register copy); s = d.
struct Q5_0 {
    static constexpr int kElems = QK5_0, kBytes = sizeof(block_q5_0), kGroup = 32;
    static constexpr bool kUnitScale = false;
    template <class F>
    static DS4_AVX512_INLINE void block(const uint8_t* p, F&& f) {
        const __m512 tlo = _mm512_setr_ps(-16, -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, -1);
        const __m512 thi = iota16();
        __mmask16 k0, k1;
        q5_masks(p + offsetof(block_q5_0, qh), k0, k1);
        const __m512i a = u8x16(p + offsetof(block_q5_0, qs)), b = _mm512_srli_epi32(a, 4);
        const __m512 u[2] = {_mm512_mask_permutexvar_ps(_mm512_permutexvar_ps(a, tlo), k0, a, thi),
                             _mm512_mask_permutexvar_ps(_mm512_permutexvar_ps(b, tlo), k1, b, thi)};
        f(0, u, bcast_f16(p + offsetof(block_q5_0, d)));
    }
};

// Q5_1: u = w from two tables, fma(d, q, m) for q < 16 and q >= 16, the second picked by the
// fifth bit (masked vpermps); s = 1.
struct Q5_1 {
    static constexpr int kElems = QK5_1, kBytes = sizeof(block_q5_1), kGroup = 32;
    static constexpr bool kUnitScale = true;
    template <class F>
    static DS4_AVX512_INLINE void block(const uint8_t* p, F&& f) {
        const __m512 iota = iota16(), iota_hi = _mm512_add_ps(iota16(), _mm512_set1_ps(16.0f));
        const __m512 d = bcast_f16(p + offsetof(block_q5_1, d)), m = bcast_f16(p + offsetof(block_q5_1, m));
        const __m512 tlo = _mm512_fmadd_ps(d, iota, m), thi = _mm512_fmadd_ps(d, iota_hi, m);
        __mmask16 k0, k1;
        q5_masks(p + offsetof(block_q5_1, qh), k0, k1);
        const __m512i a = u8x16(p + offsetof(block_q5_1, qs)), b = _mm512_srli_epi32(a, 4);
        const __m512 u[2] = {_mm512_mask_permutexvar_ps(_mm512_permutexvar_ps(a, tlo), k0, a, thi),
                             _mm512_mask_permutexvar_ps(_mm512_permutexvar_ps(b, tlo), k1, b, thi)};
        f(0, u, _mm512_set1_ps(1.0f));
    }
};

}  // namespace

float dot_f32(const void* w, const float* x, int64_t n) { return float_dot<F32>(w, x, n); }
float dot_f16(const void* w, const float* x, int64_t n) { return float_dot<F16>(w, x, n); }
float dot_bf16(const void* w, const float* x, int64_t n) { return float_dot<BF16>(w, x, n); }
void dot_rows_f32(const void* w, const float* x, int64_t ldx, int nx, int64_t n, float* y, int64_t ldy) {
    float_dot_rows<F32>(w, x, ldx, nx, n, y, ldy);
}
void dot_rows_f16(const void* w, const float* x, int64_t ldx, int nx, int64_t n, float* y, int64_t ldy) {
    float_dot_rows<F16>(w, x, ldx, nx, n, y, ldy);
}
void dot_rows_bf16(const void* w, const float* x, int64_t ldx, int nx, int64_t n, float* y, int64_t ldy) {
    float_dot_rows<BF16>(w, x, ldx, nx, n, y, ldy);
}

DS4_AVX512_QUANT_KERNELS(q8_0, Q8_0)
DS4_AVX512_QUANT_KERNELS(q4_0, Q4_0)
DS4_AVX512_QUANT_KERNELS(q4_1, Q4_1)
DS4_AVX512_QUANT_KERNELS(q5_0, Q5_0)
DS4_AVX512_QUANT_KERNELS(q5_1, Q5_1)

void dequant_q8_0(const void* src, float* dst, int64_t n) { quant_dequant<Q8_0>(src, dst, n); }
void dequant_q5_0(const void* src, float* dst, int64_t n) { quant_dequant<Q5_0>(src, dst, n); }

}  // namespace avx512

const Kernels& avx512_kernels(Type type) {
    using namespace avx512;
    static const Kernels none;
    static const Kernels f32{nullptr, &dot_f32, &dot_rows_f32}, f16{nullptr, &dot_f16, &dot_rows_f16},
        bf16{nullptr, &dot_bf16, &dot_rows_bf16},
        q4_0{nullptr, &dot_q4_0, &dot_rows_q4_0, &groups_q4_0, &gemm_groups, 32},
        q4_1{nullptr, &dot_q4_1, &dot_rows_q4_1, &groups_q4_1, &gemm_groups, 32},
        q5_0{&dequant_q5_0, &dot_q5_0, &dot_rows_q5_0, &groups_q5_0, &gemm_groups, 32},
        q5_1{nullptr, &dot_q5_1, &dot_rows_q5_1, &groups_q5_1, &gemm_groups, 32},
        q8_0{&dequant_q8_0, &dot_q8_0, &dot_rows_q8_0, &groups_q8_0, &gemm_groups, 32},
        q2_K{nullptr, &dot_q2_K, &dot_rows_q2_K, &groups_q2_K, &gemm_groups, 16},
        q3_K{nullptr, &dot_q3_K, &dot_rows_q3_K, &groups_q3_K, &gemm_groups, 16},
        q4_K{&dequant_q4_K, &dot_q4_K, &dot_rows_q4_K, &groups_q4_K, &gemm_groups, 32},
        q5_K{nullptr, &dot_q5_K, &dot_rows_q5_K, &groups_q5_K, &gemm_groups, 32},
        q6_K{&dequant_q6_K, &dot_q6_K, &dot_rows_q6_K, &groups_q6_K, &gemm_groups, 16};
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
