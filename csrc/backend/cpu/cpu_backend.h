// The CPU backend (cpu_backend.cpp) and the options only it has.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"

namespace ds4::backend {

struct CpuOptions {
    int threads = 0;  // <= 0: one per hardware thread; every model of this count shares one pool
    // Whether matmuls (and matmul_argmax) of the formats with an int16 path (Q4_0, Q4_1, Q5_0,
    // Q5_1, Q8_0, the K-quants Q2_K .. Q6_K and IQ4_XS) quantise their activations to int16
    // (quant/int16_gemm.h; ~1e-4 relative deviation from float activations), every batch size
    // alike, so that decode, verify blocks and prompts agree bit for bit. Off: float activations
    // everywhere.
    bool int16_activations = true;
    bool repack = true;       // pack() may repack (off: every weight read from the mmap)
    // Matrices of 2 MiB and more (a MoE's stacks aside) copied onto transparent huge pages at load,
    // the repacked ones and large buffers too (cpu/huge_pages.h): a model larger than the caches
    // decodes faster (Qwen2.5-Coder 1.5B +12-19 %), each process pays the first touch of the
    // memory. Needs repack.
    bool huge_pages = false;
    bool defer_pack = false;  // pack() reserves, finish_packing() writes (backend.h)
    // The greedy head of two or more rows screens with int8 scores where the CPU has the kernel
    // (screened_head.h; the same argmax, bit for bit). Off: every logit computed (tests, benches).
    bool screen_head = true;
};

// From this many rows on, an int16 matmul decodes its weights for the GEMM instead of running the
// fused rows kernels (where I16Kernels::gemm_from does not say otherwise); the same floats.
constexpr int64_t kInt16GemmRows = 32;

std::unique_ptr<Backend> make_cpu_backend(const CpuOptions& opts);

}  // namespace ds4::backend
