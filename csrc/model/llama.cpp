// Llama (Llama 2/3, SmolLM2, ...): pre-norm decoder, SiLU-gated FFN, RoPE (decoder.h).
//
// llama.cpp's converter permutes the rows of attn_q / attn_k so that HF's half-split rotary
// layout becomes interleaved pairs: the "normal" RoPE mode reproduces HF's rotate_half.
// Llama 3 frequency scaling arrives as the rope_freqs tensor (per-pair divisors).
// Defaults for absent keys (LlamaConfig): rope_theta 10000, max_position_embeddings 2048,
// rms_norm_eps 1e-6, num_key_value_heads = heads, head_dim = hidden / heads.
#include "model/decoder.h"

namespace ds4::model {

std::unique_ptr<Model> make_llama(std::shared_ptr<const gguf::File> file, const Options& opts) {
    Family f;
    f.arch = "llama";
    f.defaults.rope_base = 10000.0f;
    f.defaults.n_ctx_train = 2048;
    f.rope = backend::RopeMode::normal;
    f.rope_freqs = true;
    return make_decoder(std::move(file), opts, f);
}

}  // namespace ds4::model
