// Row-op bindings (tests): the CPU backend's softmax and gated activations of any available ISA,
// so tests can compare the SIMD variants with the scalar ones and with numpy.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>
#include <string>

#include "backend/cpu/vmath.h"
#include "bindings/register.h"
#include "quant/kernels.h"

namespace py = pybind11;

namespace ds4::bindings {

namespace {

using backend::cpu::VecMath;

const VecMath& vec_math_of(const std::optional<std::string>& isa) {
    if (!isa) return backend::cpu::vec_math();
    const quant::Isa i = quant::parse_isa(*isa);
    const std::vector<quant::Isa> have = quant::available_isas();
    if (std::find(have.begin(), have.end(), i) == have.end()) throw py::value_error("ISA " + *isa + " is not available here");
    return backend::cpu::vec_math(i);
}

using F32Array = py::array_t<float, py::array::c_style | py::array::forcecast>;

}  // namespace

void register_vmath(py::module_& m) {
    m.def("softmax", [](const F32Array& x, float scale, float softcap, const std::optional<std::string>& isa) {
        const VecMath& vm = vec_math_of(isa);
        if (x.ndim() != 1) throw py::value_error("x must be 1-D");
        F32Array y(x.size());
        std::copy(x.data(), x.data() + x.size(), y.mutable_data());
        float mx, sum;
        float* p = y.mutable_data();
        vm.softmax_part(p, static_cast<int64_t>(x.size()), scale, softcap, &mx, &sum);
        for (py::ssize_t j = 0; j < x.size(); ++j) p[j] /= sum;
        return py::make_tuple(y, mx, sum);
    }, py::arg("x"), py::arg("scale") = 1.0f, py::arg("softcap") = 0.0f, py::arg("isa") = py::none(),
       "(softmax(cap(scale * x)), max, sum) from the backend's chunk softmax kernel (softmax_part), "
       "normalised here by its sum of exps.");
    m.def("glu", [](const F32Array& gate, const F32Array& up, const std::string& act, const std::optional<std::string>& isa) {
        const VecMath& vm = vec_math_of(isa);
        if (gate.ndim() != 1 || up.ndim() != 1 || gate.size() != up.size()) throw py::value_error("gate and up must be 1-D of one length");
        if (act != "silu" && act != "gelu_tanh") throw py::value_error("act must be 'silu' or 'gelu_tanh'");
        F32Array y(gate.size());
        vm.glu(gate.data(), up.data(), static_cast<int64_t>(gate.size()), act_of(act),
               y.mutable_data());
        return y;
    }, py::arg("gate"), py::arg("up"), py::arg("act"), py::arg("isa") = py::none(),
       "act(gate) * up with the backend's row kernel (act: silu or gelu_tanh).");
    m.def("exp_scaled", [](const F32Array& x, float max, float t, const std::optional<std::string>& isa) {
        const VecMath& vm = vec_math_of(isa);
        if (x.ndim() != 1) throw py::value_error("x must be 1-D");
        if (!(t > 0.0f)) throw py::value_error("t must be > 0");
        F32Array y(x.size());
        vm.exp_scaled(x.data(), static_cast<int64_t>(x.size()), max, t, y.mutable_data());
        return y;
    }, py::arg("x"), py::arg("max"), py::arg("t"), py::arg("isa") = py::none(),
       "exp((x - max) / t) with the sampler's row kernel (exactly 0 where x is -inf).");
    m.def("to_f16", [](const F32Array& x, const std::optional<std::string>& isa) {
        const VecMath& vm = vec_math_of(isa);
        if (x.ndim() != 1) throw py::value_error("x must be 1-D");
        py::array_t<uint16_t> y(x.size());
        vm.to_f16(x.data(), static_cast<int64_t>(x.size()), y.mutable_data());
        return y;
    }, py::arg("x"), py::arg("isa") = py::none(),
       "The bits of x as IEEE halves (uint16), by the row kernel that fills an f16 KV cache.");
    m.def("argmax_row", [](const F32Array& v, const std::optional<std::string>& isa) {
        const VecMath& vm = vec_math_of(isa);
        if (v.ndim() != 1 || v.size() == 0) throw py::value_error("v must be 1-D and non-empty");
        float mx;
        bool finite;
        const int64_t i = vm.argmax(v.data(), static_cast<int64_t>(v.size()), &mx, &finite);
        return py::make_tuple(i, mx, finite);
    }, py::arg("v"), py::arg("isa") = py::none(),
       "(first index of the maximum, the maximum, no NaN / +inf) with the greedy head's row kernel.");
}

}  // namespace ds4::bindings
