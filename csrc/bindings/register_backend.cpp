// Backend op bindings (tests): every op of backend/backend.h on a backend made from Python, on
// numpy arrays, so tests/backend/ can hold each op against a numpy reference on every ISA (the
// conformance suite a GPU backend will run too).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "bindings/register.h"
#include "quant/types.h"

namespace py = pybind11;

namespace ds4::bindings {

namespace {

using backend::Backend;
using F32 = py::array_t<float, py::array::c_style | py::array::forcecast>;
using I32 = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;

quant::Type type_of(const std::string& name) {
    for (uint32_t t = 0; t < 64; ++t) {
        const quant::TypeInfo* info = quant::type_info(t);
        if (info && name == info->name) return static_cast<quant::Type>(t);
    }
    throw py::value_error("unknown tensor type " + name);
}

backend::KvType kv_type_of(const std::string& s) {
    if (s == "f32") return backend::KvType::f32;
    if (s == "f16") return backend::KvType::f16;
    throw py::value_error("kv_type must be 'f32' or 'f16'");
}

// A weight of n_out rows of n_in elements over bytes the caller keeps alive (a Python object).
struct PyWeight {
    py::bytes data;
    backend::Weight w;
};

struct PyBackend {
    std::unique_ptr<Backend> be;
    std::vector<std::unique_ptr<PyWeight>> weights;  // alive as long as the backend (packed copies point into it)

