// AVX2 + FMA row ops: chunk softmax, gated activations and argmax, 8 lanes; see vmath.h.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/vmath.h"

namespace ds4::backend::cpu {

namespace {

// e^x: x = k ln2 + r with |r| <= ln2 / 2 (ln2 split in two so k ln2 is exact enough), e^r by
// its degree-6 Taylor-like minimax polynomial, then 2^k through the exponent bits. x is clamped
// to [-87.3, 88.3] so 2^k stays a normal float (e^x below the clamp is < 2^-125, which callers
// either mask or add to 1).
inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// tanh: for |x| < 0.625 the odd polynomial x + x^3 P(x^2) (relative accuracy near 0, where
// 1 - 2 / (e^2x + 1) would cancel); above, 1 - 2 / (e^2x + 1) with |x| clamped to 9, where tanh
// rounds to +-1 in float.
inline __m256 tanh8(__m256 x) {
    const __m256 z = _mm256_mul_ps(x, x);
    __m256 p = _mm256_set1_ps(-5.70498872745e-3f);
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.06390887954e-2f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-5.37397155531e-2f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.33314422036e-1f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-3.33332819422e-1f));
    const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
    const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-9.0f)), _mm256_set1_ps(9.0f));
    const __m256 e = exp8(_mm256_add_ps(xc, xc));
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 large = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
    const __m256 abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
    return _mm256_blendv_ps(large, small, _mm256_cmp_ps(abs, _mm256_set1_ps(0.625f), _CMP_LT_OQ));
}

// The largest of the 8 lanes (max is exact, so the tree's shape does not matter).
inline float hmax(__m256 v) {
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    return _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
}

// Mask of the first m < 8 lanes.
inline __m256i head_mask(int64_t m) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(m)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Applies f to s[0..n) 8 lanes at a time, the tail through a masked load / store of the same f.
template <class F>
inline void map8(float* s, int64_t n, F&& f) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(s + j, f(_mm256_loadu_ps(s + j), _mm256_set1_epi32(-1)));
    if (j < n) {
        const __m256i m = head_mask(n - j);
        _mm256_maskstore_ps(s + j, m, f(_mm256_maskload_ps(s + j, m), m));
    }
}

void softmax_part_avx2(float* s, int64_t n, float scale, float softcap, float* max, float* total) {
    const __m256 vs = _mm256_set1_ps(scale), cap = _mm256_set1_ps(softcap), inv_cap = _mm256_set1_ps(1.0f / softcap);
    __m256 mx = _mm256_set1_ps(-INFINITY);
    map8(s, n, [&](__m256 v, __m256i m) {
        v = _mm256_mul_ps(v, vs);
        if (softcap > 0.0f) v = _mm256_mul_ps(tanh8(_mm256_mul_ps(v, inv_cap)), cap);
        mx = _mm256_max_ps(mx, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), v, _mm256_castsi256_ps(m)));
        return v;
    });
    *max = hmax(mx);
    const __m256 vmax = _mm256_set1_ps(*max);
    __m256 sum = _mm256_setzero_ps();
    map8(s, n, [&](__m256 v, __m256i m) {
        const __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(v, vmax)), _mm256_castsi256_ps(m));
        sum = _mm256_add_ps(sum, e);
        return e;
    });
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
    s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
    *total = _mm_cvtss_f32(s4);
}

void glu_avx2(const float* gate, const float* up, int64_t n, Act act, float* y) {
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    const __m256 k0 = _mm256_set1_ps(0.7978845608028654f), k1 = _mm256_set1_ps(0.044715f);
    auto f = [&](__m256 g, __m256 u) {
        if (act == Act::silu) return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), g)))), u);
        if (act == Act::sigmoid) return _mm256_div_ps(u, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), g))));
        const __m256 inner = _mm256_mul_ps(k0, _mm256_fmadd_ps(_mm256_mul_ps(_mm256_mul_ps(k1, g), g), g, g));
        return _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(half, g), _mm256_add_ps(one, tanh8(inner))), u);
    };
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    if (i < n) {
        const __m256i m = head_mask(n - i);
        _mm256_maskstore_ps(y + i, m, f(_mm256_maskload_ps(gate + i, m), _mm256_maskload_ps(up + i, m)));
    }
}

