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

// A weight of n_mat matrices of n_out rows of n_in elements over bytes the caller keeps alive (a Python object).
struct PyWeight {
    py::bytes data;
    backend::Weight w;
};

struct PyBackend {
    std::unique_ptr<Backend> be;
    std::vector<std::unique_ptr<PyWeight>> weights;  // alive as long as the backend (packed copies point into it)

    backend::Weight& weight(const std::string& type, const py::bytes& data, int64_t n_in, int64_t n_out, int64_t n_mat,
                            bool pack) {
        auto pw = std::make_unique<PyWeight>();
        pw->data = data;
        const quant::TypeInfo* info = quant::type_info(static_cast<uint32_t>(type_of(type)));
        const std::string_view view = pw->data;
        pw->w.type = type_of(type);
        pw->w.n_in = n_in;
        pw->w.n_out = n_out;
        pw->w.n_mat = n_mat;
        pw->w.row_bytes = quant::row_bytes(*info, n_in);
        if (view.size() != pw->w.row_bytes * static_cast<size_t>(pw->w.total_rows())) {
            throw py::value_error("weight bytes do not match its shape");
        }
        pw->w.data = view.data();
        if (pack) be->pack_now(pw->w);
        weights.push_back(std::move(pw));
        return weights.back()->w;
    }
};

int64_t rows_of(const F32& x, int64_t width) {
    if (x.ndim() != 2 || x.shape(1) != width) throw py::value_error("expected a 2-D float32 array of width " + std::to_string(width));
    return x.shape(0);
}

// One op call's operands in the backend's memory: arrays go in through write, results come back
// through read, as they would from a GPU backend.
class Call {
public:
    explicit Call(Backend& be) : be_(be) {}

    backend::Rows rows(int64_t n, int64_t dim) {
        bufs_.push_back(be_.alloc(static_cast<size_t>(n * dim) * sizeof(float)));
        return {static_cast<float*>(bufs_.back()->data()), n, dim};
    }
    // a as n rows of dim (a.size() == n * dim)
    backend::Rows in(const F32& a, int64_t n, int64_t dim) {
        const backend::Rows r = rows(n, dim);
        be_.upload(r, a.data());
        return r;
    }
    backend::Rows in(const F32& a) { return in(a, a.ndim() == 2 ? a.shape(0) : 1, a.shape(a.ndim() - 1)); }
    F32 out(backend::Rows r) {
        F32 a({r.n, r.dim});
        be_.download(a.mutable_data(), r);
        return a;
    }
    F32 out(backend::Rows r, const F32& like) {
        F32 a(std::vector<py::ssize_t>(like.shape(), like.shape() + like.ndim()));
        be_.download(a.mutable_data(), r);
        return a;
    }
    void* bytes(size_t n) {
        bufs_.push_back(be_.alloc(n));
        return bufs_.back()->data();
    }

private:
    Backend& be_;
    std::vector<std::unique_ptr<backend::Buffer>> bufs_;
};

backend::Vec vec_of(Backend& be, const F32& a) { return be.upload(a.data(), a.size()); }

backend::AttnParams attn_params(int n_head, int n_head_kv, int head_dim, float scale, float softcap, int64_t window) {
    if (n_head <= 0 || n_head_kv <= 0 || n_head % n_head_kv != 0 || head_dim <= 0) {
        throw py::value_error("n_head must be a positive multiple of n_head_kv, head_dim positive");
    }
    backend::AttnParams p;
    p.n_head = n_head;
    p.n_head_kv = n_head_kv;
    p.head_dim = head_dim;
    p.scale = scale;
    p.softcap = softcap;
    p.window = window;
    return p;
}

