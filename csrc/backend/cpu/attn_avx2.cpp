// AVX2 + FMA + F16C attention kernels (attn.h, the arithmetic in attn_x86.h). Compiled with
// -mavx2 -mfma -mf16c; called when quant::active_isa() is avx2 or avxvnni.
#include "backend/cpu/attn_x86.h"

namespace ds4::backend::cpu {

namespace {

struct Avx2 {
    static constexpr int keys(int g) { return 4 / g; }  // G * K * 2 accumulators = 8 chains
    template <typename T, int G, int K>
    static void dots(const float* q, const T* k, int64_t stride, int64_t hd, float* s, int64_t ns) {
        dots8<T, G, K>(q, k, stride, hd, s, ns);
    }
    template <typename T, int G>
    static void mix(const float* p, const T* v, int64_t stride, int64_t j0, int64_t j1, int64_t hd, float* o,
                    int64_t ns, bool fresh) {
        mix_keys<T, G>(p, v, stride, j0, j1, hd, o, ns, fresh);
    }
};

}  // namespace

const AttnKernels& attn_kernels_avx2() {
    static const AttnKernels k = kernels_of<Avx2>();
    return k;
}

}  // namespace ds4::backend::cpu
