// Generation bindings: GenerateOptions (what a generation does), Generator (the decode loop of
// one session, csrc/model/generate.h) and Engine (one pass per step for many generations,
// csrc/model/engine.h). Long calls release the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bindings/handles.h"
#include "bindings/register.h"
#include "model/block_drafter.h"
#include "model/engine.h"
#include "model/generate.h"
#include "model/session.h"
#include "sample/sampler.h"

namespace py = pybind11;

namespace ds4::bindings {

namespace {

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
    d["accepted_per_pass"] = st.accepted_per_pass;
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
    d["stop_string"] = st.stop_string;
    return d;
}

// A Generator with the lock that makes it safe to read progress (tokens, text, stats) from one
// Python thread while another drives it with the GIL released.
struct GeneratorHandle {
    std::unique_ptr<model::Generator> g;
    std::mutex mu;
    py::object keep;  // the draft model, whose tokenizer the generator reads

    template <typename F>
    auto locked(F&& f) {
        py::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(mu);
        return f(*g);
    }
};

// GenerateParams as Python builds it: one object for what Session.generate and
// Model.generate_batch accept, holding the draft model while a generator may use it.
struct Options {
    model::GenerateParams params;
    py::object draft;
};

void register_options(py::module_& m) {
    py::class_<Options>(m, "GenerateOptions", "What a generation does (csrc/model/generate.h's GenerateParams).")
        .def(py::init<>())
        .def_property(
            "max_tokens", [](const Options& o) { return o.params.max_tokens; },
            [](Options& o, int64_t v) { o.params.max_tokens = v; })
        .def_property(
            "sampling", [](const Options& o) { return o.params.sampling; },
            [](Options& o, const sample::SamplingParams& v) { o.params.sampling = v; })
        .def_property(
            "stop", [](const Options& o) { return o.params.stop; },
            [](Options& o, std::vector<std::string> v) { o.params.stop = std::move(v); })
        .def_property(
            "stop_at_eog", [](const Options& o) { return o.params.stop_at_eog; },
            [](Options& o, bool v) { o.params.stop_at_eog = v; })
        .def_property(
            "top_logprobs", [](const Options& o) { return o.params.top_logprobs; },
            [](Options& o, int v) { o.params.top_logprobs = v; })
        .def_property(
            "spec_types", [](const Options& o) { return o.params.spec.types; },
            [](Options& o, std::vector<std::string> v) { o.params.spec.types = std::move(v); })
        .def_property(
            "spec_n_max", [](const Options& o) { return o.params.spec.n_max; },
            [](Options& o, int v) { o.params.spec.n_max = v; })
        .def_property(
            "spec_n_min", [](const Options& o) { return o.params.spec.n_min; },
            [](Options& o, int v) { o.params.spec.n_min = v; })
        .def_property(
            "spec_exact", [](const Options& o) { return o.params.spec.exact; },
            [](Options& o, bool v) { o.params.spec.exact = v; })
        .def_property(
            "spec_confidence", [](const Options& o) { return o.params.spec.confidence; },
            [](Options& o, float v) { o.params.spec.confidence = v; })
        .def_property(
            "spec_draft_vocab", [](const Options& o) { return o.params.spec.draft_vocab; },
            [](Options& o, int64_t v) { o.params.spec.draft_vocab = v; })
        .def_property(
            "spec_mtp_draft", [](const Options& o) { return o.params.spec.mtp_draft; },
            [](Options& o, int v) { o.params.spec.mtp_draft = v; })
        .def_property(
            "spec_mtp_depth", [](const Options& o) { return o.params.spec.mtp_depth; },
            [](Options& o, int v) { o.params.spec.mtp_depth = v; })
        .def_property(
            "block_drafter", [](const Options& o) { return o.params.spec.block_drafter; },
            [](Options& o, std::shared_ptr<model::BlockDrafter> v) { o.params.spec.block_drafter = std::move(v); })
        .def_property(
            "draft", [](const Options& o) { return o.draft; },
            [](Options& o, const py::object& v) {
                if (v.is_none()) {
                    o.params.spec.draft = nullptr;
                    o.params.spec.draft_tok = nullptr;
                } else {
                    const Model& d = v.cast<const Model&>();
                    o.params.spec.draft = d.net;
                    o.params.spec.draft_tok = d.tokenizer.get();
                }
                o.draft = v;
            });
}

// Steps many generators together; each generator's lock is held for the step, so their
// progress can be read from other Python threads between steps.
struct EngineHandle {
    std::unique_ptr<model::Engine> e;
    std::vector<py::object> gens;  // the generator handles added, kept alive while running

