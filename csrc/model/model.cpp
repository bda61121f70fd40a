// Model: architecture dispatch, context and token checks around forward(); see model.h.
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
    {"gemma3", make_gemma3},
};

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
      backend_(backend::make_cpu_backend(opts.threads)),
      work_(PassWork::of(*file_, hp_.n_vocab)) {
    backend_->set_int16_activations(opts.int16_activations);
    backend_->set_repack(opts.repack);
    backend_->set_defer_packing(opts.defer_pack);
}

std::unique_ptr<state::KvCache> Model::new_cache() const {
    return std::make_unique<state::KvCache>(hp_.n_layer, hp_.kv_dim(), n_ctx_, opts_.kv_type);
}

void Model::eval(state::KvCache& kv, const int32_t* tokens, int64_t n, float* logits, int64_t n_out, int64_t head_rows) {
    run(kv, tokens, n, n_out, logits, nullptr, head_rows);
}

void Model::eval_argmax(state::KvCache& kv, const int32_t* tokens, int64_t n, int32_t* ids, int64_t n_out,
                        int64_t head_rows) {
    run(kv, tokens, n, n_out, nullptr, ids, head_rows);
}

void Model::run(state::KvCache& kv, const int32_t* tokens, int64_t n, int64_t n_out, float* logits, int32_t* ids,
                int64_t head_rows) {
    for (int64_t i = 0; i < n; ++i) {
        if (tokens[i] < 0 || tokens[i] >= hp_.n_vocab) {
            throw Error("token id " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                        " is outside the vocabulary [0, " + std::to_string(hp_.n_vocab) + ")");
        }
    }
    if (n == 0) return;
    if (n_out < 0) n_out = n;
    if (n_out == 0 || n_out > n) throw Error("n_out must be in [1, " + std::to_string(n) + "], got " + std::to_string(n_out));
    std::lock_guard<std::mutex> lock(mu_);
    if (backend_->packing_pending()) backend_->finish_packing();
    const int64_t n_past = kv.n_past();
    kv.reserve(n_past + n);  // throws ContextOverflow before anything is written
    std::vector<int32_t> pos(static_cast<size_t>(n));
    std::iota(pos.begin(), pos.end(), static_cast<int32_t>(n_past));
    Batch b{tokens, pos.data(), n, kv, n_out, logits};
    b.argmax = ids;
    b.head_rows = head_rows;
    forward(b);
    kv.commit(n_past + n);
    ++passes_;
    rows_ += static_cast<uint64_t>(n);
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
