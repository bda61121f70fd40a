// ds4._core: the private extension module. Each area registers its own functions from its
// own file; this file only wires them up and maps C++ exceptions to Python ones.
#include <pybind11/pybind11.h>

#include "bindings/register.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
    m.doc() = "ds4 native core (private; use the ds4 package)";
    py::register_exception<ds4::gguf::Error>(m, "GGUFError", PyExc_ValueError);
    py::register_exception<ds4::tok::Error>(m, "TokenizerError", PyExc_ValueError);
    ds4::bindings::register_gguf(m);
    ds4::bindings::register_quant(m);
    ds4::bindings::register_model(m);
    ds4::bindings::register_tokenizer(m);
    ds4::bindings::register_sample(m);
    ds4::bindings::register_vmath(m);
    ds4::bindings::register_speculative(m);
    ds4::bindings::register_backend(m);
    ds4::bindings::register_drafter(m);
}
