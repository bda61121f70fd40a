// Scalar row ops (every ISA without a SIMD variant) and the dispatcher; see vmath.h.
#include "backend/cpu/vmath.h"

#include <algorithm>
#include <cmath>

#include "quant/kernels.h"

namespace ds4::backend::cpu {

namespace {

void softmax_part_scalar(float* s, int64_t n, float scale, float softcap, float* max, float* total) {
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
        float v = s[j] * scale;
        if (softcap > 0.0f) v = std::tanh(v / softcap) * softcap;
        s[j] = v;
        mx = std::max(mx, v);
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
        s[j] = std::exp(s[j] - mx);
        sum += s[j];
    }
    *max = mx;
    *total = sum;
}

void glu_scalar(const float* gate, const float* up, int64_t n, Act act, float* y) {
    if (act == Act::silu) {
        for (int64_t i = 0; i < n; ++i) y[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
        return;
    }
    if (act == Act::sigmoid) {
        for (int64_t i = 0; i < n; ++i) y[i] = up[i] / (1.0f + std::exp(-gate[i]));
        return;
    }
    const float k0 = 0.7978845608028654f;  // sqrt(2 / pi)
    for (int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        const float inner = k0 * (g + 0.044715f * g * g * g);
        y[i] = 0.5f * g * (1.0f + std::tanh(inner)) * up[i];
    }
}

int64_t argmax_scalar(const float* v, int64_t n, float* max, bool* finite) {
    int64_t best = 0;
    bool ok = true;
    for (int64_t i = 0; i < n; ++i) {
        ok &= v[i] < INFINITY;
        if (v[i] > v[best]) best = i;
    }
    *max = v[best];
    *finite = ok;
    return best;
}

void exp_scaled_scalar(const float* x, int64_t n, float max, float t, float* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = std::exp((x[i] - max) / t);
}

void to_f16_scalar(const float* x, int64_t n, uint16_t* y) {
    for (int64_t i = 0; i < n; ++i) y[i] = quant::f32_to_f16(x[i]);
}

}  // namespace

const VecMath& vec_math_scalar() {
    static const VecMath k{softmax_part_scalar, glu_scalar, argmax_scalar, exp_scaled_scalar, to_f16_scalar};
    return k;
}

const VecMath& vec_math(quant::Isa isa) {
#if defined(DS4_X86)
    if (isa == quant::Isa::avx512) return vec_math_avx512();
    if (quant::x86_simd(isa)) return vec_math_avx2();
#elif defined(DS4_ARM64)
    if (isa == quant::Isa::neon) return vec_math_neon();
#endif
    (void)isa;
    return vec_math_scalar();
}

const VecMath& vec_math() { return vec_math(quant::active_isa()); }

}  // namespace ds4::backend::cpu