// Attention of q's rows, sequence s (rows first[s] .. first[s + 1] - 1) over its own cache of
// keys k[s] and values v[s], in one backend op.
F32 attend(PyBackend& b, const F32& q, const I32& pos, const I32& last, const std::vector<int64_t>& first,
           const std::vector<F32>& k, const std::vector<F32>& v, const std::string& kv_type, const backend::AttnParams& p) {
    const int64_t q_dim = static_cast<int64_t>(p.n_head) * p.head_dim, n = rows_of(q, q_dim);
    const int64_t kv_dim = static_cast<int64_t>(p.n_head_kv) * p.head_dim;
    const size_t n_seqs = k.size();
    if (v.size() != n_seqs || first.size() != n_seqs + 1 || n_seqs == 0) {
        throw py::value_error("one key and one value cache per sequence, and first with one entry more");
    }
    if (pos.size() != n || last.size() != n) throw py::value_error("pos and last need one entry per row of q");
    if (first.front() != 0 || first.back() != n) throw py::value_error("first must run from 0 to q's rows");
    const backend::KvType t = kv_type_of(kv_type);
    Call c(*b.be);
    std::vector<backend::KvView> kvs;
    for (size_t s = 0; s < n_seqs; ++s) {
        if (first[s + 1] < first[s]) throw py::value_error("first must not decrease");
        const int64_t n_kv = rows_of(k[s], kv_dim);
        if (rows_of(v[s], kv_dim) != n_kv) throw py::value_error("a sequence's keys and values differ in shape");
        for (int64_t i = first[s]; i < first[s + 1]; ++i) {
            if (last.data()[i] < 0 || last.data()[i] >= n_kv) throw py::value_error("a row sees past its cache");
        }
        const size_t bytes = static_cast<size_t>(n_kv * kv_dim) * (t == backend::KvType::f32 ? 4 : 2);
        kvs.push_back({c.bytes(bytes), c.bytes(bytes), t, kv_dim, n_kv});
        b.be->store_kv(kvs.back(), 0, c.in(k[s]), c.in(v[s]));
    }
    const backend::Rows out = c.rows(n, q_dim);
    b.be->attention_seqs(c.in(q), pos.data(), last.data(), first.data(), kvs.data(), static_cast<int>(n_seqs), p, out);
    return c.out(out);
}

// y viewed as rows of its last dimension (a 1-D array: one row).
backend::Rows flat_rows(Call& c, const F32& y) { return c.in(y, 1, y.size()); }

}  // namespace

