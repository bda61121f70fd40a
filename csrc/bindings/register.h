// One registration function per area of the core, each in its own register_*.cpp.
#pragma once

#include <pybind11/pybind11.h>

namespace ds4::bindings {

void register_gguf(pybind11::module_& m);   // inspect, tensor reading
void register_quant(pybind11::module_& m);  // dequantise, dot kernels, SIMD dispatch
void register_model(pybind11::module_& m);  // Model: tokenizer now, forward pass later
void register_tokenizer(pybind11::module_& m);  // standalone Tokenizer + StreamDecoder
void register_sample(pybind11::module_& m);     // SamplingParams, Sampler (samplers + RNG)

}  // namespace ds4::bindings
