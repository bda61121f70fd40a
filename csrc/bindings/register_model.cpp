// Model and Session bindings: the mapped GGUF, its tokenizer and forward pass (Model), and
// sequences evaluated against it (Session, Snapshot). Every call that runs the forward pass
// or copies a cache releases the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings/register.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "model/generate.h"
#include "model/session.h"
#include "sample/sampler.h"
#include "tokenizer/tokenizer.h"

namespace py = pybind11;

namespace ds4::bindings {

namespace {

struct Model {
    std::shared_ptr<gguf::File> file;
    std::unique_ptr<tok::Tokenizer> tokenizer;
    std::shared_ptr<model::Model> net;
    std::string arch;
};

backend::KvType parse_kv_type(const std::string& s) {
    if (s == "f32") return backend::KvType::f32;
    if (s == "f16") return backend::KvType::f16;
    throw std::invalid_argument("kv_type must be 'f32' or 'f16', got '" + s + "'");
}

std::unique_ptr<Model> load_model(const std::string& path, int threads, int64_t n_ctx, backend::KvType kv_type) {
    auto m = std::make_unique<Model>();
    m->file = gguf::File::open(path);
    m->arch = m->file->get("general.architecture").as_string();
    m->tokenizer = tok::Tokenizer::from_gguf(*m->file);
    model::Options opts;
    opts.threads = threads;
    opts.n_ctx = n_ctx;
    opts.kv_type = kv_type;
    m->net = model::Model::load(m->file, opts);
    return m;
}

// Token ids as int32 after a range check (a cast alone would wrap ids >= 2^31).
std::vector<int32_t> token_ids(const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& a,
                               int64_t n_vocab) {
    if (a.ndim() != 1) throw std::invalid_argument("tokens must be a 1-D sequence of token ids");
    std::vector<int32_t> ids(static_cast<size_t>(a.shape(0)));
    const int64_t* p = a.data();
    for (size_t i = 0; i < ids.size(); ++i) {
        if (p[i] < 0 || p[i] >= n_vocab) {
            throw model::Error("token id " + std::to_string(p[i]) + " at index " + std::to_string(i) +
                               " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
        }
        ids[i] = static_cast<int32_t>(p[i]);
    }
    return ids;
}

py::str utf8(const std::string& s) {
    PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
    if (!o) throw py::error_already_set();
    return py::reinterpret_steal<py::str>(o);
}

py::dict stats_dict(const model::GenerateStats& st) {
    py::dict d;
    d["n_prompt"] = st.n_prompt;
    d["n_generated"] = st.n_generated;
    // Speculation counters: plain decoding drafts nothing and verifies one row per pass.
    d["n_drafted"] = 0;
    d["n_accepted"] = 0;
    d["n_verify_passes"] = st.n_forward;
    d["accepted_per_position"] = py::list();
    d["prefill_seconds"] = st.prefill_seconds;
    d["decode_seconds"] = st.decode_seconds;
    d["sample_seconds"] = st.sample_seconds;
    d["prefill_tokens_per_second"] = st.prefill_seconds > 0 ? st.n_prompt / st.prefill_seconds : 0.0;
    const double gen = st.decode_seconds + st.sample_seconds;
    d["tokens_per_second"] = gen > 0 ? st.n_generated / gen : 0.0;
    d["stop_reason"] = st.stop_reason;
    return d;
}

void register_generate(py::module_& m) {
    py::class_<model::Generator>(m, "Generator")
        .def(py::init([](model::Session& s, const Model& mdl,
                         const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& prompt,
                         int64_t max_tokens, const sample::SamplingParams& sampling, std::vector<std::string> stop,
                         bool stop_at_eog) {
                 model::GenerateParams p;
                 p.max_tokens = max_tokens;
                 p.sampling = sampling;
                 p.stop = std::move(stop);
                 p.stop_at_eog = stop_at_eog;
                 return std::make_unique<model::Generator>(s, *mdl.tokenizer, token_ids(prompt, s.n_vocab()), std::move(p));
             }),
             py::arg("session"), py::arg("model"), py::arg("prompt"), py::arg("max_tokens"), py::arg("sampling"),
             py::arg("stop"), py::arg("stop_at_eog") = true,
             py::keep_alive<1, 2>(), py::keep_alive<1, 3>())
        .def(
            "next",
            [](model::Generator& g) -> py::object {
                std::string piece;
                {
                    py::gil_scoped_release release;
                    g.next(&piece);
                }
                if (piece.empty() && g.done()) return py::none();
                return utf8(piece);
            },
            "The next piece of text, or None once generation has ended.")
        .def("run",
             [](model::Generator& g) {
                 py::gil_scoped_release release;
                 g.run();
             })
        .def_property_readonly("done", &model::Generator::done)
        .def_property_readonly("tokens", &model::Generator::tokens)
        .def_property_readonly("text", [](const model::Generator& g) { return utf8(g.text()); })
        .def_property_readonly("stats", [](const model::Generator& g) { return stats_dict(g.stats()); });
}

void register_session(py::module_& m) {
    using Snapshot = model::Session::Snapshot;
    py::class_<Snapshot, std::shared_ptr<Snapshot>>(m, "SessionSnapshot")
        .def_property_readonly("n_past", &Snapshot::n_past)
        .def_property_readonly("nbytes", [](const Snapshot& s) { return s.kv.bytes(); });

    py::class_<model::Session>(m, "Session")
        .def_property_readonly("n_past", &model::Session::n_past)
        .def_property_readonly("n_ctx", &model::Session::n_ctx)
        .def_property_readonly("n_vocab", &model::Session::n_vocab)
        .def_property_readonly("tokens", &model::Session::tokens)
        .def(
            "eval",
            [](model::Session& s, const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& tokens) {
                const int64_t n_vocab = s.model().hparams().n_vocab;
                const std::vector<int32_t> ids = token_ids(tokens, n_vocab);
                py::array_t<float> logits({static_cast<py::ssize_t>(ids.size()), static_cast<py::ssize_t>(n_vocab)});
                float* out = logits.mutable_data();
                {
                    py::gil_scoped_release release;
                    s.eval(ids.data(), static_cast<int64_t>(ids.size()), out);
                }
                return logits;
            },
            py::arg("tokens"))
        .def(
            "truncate",
            [](model::Session& s, int64_t n) {
                py::gil_scoped_release release;
                s.truncate(n);
            },
            py::arg("n_past"))
        .def("snapshot",
             [](const model::Session& s) {
                 py::gil_scoped_release release;
                 return std::const_pointer_cast<Snapshot>(s.snapshot());
             })
        .def(
            "restore",
            [](model::Session& s, const Snapshot& snap) {
                py::gil_scoped_release release;
                s.restore(snap);
            },
            py::arg("snapshot"));
}

}  // namespace

void register_model(py::module_& m) {
    auto& model_error = py::register_exception<model::Error>(m, "ModelError", PyExc_ValueError);
    py::register_exception<state::ContextOverflow>(m, "ContextOverflowError", model_error.ptr());

    py::class_<Model>(m, "Model")
        .def(py::init([](const std::string& path, int threads, int64_t n_ctx, const std::string& kv_type) {
                 const backend::KvType kt = parse_kv_type(kv_type);
                 py::gil_scoped_release release;
                 return load_model(path, threads, n_ctx, kt);
             }),
             py::arg("path"), py::arg("threads") = 0, py::arg("n_ctx") = 0, py::arg("kv_type") = "f32")
        .def_readonly("arch", &Model::arch)
        .def_property_readonly("n_ctx", [](const Model& self) { return self.net->n_ctx(); })
        .def_property_readonly("n_vocab", [](const Model& self) { return self.net->hparams().n_vocab; })
        .def_property_readonly("vocab_size", [](const Model& self) { return self.tokenizer->vocab_size(); })
        .def("session", [](const Model& self) { return std::make_unique<model::Session>(self.net); })
        .def(
            "tokenize",
            [](const Model& self, const std::string& text, bool add_special, bool parse_special) {
                std::vector<int32_t> ids;
                {
                    py::gil_scoped_release release;
                    ids = self.tokenizer->encode(text, add_special, parse_special);
                }
                return ids;
            },
            py::arg("text"), py::arg("add_special") = true, py::arg("parse_special") = true)
        .def(
            "detokenize",
            [](const Model& self, const std::vector<int32_t>& ids) {
                std::string bytes;
                {
                    py::gil_scoped_release release;
                    bytes = self.tokenizer->decode(ids);
                }
                // Invalid or truncated UTF-8 (ids cut mid-character) becomes U+FFFD, not an error.
                PyObject* s = PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace");
                if (!s) throw py::error_already_set();
                return py::reinterpret_steal<py::str>(s);
            },
            py::arg("ids"))
        .def_property_readonly("bos_id", [](const Model& self) { return self.tokenizer->bos_id(); })
        .def_property_readonly("eos_id", [](const Model& self) { return self.tokenizer->eos_id(); })
        .def(
            "token_bytes",
            [](const Model& self, int32_t id) { return py::bytes(self.tokenizer->token_bytes(id)); },
            py::arg("id"));

    register_session(m);
    register_generate(m);
}

}  // namespace ds4::bindings
