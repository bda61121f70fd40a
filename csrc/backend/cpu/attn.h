// Attention inner kernels of the CPU backend: scores (q·k) and the softmax-weighted sum of V for
// a group of query heads that share one KV head, over keys first..last in ascending order.
//
// Batch invariance: each (head, key) score and each output element is computed with one fixed
// order of operations that depends only on head_dim and the ISA, never on how many heads are
// processed together, the number of query rows or the thread; so a row's result is the same
// whatever the call shape. Sharing a KV head only means each K/V row is loaded once per group.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace ds4::backend::cpu {

struct AttnKernels {
    // s[h * ns + (j - first)] = q_h · k_j for h < g, j in [first, last]. q_h = q + h * hd;
    // k_j = k + j * stride (k already offset to the KV head), in `type`.
    void (*scores)(const float* q, int g, const void* k, KvType type, int64_t stride,
                   int64_t first, int64_t last, int64_t hd, float* s, int64_t ns);
    // o_h[d] = sum over j ascending of p[h * ns + (j - first)] * v_j[d], for h < g.
    void (*mix)(const float* p, int g, const void* v, KvType type, int64_t stride,
                int64_t first, int64_t last, int64_t hd, float* o, int64_t ns);
};

const AttnKernels& attn_kernels_scalar();
#if defined(DS4_X86)
const AttnKernels& attn_kernels_avx2();    // attn_avx2.cpp (avx2, avxvnni)
const AttnKernels& attn_kernels_avx512();  // attn_avx512.cpp: the same floats as attn_avx2.cpp
#elif defined(DS4_ARM64)
const AttnKernels& attn_kernels_neon();  // attn_neon.cpp
#endif
// The kernels of the active ISA (quant::active_isa()), scalar where no SIMD variant exists.
const AttnKernels& attn_kernels();

}  // namespace ds4::backend::cpu
