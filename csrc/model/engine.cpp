// Engine: gathering, running and dispatching one pass for many generations; see engine.h.
#include "model/engine.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace ds4::model {

namespace {

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Engine::Engine(std::shared_ptr<Model> model, int64_t max_rows)
    : model_(std::move(model)), max_rows_(max_rows) {
    if (max_rows_ < 1) throw std::invalid_argument("max_rows must be >= 1, got " + std::to_string(max_rows_));
}

void Engine::add(Generator& g) {
    if (&g.session().model() != model_.get()) throw std::invalid_argument("the generation's session is on another model");
    if (std::find(gens_.begin(), gens_.end(), &g) != gens_.end()) throw std::invalid_argument("the generation was added already");
    g.start_batched();
    const state::State& st = g.session().state();
    const auto n = static_cast<int64_t>(g.rows().size());
    if (st.n_past() + n > st.n_ctx()) {
        throw state::ContextOverflow("context overflow: the prompt needs " + std::to_string(st.n_past() + n) +
                                     " positions, n_ctx is " + std::to_string(st.n_ctx()));
    }
    if (!g.done()) gens_.push_back(&g);
}

bool Engine::step() {
    gens_.erase(std::remove_if(gens_.begin(), gens_.end(), [](Generator* g) { return g->done(); }), gens_.end());
    parts_.clear();
    seqs_.clear();
    tokens_.clear();
    out_.clear();
    margins_.clear();
    keeps_.clear();
    int64_t n_logits = 0, n_argmax = 0;
    const auto take = [&](Generator* g, int64_t n) {
        const std::vector<int32_t>& rows = g->rows();
        Part part{g, n, -1};
        out_.insert(out_.end(), static_cast<size_t>(n), Out::none);
        if (n == static_cast<int64_t>(rows.size())) {  // the last row: the generation needs its output
            if (g->wants_argmax()) {
                out_.back() = Out::argmax;
                part.out = n_argmax++;
            } else if (g->wants_shortlist()) {
                out_.back() = Out::shortlist;
                part.out = static_cast<int64_t>(margins_.size());
                margins_.push_back(g->shortlist_margin());
                keeps_.push_back(g->shortlist_keep());
            } else {
                out_.back() = Out::logits;
                part.out = n_logits++;
            }
        }
        tokens_.insert(tokens_.end(), rows.begin(), rows.begin() + n);
        seqs_.push_back({&g->session().state(), n, Attend::causal});
        parts_.push_back(part);
    };
    const auto decoding = [](const Generator* g) { return g->stats().n_generated > 0; };
    // Decode rows first (one each), then prompts within what is left of the pass.
    int64_t used = 0;
    // Round robin from where the last pass stopped, when more sessions decode than a pass takes.
    const size_t m = gens_.size();
    size_t seen = 0;
    for (; seen < m && used < max_rows_; ++seen) {
        Generator* g = gens_[(next_ + seen) % m];
        if (!decoding(g) || g->rows().empty()) continue;
        const state::State& st = g->session().state();
        if (st.n_past() + 1 > st.n_ctx()) {
            g->overflow();
            continue;
        }
        take(g, 1);
        ++used;
    }
    next_ = m > 0 ? (next_ + seen) % m : 0;
    for (Generator* g : gens_) {
        const auto left = static_cast<int64_t>(g->rows().size());
        if (decoding(g) || left == 0) continue;
        const int64_t n = std::min(left, max_rows_ - used);
        if (n <= 0) break;
        take(g, n);
        used += n;
    }
    const auto running = [&] { return std::any_of(gens_.begin(), gens_.end(), [](Generator* g) { return !g->done(); }); };
    if (parts_.empty()) return running();
    logits_.resize(static_cast<size_t>(n_logits * model_->hparams().n_vocab));
    argmax_.resize(static_cast<size_t>(n_argmax));
    if (lists_.size() < margins_.size()) lists_.resize(margins_.size());
    Request req;
    req.tokens = tokens_.data();
    req.seqs = seqs_.data();
    req.n_seqs = static_cast<int>(seqs_.size());
    req.out = out_.data();
    req.logits = logits_.data();
    req.argmax = argmax_.data();
    req.margins = margins_.data();
    req.keeps = keeps_.data();
    req.shortlists = lists_.data();
    const double t0 = now();
    model_->forward(req);
    const double seconds = now() - t0;
    ++passes_;
    const int64_t n_vocab = model_->hparams().n_vocab;
    const auto dispatch = [&](int64_t i) {
        const Part& p = parts_[static_cast<size_t>(i)];
        const bool argmax = p.g->wants_argmax(), listed = p.g->wants_shortlist();
        Shortlisted* list = p.out >= 0 && listed ? &lists_[static_cast<size_t>(p.out)] : nullptr;
        const float* row = p.out >= 0 && !argmax && !listed ? logits_.data() + p.out * n_vocab : nullptr;
        if (list && !list->list.ok) row = list->full.data();
        p.g->session().appended(p.g->rows().data(), p.n, row);
        p.g->fed(p.n, list ? nullptr : row, p.out >= 0 && argmax ? argmax_[static_cast<size_t>(p.out)] : -1, list,
                 seconds);
    };
    // Sampling a row over the vocabulary (and copying its logits) is ~1 ms per sampled row: spread
    // over the backend's threads when several rows sample (each generation touches only its own
    // session, sampler and text).
    if (n_logits + static_cast<int64_t>(margins_.size()) > 1) {
        model_->for_each(static_cast<int64_t>(parts_.size()), dispatch);
    } else {
        for (size_t i = 0; i < parts_.size(); ++i) dispatch(static_cast<int64_t>(i));
    }
    return running();
}

}  // namespace ds4::model
