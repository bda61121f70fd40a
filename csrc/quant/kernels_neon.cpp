// neon kernels. Placeholder table (every entry nullptr, so dispatch falls back to the
// scalar reference) until the NEON variants land in this file.
#include "quant/isa_tables.h"

namespace ds4::quant {

const Kernels& neon_kernels(Type) {
    static const Kernels none;
    return none;
}

}  // namespace ds4::quant
