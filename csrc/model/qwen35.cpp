// Qwen3.5 / 3.6 (dense: qwen35; MoE: qwen35moe): the Qwen3-Next hybrid (qwen3next.cpp) with
// b and a projected apart (ssm_beta, ssm_alpha) and, in llama.cpp's files, value heads tiled
// over the key heads (head h reads key head h % n_k). Its attention's multimodal RoPE
// (rope.dimension_sections) rotates every section by the same position for text, which is the
// partial NEOX RoPE of rope.dimension_count. qwen35 has dense FFNs; qwen35moe routed experts with
// a gated shared expert. Defaults for absent keys (Qwen3_5TextConfig): rope_theta 10000,
// max_position_embeddings 32768, rms_norm_eps 1e-6, num_key_value_heads 2, head_dim 256.
#include "model/decoder.h"

namespace ds4::model {

namespace {

void read_qwen35_keys(const gguf::File& file, HParams& hp) {
    read_hybrid(file, hp, true);
    read_moe(file, hp, true);
}

Family qwen35_family(const char* arch) {
    Family f;
    f.arch = arch;
    f.defaults.rope_base = 10000.0f;
    f.defaults.n_ctx_train = 32768;
    f.defaults.n_head_kv = 2;
    f.defaults.head_dim = 256;
    f.rope = backend::RopeMode::neox;
    f.qk_norm = true;
    f.ffn_norm = "post_attention_norm";
    f.read_keys = read_qwen35_keys;
    return f;
}

}  // namespace

std::unique_ptr<Model> make_qwen35(std::shared_ptr<const gguf::File> file, const Options& opts) {
    return make_decoder(std::move(file), opts, qwen35_family("qwen35"));
}

std::unique_ptr<Model> make_qwen35moe(std::shared_ptr<const gguf::File> file, const Options& opts) {
    return make_decoder(std::move(file), opts, qwen35_family("qwen35moe"));
}

}  // namespace ds4::model
