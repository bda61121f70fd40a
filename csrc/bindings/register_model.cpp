// Model and Session bindings: the mapped GGUF, its tokenizer and forward pass (Model), and
// sequences evaluated against it (Session, Snapshot). Every call that runs the forward pass
// or copies a cache releases the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
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

bool parse_precision(const std::string& s) {  // true: int16 activations
    if (s == "int16") return true;
    if (s == "f32") return false;
    throw std::invalid_argument("precision must be 'int16' or 'f32', got '" + s + "'");
}

std::unique_ptr<Model> load_model(const std::string& path, int threads, int64_t n_ctx, backend::KvType kv_type,
                                  bool int16, bool repack, bool defer_pack) {
    auto m = std::make_unique<Model>();
    m->file = gguf::File::open(path);
    m->arch = m->file->get("general.architecture").as_string();
    m->tokenizer = tok::Tokenizer::from_gguf(*m->file);
    model::Options opts;
    opts.threads = threads;
    opts.n_ctx = n_ctx;
    opts.kv_type = kv_type;
    opts.int16_activations = int16;
    opts.repack = repack;
    opts.defer_pack = defer_pack;
    m->net = model::Model::load(m->file, opts);
    // Embeddings may have padding rows past the vocabulary, never fewer rows than tokens.
    if (m->tokenizer->vocab_size() > m->net->hparams().n_vocab)
        throw model::Error(path + ": the tokenizer has " + std::to_string(m->tokenizer->vocab_size()) +
                           " tokens but the embedding only " + std::to_string(m->net->hparams().n_vocab) + " rows");
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

py::dict stats_dict(const model::GenerateStats& st) {
    py::dict d;
    d["n_prompt"] = st.n_prompt;
    d["n_generated"] = st.n_generated;
    // Speculation counters: plain decoding drafts nothing and verifies one row per pass.
    d["n_drafted"] = st.n_drafted;
    d["n_accepted"] = st.n_accepted;
    d["n_verify_passes"] = st.n_forward;
    d["n_spec_passes"] = st.n_spec_passes;
    d["accepted_per_position"] = st.accepted_per_position;
    d["drafted_per_position"] = st.drafted_per_position;
    d["tokens_per_pass"] = st.n_forward > 0 ? static_cast<double>(st.n_generated - 1) / st.n_forward : 0.0;
    d["draft_seconds"] = st.draft_seconds;
    d["catch_up_seconds"] = st.catch_up_seconds;
    d["verify_seconds"] = st.verify_seconds;
    d["plain_seconds"] = st.plain_seconds;
    d["cost_prior_seconds"] = st.cost_prior_seconds;
    d["cost_prior_macs"] = st.cost_prior_macs;
    d["plain_tokens_per_second_estimate"] = st.plain_tokens_per_second;
    d["spec_balance_seconds"] = st.spec_balance_seconds;
    d["spec_slowdown"] = st.spec_slowdown;
    d["prefill_seconds"] = st.prefill_seconds;
    d["decode_seconds"] = st.decode_seconds;
    d["sample_seconds"] = st.sample_seconds;
    d["end_to_end_seconds"] = st.end_to_end_seconds;
    d["prefill_tokens_per_second"] = st.prefill_seconds > 0 ? st.n_prompt / st.prefill_seconds : 0.0;
    const double gen = st.decode_seconds + st.sample_seconds;
    d["tokens_per_second"] = gen > 0 ? st.n_generated / gen : 0.0;
    // What the user waited for after the prefill: every phase, the cost prior and the loop's
    // own work included.
    d["end_to_end_tokens_per_second"] = st.end_to_end_seconds > 0 ? st.n_generated / st.end_to_end_seconds : 0.0;
    d["stop_reason"] = st.stop_reason;
    return d;
}

// A Generator with the lock that makes it safe to read progress (tokens, text, stats) from one
// Python thread while another drives it with the GIL released.
struct GeneratorHandle {
    std::unique_ptr<model::Generator> g;
    std::mutex mu;

    template <typename F>
    auto locked(F&& f) {
        py::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(mu);
        return f(*g);
    }
};

void register_generate(py::module_& m) {
    py::class_<GeneratorHandle>(m, "Generator")
        .def(py::init([](model::Session& s, const Model& mdl,
                         const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& prompt,
                         int64_t max_tokens, const sample::SamplingParams& sampling, std::vector<std::string> stop,
                         bool stop_at_eog, std::vector<std::string> spec_types, int spec_n_max, bool spec_exact,
                         const Model* draft, int spec_n_min, float spec_confidence, int64_t spec_draft_vocab) {
                 model::GenerateParams p;
                 p.max_tokens = max_tokens;
                 p.sampling = sampling;
                 p.stop = std::move(stop);
                 p.stop_at_eog = stop_at_eog;
                 p.spec.types = std::move(spec_types);
                 p.spec.n_max = spec_n_max;
                 p.spec.exact = spec_exact;
                 p.spec.n_min = spec_n_min;
                 p.spec.confidence = spec_confidence;
                 p.spec.draft_vocab = spec_draft_vocab;
                 if (draft) {
                     p.spec.draft = draft->net;
                     p.spec.draft_tok = draft->tokenizer.get();
                 }
                 auto h = std::make_unique<GeneratorHandle>();
                 h->g = std::make_unique<model::Generator>(s, *mdl.tokenizer, token_ids(prompt, s.n_vocab()), std::move(p));
                 return h;
             }),
             py::arg("session"), py::arg("model"), py::arg("prompt"), py::arg("max_tokens"), py::arg("sampling"),
             py::arg("stop"), py::arg("stop_at_eog") = true, py::arg("spec_types") = std::vector<std::string>{},
             py::arg("spec_n_max") = 16, py::arg("spec_exact") = false, py::arg("draft") = nullptr, py::arg("spec_n_min") = 0,
             py::arg("spec_confidence") = 0.0f, py::arg("spec_draft_vocab") = -1,
             py::keep_alive<1, 2>(), py::keep_alive<1, 3>(), py::keep_alive<1, 12>())
        .def(
            "next",
            [](GeneratorHandle& h) -> py::object {
                auto [piece, done] = h.locked([](model::Generator& g) {
                    std::string p;
                    g.next(&p);
                    return std::make_pair(std::move(p), g.done());
                });
                if (piece.empty() && done) return py::none();
                return utf8_str(piece);
            },
            "The next piece of text, or None once generation has ended.")
        .def("run", [](GeneratorHandle& h) { h.locked([](model::Generator& g) { g.run(); }); })
        .def_property_readonly("done", [](GeneratorHandle& h) { return h.locked([](model::Generator& g) { return g.done(); }); })
        .def_property_readonly("tokens", [](GeneratorHandle& h) { return h.locked([](model::Generator& g) { return g.tokens(); }); })
        .def_property_readonly("text", [](GeneratorHandle& h) { return utf8_str(h.locked([](model::Generator& g) { return g.text(); })); })
        .def_property_readonly("stats", [](GeneratorHandle& h) {
            return stats_dict(h.locked([](model::Generator& g) { return g.stats(); }));
        });
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
            "eval_argmax",
            [](model::Session& s, const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& tokens) {
                const std::vector<int32_t> ids = token_ids(tokens, s.model().hparams().n_vocab);
                std::vector<int32_t> best;
                {
                    py::gil_scoped_release release;
                    best = s.eval_argmax(ids.data(), static_cast<int64_t>(ids.size()));
                }
                return py::array_t<int32_t>(static_cast<py::ssize_t>(best.size()), best.data());
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
        .def(py::init([](const std::string& path, int threads, int64_t n_ctx, const std::string& kv_type,
                         const std::string& precision, bool repack, bool defer_pack) {
                 const backend::KvType kt = parse_kv_type(kv_type);
                 const bool int16 = parse_precision(precision);
                 py::gil_scoped_release release;
                 return load_model(path, threads, n_ctx, kt, int16, repack, defer_pack);
             }),
             py::arg("path"), py::arg("threads") = 0, py::arg("n_ctx") = 0, py::arg("kv_type") = "f16",
             py::arg("precision") = "int16", py::arg("repack") = true, py::arg("defer_pack") = false)
        .def_readonly("arch", &Model::arch)
        .def_property_readonly("forward_passes", [](const Model& self) { return self.net->forward_passes(); })
        .def_property_readonly("forward_rows", [](const Model& self) { return self.net->forward_rows(); })
        .def_property_readonly("macs_per_token", [](const Model& self) { return self.net->work().macs(); })
        .def_property_readonly("repack_pending", [](const Model& self) { return self.net->repack_pending(); })
        .def(
            "extra_row_seconds",
            [](const Model& self, int max_rows) {
                if (max_rows < 1) throw py::value_error("max_rows must be >= 1");
                py::gil_scoped_release release;
                return self.net->extra_row_seconds(max_rows);
            },
            py::arg("max_rows"), "The verify-cost prior: seconds r rows add to a 1-row pass, r = 1 .. max_rows.")
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
                return utf8_str(bytes);  // ids cut mid-character give U+FFFD, not an error
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
