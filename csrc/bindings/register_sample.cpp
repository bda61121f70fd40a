// Sampling bindings: ds4._core.SamplingParams (kwargs constructor, validated fields) and
// ds4._core.Sampler(params, n_vocab). Logit rows are read in place through the buffer protocol
// (1-D, float32, contiguous; no copy) with the GIL released while the sampler runs.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bindings/register.h"
#include "sample/sampler.h"

namespace py = pybind11;

namespace ds4::bindings {

namespace {

using sample::Sampler;
using sample::SamplingParams;

// Sampler keeps scratch state, so concurrent calls from Python threads (the GIL is released)
// are serialised here rather than racing.
struct PySampler {
    Sampler s;
    std::mutex mu;
    PySampler(const SamplingParams& p, int32_t n) : s(p, n) {}
};

void set_seed_field(SamplingParams& p, const py::object& seed) {
    if (seed.is_none()) {
        p.has_seed = false;
        p.seed = 0;
        return;
    }
    if (!py::isinstance<py::int_>(seed) || py::isinstance<py::bool_>(seed))
        throw py::type_error("SamplingParams: seed must be an int or None, got " +
                             std::string(py::str(py::type::of(seed).attr("__name__"))));
    const unsigned long long v = PyLong_AsUnsignedLongLong(seed.ptr());
    if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
        PyErr_Clear();
        throw py::value_error("SamplingParams: seed must be in [0, 2**64), got " + std::string(py::repr(seed)));
    }
    p.seed = v;
    p.has_seed = true;
}

// Float fields print as float32 values read by a human (0.7, not 0.699999988079071).
std::string fmt(float v) {
    std::ostringstream os;
    os.precision(7);
    os << v;
    return os.str();
}

py::object get_seed_field(const SamplingParams& p) {
    return p.has_seed ? py::object(py::int_(p.seed)) : py::object(py::none());
}

// Accepts {id: bias} or an iterable of (id, bias) pairs; None clears.
std::vector<std::pair<int32_t, float>> to_bias(const py::object& o) {
    std::vector<std::pair<int32_t, float>> out;
    if (o.is_none()) return out;
    if (py::isinstance<py::dict>(o)) {
        for (auto kv : o.cast<py::dict>()) out.emplace_back(kv.first.cast<int32_t>(), kv.second.cast<float>());
        return out;
    }
    return o.cast<std::vector<std::pair<int32_t, float>>>();
}

// A 1-D float32 contiguous row of exactly n entries, read without copying.
const float* row_ptr(const py::buffer_info& info, int32_t n, const char* what) {
    if (info.format != py::format_descriptor<float>::format() || info.itemsize != sizeof(float))
        throw py::type_error(std::string(what) + " must be float32, got buffer format '" + info.format + "'");
    if (info.ndim != 1)
        throw py::value_error(std::string(what) + " must be 1-D (n_vocab,), got " + std::to_string(info.ndim) +
                              " dimensions");
    if (info.shape[0] != n)
        throw py::value_error(std::string(what) + " has " + std::to_string(info.shape[0]) +
                              " entries, the sampler was built for n_vocab " + std::to_string(n));
    if (n > 1 && info.strides[0] != static_cast<py::ssize_t>(sizeof(float)))
        throw py::value_error(std::string(what) + " must be contiguous (use np.ascontiguousarray)");
    return static_cast<const float*>(info.ptr);
}

}  // namespace

