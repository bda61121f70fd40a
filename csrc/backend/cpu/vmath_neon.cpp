// NEON row ops: chunk softmax, gated activations, argmax and tempered exponentials, 4 lanes; the
// algorithms of vmath_avx2.cpp (see vmath.h), a tail padded into one more vector of the same code.
#include <arm_neon.h>

#include <cmath>

#include "backend/cpu/vmath.h"

namespace ds4::backend::cpu {

namespace {

// e^x: x = k ln2 + r with |r| <= ln2 / 2 (ln2 in two parts), e^r by the degree-6 polynomial of
// vmath_avx2.cpp, 2^k through the exponent bits; x clamped to [-87.3, 88.3].
inline float32x4_t exp4(float32x4_t x) {
    x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-87.3f)), vdupq_n_f32(88.3f));
    const float32x4_t k = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
    float32x4_t r = vfmsq_f32(x, k, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, k, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(k), vdupq_n_s32(127)), 23);
    return vmulq_f32(p, vreinterpretq_f32_s32(e));
}

// tanh: the odd polynomial below |x| = 0.625, 1 - 2 / (e^2x + 1) above (|x| clamped to 9).
inline float32x4_t tanh4(float32x4_t x) {
    const float32x4_t z = vmulq_f32(x, x);
    float32x4_t p = vdupq_n_f32(-5.70498872745e-3f);
    p = vfmaq_f32(vdupq_n_f32(2.06390887954e-2f), p, z);
    p = vfmaq_f32(vdupq_n_f32(-5.37397155531e-2f), p, z);
    p = vfmaq_f32(vdupq_n_f32(1.33314422036e-1f), p, z);
    p = vfmaq_f32(vdupq_n_f32(-3.33332819422e-1f), p, z);
    const float32x4_t small = vfmaq_f32(x, vmulq_f32(p, z), x);
    const float32x4_t xc = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-9.0f)), vdupq_n_f32(9.0f));
    const float32x4_t e = exp4(vaddq_f32(xc, xc));
    const float32x4_t one = vdupq_n_f32(1.0f);
    const float32x4_t large = vsubq_f32(one, vdivq_f32(vdupq_n_f32(2.0f), vaddq_f32(e, one)));
    return vbslq_f32(vcltq_f32(vabsq_f32(x), vdupq_n_f32(0.625f)), small, large);
}

// Lanes below m set.
inline uint32x4_t head_mask(int64_t m) {
    static const uint32_t idx[4] = {0, 1, 2, 3};
    return vcltq_u32(vld1q_u32(idx), vdupq_n_u32(static_cast<uint32_t>(m)));
}
const uint32x4_t kAll = {~0u, ~0u, ~0u, ~0u};

// Applies f(v, mask) to s[0..n) 4 lanes at a time; a tail of m < 4 goes through the same f,
// padded with `pad` and stored back lane by lane.
template <class F>
inline void map4(const float* x, float* y, int64_t n, float pad, F&& f) {
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) vst1q_f32(y + j, f(j, vld1q_f32(x + j), kAll));
    if (j < n) {
        float buf[4] = {pad, pad, pad, pad};
        for (int64_t i = j; i < n; ++i) buf[i - j] = x[i];
        vst1q_f32(buf, f(j, vld1q_f32(buf), head_mask(n - j)));
        for (int64_t i = j; i < n; ++i) y[i] = buf[i - j];
    }
}

void softmax_part_neon(float* s, int64_t n, float scale, float softcap, float* max, float* total) {
    const float32x4_t vs = vdupq_n_f32(scale), cap = vdupq_n_f32(softcap), inv_cap = vdupq_n_f32(1.0f / softcap);
    const float32x4_t ninf = vdupq_n_f32(-INFINITY);
    float32x4_t mx = ninf;
    map4(s, s, n, 0.0f, [&](int64_t, float32x4_t v, uint32x4_t m) {
        v = vmulq_f32(v, vs);
        if (softcap > 0.0f) v = vmulq_f32(tanh4(vmulq_f32(v, inv_cap)), cap);
        mx = vmaxq_f32(mx, vbslq_f32(m, v, ninf));
        return v;
    });
    *max = vmaxvq_f32(mx);
    const float32x4_t vmax = vdupq_n_f32(*max);
    float32x4_t sum = vdupq_n_f32(0.0f);
    map4(s, s, n, 0.0f, [&](int64_t, float32x4_t v, uint32x4_t m) {
        const float32x4_t e = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(exp4(vsubq_f32(v, vmax))), m));
        sum = vaddq_f32(sum, e);
        return e;
    });
    *total = vaddvq_f32(sum);
}

