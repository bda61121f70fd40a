// The gated delta rule's AVX2 kernel (8 value lanes per vector, d_v a multiple of 8); the same
// operations per lane as the scalar kernel (delta.cpp), with fused multiply-adds.
#include <immintrin.h>

#include "backend/cpu/delta.h"

namespace ds4::backend::cpu {

namespace {

void rows_avx2(const DeltaRows& a) {
    const int64_t dk = a.d_k, dv = a.d_v;
    float* sq = a.scratch;
    float* sk = sq + dv;
    float* delta = sk + dv;
    const __m256 zero = _mm256_setzero_ps();
    for (int64_t j = 0; j < dv; j += 8) {
        _mm256_storeu_ps(sq + j, zero);
        _mm256_storeu_ps(sk + j, zero);
    }
    for (int64_t i = 0; i < dk; ++i) {
        const float* row = a.S + i * dv;
        const __m256 qi = _mm256_set1_ps(a.qk[i]), ki = _mm256_set1_ps(a.qk[dk + i]);
        for (int64_t j = 0; j < dv; j += 8) {
            const __m256 r = _mm256_loadu_ps(row + j);
            _mm256_storeu_ps(sq + j, _mm256_fmadd_ps(r, qi, _mm256_loadu_ps(sq + j)));
            _mm256_storeu_ps(sk + j, _mm256_fmadd_ps(r, ki, _mm256_loadu_ps(sk + j)));
        }
    }
    for (int64_t t = 0; t < a.n; ++t) {
        const float* q = a.qk + t * 2 * dk;
        const float* k = q + dk;
        const float* v = a.v + t * a.v_stride;
        float* o = a.out + t * a.out_stride;
        const __m256 g = _mm256_set1_ps(a.decay[t]), b = _mm256_set1_ps(a.beta[t]);
        float kq = 0.0f;
        for (int64_t i = 0; i < dk; ++i) kq += k[i] * q[i];
        const __m256 kqv = _mm256_set1_ps(kq);
        for (int64_t j = 0; j < dv; j += 8) {
            const __m256 d = _mm256_mul_ps(b, _mm256_fnmadd_ps(g, _mm256_loadu_ps(sk + j), _mm256_loadu_ps(v + j)));
            _mm256_storeu_ps(delta + j, d);
            _mm256_storeu_ps(o + j, _mm256_fmadd_ps(kqv, d, _mm256_mul_ps(g, _mm256_loadu_ps(sq + j))));
        }
        const bool next = t + 1 < a.n;
        const float* q1 = next ? q + 2 * dk : nullptr;
        if (next) {
            for (int64_t j = 0; j < dv; j += 8) {
                _mm256_storeu_ps(sq + j, zero);
                _mm256_storeu_ps(sk + j, zero);
            }
        }
        for (int64_t i = 0; i < dk; ++i) {
            float* row = a.S + i * dv;
            const __m256 ki = _mm256_set1_ps(k[i]);
            if (!next) {
                for (int64_t j = 0; j < dv; j += 8) {
                    const __m256 r = _mm256_fmadd_ps(ki, _mm256_loadu_ps(delta + j), _mm256_mul_ps(g, _mm256_loadu_ps(row + j)));
                    _mm256_storeu_ps(row + j, r);
                }
                continue;
            }
            const __m256 qi = _mm256_set1_ps(q1[i]), ki1 = _mm256_set1_ps(q1[dk + i]);
            for (int64_t j = 0; j < dv; j += 8) {
                const __m256 r = _mm256_fmadd_ps(ki, _mm256_loadu_ps(delta + j), _mm256_mul_ps(g, _mm256_loadu_ps(row + j)));
                _mm256_storeu_ps(row + j, r);
                _mm256_storeu_ps(sq + j, _mm256_fmadd_ps(r, qi, _mm256_loadu_ps(sq + j)));
                _mm256_storeu_ps(sk + j, _mm256_fmadd_ps(r, ki1, _mm256_loadu_ps(sk + j)));
            }
        }
    }
}

}  // namespace

const DeltaKernels& delta_kernels_avx2() {
    static const DeltaKernels k{rows_avx2};
    return k;
}

}  // namespace ds4::backend::cpu
