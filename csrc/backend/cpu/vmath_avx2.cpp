// AVX2 + FMA row ops: chunk softmax, gated activations and argmax, 8 lanes; see vmath.h.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/vmath.h"
#include "backend/cpu/vmath_x86.h"

namespace ds4::backend::cpu {

namespace {

// The AVX2 width of vmath_x86.h's arithmetic.
struct Ymm {
    using F = __m256;
    static F set1(float v) { return _mm256_set1_ps(v); }
    static F add(F a, F b) { return _mm256_add_ps(a, b); }
    static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
    static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
    static F div(F a, F b) { return _mm256_div_ps(a, b); }
    static F min(F a, F b) { return _mm256_min_ps(a, b); }
    static F max(F a, F b) { return _mm256_max_ps(a, b); }
    static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
    static F fnmadd(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }
    static F round(F x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
    static F abs(F x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }
    // 2^k for integral k, through the exponent bits
    static F pow2(F k) {
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23));
    }
    // t where a < b, else f
    static F select_below(F a, F b, F t, F f) { return _mm256_blendv_ps(f, t, _mm256_cmp_ps(a, b, _CMP_LT_OQ)); }
};
inline __m256 exp8(__m256 x) { return exp_v<Ymm>(x); }

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
        if (softcap > 0.0f) v = _mm256_mul_ps(tanh_v<Ymm>(_mm256_mul_ps(v, inv_cap)), cap);
        mx = _mm256_max_ps(mx, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), v, _mm256_castsi256_ps(m)));
        return v;
    });
    *max = hmax8(mx);
    const __m256 vmax = _mm256_set1_ps(*max);
    __m256 sum = _mm256_setzero_ps();
    map8(s, n, [&](__m256 v, __m256i m) {
        const __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(v, vmax)), _mm256_castsi256_ps(m));
        sum = _mm256_add_ps(sum, e);
        return e;
    });
    *total = hsum8(sum);
}

void glu_avx2(const float* gate, const float* up, int64_t n, Act act, float* y) {
    const auto f = [act](__m256 g, __m256 u) { return gated_v<Ymm>(g, u, act); };
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
    *max = hmax8(mx);
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
