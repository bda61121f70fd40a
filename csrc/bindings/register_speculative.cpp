// Speculation bindings for tests: the acceptance rules of speculative/verify.h, a simulation of
// verifying a drafted block against fixed target distributions, for statistical tests of the
// rule (deliberately wrong rules are available there only, to show the tests can fail), and the
// scheduler, to drive it with made-up timings.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings/register.h"
#include "sample/sampler.h"
#include "speculative/scheduler.h"
#include "speculative/verify.h"

namespace py = pybind11;

namespace ds4::bindings {

namespace {

using Rows = py::array_t<float, py::array::c_style | py::array::forcecast>;

// n_draws emitted sequences of k + 1 tokens when a draft of k tokens is verified against rows
// p[0..k] (p[i]: the target's distribution at position i, the same whatever came before): the
// accepted prefix, then the recovered token, then plain draws. The draft is `draft` (a
// deterministic proposer: one-hot q), or, given q (k rows), drawn afresh from q for every
// sequence (a sampling proposer). rule "exact" is speculative/verify.h; the deliberately wrong rules:
// "no-residual" draws the recovered token from p itself, "one-hot-residual" accepts by p / q but
// recovers as if the draft were deterministic (from p without the draft). (Ignoring q altogether,
// accepting with p(d) and recovering from p without d, is still exact, only accepts less.)
py::array_t<int32_t> simulate(const Rows& p, const std::vector<int32_t>& draft, int64_t n_draws, uint64_t seed,
                              const std::string& rule, const std::optional<Rows>& q) {
    if (p.ndim() != 2) throw py::value_error("p must be 2-D (k + 1, n_vocab)");
    const auto n = static_cast<int32_t>(p.shape(1));
    const int64_t k = q ? q->shape(0) : static_cast<int64_t>(draft.size());
    if (q && (q->ndim() != 2 || q->shape(1) != n)) throw py::value_error("q must be 2-D (k, n_vocab)");
    if (q && !draft.empty()) throw py::value_error("give a fixed draft or q to draw it from, not both");
    if (p.shape(0) != k + 1) throw py::value_error("p needs k + 1 rows for a draft of k tokens");
    if (rule != "exact" && rule != "no-residual" && rule != "one-hot-residual") {
        throw py::value_error("rule must be 'exact', 'no-residual' or 'one-hot-residual'");
    }
    for (int32_t d : draft)
        if (d < 0 || d >= n) throw py::value_error("draft token outside the vocabulary");
    py::array_t<int32_t> out({static_cast<py::ssize_t>(n_draws), static_cast<py::ssize_t>(k + 1)});
    int32_t* o = out.mutable_data();
    const float* rows = p.data();
    std::vector<float> res(static_cast<size_t>(n));
    sample::SamplingParams sp;  // only its draws are used: the walk of Sampler::sample_from
    sp.temperature = 1.0f;
    sp.seed = seed;
    sp.has_seed = true;
    sample::Sampler draws(sp, n);
    for (int64_t s = 0; s < n_draws; ++s, o += k + 1) {
        bool drafting = true;
        for (int64_t i = 0; i <= k; ++i) {
            const float* pi = rows + i * n;
            if (drafting && i < k) {
                const float* qi = q ? q->data() + i * n : nullptr;
                const int32_t d = qi ? draws.sample_from(qi, n) : draft[static_cast<size_t>(i)];
                if (speculative::accept_exact(pi, qi, d, draws.uniform())) {
                    o[i] = d;
                    continue;
                }
                drafting = false;
                const float* residual_q = rule == "one-hot-residual" ? nullptr : qi;
                if (rule != "no-residual" && speculative::residual(pi, residual_q, d, n, res.data())) {
                    o[i] = draws.sample_from(res.data(), n);
                    continue;
                }
            }
            o[i] = draws.sample_from(pi, n);
        }
    }
    return out;
}

}  // namespace

void register_speculative(py::module_& m) {
    m.def("spec_accept_exact", [](const Rows& p, int32_t d, double u) {
        if (p.ndim() != 1 || d < 0 || d >= p.shape(0)) throw py::value_error("p must be 1-D and d inside it");
        return speculative::accept_exact(p.data(), nullptr, d, u);
    }, py::arg("p"), py::arg("d"), py::arg("u"), "Whether a one-hot draft d is accepted for the uniform draw u.");
    m.def("spec_residual", [](const Rows& p, int32_t d) {
        if (p.ndim() != 1 || d < 0 || d >= p.shape(0)) throw py::value_error("p must be 1-D and d inside it");
        py::array_t<float> out(p.shape(0));
        speculative::residual(p.data(), nullptr, d, static_cast<int32_t>(p.shape(0)), out.mutable_data());
        return out;
    }, py::arg("p"), py::arg("d"), "The weights the recovered token is drawn from after rejecting d.");
    m.def("spec_simulate", &simulate, py::arg("p"), py::arg("draft"), py::arg("n_draws"), py::arg("seed"),
          py::arg("rule") = "exact", py::arg("q") = std::nullopt, "Emitted sequences of verifying `draft` against fixed rows p (tests only).");
    // The scheduler trusts its caller's indices; the binding checks them.
    struct Sched {
        speculative::Scheduler s;
        speculative::Scheduler& at(int p, int k = 0) {
            const int n = s.n_proposers();
            if (p < 0 || p >= n) throw py::index_error("proposer " + std::to_string(p) + " outside [0, " + std::to_string(n) + ")");
            if (k < 0 || k > s.n_max()) throw py::value_error("k must be in [0, n_max]");
            return s;
        }
    };
    py::class_<Sched>(m, "SpecScheduler", "The speculation scheduler (speculative/scheduler.h), for tests.")
        .def(py::init([](int n_max, std::vector<double> cost, int n) {
                 if (n < 1) throw py::value_error("n_proposers must be >= 1");
                 return Sched{speculative::Scheduler(n_max, std::move(cost), n)};
             }),
             py::arg("n_max"), py::arg("cost"), py::arg("n_proposers"))
        .def("pick", [](Sched& s, int p, int available, double draft_cost, double catch_up, double draft_fixed) {
                 return s.at(p).pick(p, available, draft_cost, catch_up, draft_fixed);
             }, py::arg("p"), py::arg("available"), py::arg("draft_cost") = 0.0, py::arg("catch_up") = 0.0,
             py::arg("draft_fixed") = 0.0)
        .def("cut", [](Sched& s, int p, int k, const std::vector<float>& confidence) {
                 return s.at(p, k).cut(p, k, confidence);
             }, py::arg("p"), py::arg("k"), py::arg("confidence"))
        .def("timed_pass", [](Sched& s, int rows, double seconds) { s.s.timed_pass(rows, seconds); },
             py::arg("rows"), py::arg("seconds"))
        .def("verified", [](Sched& s, int p, int k, int accepted, double seconds, double caught_up) {
                 if (accepted < 0 || accepted > k) throw py::value_error("accepted must be in [0, k]");
                 s.at(p, k).verified(p, k, accepted, seconds, caught_up);
             }, py::arg("p"), py::arg("k"), py::arg("accepted"), py::arg("seconds") = 0.0, py::arg("caught_up") = 0.0)
        .def("set_horizon", [](Sched& s, int64_t tokens) { s.s.set_horizon(tokens); }, py::arg("tokens"))
        .def("invested", [](Sched& s) { return s.s.invested(); })
        .def("slowdown", [](Sched& s, int p) { return s.at(p).slowdown(p); }, py::arg("p"))
        .def("expected_tokens", [](Sched& s, int p, int k) { return s.at(p, k).expected_tokens(p, k); },
             py::arg("p"), py::arg("k"))
        .def("cost", [](Sched& s, int rows) {
                 if (rows < 1 || rows > s.s.n_max() + 1) throw py::value_error("rows must be in [1, n_max + 1]");
                 return s.s.cost(rows);
             }, py::arg("rows"))
        .def("balance", [](Sched& s, std::optional<int> p) { return p ? s.at(*p).balance(*p) : s.s.balance(); },
             py::arg("p") = std::nullopt)
        .def("allowance", [](Sched& s) { return s.s.allowance(); });
}

}  // namespace ds4::bindings
