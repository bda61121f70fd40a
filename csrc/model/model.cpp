// Model: architecture dispatch, the checks and layout of a forward request; see model.h.
#include "model/model.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace ds4::model {

namespace {

using Builder = std::unique_ptr<Model> (*)(std::shared_ptr<const gguf::File>, const Options&);

struct Arch {
    const char* name;  // general.architecture
    Builder build;
};

constexpr Arch kArchs[] = {
    {"llama", make_llama},
    {"qwen2", make_qwen2},
    {"qwen3", make_qwen3},
    {"qwen3moe", make_qwen3moe},
    {"qwen3next", make_qwen3next},
    {"qwen35", make_qwen35},
    {"qwen35moe", make_qwen35moe},
    {"gemma3", make_gemma3},
};

std::unique_ptr<backend::Backend> make_backend(const Options& opts) {
    if (opts.backend == "cpu") return backend::make_cpu_backend(opts.cpu);
    throw Error("backend '" + opts.backend + "' is not available (available: cpu)");
}

}  // namespace

std::shared_ptr<Model> Model::load(std::shared_ptr<const gguf::File> file, const Options& opts) {
    const std::string arch = file->get("general.architecture").as_string();
    for (const Arch& a : kArchs) {
        if (arch == a.name) return std::shared_ptr<Model>(a.build(std::move(file), opts));
    }
    std::string known;
    for (const Arch& a : kArchs) known += std::string(known.empty() ? "" : ", ") + a.name;
    throw Error(file->path() + ": architecture '" + arch + "' is not supported (supported: " + known + ")");
}

Model::Model(std::shared_ptr<const gguf::File> file, HParams hp, const Options& opts)
    : file_(std::move(file)), hp_(std::move(hp)), opts_(opts),
      n_ctx_(opts.n_ctx > 0 ? opts.n_ctx : hp_.n_ctx_train),
      backend_(make_backend(opts)),
      work_(PassWork::of(*file_, hp_.n_vocab)) {}

std::unique_ptr<state::Slot> Model::make_slot(int layer) const {
    const LayerParams& L = hp_.layers[static_cast<size_t>(layer)];
    return std::make_unique<state::KvSlot>(L.kv_dim(), n_ctx_, opts_.kv_type, *backend_);
}

const Identity& Model::identity() const {
    std::call_once(identity_once_, [this] { identity_ = identity_of(*file_); });
    return identity_;
}

std::unique_ptr<state::State> Model::new_state() const {
    std::vector<std::unique_ptr<state::Slot>> slots;
    for (int il = 0; il < n_slots(); ++il) slots.push_back(make_slot(il));
    return std::make_unique<state::State>(std::move(slots), n_ctx_, this);
}

void Model::mtp(state::State& st, const MtpRows& r) {
    if (!has_mtp()) throw Error(file_->path() + ": the model has no MTP block");
    if (st.owner() != this) throw Error("mtp: the state belongs to another model");
    if (r.n < 1 || r.pos0 < 0 || r.pos0 + r.n > n_ctx_) {
        throw Error("mtp: positions " + std::to_string(r.pos0) + ".." + std::to_string(r.pos0 + r.n - 1) +
                    " must lie in the context [0, " + std::to_string(n_ctx_) + ")");
    }
    if (r.n_out > r.n) throw Error("mtp: n_out " + std::to_string(r.n_out) + " exceeds the " + std::to_string(r.n) + " rows");
    check_tokens(r.tokens, r.n);
    std::lock_guard<std::mutex> lock(mu_);
    if (backend_->packing_pending()) backend_->finish_packing();
    st.slot(hp_.n_layer)->reserve(r.pos0 + r.n);
    backend_->arena().reset();
    run_mtp(st, r);
}

void Model::lend(const std::function<void(const Lent&)>& fn) {
    std::lock_guard<std::mutex> lock(mu_);
    if (backend_->packing_pending()) backend_->finish_packing();
    backend_->arena().reset();
    fn(lent());
}

int64_t Model::rollback(state::State& st, int64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    backend_->arena().reset();
    return st.rollback(n);
}

void Model::check_tokens(const int32_t* tokens, int64_t n) const {
    for (int64_t i = 0; i < n; ++i) {
        if (tokens[i] < 0 || tokens[i] >= hp_.n_vocab) {
            throw Error("token id " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                        " is outside the vocabulary [0, " + std::to_string(hp_.n_vocab) + ")");
        }
    }
}

