// Qwen3-Next: a hybrid of gated DeltaNet layers (deltanet.h) and, every
// full_attention_interval-th layer, gated attention (each head's q followed by a gate; the
// heads' outputs times sigmoid(gate)) with q/k norms and partial NEOX RoPE
// (rope.dimension_count of each head); the FFNs are routed experts with a gated shared expert
// (moe.h). Every norm but the DeltaNet's gated one is Gemma-style 1 + w in transformers, stored
// with the 1 added (llama.cpp's converter); the FFN's pre-norm is post_attention_norm.
// Defaults for absent keys (Qwen3NextConfig): rope_theta 10000, max_position_embeddings 32768,
// rms_norm_eps 1e-6, num_key_value_heads 2, head_dim 256.
#include "model/decoder.h"

namespace ds4::model {

namespace {

void read_qwen3next_keys(const gguf::File& file, HParams& hp) {
    read_hybrid(file, hp, false);
    read_moe(file, hp, true);
}

}  // namespace

std::unique_ptr<Model> make_qwen3next(std::shared_ptr<const gguf::File> file, const Options& opts) {
    Family f;
    f.arch = "qwen3next";
    f.defaults.rope_base = 10000.0f;
    f.defaults.n_ctx_train = 32768;
    f.defaults.n_head_kv = 2;
    f.defaults.head_dim = 256;
    f.rope = backend::RopeMode::neox;
    f.qk_norm = true;
    f.ffn_norm = "post_attention_norm";
    f.read_keys = read_qwen3next_keys;
    return make_decoder(std::move(file), opts, f);
}

}  // namespace ds4::model
