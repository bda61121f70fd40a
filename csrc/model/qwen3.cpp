// Qwen3 (dense): the Llama decoder (decoder.h) with a per-head RMSNorm on q and k before RoPE
// (no q/k/v biases) and NEOX RoPE (GGUF keeps HF's half-split q/k layout for this family).
// Defaults for absent keys (Qwen3Config): rope_theta 10000, max_position_embeddings 32768,
// rms_norm_eps 1e-6, num_key_value_heads 32, head_dim 128. The optional
// sliding window (use_sliding_window, off in every released model) is not implemented.
#include "model/decoder.h"

namespace ds4::model {

std::unique_ptr<Model> make_qwen3(std::shared_ptr<const gguf::File> file, const Options& opts) {
    Family f;
    f.arch = "qwen3";
    f.defaults.rope_base = 10000.0f;
    f.defaults.n_ctx_train = 32768;
    f.defaults.n_head_kv = 32;
    f.defaults.head_dim = 128;
    f.rope = backend::RopeMode::neox;
    f.qk_norm = true;
    return make_decoder(std::move(file), opts, f);
}

}  // namespace ds4::model
