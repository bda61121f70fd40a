// Gemma 3 (text): sliding-window and global attention layers with their own RoPE bases,
// RMSNorm before and after both the attention and the FFN, q/k norms, GELU(tanh)-gated FFN,
// embeddings scaled by sqrt(n_embd), optional soft-caps, output tied to the embeddings.
//
// Norm weights: Gemma's RMSNorm multiplies by (1 + w); llama.cpp's converter (and ds4.convert)
// store w + 1 in the GGUF, and transformers' GGUF loader subtracts the 1 again
// (Gemma2TensorProcessor), so the stored weights are used as-is here.
//
// Keys and their defaults when absent (Gemma3TextConfig; llama.cpp's own converter writes none
// of the first four, e.g. the Gemma 3 270M file):
//   gemma3.rope.freq_base_swa                RoPE base of sliding layers: 10000 (rope_local_base_freq)
//   gemma3.attention.sliding_window_pattern  per-layer bools, true = sliding; absent: every
//                                            6th layer (il % 6 == 5) is global (sliding_window_pattern 6)
//   gemma3.attention.scale                   factor on q·k: query_pre_attn_scalar^-0.5 with its
//                                            default 256 (= head_dim for every Gemma 3 but 27B)
//   gemma3.attn_logit_softcapping, gemma3.final_logit_softcapping   none
//   gemma3.attention.sliding_window          4096
//   rope.freq_base 1e6, context_length 131072, rms eps 1e-6, head_count_kv 4, key_length 256.
// Linear RoPE scaling (rope.scaling.*) applies to the global layers only, as in transformers.
#include <cmath>
#include <string>
#include <vector>

#include "model/decoder.h"

namespace ds4::model {

namespace {

void read_gemma_keys(const gguf::File& f, HParams& hp) {
    const std::string where = f.path() + ": ";
    const auto window = static_cast<int64_t>(get_float(f, "gemma3", "attention.sliding_window", 4096));
    if (window <= 0) throw Error(where + "gemma3.attention.sliding_window must be positive");
    // which layers slide
    std::vector<bool> sliding(static_cast<size_t>(hp.n_layer));
    if (const gguf::Value* v = find_key(f, "gemma3", "attention.sliding_window_pattern")) {
        if (v->type == gguf::ValueType::ARRAY) {
            const auto& arr = v->as_array();
            if (arr.size() != sliding.size()) {
                throw Error(where + "gemma3.attention.sliding_window_pattern has " + std::to_string(arr.size()) +
                            " entries for " + std::to_string(hp.n_layer) + " layers");
            }
            for (size_t i = 0; i < arr.size(); ++i) sliding[i] = arr[i].as_bool();
        } else {  // a period: every period-th layer is global
            const int64_t period = v->as_int();
            if (period <= 0) throw Error(where + "gemma3.attention.sliding_window_pattern must be positive");
            for (size_t i = 0; i < sliding.size(); ++i) sliding[i] = (static_cast<int64_t>(i) + 1) % period != 0;
        }
    } else {
        for (size_t i = 0; i < sliding.size(); ++i) sliding[i] = (i + 1) % 6 != 0;
    }
    // attention scale and soft-caps
    const double scale = get_float(f, "gemma3", "attention.scale", 1.0 / std::sqrt(256.0));
    const auto attn_softcap = static_cast<float>(get_float(f, "gemma3", "attn_logit_softcapping", 0.0));
    hp.final_softcap = static_cast<float>(get_float(f, "gemma3", "final_logit_softcapping", 0.0));
    const auto base_swa = static_cast<float>(get_float(f, "gemma3", "rope.freq_base_swa", 10000.0));
    for (size_t i = 0; i < sliding.size(); ++i) {
        LayerParams& L = hp.layers[i];
        L.attn_scale = static_cast<float>(scale);
        L.attn_softcap = attn_softcap;
        if (!sliding[i]) continue;
        L.window = window;
        L.rope_base = base_swa;
        L.rope_freq_scale = 1.0f;
    }
}

}  // namespace

std::unique_ptr<Model> make_gemma3(std::shared_ptr<const gguf::File> file, const Options& opts) {
    Family f;
    f.arch = "gemma3";
    f.defaults.rope_base = 1000000.0f;
    f.defaults.n_ctx_train = 131072;
    f.defaults.n_head_kv = 4;
    f.defaults.head_dim = 256;
    f.rope = backend::RopeMode::neox;
    f.qk_norm = true;
    f.sandwich_norms = true;
    f.act = backend::Act::gelu_tanh;
    f.scale_embeddings = true;
    f.read_keys = read_gemma_keys;
    return make_decoder(std::move(file), opts, f);
}

}  // namespace ds4::model
