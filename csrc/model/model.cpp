// Model: architecture dispatch, context and token checks around forward(); see model.h.
#include "model/model.h"

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
      backend_(backend::make_cpu_backend(opts.threads)) {
    backend_->set_int16_activations(opts.int16_activations);
    backend_->set_repack(opts.repack);
}

std::unique_ptr<state::KvCache> Model::new_cache() const {
    return std::make_unique<state::KvCache>(hp_.n_layer, hp_.kv_dim(), n_ctx_, opts_.kv_type);
}

void Model::eval(state::KvCache& kv, const int32_t* tokens, int64_t n, float* logits, int64_t n_out) {
    run(kv, tokens, n, n_out, logits, nullptr);
}

void Model::eval_argmax(state::KvCache& kv, const int32_t* tokens, int64_t n, int32_t* ids, int64_t n_out) {
    run(kv, tokens, n, n_out, nullptr, ids);
}

void Model::run(state::KvCache& kv, const int32_t* tokens, int64_t n, int64_t n_out, float* logits, int32_t* ids) {
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
    const int64_t n_past = kv.n_past();
    kv.reserve(n_past + n);  // throws ContextOverflow before anything is written
    std::vector<int32_t> pos(static_cast<size_t>(n));
    std::iota(pos.begin(), pos.end(), static_cast<int32_t>(n_past));
    Batch b{tokens, pos.data(), n, kv, n_out, logits};
    b.argmax = ids;
    forward(b);
    kv.commit(n_past + n);
}

}  // namespace ds4::model
