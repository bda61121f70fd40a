// Per-ISA kernel tables, each defined in its own translation unit compiled with that ISA's
// flags. Entries a file does not implement stay nullptr and fall back to the next lower ISA.
#pragma once

#include "quant/kernels.h"

namespace ds4::quant {

const Kernels& ref_kernels(Type type);     // kernels_ref.cpp (every supported type)
#if defined(DS4_X86)
const Kernels& avx2_kernels(Type type);    // x86/float_avx2.cpp
const Kernels& avx512_kernels(Type type);  // x86/float_avx512.cpp
#endif
#if defined(DS4_ARM64)
const Kernels& neon_kernels(Type type);    // arm/float_neon.cpp
#endif

}  // namespace ds4::quant
