// Test-only stand-in for <immintrin.h>: the AVX-512 kernels compiled against SIMDe's portable
// implementations of the intrinsics (native aliases), so tests/quant/simd_check.cpp and the
// backend's x86 checks (tests/backend/x86_*_check.cpp) can run them on a CPU without AVX-512.
// Used only by tests/quant/test_simd_kernels.py and tests/backend/test_x86_avx512.py (built
// without -mavx* flags, so SIMDe itself never includes the real <immintrin.h>).  Intrinsics missing from older SIMDe
// releases (Debian's 0.7.x) are supplied below lane by lane, with the hardware's semantics.
#pragma once
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <simde/x86/f16c.h>

#include <array>
#include <cstdint>
#include <cstring>

typedef simde__mmask16 __mmask16;  // SIMDe 0.7 aliases the vector types but not the masks
typedef simde__mmask64 __mmask64;

namespace ds4_simde_shim {
template <class To, class From>
inline To bits(const From& f) {
    static_assert(sizeof(To) == sizeof(From), "size");
    To t;
    std::memcpy(&t, &f, sizeof t);
    return t;
}
}  // namespace ds4_simde_shim

// Each helper: unpack to arrays, apply the instruction's per-lane definition, repack.
#define DS4_SHIM_UNARY(name, In, InT, InN, OutT, expr)                                   \
    inline simde__m512i ds4_##name(In a) {                                              \
        const auto v = ds4_simde_shim::bits<std::array<InT, InN>>(a);                   \
        std::array<OutT, 16> r;                                                         \
        for (int i = 0; i < 16; ++i) r[i] = static_cast<OutT>(expr);                   \
        return ds4_simde_shim::bits<simde__m512i>(r);                                   \
    }

#ifndef _mm512_cvtepu8_epi32
DS4_SHIM_UNARY(mm512_cvtepu8_epi32, simde__m128i, uint8_t, 16, int32_t, v[i])
#define _mm512_cvtepu8_epi32 ds4_mm512_cvtepu8_epi32
#endif
#ifndef _mm512_cvtepi8_epi32
DS4_SHIM_UNARY(mm512_cvtepi8_epi32, simde__m128i, int8_t, 16, int32_t, v[i])
#define _mm512_cvtepi8_epi32 ds4_mm512_cvtepi8_epi32
#endif
#ifndef _mm512_cvtepu16_epi32
DS4_SHIM_UNARY(mm512_cvtepu16_epi32, simde__m256i, uint16_t, 16, int32_t, v[i])
#define _mm512_cvtepu16_epi32 ds4_mm512_cvtepu16_epi32
#endif
#ifndef _mm512_cvtepu8_epi16
inline simde__m512i ds4_mm512_cvtepu8_epi16(simde__m256i a) {
    const auto v = ds4_simde_shim::bits<std::array<uint8_t, 32>>(a);
    std::array<int16_t, 32> r;
    for (int i = 0; i < 32; ++i) r[i] = v[i];
    return ds4_simde_shim::bits<simde__m512i>(r);
}
#define _mm512_cvtepu8_epi16 ds4_mm512_cvtepu8_epi16
#endif
#ifndef _mm512_cvtepi32_ps
inline simde__m512 ds4_mm512_cvtepi32_ps(simde__m512i a) {
    const auto v = ds4_simde_shim::bits<std::array<int32_t, 16>>(a);
    std::array<float, 16> r;
    for (int i = 0; i < 16; ++i) r[i] = static_cast<float>(v[i]);  // round to nearest, as cvtdq2ps
    return ds4_simde_shim::bits<simde__m512>(r);
}
#define _mm512_cvtepi32_ps ds4_mm512_cvtepi32_ps
#endif
#ifndef _mm512_cvtph_ps
inline simde__m512 ds4_mm512_cvtph_ps(simde__m256i a) {
    const simde__m128i lo = simde_mm256_castsi256_si128(a), hi = simde_mm256_extractf128_si256(a, 1);
    const simde__m128 q[4] = {simde_mm_cvtph_ps(lo), simde_mm_cvtph_ps(simde_mm_srli_si128(lo, 8)),
                              simde_mm_cvtph_ps(hi), simde_mm_cvtph_ps(simde_mm_srli_si128(hi, 8))};
    float r[16];
    std::memcpy(r, q, sizeof r);
    return simde_mm512_loadu_ps(r);
}
#define _mm512_cvtph_ps ds4_mm512_cvtph_ps
#endif
#ifndef _mm512_test_epi32_mask
inline simde__mmask16 ds4_mm512_test_epi32_mask(simde__m512i a, simde__m512i b) {
    const auto x = ds4_simde_shim::bits<std::array<uint32_t, 16>>(a);
    const auto y = ds4_simde_shim::bits<std::array<uint32_t, 16>>(b);
    unsigned k = 0;
    for (int i = 0; i < 16; ++i) k |= (x[i] & y[i]) ? (1u << i) : 0u;
    return static_cast<simde__mmask16>(k);
}
#define _mm512_test_epi32_mask ds4_mm512_test_epi32_mask
#endif
#ifndef _mm512_testn_epi32_mask
inline simde__mmask16 ds4_mm512_testn_epi32_mask(simde__m512i a, simde__m512i b) {
    return static_cast<simde__mmask16>(~_mm512_test_epi32_mask(a, b));
}
#define _mm512_testn_epi32_mask ds4_mm512_testn_epi32_mask
#endif
// Masked loads: only the selected lanes are read (masked-off lanes may lie past the buffer), the
// others are zero.
#ifndef _mm512_maskz_loadu_ps
inline simde__m512 ds4_mm512_maskz_loadu_ps(simde__mmask16 k, const void* p) {
    std::array<float, 16> r{};
    for (int i = 0; i < 16; ++i)
        if (k & (1u << i)) std::memcpy(&r[i], static_cast<const char*>(p) + 4 * i, 4);
    return ds4_simde_shim::bits<simde__m512>(r);
}
#define _mm512_maskz_loadu_ps ds4_mm512_maskz_loadu_ps
#endif
#ifndef _mm256_maskz_loadu_epi16
inline simde__m256i ds4_mm256_maskz_loadu_epi16(simde__mmask16 k, const void* p) {
    std::array<uint16_t, 16> r{};
    for (int i = 0; i < 16; ++i)
        if (k & (1u << i)) std::memcpy(&r[i], static_cast<const char*>(p) + 2 * i, 2);
    return ds4_simde_shim::bits<simde__m256i>(r);
}
#define _mm256_maskz_loadu_epi16 ds4_mm256_maskz_loadu_epi16
#endif