void register_sample(py::module_& m) {
    py::class_<SamplingParams>(m, "SamplingParams")
        .def(py::init([](float temperature, int32_t top_k, float top_p, float min_p, float repeat_penalty,
                         int32_t repeat_last_n, float presence_penalty, float frequency_penalty,
                         const py::object& logit_bias, const py::object& seed) {
                 SamplingParams p;
                 p.temperature = temperature;
                 p.top_k = top_k;
                 p.top_p = top_p;
                 p.min_p = min_p;
                 p.repeat_penalty = repeat_penalty;
                 p.repeat_last_n = repeat_last_n;
                 p.presence_penalty = presence_penalty;
                 p.frequency_penalty = frequency_penalty;
                 p.logit_bias = to_bias(logit_bias);
                 set_seed_field(p, seed);
                 p.validate();  // ids are range-checked once n_vocab is known (Sampler)
                 return p;
             }),
             py::kw_only(), py::arg("temperature") = 0.0f, py::arg("top_k") = 0, py::arg("top_p") = 1.0f,
             py::arg("min_p") = 0.0f, py::arg("repeat_penalty") = 1.0f, py::arg("repeat_last_n") = 64,
             py::arg("presence_penalty") = 0.0f, py::arg("frequency_penalty") = 0.0f,
             py::arg("logit_bias") = py::none(), py::arg("seed") = py::none())
        .def_readwrite("temperature", &SamplingParams::temperature)
        .def_readwrite("top_k", &SamplingParams::top_k)
        .def_readwrite("top_p", &SamplingParams::top_p)
        .def_readwrite("min_p", &SamplingParams::min_p)
        .def_readwrite("repeat_penalty", &SamplingParams::repeat_penalty)
        .def_readwrite("repeat_last_n", &SamplingParams::repeat_last_n)
        .def_readwrite("presence_penalty", &SamplingParams::presence_penalty)
        .def_readwrite("frequency_penalty", &SamplingParams::frequency_penalty)
        .def_property(
            "logit_bias", [](const SamplingParams& p) { return p.logit_bias; },
            [](SamplingParams& p, const py::object& o) { p.logit_bias = to_bias(o); })
        .def_property("seed", &get_seed_field, &set_seed_field)
        .def("validate", &SamplingParams::validate, py::arg("n_vocab") = -1,
             "Raise ValueError naming the first bad field (logit_bias ids are checked when n_vocab >= 0).")
        .def("__repr__", [](const SamplingParams& p) {
            return "SamplingParams(temperature=" + fmt(p.temperature) +
                   ", top_k=" + std::to_string(p.top_k) + ", top_p=" + fmt(p.top_p) +
                   ", min_p=" + fmt(p.min_p) +
                   ", repeat_penalty=" + fmt(p.repeat_penalty) +
                   ", repeat_last_n=" + std::to_string(p.repeat_last_n) +
                   ", presence_penalty=" + fmt(p.presence_penalty) +
                   ", frequency_penalty=" + fmt(p.frequency_penalty) +
                   ", logit_bias=" + std::string(py::repr(py::cast(p.logit_bias))) +
                   ", seed=" + std::string(py::repr(get_seed_field(p))) + ")";
        });

    py::class_<PySampler>(m, "Sampler")
        .def(py::init<const SamplingParams&, int32_t>(), py::arg("params"), py::arg("n_vocab"))
        .def(
            "sample",
            [](PySampler& self, const py::buffer& logits) {
                const py::buffer_info info = logits.request();
                const float* row = row_ptr(info, self.s.n_vocab(), "logits");
                py::gil_scoped_release release;
                std::lock_guard<std::mutex> lock(self.mu);
                return self.s.sample(row, self.s.n_vocab());
            },
            py::arg("logits"), "Draw a token id from a (n_vocab,) float32 logits row (not modified, not recorded).")
        .def(
            "sample_screened",
            [](PySampler& self, const py::buffer& logits, const std::optional<py::array_t<int32_t, py::array::c_style | py::array::forcecast>>& ids,
               float thr) {
                const py::buffer_info info = logits.request();
                const float* row = row_ptr(info, self.s.n_vocab(), "logits");
                if (!ids) {
                    py::gil_scoped_release release;
                    std::lock_guard<std::mutex> lock(self.mu);
                    return self.s.sample_screened(row, self.s.n_vocab());
                }
                const int32_t n_vocab = self.s.n_vocab();
                std::vector<int32_t> list(ids->data(), ids->data() + ids->size());
                std::vector<float> values;
                for (size_t i = 0; i < list.size(); ++i) {
                    if (list[i] < 0 || list[i] >= n_vocab || (i > 0 && list[i] <= list[i - 1])) {
                        throw py::value_error("Sampler.sample_screened: ids must be ascending, in [0, n_vocab)");
                    }
                    values.push_back(row[list[i]]);
                }
                const sample::ScreenedRow screened{list.data(), values.data(), static_cast<int64_t>(list.size()), thr,
                                                   [row](const int32_t* more, int64_t n, float* out) {
                                                       for (int64_t i = 0; i < n; ++i) out[i] = row[more[i]];
                                                   }};
                py::gil_scoped_release release;
                std::lock_guard<std::mutex> lock(self.mu);
                return self.s.sample_screened(screened);
            },
            py::arg("logits"), py::arg("ids") = py::none(), py::arg("thr") = 0.0f,
            "Screened sampling (temperature > 0, no top-k / top-p / min-p): a draw from the distribution "
            "sample() draws from, computed from the ids near the largest logit. With ids (ascending) and thr "
            "(above every other id's logit): from that shortlist of the row, the rest read on demand; the same "
            "draw either way.")
        .def_property_readonly("screens", [](PySampler& self) { return self.s.screens(); })
        .def_property_readonly("margin", [](PySampler& self) { return self.s.margin(); })
        .def_property_readonly("head_keep", [](PySampler& self) { return self.s.head_keep(); },
                               "How many of its largest logits a shortlisted row needs (the head's keep).")
        .def(
            "probs",
            [](PySampler& self, const py::buffer& logits) {
                const py::buffer_info info = logits.request();
                const float* row = row_ptr(info, self.s.n_vocab(), "logits");
                py::array_t<float> out(self.s.n_vocab());
                float* dst = out.mutable_data();
                {
                    py::gil_scoped_release release;
                    std::lock_guard<std::mutex> lock(self.mu);
                    self.s.probs(row, self.s.n_vocab(), dst);
                }
                return out;
            },
            py::arg("logits"), "The (n_vocab,) float32 distribution sample() draws from for this row.")
        .def(
            "sample_from",
            [](PySampler& self, const py::buffer& p) {
                const py::buffer_info info = p.request();
                const float* row = row_ptr(info, self.s.n_vocab(), "p");
                py::gil_scoped_release release;
                std::lock_guard<std::mutex> lock(self.mu);
                return self.s.sample_from(row, self.s.n_vocab());
            },
            py::arg("p"), "Draw from non-negative weights p (n_vocab,) float32, normalised by their sum.")
        .def(
            "accept",
            [](PySampler& self, int32_t token) {
                std::lock_guard<std::mutex> lock(self.mu);
                self.s.accept(token);
            },
            py::arg("token"))
        .def("reset",
             [](PySampler& self) {
                 std::lock_guard<std::mutex> lock(self.mu);
                 self.s.reset();
             })
        .def(
            "set_seed",
            [](PySampler& self, const py::object& seed) {
                SamplingParams tmp;
                set_seed_field(tmp, seed);
                if (!tmp.has_seed) throw py::value_error("Sampler.set_seed: seed must be an int");
                std::lock_guard<std::mutex> lock(self.mu);
                self.s.set_seed(tmp.seed);
            },
            py::arg("seed"))
        .def("uniform",
             [](PySampler& self) {
                 std::lock_guard<std::mutex> lock(self.mu);
                 return self.s.uniform();
             })
        .def("next_u64",
             [](PySampler& self) {
                 std::lock_guard<std::mutex> lock(self.mu);
                 return self.s.next_u64();
             })
        .def_property_readonly("seed", [](PySampler& self) { return self.s.seed(); })
        .def_property_readonly("n_vocab", [](PySampler& self) { return self.s.n_vocab(); })
        .def_property_readonly("params", [](PySampler& self) { return self.s.params(); })
        .def_property_readonly("history", [](PySampler& self) {
            std::lock_guard<std::mutex> lock(self.mu);
            return self.s.history();
        });
}

}  // namespace ds4::bindings
