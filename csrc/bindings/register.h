// One registration function per area of the core, each in its own register_*.cpp.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <string_view>

#include "backend/backend.h"

namespace ds4::bindings {

// UTF-8 bytes as a Python str; invalid or truncated sequences become U+FFFD instead of raising
// (model text, token pieces and metadata strings need not be valid UTF-8).
inline pybind11::str utf8_str(std::string_view bytes) {
    PyObject* s = PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace");
    if (!s) throw pybind11::error_already_set();
    return pybind11::reinterpret_steal<pybind11::str>(s);
}

// An activation by name, as the test bindings take it.
inline backend::Act act_of(const std::string& name) {
    if (name == "silu") return backend::Act::silu;
    if (name == "gelu_tanh") return backend::Act::gelu_tanh;
    if (name == "sigmoid") return backend::Act::sigmoid;
    throw pybind11::value_error("act must be 'silu', 'gelu_tanh' or 'sigmoid', got '" + name + "'");
}

void register_gguf(pybind11::module_& m);   // inspect, tensor reading
void register_quant(pybind11::module_& m);  // dequantise, dot kernels, SIMD dispatch
void register_model(pybind11::module_& m);  // Model: tokenizer now, forward pass later
void register_tokenizer(pybind11::module_& m);  // standalone Tokenizer + StreamDecoder
void register_sample(pybind11::module_& m);     // SamplingParams, Sampler (samplers + RNG)
void register_vmath(pybind11::module_& m);      // backend row ops (softmax, GLU), for tests
void register_speculative(pybind11::module_& m);  // speculation acceptance rules, for tests
void register_backend(pybind11::module_& m);      // every backend op on numpy arrays, for tests
void register_drafter(pybind11::module_& m);      // block drafters (DFlash / DSpark)

}  // namespace ds4::bindings
