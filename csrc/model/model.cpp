// Model: architecture dispatch, context and token checks around forward(); see model.h.
#include "model/model.h"

#include <algorithm>
#include <chrono>
#include <limits>
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
    const int64_t n_past = kv.n_past();
    kv.reserve(n_past + n);  // throws ContextOverflow before anything is written
    std::vector<int32_t> pos(static_cast<size_t>(n));
    std::iota(pos.begin(), pos.end(), static_cast<int32_t>(n_past));
    Batch b{tokens, pos.data(), n, kv, n_out, logits};
    b.argmax = ids;
    b.head_rows = head_rows;
    forward(b);
    kv.commit(n_past + n);
}

std::vector<double> Model::verify_costs(int max_rows) {
    std::lock_guard<std::mutex> lock(cost_mu_);
    if (static_cast<int>(verify_costs_.size()) < max_rows) {
        constexpr int kWarm = 32;  // positions before the timed passes
        auto kv = new_cache();
        std::vector<int32_t> tokens(static_cast<size_t>(kWarm + max_rows)), ids(tokens.size());
        for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7919 + 11) % hp_.n_vocab);
        eval_argmax(*kv, tokens.data(), kWarm, ids.data());
        std::vector<int> probe;
        for (int r = 1; r < max_rows; r *= 2) probe.push_back(r);
        probe.push_back(max_rows);
        // Each size is timed twice, a third time when the two disagree by more than a fifth, and
        // the fastest counts: one pass the machine stalled would otherwise bend the curve for the
        // model's lifetime (the scheduler refines only the sizes it uses, so an inflated cost(16)
        // would keep drafts short for good).
        const auto timed = [&](int rows) {
            const auto t0 = std::chrono::steady_clock::now();
            eval_argmax(*kv, tokens.data() + kWarm, rows, ids.data());
            kv->truncate(kWarm);
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        };
        std::vector<double> at(probe.size());
        for (size_t i = 0; i < probe.size(); ++i) {
            const double a = timed(probe[i]), b = timed(probe[i]);
            at[i] = std::min(a, b);
            if (std::max(a, b) > 1.2 * at[i]) at[i] = std::min(at[i], timed(probe[i]));
        }
        // Never cheaper for more rows.
        for (size_t i = 1; i < at.size(); ++i) at[i] = std::max(at[i], at[i - 1]);
        verify_costs_.assign(static_cast<size_t>(max_rows), 0.0);
        for (int r = 1; r <= max_rows; ++r) {
            const size_t hi = static_cast<size_t>(std::lower_bound(probe.begin(), probe.end(), r) - probe.begin());
            const size_t lo = hi == 0 ? 0 : hi - 1;
            const double f = probe[hi] == probe[lo] ? 0.0 : double(r - probe[lo]) / (probe[hi] - probe[lo]);
            verify_costs_[static_cast<size_t>(r - 1)] = probe[hi] == r ? at[hi] : at[lo] + f * (at[hi] - at[lo]);
        }
    }
    return {verify_costs_.begin(), verify_costs_.begin() + max_rows};
}

double Model::step_cost(int64_t head_rows) {
    std::lock_guard<std::mutex> lock(cost_mu_);
    const auto known = step_costs_.find(head_rows);
    if (known != step_costs_.end()) return known->second;
    constexpr int kWarm = 32, kSteps = 3;
    auto kv = new_cache();
    std::vector<int32_t> tokens(kWarm + kSteps), ids(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7919 + 11) % hp_.n_vocab);
    eval_argmax(*kv, tokens.data(), kWarm, ids.data(), -1, head_rows);
    double best = std::numeric_limits<double>::infinity();
    for (int i = 0; i < kSteps; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        eval_argmax(*kv, tokens.data() + kWarm + i, 1, ids.data(), -1, head_rows);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return step_costs_[head_rows] = best;
}

}  // namespace ds4::model
