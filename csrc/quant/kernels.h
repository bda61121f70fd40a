// Per-type kernels and their run-time dispatch.
//
// Every supported type has a scalar reference (kernels_ref.cpp) and may have SIMD variants
// (x86/float_avx2.cpp, x86/float_avx512.cpp, arm/float_neon.cpp). One table per ISA maps a type to
// its kernels; a missing SIMD entry falls back to the next lower ISA, ending at the reference.
// The active ISA is the best one the CPU supports, or the one forced by DS4_SIMD
// (scalar | avx2 | avxvnni | avx512 | neon) or by set_isa(), so tests can exercise every path.
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

// Several activation rows against one weight row: for r < nx, y[r * ldy] = dot(w, x + r * ldx, n),
// bit for bit what the dot kernel of the same table returns (one order of operations per (weight
// row, activation row), so a row's result never depends on how many rows share the call).
// 1 <= nx <= kDotRowsMax. The weight row is decoded once for all nx rows.
constexpr int kDotRowsMax = 4;
using DotRowsFn = void (*)(const void* w, const float* x, int64_t ldx, int nx, int64_t n, float* y,
                           int64_t ldy);

// One weight row as its table's dot kernel sees it: n floats u[] and one scale per group of
// group_len elements, such that the dot kernel's result equals the grouped sum described in
// x86/simd.h computed from (u, scales). Lets a prefill decode a tile of weight rows once and
// reuse it for every activation row (GemmGroupsFn) with results bit-identical to dot.
using DecodeGroupsFn = void (*)(const void* w, int64_t n, float* u, float* scales);
// For o < nw, r < nx: y[r * ldy + o] = the grouped dot of decoded weight row o (u + o * n,
// scales + o * (n / group_len)) with x + r * ldx; bit-identical to the dot kernel of the table
// whose decode_groups produced the rows.
using GemmGroupsFn = void (*)(const float* u, const float* scales, int nw, const float* x, int64_t ldx,
                              int nx, int64_t n, int group_len, float* y, int64_t ldy);

// The members after `dot` are optional accelerations, and they always come from the same ISA's
// table as `dot` (dispatch never mixes them across ISAs, which would break bit-identity):
// without dot_rows a caller loops over dot; without decode_groups it uses dot_rows.
struct Kernels {
    DequantFn dequant = nullptr;
    DotFn dot = nullptr;
    DotRowsFn dot_rows = nullptr;
    DecodeGroupsFn decode_groups = nullptr;
    GemmGroupsFn gemm_groups = nullptr;
    int group_len = 0;
};

// avxvnni: AVX2 plus AVX-VNNI (vpdpwssd on ymm), the int16 kernels' level where AVX-512 is absent
// (Alder Lake and later); its float path is AVX2's.
enum class Isa { scalar = 0, avx2 = 1, avx512 = 2, neon = 3, avxvnni = 4 };

// The x86 levels (AVX2 and up), which share the AVX2 kernels outside the quant tables (the
// DeltaNet recurrence; attention and vector math on AVX-512 have their own, of the same floats).
inline bool x86_simd(Isa isa) { return isa == Isa::avx2 || isa == Isa::avxvnni || isa == Isa::avx512; }

const char* isa_name(Isa isa);
// The ISAs compiled into this build that this CPU can run, lowest first (scalar always).
std::vector<Isa> available_isas();
Isa active_isa();
// Whether the active ISA is avx512 on a CPU that also has AVX-512 VBMI (the *_avx512vbmi.cpp kernels).
bool active_avx512_vbmi();
// Whether CPUID names an Intel CPU: for the tunings that measured differently on Intel and AMD.
bool intel_cpu();
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