void glu_neon(const float* gate, const float* up, int64_t n, Act act, float* y) {
    const float32x4_t half = vdupq_n_f32(0.5f), one = vdupq_n_f32(1.0f);
    const float32x4_t k0 = vdupq_n_f32(0.7978845608028654f), k1 = vdupq_n_f32(0.044715f);
    const auto f = [&](float32x4_t g, float32x4_t u) {
        if (act == Act::silu) return vmulq_f32(vdivq_f32(g, vaddq_f32(one, exp4(vnegq_f32(g)))), u);
        if (act == Act::sigmoid) return vdivq_f32(u, vaddq_f32(one, exp4(vnegq_f32(g))));
        const float32x4_t inner = vmulq_f32(k0, vfmaq_f32(g, vmulq_f32(vmulq_f32(k1, g), g), g));
        return vmulq_f32(vmulq_f32(vmulq_f32(half, g), vaddq_f32(one, tanh4(inner))), u);
    };
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, f(vld1q_f32(gate + i), vld1q_f32(up + i)));
    if (i < n) {
        float g[4] = {}, u[4] = {}, out[4];
        for (int64_t j = i; j < n; ++j) g[j - i] = gate[j], u[j - i] = up[j];
        vst1q_f32(out, f(vld1q_f32(g), vld1q_f32(u)));
        for (int64_t j = i; j < n; ++j) y[j] = out[j - i];
    }
}

// The maximum 4 lanes at a time (a tail padded with -inf), then the first index holding it.
int64_t argmax_neon(const float* v, int64_t n, float* max, bool* finite) {
    const float32x4_t inf = vdupq_n_f32(INFINITY);
    float32x4_t mx = vdupq_n_f32(-INFINITY);
    uint32x4_t ok = kAll;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t x = vld1q_f32(v + i);
        ok = vandq_u32(ok, vcltq_f32(x, inf));  // false for NaN and +inf
        mx = vmaxq_f32(mx, x);
    }
    if (i < n) {
        float buf[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        for (int64_t j = i; j < n; ++j) buf[j - i] = v[j];
        const float32x4_t x = vld1q_f32(buf);
        ok = vandq_u32(ok, vcltq_f32(x, inf));
        mx = vmaxq_f32(mx, x);
    }
    *max = vmaxvq_f32(mx);
    *finite = vminvq_u32(ok) != 0;
    for (int64_t j = 0; j < n; ++j)
        if (v[j] == *max) return j;
    return 0;  // only when a NaN hid the maximum; *finite is false then
}

// Below exp4's clamp (-87.3) the lanes are redone with std::exp (denormals, 0 for -inf).
void exp_scaled_neon(const float* x, int64_t n, float max, float t, float* out) {
    const float32x4_t vmax = vdupq_n_f32(max), vt = vdupq_n_f32(t), lo = vdupq_n_f32(-87.3f);
    map4(x, out, n, max, [&](int64_t i, float32x4_t v, uint32x4_t m) {
        const float32x4_t a = vdivq_f32(vsubq_f32(v, vmax), vt);
        float32x4_t e = exp4(a);
        const uint32x4_t below = vandq_u32(vmvnq_u32(vcgeq_f32(a, lo)), m);  // a < lo or NaN
        if (vmaxvq_u32(below) != 0) {
            float lane[4];
            uint32_t b[4];
            vst1q_f32(lane, e);
            vst1q_u32(b, below);
            for (int j = 0; j < 4; ++j)
                if (b[j]) lane[j] = std::exp((x[i + j] - max) / t);
            e = vld1q_f32(lane);
        }
        return e;
    });
}

// fcvtn in the default rounding (to nearest even, FPCR.DN clear: NaNs quieted with their top
// payload bits), as the scalar conversion; a tail through a padded vector.
void to_f16_neon(const float* x, int64_t n, uint16_t* y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    if (i < n) {
        float in[4] = {};
        uint16_t out[4];
        for (int64_t j = i; j < n; ++j) in[j - i] = x[j];
        vst1_u16(out, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(in))));
        for (int64_t j = i; j < n; ++j) y[j] = out[j - i];
    }
}

}  // namespace

const VecMath& vec_math_neon() {
    static const VecMath k{softmax_part_neon, glu_neon, argmax_neon, exp_scaled_neon, to_f16_neon};
    return k;
}

}  // namespace ds4::backend::cpu
