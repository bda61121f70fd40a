// avx2 kernels. Placeholder table (every entry nullptr, so dispatch falls back to the next
// lower ISA) until the SIMD variants land in this file.
#include "quant/isa_tables.h"

namespace ds4::quant {

const Kernels& avx2_kernels(Type) {
    static const Kernels none;
    return none;
}

}  // namespace ds4::quant