void register_backend(py::module_& m) {
    py::class_<PyBackend>(m, "Backend", "A compute backend's ops on numpy arrays (tests).")
        .def(py::init([](const std::string& kind, int threads, bool int16, bool screen) {
                 if (kind != "cpu") throw py::value_error("backend '" + kind + "' is not available (available: cpu)");
                 auto b = std::make_unique<PyBackend>();
                 backend::CpuOptions o;
                 o.threads = threads;
                 o.int16_activations = int16;
                 o.screen_head = screen;
                 b->be = backend::make_cpu_backend(o);
                 return b;
             }),
             py::arg("kind") = "cpu", py::arg("threads") = 2, py::arg("int16") = false, py::arg("screen") = true)
        .def("supports_op", [](const PyBackend& b, const std::string& op, const std::string& type) {
            for (int i = 0; i <= static_cast<int>(backend::Op::gated_delta); ++i) {
                const auto o = static_cast<backend::Op>(i);
                if (op == backend::op_name(o)) return b.be->supports_op(o, type_of(type));
            }
            throw py::value_error("unknown op " + op);
        }, py::arg("op"), py::arg("type") = "F32")
        .def("matmul", [](PyBackend& b, const std::string& type, const py::bytes& data, int64_t n_out, const F32& x, bool pack,
                          int64_t n_mat, int64_t mat) {
            const int64_t n_in = x.shape(x.ndim() - 1), n = rows_of(x, n_in);
            if (n_mat < 1 || mat < 0 || mat >= n_mat) throw py::value_error("matrix index out of the stack");
            const backend::Weight w = b.weight(type, data, n_in, n_out, n_mat, pack).matrix(mat);
            Call c(*b.be);
            const backend::Rows y = c.rows(n, n_out);
            b.be->matmul(w, c.in(x), y);
            return c.out(y);
        }, py::arg("type"), py::arg("data"), py::arg("n_out"), py::arg("x"), py::arg("pack") = false, py::arg("n_mat") = 1,
           py::arg("mat") = 0)
        .def("matmuls", [](PyBackend& b, const std::vector<std::string>& types, const std::vector<py::bytes>& data,
                           const std::vector<int64_t>& n_out, const F32& x, bool pack) {
            if (data.size() != types.size() || n_out.size() != types.size() || types.empty()) {
                throw py::value_error("one type, data and n_out per weight");
            }
            const int64_t n_in = x.shape(x.ndim() - 1), n = rows_of(x, n_in);
            std::vector<const backend::Weight*> ws;
            for (size_t i = 0; i < types.size(); ++i) ws.push_back(&b.weight(types[i], data[i], n_in, n_out[i], 1, pack));
            Call c(*b.be);
            std::vector<backend::Rows> ys;
            for (const int64_t cols : n_out) ys.push_back(c.rows(n, cols));
            b.be->matmuls(ws.data(), static_cast<int>(ws.size()), c.in(x), ys.data());
            py::list out;
            for (const backend::Rows& y : ys) out.append(c.out(y));
            return out;
        }, py::arg("types"), py::arg("data"), py::arg("n_out"), py::arg("x"), py::arg("pack") = false)
        .def("argmax", [](PyBackend& b, const std::string& type, const py::bytes& data, int64_t n_out, const F32& x, float cap,
                          bool pack) {
            const int64_t n_in = x.shape(x.ndim() - 1), n = rows_of(x, n_in);
            backend::Weight& w = b.weight(type, data, n_in, n_out, 1, pack);
            Call c(*b.be);
            I32 idx(n);
            b.be->matmul_argmax(w, c.in(x), cap, idx.mutable_data());
            return idx;
        }, py::arg("type"), py::arg("data"), py::arg("n_out"), py::arg("x"), py::arg("cap") = 0.0f, py::arg("pack") = false)
        .def("shortlist", [](PyBackend& b, const std::string& type, const py::bytes& data, int64_t n_out, const F32& x,
                             const std::vector<float>& margins, const std::vector<int32_t>& keep, bool pack) {
            const int64_t n_in = x.shape(x.ndim() - 1), n = rows_of(x, n_in);
            if (static_cast<int64_t>(margins.size()) != n) throw py::value_error("one margin per row of x");
            if (!keep.empty() && static_cast<int64_t>(keep.size()) != n) throw py::value_error("one keep per row of x, or none");
            backend::Weight& w = b.weight(type, data, n_in, n_out, 1, pack);
            std::vector<backend::Shortlist> lists(static_cast<size_t>(n));
            {
                Call c(*b.be);
                b.be->matmul_shortlist(w, c.in(x), margins.data(), keep.empty() ? nullptr : keep.data(),
                                       [&lists](int64_t r) -> backend::Shortlist& { return lists[static_cast<size_t>(r)]; });
            }
            py::list out;
            for (int64_t r = 0; r < n; ++r) {
                const backend::Shortlist& s = lists[static_cast<size_t>(r)];
                py::dict d;
                d["ok"] = s.ok;
                if (s.ok) {
                    d["ids"] = I32(static_cast<py::ssize_t>(s.ids.size()), s.ids.data());
                    d["logits"] = F32(static_cast<py::ssize_t>(s.logits.size()), s.logits.data());
                    d["thr"] = s.thr;
                    // matmul_ids on the same row: more of it
                    std::vector<int32_t> all(static_cast<size_t>(n_out));
                    for (int64_t i = 0; i < n_out; ++i) all[static_cast<size_t>(i)] = static_cast<int32_t>(i);
                    F32 every(n_out);
                    b.be->matmul_ids(w, x.data() + r * n_in, all.data(), n_out, every.mutable_data());
                    d["every"] = every;
                }
                out.append(d);
            }
            return out;
        }, py::arg("type"), py::arg("data"), py::arg("n_out"), py::arg("x"), py::arg("margins"), py::arg("keep") = std::vector<int32_t>{},
           py::arg("pack") = false,
           "Per row of x: the sampling head's shortlist {'ok', 'ids', 'logits', 'thr', 'every': matmul_ids of "
           "every id} (Backend::matmul_shortlist), or {'ok': False}.")
        .def("get_rows", [](PyBackend& b, const std::string& type, const py::bytes& data, int64_t n_in, int64_t n_out, const I32& ids) {
            backend::Weight& w = b.weight(type, data, n_in, n_out, 1, false);
            for (py::ssize_t i = 0; i < ids.size(); ++i)
                if (ids.data()[i] < 0 || ids.data()[i] >= n_out) throw py::value_error("row id out of range");
            Call c(*b.be);
            const backend::Rows y = c.rows(ids.size(), n_in);
            b.be->get_rows(w, ids.data(), y);
            return c.out(y);
        }, py::arg("type"), py::arg("data"), py::arg("n_in"), py::arg("n_out"), py::arg("ids"))
        .def("gather", [](PyBackend& b, const F32& x, const std::vector<int64_t>& rows) {
            const int64_t d = x.shape(1), n = rows_of(x, d);
            for (int64_t r : rows)
                if (r < 0 || r >= n) throw py::value_error("row out of range");
            Call c(*b.be);
            const backend::Rows y = c.rows(static_cast<int64_t>(rows.size()), d);
            b.be->gather(c.in(x), rows.data(), y);
            return c.out(y);
        }, py::arg("x"), py::arg("rows"))
        .def("rms_norm", [](PyBackend& b, const F32& x, std::optional<F32> w, float eps) {
            const int64_t d = x.shape(1), n = rows_of(x, d);
            if (w && w->size() != d) throw py::value_error("the norm's length differs from the rows'");
            Call c(*b.be);
            const backend::Rows y = c.rows(n, d);
            b.be->rms_norm(c.in(x), w ? vec_of(*b.be, *w) : backend::Vec{}, eps, y);
            return c.out(y);
        }, py::arg("x"), py::arg("w"), py::arg("eps"))
        .def("rope", [](PyBackend& b, const F32& x, int n_head, int head_dim, const I32& pos, const std::string& mode,
                        int n_dims, float base, float freq_scale, std::optional<F32> factors) {
            const int64_t n = rows_of(x, static_cast<int64_t>(n_head) * head_dim);
            if (pos.size() != n) throw py::value_error("one position per row");
            if (factors && factors->size() != n_dims / 2) throw py::value_error("one frequency factor per rotated pair");
            const backend::Vec f = factors ? vec_of(*b.be, *factors) : backend::Vec{};
            backend::RopeParams p;
            p.mode = mode == "neox" ? backend::RopeMode::neox : backend::RopeMode::normal;
            p.n_dims = n_dims;
            p.freq_base = base;
            p.freq_scale = freq_scale;
            p.freq_factors = f.data();
            Call c(*b.be);
            const backend::Rows y = c.in(x);
            b.be->rope(y, n_head, pos.data(), p);
            return c.out(y);
        }, py::arg("x"), py::arg("n_head"), py::arg("head_dim"), py::arg("pos"), py::arg("mode"), py::arg("n_dims"),
           py::arg("base"), py::arg("freq_scale") = 1.0f, py::arg("factors") = py::none())
        .def("store_kv", [](PyBackend& b, const F32& k, const F32& v, const std::string& type, int64_t pos, int64_t capacity) {
            const int64_t d = k.shape(1), n = rows_of(k, d);
            if (rows_of(v, d) != n) throw py::value_error("k and v differ in shape");
            if (capacity == 0) capacity = pos + n;
            if (pos < 0 || pos + n > capacity) throw py::value_error("rows past the cache's capacity");
            const backend::KvType t = kv_type_of(type);
            const size_t bytes = static_cast<size_t>(capacity * d) * (t == backend::KvType::f32 ? 4 : 2);
            Call c(*b.be);
            const backend::KvView kv{c.bytes(bytes), c.bytes(bytes), t, d, capacity};
            std::string zeros(bytes, '\0');
            b.be->write(kv.k, zeros.data(), bytes);
            b.be->write(kv.v, zeros.data(), bytes);
            b.be->store_kv(kv, pos, c.in(k), c.in(v));
            std::string ko(bytes, '\0'), vo(bytes, '\0');
            b.be->read(ko.data(), kv.k, bytes);
            b.be->read(vo.data(), kv.v, bytes);
            return py::make_tuple(py::bytes(ko), py::bytes(vo));
        }, py::arg("k"), py::arg("v"), py::arg("type"), py::arg("pos") = 0, py::arg("capacity") = 0)
        .def("attention", [](PyBackend& b, const F32& q, const I32& pos, const I32& last, const F32& k, const F32& v,
                             const std::string& kv_type, int n_head, int n_head_kv, int head_dim, float scale, float softcap,
                             int64_t window) {
            return attend(b, q, pos, last, {0, rows_of(q, static_cast<int64_t>(n_head) * head_dim)}, {k}, {v}, kv_type,
                          attn_params(n_head, n_head_kv, head_dim, scale, softcap, window));
        }, py::arg("q"), py::arg("pos"), py::arg("last"), py::arg("k"), py::arg("v"), py::arg("kv_type"), py::arg("n_head"),
           py::arg("n_head_kv"), py::arg("head_dim"), py::arg("scale"), py::arg("softcap") = 0.0f, py::arg("window") = 0)
        .def("attention_seqs", [](PyBackend& b, const F32& q, const I32& pos, const I32& last, const std::vector<int64_t>& first,
                                  const std::vector<F32>& k, const std::vector<F32>& v, const std::string& kv_type, int n_head,
                                  int n_head_kv, int head_dim, float scale, float softcap, int64_t window) {
            return attend(b, q, pos, last, first, k, v, kv_type, attn_params(n_head, n_head_kv, head_dim, scale, softcap, window));
        }, py::arg("q"), py::arg("pos"), py::arg("last"), py::arg("first"), py::arg("k"), py::arg("v"), py::arg("kv_type"),
           py::arg("n_head"), py::arg("n_head_kv"), py::arg("head_dim"), py::arg("scale"), py::arg("softcap") = 0.0f,
           py::arg("window") = 0)
        .def("add", [](PyBackend& b, const F32& y, const F32& x) {
            if (x.size() != y.size()) throw py::value_error("x and y differ in size");
            Call c(*b.be);
            const backend::Rows r = flat_rows(c, y);
            b.be->add(r, flat_rows(c, x));
            return c.out(r, y);
        }, py::arg("y"), py::arg("x"))
        .def("add_rows", [](PyBackend& b, const F32& y, const F32& bias) {
            const int64_t d = y.shape(1);
            rows_of(y, d);
            if (bias.size() != d) throw py::value_error("the row vector's length differs from the rows'");
            Call c(*b.be);
            const backend::Rows r = c.in(y);
            b.be->add_rows(r, vec_of(*b.be, bias));
            return c.out(r);
        }, py::arg("y"), py::arg("b"))
        .def("mul_rows", [](PyBackend& b, const F32& y, const F32& w) {
            const int64_t d = y.shape(1);
            rows_of(y, d);
            if (w.size() != d) throw py::value_error("the row vector's length differs from the rows'");
            Call c(*b.be);
            const backend::Rows r = c.in(y);
            b.be->mul_rows(r, vec_of(*b.be, w));
            return c.out(r);
        }, py::arg("y"), py::arg("w"))
        .def("scale", [](PyBackend& b, const F32& y, float s) {
            Call c(*b.be);
            const backend::Rows r = flat_rows(c, y);
            b.be->scale(r, s);
            return c.out(r, y);
        }, py::arg("y"), py::arg("s"))
        .def("glu", [](PyBackend& b, const F32& gate, const F32& up, const std::string& act) {
            if (gate.size() != up.size()) throw py::value_error("gate and up differ in size");
            Call c(*b.be);
            const backend::Rows y = c.rows(1, gate.size());
            b.be->glu(flat_rows(c, gate), flat_rows(c, up), act_of(act), y);
            return c.out(y, gate);
        }, py::arg("gate"), py::arg("up"), py::arg("act"))
        .def("fill", [](PyBackend& b, const F32& y, float v) {
            Call c(*b.be);
            const backend::Rows r = flat_rows(c, y);
            b.be->fill(r, v);
            return c.out(r, y);
        }, py::arg("y"), py::arg("v"))
        .def("scatter_add", [](PyBackend& b, const F32& src, const std::vector<int64_t>& rows, const F32& w, const F32& dst) {
            const int64_t d = dst.shape(1), n_dst = rows_of(dst, d), n = rows_of(src, d);
            if (static_cast<int64_t>(rows.size()) != n || w.size() != n) throw py::value_error("one row index and weight per source row");
            std::vector<bool> seen(static_cast<size_t>(n_dst));
            for (int64_t r : rows) {
                if (r < 0 || r >= n_dst) throw py::value_error("row out of range");
                if (seen[static_cast<size_t>(r)]) throw py::value_error("rows repeat");
                seen[static_cast<size_t>(r)] = true;
            }
            Call c(*b.be);
            const backend::Rows out = c.in(dst);
            b.be->scatter_add(c.in(src), rows.data(), w.data(), out);
            return c.out(out);
        }, py::arg("src"), py::arg("rows"), py::arg("w"), py::arg("dst"))
        .def("ssm_conv", [](PyBackend& b, const F32& x, const F32& w, const F32& state) {
            const int64_t C = x.shape(1), n = rows_of(x, C);
            if (w.ndim() != 2 || w.shape(0) != C) throw py::value_error("w must be [channels, kernel]");
            const auto k = static_cast<int>(w.shape(1));
            if (rows_of(state, C) != k - 1) throw py::value_error("state must be [kernel - 1, channels]");
            Call c(*b.be);
            const backend::Rows st = c.in(state, k - 1, C), y = c.rows(n, C);
            b.be->ssm_conv(c.in(x), vec_of(*b.be, w), k, st, y);
            return py::make_tuple(c.out(y), c.out(st));
        }, py::arg("x"), py::arg("w"), py::arg("state"))
        .def("gated_delta", [](PyBackend& b, const F32& qkv, const F32& a, const F32& bb, const F32& a_coef,
                               const F32& dt_bias, int n_k, int n_v, int d_k, int d_v, const F32& state, bool tiled) {
            backend::DeltaParams p{n_k, n_v, d_k, d_v, tiled};
            if (n_k <= 0 || n_v % n_k != 0) throw py::value_error("n_v must be a multiple of n_k");
            const int64_t n = rows_of(qkv, 2 * p.key_dim() + p.value_dim());
            if (rows_of(a, n_v) != n || rows_of(bb, n_v) != n || a_coef.size() != n_v || dt_bias.size() != n_v) {
                throw py::value_error("a, b: one row of n_v per row; a_coef, dt_bias: n_v values");
            }
            if (rows_of(state, d_v) != static_cast<int64_t>(n_v) * d_k) throw py::value_error("state must be [n_v * d_k, d_v]");
            Call c(*b.be);
            const backend::Rows st = c.in(state), out = c.rows(n, p.value_dim());
            b.be->gated_delta(c.in(qkv), c.in(a), c.in(bb), vec_of(*b.be, a_coef), vec_of(*b.be, dt_bias), p, st, out);
            return py::make_tuple(c.out(out), c.out(st));
        }, py::arg("qkv"), py::arg("a"), py::arg("b"), py::arg("a_coef"), py::arg("dt_bias"), py::arg("n_k"), py::arg("n_v"),
           py::arg("d_k"), py::arg("d_v"), py::arg("state"), py::arg("tiled") = false)
        .def("softcap", [](PyBackend& b, const F32& x, float cap) {
            Call c(*b.be);
            const backend::Rows r = flat_rows(c, x);
            b.be->softcap(r, cap);
            return c.out(r, x);
        }, py::arg("x"), py::arg("cap"));
}

}  // namespace ds4::bindings
