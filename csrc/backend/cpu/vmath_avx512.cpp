// AVX-512 row ops (vmath.h): the AVX2 kernels' arithmetic (vmath_avx2.cpp) 16 lanes at a time, the
// same floats bit for bit. Every element goes through the same instruction sequence as there (the
// exp and tanh polynomials, the divisions), and the one sum, a softmax chunk's, keeps the AVX2
// kernel's 8-lane accumulator: a zmm of exps adds to it as its two halves in turn, the order of
// the AVX2 kernel's two 8-element steps. The f16 conversion is the AVX2 kernel itself. Compiled
// with the AVX-512 flags; used when quant::active_isa() is avx512.
// GCC 12 warns on its own _mm512_undefined_* inside the cast / extract intrinsics (GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/vmath.h"

namespace ds4::backend::cpu {

namespace {

// vmath_avx2.cpp's exp8, the same constants and steps.
inline __m512 exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.3f));
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

// vmath_avx2.cpp's tanh8.
inline __m512 tanh16(__m512 x) {
    const __m512 z = _mm512_mul_ps(x, x);
    __m512 p = _mm512_set1_ps(-5.70498872745e-3f);
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(2.06390887954e-2f));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-5.37397155531e-2f));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(1.33314422036e-1f));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-3.33332819422e-1f));
    const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, z), x, x);
    const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-9.0f)), _mm512_set1_ps(9.0f));
    const __m512 e = exp16(_mm512_add_ps(xc, xc));
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 large = _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one)));
    const __m512 abs = _mm512_abs_ps(x);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(abs, _mm512_set1_ps(0.625f), _CMP_LT_OQ), large, small);
}

// The first m <= 16 lanes.
inline __mmask16 head(int64_t m) { return static_cast<__mmask16>(m >= 16 ? 0xFFFF : (1u << m) - 1); }

inline __m256 lo8(__m512 v) { return _mm512_castps512_ps256(v); }
inline __m256 hi8(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

// acc <- op(acc, the AVX2 kernels' 8-element steps of a zmm of valid lanes m, in order): the low
// half, then the high one if it holds a valid lane. (vmaxps keeps its second operand where one is
// NaN, so even the running maximum depends on that order.)
template <class Op>
inline __m256 steps8(__m256 acc, __m512 v, __mmask16 m, Op op) {
    acc = op(acc, lo8(v));
    return m > 0xFF ? op(acc, hi8(v)) : acc;
}
inline __m256 max8(__m256 a, __m256 b) { return _mm256_max_ps(a, b); }

// The AVX2 kernels' largest of 8 lanes (vmath_avx2.cpp: hmax), by the same tree.
inline float hmax(__m256 v) {
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    return _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
}

// Applies f to s[0..n) 16 lanes at a time, the tail through a masked load / store of the same f.
template <class F>
inline void map16(float* s, int64_t n, F&& f) {
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) _mm512_storeu_ps(s + j, f(_mm512_loadu_ps(s + j), __mmask16{0xFFFF}));
    if (j < n) {
        const __mmask16 m = head(n - j);
        _mm512_mask_storeu_ps(s + j, m, f(_mm512_maskz_loadu_ps(m, s + j), m));
    }
}

void softmax_part_avx512(float* s, int64_t n, float scale, float softcap, float* max, float* total) {
    const __m512 vs = _mm512_set1_ps(scale), cap = _mm512_set1_ps(softcap), inv_cap = _mm512_set1_ps(1.0f / softcap);
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m256 mx = _mm256_set1_ps(-INFINITY);
    map16(s, n, [&](__m512 v, __mmask16 m) {
        v = _mm512_mul_ps(v, vs);
        if (softcap > 0.0f) v = _mm512_mul_ps(tanh16(_mm512_mul_ps(v, inv_cap)), cap);
        mx = steps8(mx, _mm512_mask_blend_ps(m, ninf, v), m, max8);
        return v;
    });
    *max = hmax(mx);
    const __m512 vmax = _mm512_set1_ps(*max);
    // Masked lanes add +0, as in the AVX2 kernel.
    __m256 sum = _mm256_setzero_ps();
    map16(s, n, [&](__m512 v, __mmask16 m) {
        const __m512 e = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(v, vmax)));
        sum = steps8(sum, e, m, [](__m256 a, __m256 b) { return _mm256_add_ps(a, b); });
        return e;
    });
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
    s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
    *total = _mm_cvtss_f32(s4);
}

