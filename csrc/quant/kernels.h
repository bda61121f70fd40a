// Per-type kernels and their run-time dispatch.
//
// Every supported type has a scalar reference (kernels_ref.cpp) and may have SIMD variants
// (kernels_avx2.cpp, kernels_avx512.cpp, kernels_neon.cpp). One table per ISA maps a type to
// its kernels; a missing SIMD entry falls back to the next lower ISA, ending at the reference.
// The active ISA is the best one the CPU supports, or the one forced by DS4_SIMD
// (scalar | avx2 | avx512 | neon) or by set_isa(), so tests can exercise every path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quant/types.h"

namespace ds4::quant {

// dst[0..n) = dequantised src; n is a multiple of the type's block size.
using DequantFn = void (*)(const void* src, float* dst, int64_t n);
// sum_i w[i] * x[i] over one row of n weights in the block format against float activations.
using DotFn = float (*)(const void* w, const float* x, int64_t n);

struct Kernels {
    DequantFn dequant = nullptr;
    DotFn dot = nullptr;
};

enum class Isa { scalar = 0, avx2 = 1, avx512 = 2, neon = 3 };

const char* isa_name(Isa isa);
// The ISAs compiled into this build that this CPU can run, lowest first (scalar always).
std::vector<Isa> available_isas();
Isa active_isa();
// Throws std::invalid_argument if the ISA is not available here.
void set_isa(Isa isa);
Isa parse_isa(const std::string& name);  // throws std::invalid_argument

// Kernels of `type` for the active ISA (with fallback); nullptr members if unsupported.
const Kernels& kernels(Type type);
// Kernels of exactly one ISA, without fallback (members nullptr where that ISA has none).
const Kernels& kernels_for(Type type, Isa isa);
// Kernels of `type` as they would be with `isa` active (with fallback); lets callers and tests
// use any available path without changing the process-wide choice. Throws
// std::invalid_argument if `isa` is not available here.
const Kernels& kernels(Type type, Isa isa);
bool is_supported(Type type);  // has at least a reference dequant + dot

// Quantise n floats (n % 32 == 0) to Q8_0 blocks, round-to-nearest as ggml does; used for
// weights and for activation rows.
void quantize_row_q8_0(const float* x, void* y, int64_t n);

// Half / bfloat16 conversions shared by all kernels (exact, round-to-nearest-even).
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float bf16_to_f32(uint16_t h);

}  // namespace ds4::quant
