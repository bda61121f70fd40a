// The gated delta rule's scalar kernel and the dispatch; see delta.h.
#include "backend/cpu/delta.h"

#include "quant/kernels.h"

namespace ds4::backend::cpu {

namespace {

void rows_scalar(const DeltaRows& a) {
    const int64_t dk = a.d_k, dv = a.d_v;
    float* sq = a.scratch;       // S^T q^ of the row to come
    float* sk = sq + dv;         // S^T k^
    float* delta = sk + dv;
    for (int64_t j = 0; j < dv; ++j) sq[j] = sk[j] = 0.0f;
    for (int64_t i = 0; i < dk; ++i) {
        const float* row = a.S + i * dv;
        const float qi = a.qk[i], ki = a.qk[dk + i];
        for (int64_t j = 0; j < dv; ++j) {
            sq[j] += row[j] * qi;
            sk[j] += row[j] * ki;
        }
    }
    for (int64_t t = 0; t < a.n; ++t) {
        const float* q = a.qk + t * 2 * dk;
        const float* k = q + dk;
        const float* v = a.v + t * a.v_stride;
        float* o = a.out + t * a.out_stride;
        const float g = a.decay[t], b = a.beta[t];
        float kq = 0.0f;
        for (int64_t i = 0; i < dk; ++i) kq += k[i] * q[i];
        for (int64_t j = 0; j < dv; ++j) {
            delta[j] = b * (v[j] - g * sk[j]);
            o[j] = g * sq[j] + kq * delta[j];
        }
        const bool next = t + 1 < a.n;
        const float* q1 = next ? q + 2 * dk : nullptr;
        if (next) {
            for (int64_t j = 0; j < dv; ++j) sq[j] = sk[j] = 0.0f;
        }
        for (int64_t i = 0; i < dk; ++i) {
            float* row = a.S + i * dv;
            const float ki = k[i];
            for (int64_t j = 0; j < dv; ++j) row[j] = g * row[j] + ki * delta[j];
            if (!next) continue;
            const float qi = q1[i], ki1 = q1[dk + i];
            for (int64_t j = 0; j < dv; ++j) {
                sq[j] += row[j] * qi;
                sk[j] += row[j] * ki1;
            }
        }
    }
}

}  // namespace

const DeltaKernels& delta_kernels_scalar() {
    static const DeltaKernels k{rows_scalar};
    return k;
}

const DeltaKernels& delta_kernels(int64_t d_v) {
#if defined(DS4_X86)
    const quant::Isa isa = quant::active_isa();
    if (quant::x86_simd(isa) && d_v % 8 == 0) return delta_kernels_avx2();
#endif
    return delta_kernels_scalar();
}

}  // namespace ds4::backend::cpu