// SIMDe 0.7 has the function but no native alias.
#ifndef _mm512_shuffle_f32x4
#define _mm512_shuffle_f32x4(a, b, imm8) simde_mm512_shuffle_f32x4(a, b, imm8)
#endif

// The fused multiply-adds rounded once, as the hardware's (SIMDe may compute a * b + c with two
// roundings): the int16 path's kernels are checked bit for bit against the scalar reference's
// std::fma. N: the lanes fused (the _ss form fuses lane 0 and keeps a's others).
#include <cmath>
namespace ds4_simde_shim {
template <class V, int L, int N = L>
inline V fused(V a, V b, V c) {
    const auto x = bits<std::array<float, L>>(a), y = bits<std::array<float, L>>(b), w = bits<std::array<float, L>>(c);
    auto z = N == L ? w : x;
    for (int i = 0; i < N; ++i) z[i] = std::fma(x[i], y[i], w[i]);
    return bits<V>(z);
}
// c - a * b rounded once (fnmadd).
template <class V, int L>
inline V fused_neg(V a, V b, V c) {
    const auto x = bits<std::array<float, L>>(a), y = bits<std::array<float, L>>(b), w = bits<std::array<float, L>>(c);
    std::array<float, L> z;
    for (int i = 0; i < L; ++i) z[i] = std::fma(-x[i], y[i], w[i]);
    return bits<V>(z);
}
}  // namespace ds4_simde_shim
#undef _mm512_fmadd_ps
#define _mm512_fmadd_ps ds4_simde_shim::fused<simde__m512, 16>
#undef _mm256_fmadd_ps
#define _mm256_fmadd_ps ds4_simde_shim::fused<simde__m256, 8>
#undef _mm_fmadd_ps
#define _mm_fmadd_ps ds4_simde_shim::fused<simde__m128, 4>
#undef _mm_fmadd_ss
#define _mm_fmadd_ss ds4_simde_shim::fused<simde__m128, 4, 1>
#undef _mm512_fnmadd_ps
#define _mm512_fnmadd_ps ds4_simde_shim::fused_neg<simde__m512, 16>
#undef _mm256_fnmadd_ps
#define _mm256_fnmadd_ps ds4_simde_shim::fused_neg<simde__m256, 8>