int64_t Model::check(const Request& req) const {
    if (req.n_seqs < 0 || (req.n_seqs > 0 && !req.seqs)) throw Error("forward: no sequences given");
    for (int i = 0; i < req.n_seqs; ++i) {
        const SeqRows& s = req.seqs[i];
        // The message is made only on failure: a decode step allocates nothing.
        const auto fail = [i](const std::string& what) { throw Error("forward: sequence " + std::to_string(i) + what); };
        if (!s.state) fail(" has no state");
        if (s.state->owner() != this) fail("'s state belongs to another model");
        if (s.n < 1) fail(" has " + std::to_string(s.n) + " rows");
        for (int j = 0; j < i; ++j) {
            if (req.seqs[j].state == s.state) fail(" repeats sequence " + std::to_string(j) + "'s state");
        }
    }
    const int64_t n = req.rows();
    if (n == 0) return 0;
    if (!req.tokens == !req.embeddings) throw Error("forward: give either token ids or input embeddings");
    if (req.tokens) check_tokens(req.tokens, n);
    int64_t n_logits = req.out ? 0 : n, n_argmax = 0, n_shortlist = 0;
    for (int64_t i = 0; req.out && i < n; ++i) {
        n_logits += req.out[i] == Out::logits;
        n_argmax += req.out[i] == Out::argmax;
        n_shortlist += req.out[i] == Out::shortlist;
    }
    if (n_logits > 0 && !req.logits) throw Error("forward: rows return logits but no logits buffer was given");
    if (n_argmax > 0 && !req.argmax) throw Error("forward: rows return argmax but no argmax buffer was given");
    if (n_shortlist > 0 && (!req.margins || !req.shortlists)) {
        throw Error("forward: rows return shortlists but no margins or shortlists were given");
    }
    for (int64_t i = 0; i < n_shortlist; ++i) {
        if (!(req.margins[i] >= 0.0f)) throw Error("forward: a shortlist's margin must be >= 0");
    }
    if (n_shortlist > 0 && req.head_rows > 0) throw Error("forward: shortlists score the whole vocabulary (head_rows 0)");
    for (int c = 0; c < req.n_capture; ++c) {
        const int layer = req.capture_layers[c];
        if (layer < 0 || layer > hp_.n_layer) {
            throw Error("forward: capture layer " + std::to_string(layer) + " is outside [0, " +
                        std::to_string(hp_.n_layer) + "]");
        }
    }
    if (req.n_capture > 0 && !req.hidden) throw Error("forward: captures asked for but no hidden buffer was given");
    return n;
}

void Model::forward(const Request& req) {
    std::lock_guard<std::mutex> lock(mu_);
    forward_locked(req);
}

void Model::forward_locked(const Request& req) {
    const int64_t n = check(req);
    if (n == 0) return;
    if (backend_->packing_pending()) backend_->finish_packing();
    for (int i = 0; i < req.n_seqs; ++i) {  // throws ContextOverflow before anything is written
        req.seqs[i].state->reserve(req.seqs[i].state->n_past() + req.seqs[i].n);
    }
    pos_.resize(static_cast<size_t>(n));
    last_.resize(static_cast<size_t>(n));
    first_.assign(1, 0);
    n_past_.clear();
    for (int i = 0; i < req.n_seqs; ++i) {
        const SeqRows& s = req.seqs[i];
        const int64_t f = first_.back(), p0 = s.state->n_past();
        for (int64_t r = 0; r < s.n; ++r) {
            pos_[static_cast<size_t>(f + r)] = static_cast<int32_t>(p0 + r);
            last_[static_cast<size_t>(f + r)] = static_cast<int32_t>(s.attend == Attend::block ? p0 + s.n - 1 : p0 + r);
        }
        first_.push_back(f + s.n);
        n_past_.push_back(p0);
    }
    out_logits_.clear();
    out_argmax_.clear();
    out_shortlist_.clear();
    captured_.clear();
    for (int64_t r = 0; r < n; ++r) {
        const Out o = req.out ? req.out[r] : Out::logits;
        if (o == Out::logits) out_logits_.push_back(r);
        if (o == Out::argmax) out_argmax_.push_back(r);
        if (o == Out::shortlist) out_shortlist_.push_back(r);
        if (req.n_capture > 0 && (!req.capture_rows || req.capture_rows[r])) captured_.push_back(r);
    }
    const Pass pass{req, n, pos_.data(), last_.data(), first_.data(), n_past_.data(),
                    out_logits_.data(), static_cast<int64_t>(out_logits_.size()),
                    out_argmax_.data(), static_cast<int64_t>(out_argmax_.size()),
                    out_shortlist_.data(), static_cast<int64_t>(out_shortlist_.size()),
                    captured_.data(), static_cast<int64_t>(captured_.size())};
    backend_->arena().reset();
    run(pass);
    for (int i = 0; i < req.n_seqs; ++i) {
        const SeqRows& s = req.seqs[i];
        if (s.attend == Attend::causal) s.state->commit(n_past_[static_cast<size_t>(i)] + s.n);
    }
    ++passes_;
    rows_ += static_cast<uint64_t>(n);
}

