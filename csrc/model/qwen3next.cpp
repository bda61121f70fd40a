// Qwen3-Next (qwen3next) and its successors Qwen3.5 / 3.6 (qwen35 dense, qwen35moe): hybrids of
// gated DeltaNet layers (deltanet.h) and, every full_attention_interval-th layer, gated attention
// (each head's q followed by a gate; the heads' outputs times sigmoid(gate)) with q/k norms and
// partial NEOX RoPE (rope.dimension_count of each head); the FFNs are routed experts with a gated
// shared expert (moe.h), or dense (qwen35). Every norm but the DeltaNet's gated one is
// Gemma-style 1 + w in transformers, stored with the 1 added (llama.cpp's converter); the FFN's
// pre-norm is post_attention_norm.
//
// Qwen3.5 differs in its files only: b and a projected apart (ssm_beta, ssm_alpha, where
// qwen3next fuses them per key-head group in ssm_ba) and value heads tiled over the key heads
// (head h reads key head h % n_k; llama.cpp's converter reorders them so). Its multimodal RoPE
// (rope.dimension_sections) rotates every section by the same position for text, which is the
// partial NEOX RoPE above.
// Defaults for absent keys (Qwen3NextConfig, Qwen3_5TextConfig): rope_theta 10000,
// max_position_embeddings 32768, rms_norm_eps 1e-6, num_key_value_heads 2, head_dim 256.
#include "model/decoder.h"

namespace ds4::model {

namespace {

void read_qwen3next_keys(const gguf::File& file, HParams& hp) {
    read_hybrid(file, hp, false);
    read_moe(file, hp, true);
}

void read_qwen35_keys(const gguf::File& file, HParams& hp) {
    read_hybrid(file, hp, true);
    read_moe(file, hp, true);
}

Family hybrid_family(const char* arch, void (*read_keys)(const gguf::File&, HParams&)) {
    Family f;
    f.arch = arch;
    f.defaults.rope_base = 10000.0f;
    f.defaults.n_ctx_train = 32768;
    f.defaults.n_head_kv = 2;
    f.defaults.head_dim = 256;
    f.rope = backend::RopeMode::neox;
    f.qk_norm = true;
    f.ffn_norm = "post_attention_norm";
    f.read_keys = read_keys;
    return f;
}

}  // namespace

std::unique_ptr<Model> make_qwen3next(std::shared_ptr<const gguf::File> file, const Options& opts) {
    return make_decoder(std::move(file), opts, hybrid_family("qwen3next", read_qwen3next_keys));
}

std::unique_ptr<Model> make_qwen35(std::shared_ptr<const gguf::File> file, const Options& opts) {
    return make_decoder(std::move(file), opts, hybrid_family("qwen35", read_qwen35_keys));
}

std::unique_ptr<Model> make_qwen35moe(std::shared_ptr<const gguf::File> file, const Options& opts) {
    return make_decoder(std::move(file), opts, hybrid_family("qwen35moe", read_qwen35_keys));
}

}  // namespace ds4::model
