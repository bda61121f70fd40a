// AVX2 + FMA + F16C attention kernels (attn.h, the arithmetic in attn_x86.h). Compiled with
// -mavx2 -mfma -mf16c; called when quant::active_isa() is avx2 or avxvnni.
#include "backend/cpu/attn_x86.h"

namespace ds4::backend::cpu {

namespace {

void scores_avx2(const float* q, int g, const void* k, KvType type, int64_t stride, int64_t first, int64_t last,
                 int64_t hd, float* s, int64_t ns) {
    with_rows(k, type, first * stride, [&](auto rows) { scores_t(q, g, rows, stride, last - first + 1, hd, s, ns); });
}

void mix_avx2(const float* p, int g, const void* v, KvType type, int64_t stride, int64_t first, int64_t last,
              int64_t hd, float* o, int64_t ns) {
    with_rows(v, type, first * stride, [&](auto rows) { mix_t(p, g, rows, stride, last - first + 1, hd, o, ns); });
}

}  // namespace

const AttnKernels& attn_kernels_avx2() {
    static const AttnKernels k{scores_avx2, mix_avx2};
    return k;
}

}  // namespace ds4::backend::cpu
