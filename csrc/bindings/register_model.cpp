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

#include "bindings/handles.h"
#include "bindings/register.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "model/session.h"
#include "sample/sampler.h"
#include "tokenizer/tokenizer.h"

namespace py = pybind11;

namespace ds4::bindings {

namespace {


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
                                  bool int16, bool repack, bool defer_pack, bool huge_pages) {
    auto m = std::make_unique<Model>();
    m->file = gguf::File::open(path);
    m->arch = m->file->get("general.architecture").as_string();
    m->tokenizer = tok::Tokenizer::from_gguf(*m->file);
    model::Options opts;
    opts.cpu.threads = threads;
    opts.cpu.int16_activations = int16;
    opts.cpu.repack = repack;
    opts.cpu.defer_pack = defer_pack;
    opts.cpu.huge_pages = huge_pages;
    opts.n_ctx = n_ctx;
    opts.kv_type = kv_type;
    m->net = model::Model::load(m->file, opts);
    // Embeddings may have padding rows past the vocabulary, never fewer rows than tokens.
    if (m->tokenizer->vocab_size() > m->net->hparams().n_vocab)
        throw model::Error(path + ": the tokenizer has " + std::to_string(m->tokenizer->vocab_size()) +
                           " tokens but the embedding only " + std::to_string(m->net->hparams().n_vocab) + " rows");
    return m;
}

using IdArray = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

// A (len(tokens), n_vocab) float32 array filled by run(ids, n, out) with the GIL released.
template <typename Run>
py::array_t<float> logits_of(model::Session& s, const IdArray& tokens, Run run) {
    const int64_t n_vocab = s.model().hparams().n_vocab;
    const std::vector<int32_t> ids = token_ids(tokens, n_vocab);
    py::array_t<float> logits({static_cast<py::ssize_t>(ids.size()), static_cast<py::ssize_t>(n_vocab)});
    float* out = logits.mutable_data();
    {
        py::gil_scoped_release release;
        run(ids.data(), static_cast<int64_t>(ids.size()), out);
    }
    return logits;
}

void register_session(py::module_& m) {
    using Snapshot = model::Session::Snapshot;
    m.attr("STATE_FORMAT") = model::Session::kStateFormat;
    py::class_<Snapshot, std::shared_ptr<Snapshot>>(m, "SessionSnapshot")
        .def_property_readonly("n_past", &Snapshot::n_past)
        .def_property_readonly("nbytes", [](const Snapshot& s) { return s.state.bytes(); })
        .def_property_readonly("tokens", [](const Snapshot& s) { return s.tokens; })
        .def("to_bytes", [](const Snapshot& s) {
            const size_t n = model::Session::saved_size(s);
            py::bytes out(nullptr, n);
            auto* buf = reinterpret_cast<uint8_t*>(PyBytes_AsString(out.ptr()));
            {
                py::gil_scoped_release release;
                model::Session::save(s, buf, n);
            }
            return out;
        });

    py::class_<model::Session>(m, "Session")
        .def_property_readonly("n_past", &model::Session::n_past)
        .def_property_readonly("n_ctx", &model::Session::n_ctx)
        .def_property_readonly("n_vocab", &model::Session::n_vocab)
        .def_property_readonly("tokens", &model::Session::tokens)
        .def(
            "eval",
            [](model::Session& s, const IdArray& tokens) {
                return logits_of(s, tokens, [&s](const int32_t* ids, int64_t n, float* out) { s.eval(ids, n, out); });
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
            "eval_shortlist",
            [](model::Session& s, const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& tokens,
               float margin, int32_t keep) {
                const std::vector<int32_t> ids = token_ids(tokens, s.model().hparams().n_vocab);
                model::Shortlisted out;
                {
                    py::gil_scoped_release release;
                    s.eval_shortlist(ids.data(), static_cast<int64_t>(ids.size()), margin, keep, &out);
                }
                py::dict d;
                d["ok"] = out.list.ok;
                if (out.list.ok) {
                    d["ids"] = py::array_t<int32_t>(static_cast<py::ssize_t>(out.list.ids.size()), out.list.ids.data());
                    d["logits"] = py::array_t<float>(static_cast<py::ssize_t>(out.list.logits.size()), out.list.logits.data());
                    d["thr"] = out.list.thr;
                    d["more"] = py::cpp_function([&m = s.model(), list = out.list](
                                                     const py::array_t<int32_t, py::array::c_style | py::array::forcecast>& more) {
                        py::array_t<float> y(more.size());
                        m.head_values(list, more.data(), more.size(), y.mutable_data());
                        return y;
                    });
                } else {
                    d["logits"] = py::array_t<float>(static_cast<py::ssize_t>(out.full.size()), out.full.data());
                }
                return d;
            },
            py::arg("tokens"), py::arg("margin"), py::arg("keep") = 0,
            "Appends tokens like eval and shortlists the last one's logits for a sampler: {'ok', 'ids', "
            "'logits', 'thr', 'more'} (more(ids): exact logits of any ids), or {'ok': False, 'logits': the row}.")
        .def(
            "eval_hidden",
            [](model::Session& s, const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& tokens,
               const std::vector<int>& layers) {
                const std::vector<int32_t> ids = token_ids(tokens, s.model().hparams().n_vocab);
                const int n_layer = s.model().hparams().n_layer;
                for (int l : layers) {
                    if (l < 0 || l > n_layer) {
                        throw model::Error("eval_hidden: layer " + std::to_string(l) + " is outside [0, " +
                                           std::to_string(n_layer) + "] (0: the embeddings, " +
                                           std::to_string(n_layer) + ": after the final norm)");
                    }
                }
                py::array_t<float> hidden({static_cast<py::ssize_t>(layers.size()), static_cast<py::ssize_t>(ids.size()),
                                           static_cast<py::ssize_t>(s.model().hparams().n_embd)});
                float* out = hidden.mutable_data();
                {
                    py::gil_scoped_release release;
                    s.eval_hidden(ids.data(), static_cast<int64_t>(ids.size()), layers.data(),
                                  static_cast<int>(layers.size()), out);
                }
                return hidden;
            },
            py::arg("tokens"), py::arg("layers"))
        .def(
            "mtp_step",
            [](model::Session& s, int64_t pos0, const IdArray& tokens,
               const py::array_t<float, py::array::c_style | py::array::forcecast>& hidden) {
                const std::vector<int32_t> ids = token_ids(tokens, s.model().hparams().n_vocab);
                const auto n = static_cast<int64_t>(ids.size());
                const int64_t d = s.model().hparams().n_embd, vocab = s.model().hparams().n_vocab;
                if (hidden.ndim() != 2 || hidden.shape(0) != n || hidden.shape(1) != d) {
                    throw model::Error("mtp_step: hidden must be [" + std::to_string(n) + ", " + std::to_string(d) + "]");
                }
                py::array_t<float> logits({n, vocab}), out({n, d});
                float* lp = logits.mutable_data();
                float* op = out.mutable_data();
                {
                    py::gil_scoped_release release;
                    s.mtp_step(pos0, ids.data(), hidden.data(), n, lp, op);
                }
                return py::make_tuple(logits, out);
            },
            py::arg("pos0"), py::arg("tokens"), py::arg("hidden"))
        .def("track_mtp", &model::Session::track_mtp, py::call_guard<py::gil_scoped_release>())
        .def_property_readonly("tracks_mtp", &model::Session::tracks_mtp)
        .def_property_readonly("mtp_lag", &model::Session::mtp_lag)
        .def(
            "mtp_draft",
            [](model::Session& s, int32_t tok) -> py::object {
                const int64_t d = s.model().hparams().n_embd, vocab = s.model().hparams().n_vocab;
                py::array_t<float> logits(vocab), hidden(d);
                model::MtpOut out;
                out.logits = logits.mutable_data();
                out.hidden = hidden.mutable_data();
                bool ok;
                {
                    py::gil_scoped_release release;
                    ok = s.mtp_draft(tok, out);
                }
                if (!ok) return py::none();
                return py::make_tuple(logits, hidden);
            },
            py::arg("token"))
        .def("track_block", &model::Session::track_block, py::arg("drafter"), py::call_guard<py::gil_scoped_release>())
        .def_property_readonly("block_lag", &model::Session::block_lag)
        .def_property_readonly("block_stale", &model::Session::block_stale)
        .def(
            "block_draft",
            [](model::Session& s, int32_t tok, int64_t n) -> py::object {
                const int64_t vocab = s.model().hparams().n_vocab;
                if (n < 1) throw py::value_error("n must be >= 1");
                std::vector<float> rows;
                std::vector<float> conf;
                bool ok;
                {
                    py::gil_scoped_release release;
                    ok = s.block_draft(tok, n, true, 0, [&](const model::BlockRow& r) {
                        rows.insert(rows.end(), r.logits, r.logits + vocab);
                        conf.push_back(r.confidence);
                        return r.argmax;  // the Markov head, if any, follows the greedy chain
                    });
                }
                if (!ok) return py::none();
                py::array_t<float> logits({static_cast<py::ssize_t>(conf.size()), static_cast<py::ssize_t>(vocab)});
                std::copy(rows.begin(), rows.end(), logits.mutable_data());
                return py::make_tuple(logits, py::array_t<float>(static_cast<py::ssize_t>(conf.size()), conf.data()));
            },
            py::arg("token"), py::arg("n"),
            "(logits [n, n_vocab], confidences [n]) of the tracked block drafter's pass after `token`, its Markov "
            "head (if any) following the greedy chain; None if it cannot draft.")
        .def(
            "eval_block",
            [](model::Session& s, const IdArray& tokens) {
                return logits_of(s, tokens,
                                 [&s](const int32_t* ids, int64_t n, float* out) { s.eval_block(ids, n, out); });
            },
            py::arg("tokens"))
        .def(
            "eval_embeddings",
            [](model::Session& s, const py::array_t<float, py::array::c_style | py::array::forcecast>& embd) {
                const int64_t d = s.model().hparams().n_embd, n_vocab = s.model().hparams().n_vocab;
                if (embd.ndim() != 2 || embd.shape(1) != d)
                    throw model::Error("eval_embeddings: expected float32 (n, " + std::to_string(d) + ")");
                const int64_t n = embd.shape(0);
                py::array_t<float> logits({n, n_vocab});
                float* out = logits.mutable_data();
                {
                    py::gil_scoped_release release;
                    s.eval_embeddings(embd.data(), n, out);
                }
                return logits;
            },
            py::arg("embeddings"))
        .def("checkpoint", &model::Session::checkpoint, py::call_guard<py::gil_scoped_release>())
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
            py::arg("snapshot"))
        .def(
            "snapshot_from_bytes",
            [](const model::Session& s, const py::buffer& data) {
                Py_buffer view;  // PyBUF_SIMPLE: contiguous bytes, or a TypeError
                if (PyObject_GetBuffer(data.ptr(), &view, PyBUF_SIMPLE) != 0) throw py::error_already_set();
                std::shared_ptr<Snapshot> snap;
                try {
                    py::gil_scoped_release release;
                    snap = s.load(static_cast<const uint8_t*>(view.buf), static_cast<size_t>(view.len));
                } catch (...) {
                    PyBuffer_Release(&view);
                    throw;
                }
                PyBuffer_Release(&view);
                return snap;
            },
            py::arg("data"));
}

}  // namespace

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