    bool step() {
        std::vector<GeneratorHandle*> hs;
        for (auto& o : gens) hs.push_back(o.cast<GeneratorHandle*>());
        py::gil_scoped_release release;
        std::vector<std::unique_lock<std::mutex>> locks;
        for (GeneratorHandle* h : hs) locks.emplace_back(h->mu);
        return e->step();
    }
};

void register_engine(py::module_& m) {
    py::class_<EngineHandle>(m, "Engine", "One forward pass per step for many generations (csrc/model/engine.h).")
        .def(py::init([](const Model& mdl, int64_t max_rows) {
                 auto h = std::make_unique<EngineHandle>();
                 h->e = std::make_unique<model::Engine>(mdl.net, max_rows);
                 return h;
             }),
             py::arg("model"), py::arg("max_rows") = 512, py::keep_alive<1, 2>())
        .def(
            "add",
            [](EngineHandle& self, py::object gen) {
                GeneratorHandle* h = gen.cast<GeneratorHandle*>();
                {
                    py::gil_scoped_release release;
                    std::lock_guard<std::mutex> lock(h->mu);
                    self.e->add(*h->g);
                }
                self.gens.push_back(std::move(gen));
            },
            py::arg("generator"))
        .def(
            "step",
            [](EngineHandle& self) {
                const bool running = self.step();
                // Finished generators need no keeping any more.
                auto& gens = self.gens;
                gens.erase(std::remove_if(gens.begin(), gens.end(),
                                          [](const py::object& o) { return o.cast<GeneratorHandle*>()->g->done(); }),
                           gens.end());
                return running;
            },
            "Runs one forward pass; returns whether any generation is still running.")
        .def_property_readonly("running", [](const EngineHandle& self) { return self.e->running(); })
        .def_property_readonly("passes", [](const EngineHandle& self) { return self.e->passes(); });
}

void register_generator(py::module_& m) {
    py::class_<GeneratorHandle>(m, "Generator")
        .def(py::init([](model::Session& s, const Model& mdl,
                         const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& prompt,
                         const Options& opts) {
                 auto h = std::make_unique<GeneratorHandle>();
                 h->g = std::make_unique<model::Generator>(s, *mdl.tokenizer, token_ids(prompt, s.n_vocab()), opts.params);
                 h->keep = opts.draft;
                 return h;
             }),
             py::arg("session"), py::arg("model"), py::arg("prompt"), py::arg("options"), py::keep_alive<1, 2>(),
             py::keep_alive<1, 3>())
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
        .def(
            "set_sampling",
            [](GeneratorHandle& h, const sample::SamplingParams& p) {
                h.locked([&p](model::Generator& g) { g.set_sampling(p); });
            },
            py::arg("sampling"), "The sampling-mode boundary: sample with these settings from the next token on.")
        .def("run", [](GeneratorHandle& h) { h.locked([](model::Generator& g) { g.run(); }); })
        .def("cancel", [](GeneratorHandle& h) { h.locked([](model::Generator& g) { g.cancel(); }); },
             "Ends the generation where it is (stop reason 'cancelled'); an engine drops it at its next step.")
        .def_property_readonly("done", [](GeneratorHandle& h) { return h.locked([](model::Generator& g) { return g.done(); }); })
        .def_property_readonly("tokens", [](GeneratorHandle& h) { return h.locked([](model::Generator& g) { return g.tokens(); }); })
        .def(
            "logprobs",
            [](GeneratorHandle& h, size_t start) -> py::object {
                auto [on, lps] = h.locked([start](model::Generator& g) {
                    const auto& all = g.logprobs();
                    const auto from = all.begin() + static_cast<std::ptrdiff_t>(std::min(start, all.size()));
                    return std::make_pair(g.logprobs_on(), std::vector<sample::TokenLogprob>(from, all.end()));
                });
                if (!on) return py::none();
                py::list out;
                for (const sample::TokenLogprob& t : lps) out.append(py::make_tuple(t.id, t.logprob, t.top));
                return out;
            },
            py::arg("start") = 0,
            "(id, logprob, [(id, logprob), ...]) of each token from `start` on; None without logprobs.")
        .def_property_readonly("text", [](GeneratorHandle& h) { return utf8_str(h.locked([](model::Generator& g) { return g.text(); })); })
        .def_property_readonly("stats", [](GeneratorHandle& h) {
            return stats_dict(h.locked([](model::Generator& g) { return g.stats(); }));
        });
}

}  // namespace

void register_generate(py::module_& m) {
    register_options(m);
    register_generator(m);
    register_engine(m);
}

}  // namespace ds4::bindings
