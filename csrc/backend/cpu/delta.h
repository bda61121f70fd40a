// The gated delta rule's inner kernel of the CPU backend (Backend::gated_delta): one value
// head's [d_k, d_v] state through a sequence's rows, the rows' q^ and k^ already normalised.
//
// Per row t: out_t = e^g_t S^T q^_t + (k^_t . q^_t) delta_t and S = e^g_t S + k^_t delta_t^T,
// with delta_t = beta_t (v_t - e^g_t S^T k^_t): the rule of backend.h with the decay folded into
// the products, so that each row reads and writes the state once, the pass that updates S for
// row t also forming S^T q^ and S^T k^ for row t + 1. Every sum runs over the key index in
// ascending order, one per output lane, so a row's result is the same whether its rows come one
// per call or many (the batch invariance of backend.h).
#pragma once

#include <cstdint>

namespace ds4::backend::cpu {

struct DeltaRows {
    float* S;              // [d_k, d_v], advanced in place
    int64_t d_k, d_v, n;
    const float* qk;       // [n, 2 d_k]: q^ then k^ of each row
    const float* v;        // row t at v + t * v_stride: d_v values
    int64_t v_stride;
    const float* decay;    // [n] e^g
    const float* beta;     // [n]
    float* out;            // row t at out + t * out_stride: d_v values
    int64_t out_stride;
    float* scratch;        // 3 d_v floats
};

struct DeltaKernels {
    void (*rows)(const DeltaRows& a);
};

const DeltaKernels& delta_kernels_scalar();
#if defined(DS4_X86)
const DeltaKernels& delta_kernels_avx2();  // delta_avx2.cpp (d_v a multiple of 8); also under AVX-512
#endif
// The kernels of the active ISA for rows of d_v values, scalar where no SIMD variant fits.
const DeltaKernels& delta_kernels(int64_t d_v);

}  // namespace ds4::backend::cpu
