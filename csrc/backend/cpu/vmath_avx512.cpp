// AVX-512 row ops (vmath.h): the AVX2 kernels' arithmetic (vmath_avx2.cpp) 16 lanes at a time, the
// same floats bit for bit. Every element goes through the same instruction sequence as there (the
// exp, tanh and gated activations of vmath_x86.h), and the one sum, a softmax chunk's, keeps the
// AVX2 kernel's 8-lane accumulator: a zmm of exps adds to it as its two halves in turn, the order
// of the AVX2 kernel's two 8-element steps. The f16 conversion is the AVX2 kernel itself.
// Compiled with the AVX-512 flags; used when quant::active_isa() is avx512.
// GCC 12 warns on its own _mm512_undefined_* inside the cast / extract intrinsics (GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cmath>

#include "backend/cpu/vmath.h"
#include "backend/cpu/vmath_x86.h"

namespace ds4::backend::cpu {

namespace {

// The AVX-512 width of vmath_x86.h's arithmetic.
struct Zmm {
    using F = __m512;
    static F set1(float v) { return _mm512_set1_ps(v); }
    static F add(F a, F b) { return _mm512_add_ps(a, b); }
    static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
    static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
    static F div(F a, F b) { return _mm512_div_ps(a, b); }
    static F min(F a, F b) { return _mm512_min_ps(a, b); }
    static F max(F a, F b) { return _mm512_max_ps(a, b); }
    static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
    static F fnmadd(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
    static F round(F x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
    static F abs(F x) { return _mm512_abs_ps(x); }
    static F pow2(F k) {
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23));
    }
    static F select_below(F a, F b, F t, F f) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), f, t); }
};
inline __m512 exp16(__m512 x) { return exp_v<Zmm>(x); }

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
        if (softcap > 0.0f) v = _mm512_mul_ps(tanh_v<Zmm>(_mm512_mul_ps(v, inv_cap)), cap);
        mx = steps8(mx, _mm512_mask_blend_ps(m, ninf, v), m, max8);
        return v;
    });
    *max = hmax8(mx);
    const __m512 vmax = _mm512_set1_ps(*max);
    // Masked lanes add +0, as in the AVX2 kernel.
    __m256 sum = _mm256_setzero_ps();
    map16(s, n, [&](__m512 v, __mmask16 m) {
        const __m512 e = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(v, vmax)));
        sum = steps8(sum, e, m, [](__m256 a, __m256 b) { return _mm256_add_ps(a, b); });
        return e;
    });
    *total = hsum8(sum);
}

void glu_avx512(const float* gate, const float* up, int64_t n, Act act, float* y) {
    const auto f = [act](__m512 g, __m512 u) { return gated_v<Zmm>(g, u, act); };
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
    *max = hmax8(mx);
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