void glu_avx512(const float* gate, const float* up, int64_t n, Act act, float* y) {
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
    const __m512 k0 = _mm512_set1_ps(0.7978845608028654f), k1 = _mm512_set1_ps(0.044715f);
    auto f = [&](__m512 g, __m512 u) {
        if (act == Act::silu) return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), g)))), u);
        if (act == Act::sigmoid) return _mm512_div_ps(u, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), g))));
        const __m512 inner = _mm512_mul_ps(k0, _mm512_fmadd_ps(_mm512_mul_ps(_mm512_mul_ps(k1, g), g), g, g));
        return _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(half, g), _mm512_add_ps(one, tanh16(inner))), u);
    };
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
    if (i < n) {
        const __mmask16 m = head(n - i);
        _mm512_mask_storeu_ps(y + i, m, f(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, up + i)));
    }
}

// The maximum 16 lanes at a time (a masked tail padded with -inf), then the first index holding it.
int64_t argmax_avx512(const float* v, int64_t n, float* max, bool* finite) {
    const __m512 inf = _mm512_set1_ps(INFINITY), ninf = _mm512_set1_ps(-INFINITY);
    __m256 mx = _mm256_set1_ps(-INFINITY);
    __mmask16 ok = 0xFFFF;
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = head(n - i);
        const __m512 x = _mm512_mask_loadu_ps(ninf, m, v + i);
        ok &= _mm512_cmp_ps_mask(x, inf, _CMP_LT_OQ);  // false for NaN and +inf
        mx = steps8(mx, x, m, max8);
    }
    *max = hmax(mx);
    *finite = ok == 0xFFFF;
    const __m512 target = _mm512_set1_ps(*max);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = head(n - i);
        const __mmask16 hit = _mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, v + i), target, _CMP_EQ_OQ);
        if (hit) return i + __builtin_ctz(hit);
    }
    return 0;  // only when a NaN hid the maximum; *finite is false then
}

// As exp_scaled_avx2: the lanes below exp16's clamp redone with std::exp.
void exp_scaled_avx512(const float* x, int64_t n, float max, float t, float* out) {
    const __m512 vmax = _mm512_set1_ps(max), vt = _mm512_set1_ps(t), lo = _mm512_set1_ps(-87.3f);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = head(n - i);
        const __m512 a = _mm512_div_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vmax), vt);
        __m512 e = exp16(a);
        const __mmask16 below = _mm512_mask_cmp_ps_mask(m, a, lo, _CMP_NGE_UQ);
        if (below != 0) {
            alignas(64) float lane[16];
            _mm512_store_ps(lane, e);
            for (int j = 0; j < 16; ++j)
                if (below >> j & 1) lane[j] = std::exp((x[i + j] - max) / t);
            e = _mm512_load_ps(lane);
        }
        _mm512_mask_storeu_ps(out + i, m, e);
    }
}

}  // namespace

const VecMath& vec_math_avx512() {
    // The f16 conversion stays the AVX2 kernel's: vcvtps2ph on zmm measured 1.3x its time on
    // rows in cache (Intel Xeon, 16,384 floats), level from DRAM.
    static const VecMath k{softmax_part_avx512, glu_avx512, argmax_avx512, exp_scaled_avx512, vec_math_avx2().to_f16};
    return k;
}

}  // namespace ds4::backend::cpu
