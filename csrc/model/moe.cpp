// Routed experts; see moe.h.
#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace ds4::model::moe {

using backend::Rows;

Weights Weights::load(const blocks::Loader& ld, int64_t n_embd, const MoeParams& m, int il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    Weights w;
    w.router = ld.matrix(p + "ffn_gate_inp.weight", n_embd, m.n_expert);
    w.gate = ld.stack(p + "ffn_gate_exps.weight", n_embd, m.n_ff, m.n_expert);
    w.up = ld.stack(p + "ffn_up_exps.weight", n_embd, m.n_ff, m.n_expert);
    w.down = ld.stack(p + "ffn_down_exps.weight", m.n_ff, n_embd, m.n_expert);
    if (m.n_ff_shared > 0) {
        w.shared.gate = ld.matrix(p + "ffn_gate_shexp.weight", n_embd, m.n_ff_shared);
        w.shared.up = ld.matrix(p + "ffn_up_shexp.weight", n_embd, m.n_ff_shared);
        w.shared.down = ld.matrix(p + "ffn_down_shexp.weight", m.n_ff_shared, n_embd);
        w.shared_gate = ld.row(p + "ffn_gate_inp_shexp.weight", n_embd);
    }
    return w;
}

void Router::route(const MoeParams& m, int64_t n) {
    const int64_t E = m.n_expert, K = m.n_used;
    order_.resize(static_cast<size_t>(E));
    chosen_.resize(static_cast<size_t>(n * K));
    chosen_w_.resize(static_cast<size_t>(n * K));
    for (int64_t r = 0; r < n; ++r) {
        float* p = logits_.data() + r * E;
        // Probabilities in float32, as transformers computes them.
        if (m.gating == Gating::softmax) {
            const float mx = *std::max_element(p, p + E);
            float sum = 0.0f;
            for (int64_t e = 0; e < E; ++e) sum += (p[e] = std::exp(p[e] - mx));
            for (int64_t e = 0; e < E; ++e) p[e] /= sum;
        } else {
            for (int64_t e = 0; e < E; ++e) p[e] = 1.0f / (1.0f + std::exp(-p[e]));
        }
        for (int64_t e = 0; e < E; ++e) order_[static_cast<size_t>(e)] = static_cast<int32_t>(e);
        // The K most probable, ties to the lower expert.
        std::partial_sort(order_.begin(), order_.begin() + K, order_.end(),
                          [p](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
        float total = 0.0f;
        for (int64_t k = 0; k < K; ++k) total += p[order_[static_cast<size_t>(k)]];
        for (int64_t k = 0; k < K; ++k) {
            const int32_t e = order_[static_cast<size_t>(k)];
            chosen_[static_cast<size_t>(r * K + k)] = e;
            chosen_w_[static_cast<size_t>(r * K + k)] = m.norm_weights ? p[e] / total : p[e];
        }
    }
    // Rows grouped by expert (a counting sort), ascending row order within each expert.
    first_.assign(static_cast<size_t>(E + 1), 0);
    for (int64_t i = 0; i < n * K; ++i) ++first_[static_cast<size_t>(chosen_[static_cast<size_t>(i)] + 1)];
    for (int64_t e = 0; e < E; ++e) first_[static_cast<size_t>(e + 1)] += first_[static_cast<size_t>(e)];
    rows_.resize(static_cast<size_t>(n * K));
    weights_.resize(static_cast<size_t>(n * K));
    next_.assign(first_.begin(), first_.end() - 1);
    for (int64_t i = 0; i < n * K; ++i) {
        const auto e = static_cast<size_t>(chosen_[static_cast<size_t>(i)]);
        const auto at = static_cast<size_t>(next_[e]++);
        rows_[at] = i / K;
        weights_[at] = chosen_w_[static_cast<size_t>(i)];
    }
}

void Router::run(backend::Backend& be, const Weights& w, const MoeParams& m, backend::Act act, Rows x, Rows out) {
    const int64_t n = x.n, d = x.dim;
    backend::Arena& arena = be.arena();
    // 1. the router's logits, to the host
    const Rows scores = arena.rows(n, m.n_expert);
    be.matmul(w.router, x, scores);
    logits_.resize(static_cast<size_t>(n * m.n_expert));
    be.download(logits_.data(), scores);
    route(m, n);
    // 2. each chosen expert over its rows
    int64_t most = 0;
    for (int64_t e = 0; e < m.n_expert; ++e) {
        most = std::max(most, first_[static_cast<size_t>(e + 1)] - first_[static_cast<size_t>(e)]);
    }
    const Rows xe = arena.rows(most, d), gate = arena.rows(most, m.n_ff), up = arena.rows(most, m.n_ff);
    const Rows ye = arena.rows(most, d);
    be.fill(out, 0.0f);
    for (int64_t e = 0; e < m.n_expert; ++e) {
        const int64_t i = first_[static_cast<size_t>(e)], c = first_[static_cast<size_t>(e + 1)] - i;
        if (c == 0) continue;
        const int64_t* rows = rows_.data() + i;
        be.gather(x, rows, xe.rows(0, c));
        be.matmul(w.gate.matrix(e), xe.rows(0, c), gate.rows(0, c));
        be.matmul(w.up.matrix(e), xe.rows(0, c), up.rows(0, c));
        be.glu(gate.rows(0, c), up.rows(0, c), act, gate.rows(0, c));
        be.matmul(w.down.matrix(e), gate.rows(0, c), ye.rows(0, c));
        be.scatter_add(ye.rows(0, c), rows, weights_.data() + i, out);
    }
    // 3. the shared expert, added last (as transformers adds it to the experts' sum)
    if (m.n_ff_shared > 0) {
        const Rows shared = arena.rows(n, d), shared_logit = arena.rows(n, 1);
        blocks::ffn(be, w.shared, act, x, shared);
        be.matmul(w.shared_gate, x, shared_logit);
        shared_w_.resize(static_cast<size_t>(n));
        be.download(shared_w_.data(), shared_logit);
        all_.resize(static_cast<size_t>(n));
        for (int64_t r = 0; r < n; ++r) {
            shared_w_[static_cast<size_t>(r)] = 1.0f / (1.0f + std::exp(-shared_w_[static_cast<size_t>(r)]));
            all_[static_cast<size_t>(r)] = r;
        }
        be.scatter_add(shared, all_.data(), shared_w_.data(), out);
    }
}

}  // namespace ds4::model::moe