void Model::eval(state::State& st, const int32_t* tokens, int64_t n, float* logits, int64_t n_out, int64_t head_rows,
                 const Captures& cap) {
    eval_one(st, tokens, n, n_out, logits, nullptr, head_rows, cap);
}

void Model::eval_argmax(state::State& st, const int32_t* tokens, int64_t n, int32_t* ids, int64_t n_out,
                        int64_t head_rows, const Captures& cap) {
    eval_one(st, tokens, n, n_out, nullptr, ids, head_rows, cap);
}

void Model::eval_shortlist(state::State& st, const int32_t* tokens, int64_t n, float margin, int32_t keep,
                           Shortlisted* out, const Captures& cap) {
    if (n == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    eval_out_.assign(static_cast<size_t>(n), Out::none);
    eval_out_.back() = Out::shortlist;
    const SeqRows seq{&st, n, Attend::causal};
    Request req = one(seq, tokens, cap);
    req.margins = &margin;
    req.keeps = &keep;
    req.shortlists = out;
    forward_locked(req);
}

Request Model::one(const SeqRows& seq, const int32_t* tokens, const Captures& cap) const {
    Request req = Request::of(seq, tokens);
    req.out = eval_out_.data();
    if (!cap.empty()) {
        req.capture_layers = cap.layers;
        req.n_capture = cap.n;
        req.hidden = cap.hidden;
    }
    return req;
}

void Model::head_values(const backend::Shortlist& s, const int32_t* ids, int64_t n, float* y) {
    if (!s.ok) throw Error("head_values: the row was not shortlisted");
    backend_->matmul_ids(lent().output, s.x.data(), ids, n, y);
}

void Model::eval_one(state::State& st, const int32_t* tokens, int64_t n, int64_t n_out, float* logits, int32_t* ids,
                     int64_t head_rows, const Captures& cap) {
    if (n == 0) return;
    if (n_out < 0) n_out = n;
    if (n_out == 0 || n_out > n) throw Error("n_out must be in [1, " + std::to_string(n) + "], got " + std::to_string(n_out));
    std::lock_guard<std::mutex> lock(mu_);
    eval_out_.assign(static_cast<size_t>(n), Out::none);  // reused: a decode step allocates nothing here
    std::fill(eval_out_.end() - n_out, eval_out_.end(), ids ? Out::argmax : Out::logits);
    const SeqRows seq{&st, n, Attend::causal};
    Request req = one(seq, tokens, cap);
    req.logits = logits;
    req.argmax = ids;
    req.head_rows = head_rows;
    forward_locked(req);
}

void Model::eval_captures(state::State& st, const int32_t* tokens, int64_t n, const Captures& cap) {
    if (n == 0) return;
    const std::vector<Out> none(static_cast<size_t>(n), Out::none);
    const SeqRows seq{&st, n, Attend::causal};
    Request req = Request::of(seq, tokens);
    req.out = none.data();
    req.capture_layers = cap.layers;
    req.n_capture = cap.n;
    req.hidden = cap.hidden;
    forward(req);
}

PassTimes Model::pass_times(bool argmax) const {
    std::lock_guard<std::mutex> lock(times_mu_);
    return times_[argmax ? 1 : 0];
}

void Model::set_pass_times(bool argmax, PassTimes t) {
    std::lock_guard<std::mutex> lock(times_mu_);
    times_[argmax ? 1 : 0] = std::move(t);
}

std::vector<double> Model::extra_row_seconds(int max_rows, double* probe_macs) {
    std::lock_guard<std::mutex> lock(mu_);  // the probe runs on the backend's threads
    return model::extra_row_seconds(*backend_, work_, max_rows, probe_macs);
}

}  // namespace ds4::model
