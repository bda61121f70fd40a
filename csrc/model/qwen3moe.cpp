// Qwen3-MoE: the Qwen3 decoder (qwen3.cpp: q/k norms, NEOX RoPE) whose FFNs are routed experts
// (moe.h): softmax over the router's logits, the top expert_used_count experts, their weights
// rescaled to sum to 1 unless expert_weights_norm says otherwise (llama.cpp assumes they are,
// as every released checkpoint's norm_topk_prob is). GGUF files hold every layer as MoE
// (llama.cpp's converter refuses mlp_only_layers); a layer without a router would load as dense.
// Defaults for absent keys (Qwen3MoeConfig): rope_theta 10000, max_position_embeddings 32768,
// rms_norm_eps 1e-6, num_key_value_heads 4, head_dim 128.
#include "model/decoder.h"

namespace ds4::model {

namespace {

void read_qwen3moe_keys(const gguf::File& file, HParams& hp) { read_moe(file, hp, true); }

}  // namespace

std::unique_ptr<Model> make_qwen3moe(std::shared_ptr<const gguf::File> file, const Options& opts) {
    Family f;
    f.arch = "qwen3moe";
    f.defaults.rope_base = 10000.0f;
    f.defaults.n_ctx_train = 32768;
    f.defaults.n_head_kv = 4;
    f.defaults.head_dim = 128;
    f.rope = backend::RopeMode::neox;
    f.qk_norm = true;
    f.read_keys = read_qwen3moe_keys;
    return make_decoder(std::move(file), opts, f);
}

}  // namespace ds4::model
