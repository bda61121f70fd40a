// Qwen2 / Qwen2.5: the Llama decoder (decoder.h) with biases on the q/k/v projections and
// NEOX RoPE (GGUF keeps HF's half-split q/k layout for this family).
// Defaults for absent keys (Qwen2Config): rope_theta 10000, max_position_embeddings 32768,
// rms_norm_eps 1e-6, num_key_value_heads 32, head_dim = hidden / heads. Qwen2's optional
// sliding window (use_sliding_window, off in every released model) is not implemented.
#include "model/decoder.h"

namespace ds4::model {

std::unique_ptr<Model> make_qwen2(std::shared_ptr<const gguf::File> file, const Options& opts) {
    Family f;
    f.arch = "qwen2";
    f.defaults.rope_base = 10000.0f;
    f.defaults.n_ctx_train = 32768;
    f.defaults.n_head_kv = 32;
    f.rope = backend::RopeMode::neox;
    f.bias = true;
    return make_decoder(std::move(file), opts, f);
}

}  // namespace ds4::model
