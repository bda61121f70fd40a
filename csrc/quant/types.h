// Tensor element types as GGUF numbers them (ggml's type ids), with their block geometry.
// The GGUF reader uses this table to validate tensor extents; the kernels use it to
// find a type's implementation. Ids are part of the file format: never renumber.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds4::quant {

enum class Type : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
    IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
    IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
    TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41,
};

struct TypeInfo {
    const char* name;     // ggml's spelling, e.g. "Q4_K"
    int64_t block_size;   // elements per block
    size_t type_size;     // bytes per block
};

// nullptr for an id that is not a known ggml type.
const TypeInfo* type_info(uint32_t id);

// Bytes of a row of n elements; n must be a multiple of the block size (checked by callers).
inline size_t row_bytes(const TypeInfo& t, int64_t n) {
    return static_cast<size_t>(n / t.block_size) * t.type_size;
}

}  // namespace ds4::quant
