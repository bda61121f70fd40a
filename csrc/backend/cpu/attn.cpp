// Scalar attention kernels (every ISA without a SIMD variant) and the dispatcher.
#include "backend/cpu/attn.h"

#include "quant/kernels.h"

namespace ds4::backend::cpu {

namespace {

// Lanes of the scalar dot: independent accumulators summed pairwise at the end, so the compiler
// may vectorise without reassociating (one fixed order for a given head_dim).
constexpr int kLanes = 8;

inline float kv_at(const void* base, KvType type, int64_t i) {
    if (type == KvType::f32) return static_cast<const float*>(base)[i];
    return quant::f16_to_f32(static_cast<const uint16_t*>(base)[i]);
}

void scores_scalar(const float* q, int g, const void* k, KvType type, int64_t stride,
                   int64_t first, int64_t last, int64_t hd, float* s, int64_t ns) {
    for (int64_t j = first; j <= last; ++j) {
        const int64_t kb = j * stride;
        for (int h = 0; h < g; ++h) {
            const float* qh = q + h * hd;
            float acc[kLanes] = {};
            int64_t d = 0;
            for (; d + kLanes <= hd; d += kLanes) {
                for (int l = 0; l < kLanes; ++l) acc[l] += qh[d + l] * kv_at(k, type, kb + d + l);
            }
            for (int l = 0; d < hd; ++d, ++l) acc[l] += qh[d] * kv_at(k, type, kb + d);
            for (int w = kLanes / 2; w > 0; w /= 2) {
                for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
            }
            s[h * ns + (j - first)] = acc[0];
        }
    }
}

void mix_scalar(const float* p, int g, const void* v, KvType type, int64_t stride,
                int64_t first, int64_t last, int64_t hd, float* o, int64_t ns) {
    for (int h = 0; h < g; ++h) {
        float* oh = o + h * hd;
        for (int64_t d = 0; d < hd; ++d) oh[d] = 0.0f;
    }
    for (int64_t j = first; j <= last; ++j) {
        const int64_t vb = j * stride;
        for (int h = 0; h < g; ++h) {
            const float pj = p[h * ns + (j - first)];
            float* oh = o + h * hd;
            for (int64_t d = 0; d < hd; ++d) oh[d] += pj * kv_at(v, type, vb + d);
        }
    }
}

}  // namespace

const AttnKernels& attn_kernels_scalar() {
    static const AttnKernels k{scores_scalar, mix_scalar};
    return k;
}

const AttnKernels& attn_kernels() {
#if defined(DS4_X86)
    if (quant::active_isa() == quant::Isa::avx512) return attn_kernels_avx512();
    if (quant::x86_simd(quant::active_isa())) return attn_kernels_avx2();
#elif defined(DS4_ARM64)
    if (quant::active_isa() == quant::Isa::neon) return attn_kernels_neon();
#endif
    return attn_kernels_scalar();
}

}  // namespace ds4::backend::cpu
