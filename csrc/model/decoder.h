// The decoder every supported architecture is: a list of layers, each with its own parameters
// (hparams.h's LayerParams), built from the shared blocks (blocks.h):
//   x = embed(tokens) (or the input embeddings given)
//   per layer: x += [post_norm] mixer(norm(x)); x += [post_norm] ffn(norm(x)): the mixer
//              attention (optionally gated) or a gated DeltaNet (deltanet.h) per the layer's
//              LayerKind, the FFN gated or routed experts (moe.h) per its FfnKind
//   logits = output(norm(x))
// An architecture's file is a Family: what it changes (q/k norms, biases, RoPE layout, sandwich
// norms, activation, embedding scale) and the keys of its own it reads into the layers.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "model/model.h"

namespace ds4::model {

struct Family {
    const char* arch = "";            // for error messages ("required by <arch>")
    ArchDefaults defaults;            // transformers' values for absent keys
    backend::RopeMode rope = backend::RopeMode::normal;
    bool qk_norm = false;             // per-head RMSNorm on q and k before RoPE (qwen3, gemma3)
    bool bias = false;                // q/k/v biases; when false, present in the file decides
    bool rope_freqs = false;          // optional rope_freqs.weight (llama 3 frequency scaling)
    bool sandwich_norms = false;      // RMSNorm of the attention's and the FFN's outputs too (gemma3)
    backend::Act act = backend::Act::silu;
    bool scale_embeddings = false;    // embeddings times sqrt(n_embd) (gemma)
    const char* ffn_norm = "ffn_norm";  // the FFN's pre-norm tensor (qwen3next: post_attention_norm)
    // Reads the family's own metadata into hp after the shared keys (windows, RoPE bases, caps).
    void (*read_keys)(const gguf::File& file, HParams& hp) = nullptr;
};

std::unique_ptr<Model> make_decoder(std::shared_ptr<const gguf::File> file, const Options& opts, const Family& family);

}  // namespace ds4::model