// AVX-VNNI's vpdpwssd on ymm (the x86/int16_*_avxvnni.cpp kernels): per 32-bit lane, acc plus the
// two int16 products of that lane, wrapping.
inline simde__m256i ds4_mm256_dpwssd_avx_epi32(simde__m256i acc, simde__m256i a, simde__m256i b) {
    const auto x = ds4_simde_shim::bits<std::array<int16_t, 16>>(a), y = ds4_simde_shim::bits<std::array<int16_t, 16>>(b);
    auto z = ds4_simde_shim::bits<std::array<uint32_t, 8>>(acc);
    for (int i = 0; i < 8; ++i) {
        z[i] += static_cast<uint32_t>(int32_t{x[2 * i]} * y[2 * i]) + static_cast<uint32_t>(int32_t{x[2 * i + 1]} * y[2 * i + 1]);
    }
    return ds4_simde_shim::bits<simde__m256i>(z);
}
#define _mm256_dpwssd_avx_epi32 ds4_mm256_dpwssd_avx_epi32
#ifndef _cvtsh_ss
inline float ds4_cvtsh_ss(unsigned short h) { return simde_mm_cvtss_f32(simde_mm_cvtph_ps(simde_mm_cvtsi32_si128(h))); }
#define _cvtsh_ss ds4_cvtsh_ss
#endif
// The activation quantiser (x86/int16_quantize_avx512.cpp): vcvtps2dq rounds to nearest even
// (the default rounding) and gives INT32_MIN for what int32 cannot hold; the float maximum of the
// 16 lanes (NaN-free inputs there).
#ifndef _mm512_cvtps_epi32
inline simde__m512i ds4_mm512_cvtps_epi32(simde__m512 a) {
    const auto v = ds4_simde_shim::bits<std::array<float, 16>>(a);
    std::array<int32_t, 16> r;
    for (int i = 0; i < 16; ++i) {
        const float t = std::nearbyint(v[i]);
        r[i] = t >= -2147483648.0f && t < 2147483648.0f ? static_cast<int32_t>(t) : INT32_MIN;
    }
    return ds4_simde_shim::bits<simde__m512i>(r);
}
#define _mm512_cvtps_epi32 ds4_mm512_cvtps_epi32
#endif
#ifndef _mm512_reduce_max_ps
inline float ds4_mm512_reduce_max_ps(simde__m512 a) {
    const auto v = ds4_simde_shim::bits<std::array<float, 16>>(a);
    float m = v[0];
    for (int i = 1; i < 16; ++i) m = v[i] > m ? v[i] : m;
    return m;
}
#define _mm512_reduce_max_ps ds4_mm512_reduce_max_ps
#endif

// The masked float loads, stores and compares of the backend's AVX-512 row ops (vmath_avx512.cpp).
#ifndef _MM_FROUND_NO_EXC
#define _MM_FROUND_NO_EXC SIMDE_MM_FROUND_NO_EXC
#endif
#ifndef _mm512_mask_storeu_ps
inline void ds4_mm512_mask_storeu_ps(void* p, simde__mmask16 k, simde__m512 a) {
    const auto v = ds4_simde_shim::bits<std::array<float, 16>>(a);
    for (int i = 0; i < 16; ++i)
        if (k >> i & 1) std::memcpy(static_cast<char*>(p) + 4 * i, &v[i], 4);
}
#define _mm512_mask_storeu_ps ds4_mm512_mask_storeu_ps
#endif
#ifndef _mm512_mask_loadu_ps
inline simde__m512 ds4_mm512_mask_loadu_ps(simde__m512 src, simde__mmask16 k, const void* p) {
    auto r = ds4_simde_shim::bits<std::array<float, 16>>(src);
    for (int i = 0; i < 16; ++i)
        if (k >> i & 1) std::memcpy(&r[i], static_cast<const char*>(p) + 4 * i, 4);
    return ds4_simde_shim::bits<simde__m512>(r);
}
#define _mm512_mask_loadu_ps ds4_mm512_mask_loadu_ps
#endif
#ifndef _mm512_mask_cmp_ps_mask
#define _mm512_mask_cmp_ps_mask(k, a, b, imm) static_cast<simde__mmask16>((k) & _mm512_cmp_ps_mask((a), (b), (imm)))
#endif
