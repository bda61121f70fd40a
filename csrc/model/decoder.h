// The plain pre-norm decoder that llama, qwen2 and qwen3 share:
//   x = embed(tokens)
//   per layer: x += attn(rms_norm(x)); x += silu_ffn(rms_norm(x))
//   logits = output(rms_norm(x))
// Each family's file says how its attention differs (biases, q/k norms, RoPE layout) through
// DecoderConfig and gives the transformers defaults for absent keys.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "model/model.h"

namespace ds4::model {

struct DecoderConfig {
    const char* arch;                 // for error messages ("required by <arch>")
    backend::RopeMode rope;
    bool qk_norm = false;             // per-head RMSNorm on q and k before RoPE (qwen3)
    bool bias = false;                // q/k/v biases; present in the file decides when false
    bool rope_freqs = false;          // optional rope_freqs.weight (llama 3 frequency scaling)
};

std::unique_ptr<Model> make_decoder(std::shared_ptr<const gguf::File> file, const Options& opts,
                                    const ArchDefaults& defaults, const DecoderConfig& cfg);

}  // namespace ds4::model
