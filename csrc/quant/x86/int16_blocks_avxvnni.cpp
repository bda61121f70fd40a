// x86/int16_blocks_avx2.cpp compiled again for AVX-VNNI (Alder Lake and later, Zen 4 and later):
// the same kernels in namespace avxvnni, each vpmaddwd + vpaddd pair one vpdpwssd (x86/madd.h),
// the same floats bit for bit.
#define DS4_AVX2_NAMESPACE avxvnni
#define DS4_I16_VNNI 1
#include "quant/x86/int16_blocks_avx2.cpp"