    backend::Weight& weight(const std::string& type, const py::bytes& data, int64_t n_in, int64_t n_out, bool pack) {
        auto pw = std::make_unique<PyWeight>();
        pw->data = data;
        const quant::TypeInfo* info = quant::type_info(static_cast<uint32_t>(type_of(type)));
        const std::string_view view = pw->data;
        pw->w.type = type_of(type);
        pw->w.n_in = n_in;
        pw->w.n_out = n_out;
        pw->w.row_bytes = quant::row_bytes(*info, n_in);
        if (view.size() != pw->w.row_bytes * static_cast<size_t>(n_out)) throw py::value_error("weight bytes do not match its shape");
        pw->w.data = view.data();
        if (pack) be->pack_now(pw->w);
        weights.push_back(std::move(pw));
        return weights.back()->w;
    }
};

// A new array of a's shape holding a's values: what the in-place ops work on.
F32 copy_of(const F32& a) {
    F32 r(std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
    std::memcpy(r.mutable_data(), a.data(), static_cast<size_t>(a.size()) * sizeof(float));
    return r;
}

int64_t rows_of(const F32& x, int64_t width) {
    if (x.ndim() != 2 || x.shape(1) != width) throw py::value_error("expected a 2-D float32 array of width " + std::to_string(width));
    return x.shape(0);
}

}  // namespace

void register_backend(py::module_& m) {
    py::class_<PyBackend>(m, "Backend", "A compute backend's ops on numpy arrays (tests).")
        .def(py::init([](const std::string& kind, int threads, bool int16) {
                 if (kind != "cpu") throw py::value_error("backend '" + kind + "' is not available (available: cpu)");
                 auto b = std::make_unique<PyBackend>();
                 backend::CpuOptions o;
                 o.threads = threads;
                 o.int16_activations = int16;
                 b->be = backend::make_cpu_backend(o);
                 return b;
             }),
             py::arg("kind") = "cpu", py::arg("threads") = 2, py::arg("int16") = false)
        .def("supports_op", [](const PyBackend& b, const std::string& op, const std::string& type) {
            for (int i = 0; i <= static_cast<int>(backend::Op::softcap); ++i) {
                const auto o = static_cast<backend::Op>(i);
                if (op == backend::op_name(o)) return b.be->supports_op(o, type_of(type));
            }
            throw py::value_error("unknown op " + op);
        }, py::arg("op"), py::arg("type") = "F32")
        .def("matmul", [](PyBackend& b, const std::string& type, const py::bytes& data, int64_t n_out, const F32& x, bool pack) {
            const int64_t n_in = x.shape(x.ndim() - 1), n = rows_of(x, n_in);
            backend::Weight& w = b.weight(type, data, n_in, n_out, pack);
            F32 y({n, n_out});
            b.be->matmul(w, x.data(), n, y.mutable_data());
            return y;
        }, py::arg("type"), py::arg("data"), py::arg("n_out"), py::arg("x"), py::arg("pack") = false)
        .def("argmax", [](PyBackend& b, const std::string& type, const py::bytes& data, int64_t n_out, const F32& x, float cap) {
            const int64_t n_in = x.shape(x.ndim() - 1), n = rows_of(x, n_in);
            backend::Weight& w = b.weight(type, data, n_in, n_out, false);
            I32 idx(n);
            b.be->matmul_argmax(w, x.data(), n, cap, idx.mutable_data());
            return idx;
        }, py::arg("type"), py::arg("data"), py::arg("n_out"), py::arg("x"), py::arg("cap") = 0.0f)
        .def("get_rows", [](PyBackend& b, const std::string& type, const py::bytes& data, int64_t n_in, int64_t n_out, const I32& ids) {
            backend::Weight& w = b.weight(type, data, n_in, n_out, false);
            for (py::ssize_t i = 0; i < ids.size(); ++i)
                if (ids.data()[i] < 0 || ids.data()[i] >= n_out) throw py::value_error("row id out of range");
            F32 y({static_cast<int64_t>(ids.size()), n_in});
            b.be->get_rows(w, ids.data(), ids.size(), y.mutable_data());
            return y;
        }, py::arg("type"), py::arg("data"), py::arg("n_in"), py::arg("n_out"), py::arg("ids"))
        .def("rms_norm", [](PyBackend& b, const F32& x, std::optional<F32> w, float eps) {
            const int64_t d = x.shape(1), n = rows_of(x, d);
            F32 y({n, d});
            b.be->rms_norm(x.data(), w ? w->data() : nullptr, n, d, eps, y.mutable_data());
            return y;
        }, py::arg("x"), py::arg("w"), py::arg("eps"))
        .def("rope", [](PyBackend& b, const F32& x, int n_head, int head_dim, const I32& pos, const std::string& mode,
                        int n_dims, float base, float freq_scale, std::optional<F32> factors) {
            const int64_t n = rows_of(x, static_cast<int64_t>(n_head) * head_dim);
            if (pos.size() != n) throw py::value_error("one position per row");
            backend::RopeParams p;
            p.mode = mode == "neox" ? backend::RopeMode::neox : backend::RopeMode::normal;
            p.n_dims = n_dims;
            p.freq_base = base;
            p.freq_scale = freq_scale;
            p.freq_factors = factors ? factors->data() : nullptr;
            F32 y = copy_of(x);
            b.be->rope(y.mutable_data(), n, n_head, head_dim, pos.data(), p);
            return y;
        }, py::arg("x"), py::arg("n_head"), py::arg("head_dim"), py::arg("pos"), py::arg("mode"), py::arg("n_dims"),
           py::arg("base"), py::arg("freq_scale") = 1.0f, py::arg("factors") = py::none())
        .def("store_kv", [](PyBackend& b, const F32& x, const std::string& type) {
            const int64_t d = x.shape(1), n = rows_of(x, d);
            const backend::KvType t = kv_type_of(type);
            std::string out(static_cast<size_t>(n * d) * (t == backend::KvType::f32 ? 4 : 2), '\0');
            b.be->store_kv(out.data(), t, x.data(), n, d);
            return py::bytes(out);
        }, py::arg("x"), py::arg("type"))
        .def("attention", [](PyBackend& b, const F32& q, const I32& pos, const I32& last, const F32& k, const F32& v,
                             const std::string& kv_type, int n_head, int n_head_kv, int head_dim, float scale, float softcap,
                             int64_t window) {
            const int64_t n = rows_of(q, static_cast<int64_t>(n_head) * head_dim);
            const int64_t kv_dim = static_cast<int64_t>(n_head_kv) * head_dim, n_kv = rows_of(k, kv_dim);
            if (rows_of(v, kv_dim) != n_kv || pos.size() != n || last.size() != n) throw py::value_error("shapes differ");
            for (int64_t i = 0; i < n; ++i)
                if (last.data()[i] < 0 || last.data()[i] >= n_kv) throw py::value_error("a row sees past the cache");
            const backend::KvType t = kv_type_of(kv_type);
            const size_t elem = t == backend::KvType::f32 ? 4 : 2;
            std::vector<uint8_t> kc(static_cast<size_t>(n_kv * kv_dim) * elem), vc(kc.size());
            b.be->store_kv(kc.data(), t, k.data(), n_kv, kv_dim);
            b.be->store_kv(vc.data(), t, v.data(), n_kv, kv_dim);
            backend::KvView view{kc.data(), vc.data(), t, n_kv};
            backend::AttnParams p;
            p.n_head = n_head;
            p.n_head_kv = n_head_kv;
            p.head_dim = head_dim;
            p.scale = scale;
            p.softcap = softcap;
            p.window = window;
            F32 out({n, static_cast<int64_t>(n_head) * head_dim});
            b.be->attention(q.data(), n, pos.data(), last.data(), view, p, out.mutable_data());
            return out;
        }, py::arg("q"), py::arg("pos"), py::arg("last"), py::arg("k"), py::arg("v"), py::arg("kv_type"), py::arg("n_head"),
           py::arg("n_head_kv"), py::arg("head_dim"), py::arg("scale"), py::arg("softcap") = 0.0f, py::arg("window") = 0)
        .def("add", [](PyBackend& b, const F32& y, const F32& x) {
            if (x.size() != y.size()) throw py::value_error("x and y differ in size");
            F32 r = copy_of(y);
            b.be->add(r.mutable_data(), x.data(), y.size());
            return r;
        }, py::arg("y"), py::arg("x"))
        .def("add_rows", [](PyBackend& b, const F32& y, const F32& bias) {
            const int64_t d = y.shape(1), n = rows_of(y, d);
            if (bias.size() != d) throw py::value_error("the row vector's length differs from the rows'");
            F32 r = copy_of(y);
            b.be->add_rows(r.mutable_data(), bias.data(), n, d);
            return r;
        }, py::arg("y"), py::arg("b"))
        .def("mul_rows", [](PyBackend& b, const F32& y, const F32& w) {
            const int64_t d = y.shape(1), n = rows_of(y, d);
            if (w.size() != d) throw py::value_error("the row vector's length differs from the rows'");
            F32 r = copy_of(y);
            b.be->mul_rows(r.mutable_data(), w.data(), n, d);
            return r;
        }, py::arg("y"), py::arg("w"))
        .def("scale", [](PyBackend& b, const F32& y, float s) {
            F32 r = copy_of(y);
            b.be->scale(r.mutable_data(), s, y.size());
            return r;
        }, py::arg("y"), py::arg("s"))
        .def("glu", [](PyBackend& b, const F32& gate, const F32& up, const std::string& act) {
            if (gate.size() != up.size()) throw py::value_error("gate and up differ in size");
            F32 r = copy_of(gate);
            b.be->glu(gate.data(), up.data(), gate.size(), act == "silu" ? backend::Act::silu : backend::Act::gelu_tanh,
                      r.mutable_data());
            return r;
        }, py::arg("gate"), py::arg("up"), py::arg("act"))
        .def("softcap", [](PyBackend& b, const F32& x, float cap) {
            F32 r = copy_of(x);
            b.be->softcap(r.mutable_data(), x.size(), cap);
            return r;
        }, py::arg("x"), py::arg("cap"));
}

}  // namespace ds4::bindings