// The maximum 8 lanes at a time (a masked tail padded with -inf), then the first index holding it.
int64_t argmax_avx2(const float* v, int64_t n, float* max, bool* finite) {
    const __m256 inf = _mm256_set1_ps(INFINITY), ninf = _mm256_set1_ps(-INFINITY);
    __m256 mx = ninf, ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(v + i);
        ok = _mm256_and_ps(ok, _mm256_cmp_ps(x, inf, _CMP_LT_OQ));  // false for NaN and +inf
        mx = _mm256_max_ps(mx, x);
    }
    if (i < n) {
        const __m256i m = head_mask(n - i);
        const __m256 x = _mm256_blendv_ps(ninf, _mm256_maskload_ps(v + i, m), _mm256_castsi256_ps(m));
        ok = _mm256_and_ps(ok, _mm256_cmp_ps(x, inf, _CMP_LT_OQ));
        mx = _mm256_max_ps(mx, x);
    }
    *max = hmax(mx);
    *finite = _mm256_movemask_ps(ok) == 0xFF;
    for (int64_t j = 0; j < n; ++j)
        if (v[j] == *max) return j;
    return 0;  // only when a NaN hid the maximum; *finite is false then
}

// vcvtps2ph in round-to-nearest-even: IEEE's half, as the scalar conversion rounds it, NaNs
// quieted with their top payload bits as it keeps them; a tail through a padded vector.
void to_f16_avx2(const float* x, int64_t n, uint16_t* y) {
    constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), kRound));
    }
    if (i < n) {
        alignas(32) float in[8] = {};
        alignas(16) uint16_t out[8];
        std::copy(x + i, x + n, in);
        _mm_store_si128(reinterpret_cast<__m128i*>(out), _mm256_cvtps_ph(_mm256_load_ps(in), kRound));
        std::copy(out, out + (n - i), y + i);
    }
}

}  // namespace

// Below exp8's clamp (-87.3) the result would be the clamp's value: those lanes, rare in a row
// of logits, are redone with std::exp, which gives their denormals and 0 (-inf included).
void exp_scaled_avx2(const float* x, int64_t n, float max, float t, float* out) {
    const __m256 vmax = _mm256_set1_ps(max), vt = _mm256_set1_ps(t), lo = _mm256_set1_ps(-87.3f);
    const auto f = [&](int64_t i, __m256 v, __m256i m) {
        const __m256 a = _mm256_div_ps(_mm256_sub_ps(v, vmax), vt);
        __m256 e = exp8(a);
        const int below = _mm256_movemask_ps(_mm256_and_ps(_mm256_cmp_ps(a, lo, _CMP_NGE_UQ), _mm256_castsi256_ps(m)));
        if (below != 0) {
            alignas(32) float lane[8];
            _mm256_store_ps(lane, e);
            for (int j = 0; j < 8; ++j)
                if (below >> j & 1) lane[j] = std::exp((x[i + j] - max) / t);
            e = _mm256_load_ps(lane);
        }
        return e;
    };
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, f(i, _mm256_loadu_ps(x + i), _mm256_set1_epi32(-1)));
    if (i < n) {
        const __m256i m = head_mask(n - i);
        _mm256_maskstore_ps(out + i, m, f(i, _mm256_maskload_ps(x + i, m), m));
    }
}

const VecMath& vec_math_avx2() {
    static const VecMath k{softmax_part_avx2, glu_avx2, argmax_avx2, exp_scaled_avx2, to_f16_avx2};
    return k;
}

}  // namespace ds4::backend::cpu