void register_model(py::module_& m) {
    auto& model_error = py::register_exception<model::Error>(m, "ModelError", PyExc_ValueError);
    py::register_exception<state::ContextOverflow>(m, "ContextOverflowError", model_error.ptr());

    py::class_<Model>(m, "Model")
        .def(py::init([](const std::string& path, int threads, int64_t n_ctx, const std::string& kv_type,
                         const std::string& precision, bool repack, bool defer_pack, bool huge_pages) {
                 const backend::KvType kt = parse_kv_type(kv_type);
                 const bool int16 = parse_precision(precision);
                 py::gil_scoped_release release;
                 return load_model(path, threads, n_ctx, kt, int16, repack, defer_pack, huge_pages);
             }),
             py::arg("path"), py::arg("threads") = 0, py::arg("n_ctx") = 0, py::arg("kv_type") = "f16",
             py::arg("precision") = "int16", py::arg("repack") = true, py::arg("defer_pack") = false,
             py::arg("huge_pages") = false)
        .def_readonly("arch", &Model::arch)
        .def_property_readonly("forward_passes", [](const Model& self) { return self.net->forward_passes(); })
        .def_property_readonly("forward_rows", [](const Model& self) { return self.net->forward_rows(); })
        .def_property_readonly("macs_per_token", [](const Model& self) { return self.net->work().macs(); })
        .def_property_readonly("repack_pending", [](const Model& self) { return self.net->repack_pending(); })
        .def_property_readonly("n_layer", [](const Model& self) { return self.net->hparams().n_layer; })
        .def_property_readonly("n_embd", [](const Model& self) { return self.net->hparams().n_embd; })
        .def_property_readonly("has_mtp", [](const Model& self) { return self.net->has_mtp(); })
        .def(
            "extra_row_seconds",
            [](const Model& self, int max_rows) {
                if (max_rows < 1) throw py::value_error("max_rows must be >= 1");
                py::gil_scoped_release release;
                return self.net->extra_row_seconds(max_rows);
            },
            py::arg("max_rows"), "The verify-cost prior: seconds r rows add to a 1-row pass, r = 1 .. max_rows.")
        .def(
            "eval_together",
            [](const Model& self, const std::vector<model::Session*>& sessions,
               const std::vector<py::array_t<int64_t, py::array::c_style | py::array::forcecast>>& tokens) {
                if (sessions.size() != tokens.size()) throw py::value_error("one token list per session");
                const int64_t n_vocab = self.net->hparams().n_vocab;
                std::vector<int32_t> all;
                std::vector<model::SeqRows> seqs;
                for (size_t i = 0; i < sessions.size(); ++i) {
                    const std::vector<int32_t> ids = token_ids(tokens[i], n_vocab);
                    if (sessions[i]->tokens().size() != static_cast<size_t>(sessions[i]->state().n_past()))
                        throw py::value_error("eval_together: a session holds a pending token");
                    all.insert(all.end(), ids.begin(), ids.end());
                    seqs.push_back({&sessions[i]->state(), static_cast<int64_t>(ids.size()), model::Attend::causal});
                }
                std::vector<float> logits(all.size() * static_cast<size_t>(n_vocab));
                model::Request req;
                req.tokens = all.data();
                req.seqs = seqs.data();
                req.n_seqs = static_cast<int>(seqs.size());
                req.logits = logits.data();
                {
                    py::gil_scoped_release release;
                    self.net->forward(req);
                }
                py::list out;
                size_t row = 0;
                for (size_t i = 0; i < seqs.size(); ++i) {
                    const auto n = static_cast<size_t>(seqs[i].n);
                    sessions[i]->appended(all.data() + row, seqs[i].n, logits.data() + (row + n - 1) * n_vocab);
                    py::array_t<float> a({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(n_vocab)});
                    std::copy(logits.begin() + static_cast<std::ptrdiff_t>(row * n_vocab),
                              logits.begin() + static_cast<std::ptrdiff_t>((row + n) * n_vocab), a.mutable_data());
                    out.append(a);
                    row += n;
                }
                return out;
            },
            py::arg("sessions"), py::arg("tokens"),
            "One forward pass over rows of several sessions (causal, committed); each session's logits rows. For tests.")
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
