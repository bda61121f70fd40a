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

#include "model/blocks.h"
#include "model/model.h"

namespace ds4::model {

namespace {

class Gemma3 final : public Model {
public:
    Gemma3(std::shared_ptr<const gguf::File> file, HParams hp, const Options& opts)
        : Model(std::move(file), std::move(hp), opts) {
        read_gemma_keys();
        const blocks::Loader ld(*file_, be(), "gemma3");
        tok_embd_ = ld.matrix("token_embd.weight", hp_.n_embd, hp_.n_vocab, backend::Op::get_rows);
        for (int il = 0; il < hp_.n_layer; ++il) {
            const std::string p = "blk." + std::to_string(il) + ".";
            Layer L;
            L.attn_norm = ld.vec(p + "attn_norm.weight", hp_.n_embd);
            L.attn = blocks::AttnWeights::load(ld, hp_, il, /*bias=*/false, /*qk_norm=*/true);
            L.post_attn_norm = ld.vec(p + "post_attention_norm.weight", hp_.n_embd);
            L.ffn_norm = ld.vec(p + "ffn_norm.weight", hp_.n_embd);
            L.ffn = blocks::FfnWeights::load(ld, hp_, il);
            L.post_ffn_norm = ld.vec(p + "post_ffw_norm.weight", hp_.n_embd);
            layers_.push_back(std::move(L));
        }
        out_norm_ = ld.vec("output_norm.weight", hp_.n_embd);
        output_ = blocks::output_weight(ld, hp_);
    }

private:
    struct Layer {
        std::vector<float> attn_norm, post_attn_norm, ffn_norm, post_ffn_norm;  // [n_embd] each
        blocks::AttnWeights attn;
        blocks::FfnWeights ffn;
    };

    void read_gemma_keys() {
        const gguf::File& f = *file_;
        const std::string where = f.path() + ": ";
        const auto window = static_cast<int64_t>(get_float(f, "gemma3", "attention.sliding_window", 4096));
        if (window <= 0) throw Error(where + "gemma3.attention.sliding_window must be positive");
        // which layers slide
        std::vector<bool> sliding(static_cast<size_t>(hp_.n_layer));
        if (const gguf::Value* v = find_key(f, "gemma3", "attention.sliding_window_pattern")) {
            if (v->type == gguf::ValueType::ARRAY) {
                const auto& arr = v->as_array();
                if (arr.size() != sliding.size()) {
                    throw Error(where + "gemma3.attention.sliding_window_pattern has " + std::to_string(arr.size()) +
                                " entries for " + std::to_string(hp_.n_layer) + " layers");
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
        final_softcap_ = static_cast<float>(get_float(f, "gemma3", "final_logit_softcapping", 0.0));
        const auto base_swa = static_cast<float>(get_float(f, "gemma3", "rope.freq_base_swa", 10000.0));

        blocks::AttnConfig global = blocks::default_attn_config(hp_, backend::RopeMode::neox);
        global.attn.scale = static_cast<float>(scale);
        global.attn.softcap = attn_softcap;
        blocks::AttnConfig local = global;
        local.attn.window = window;
        local.rope.freq_base = base_swa;
        local.rope.freq_scale = 1.0f;
        for (bool s : sliding) layer_cfg_.push_back(s ? local : global);
        // sqrt(n_embd) rounded to float32, as transformers computes it in the embedding dtype
        embed_scale_ = static_cast<float>(std::sqrt(static_cast<double>(hp_.n_embd)));
    }

    void forward(const Batch& b) override {
        const int64_t n = b.n, d = hp_.n_embd;
        const float eps = hp_.norm_eps;
        std::vector<float> x(static_cast<size_t>(n * d));  // [n, n_embd] residual stream
        std::vector<float> h(x.size()), y(x.size());       // [n, n_embd] scratch
        // 1. token embeddings, scaled by sqrt(n_embd)
        be().get_rows(tok_embd_, b.tokens, n, x.data());
        be().scale(x.data(), embed_scale_, n * d);
        for (int il = 0; il < hp_.n_layer; ++il) {
            const Layer& L = layers_[static_cast<size_t>(il)];
            // 2. x += post_norm(attention(pre_norm(x))), sliding or global per layer
            be().rms_norm(x.data(), L.attn_norm.data(), n, d, eps, h.data());
            blocks::attention(be(), L.attn, layer_cfg_[static_cast<size_t>(il)], {b.pos, n, b.kv}, il, h.data(),
                              y.data());
            be().rms_norm(y.data(), L.post_attn_norm.data(), n, d, eps, y.data());
            be().add(x.data(), y.data(), n * d);
            // 3. x += post_norm(ffn(pre_norm(x))), GELU(tanh)-gated
            be().rms_norm(x.data(), L.ffn_norm.data(), n, d, eps, h.data());
            blocks::ffn(be(), L.ffn, backend::Act::gelu_tanh, h.data(), n, y.data());
            be().rms_norm(y.data(), L.post_ffn_norm.data(), n, d, eps, y.data());
            be().add(x.data(), y.data(), n * d);
        }
        // 4. final norm, output projection (tied), final soft-cap if configured
        blocks::head(be(), output_, out_norm_, eps, final_softcap_, x.data(), n, b.n_out, b.logits, b.argmax, b.head_rows);
    }

    backend::Weight tok_embd_, output_;
    std::vector<float> out_norm_;
    std::vector<Layer> layers_;
    std::vector<blocks::AttnConfig> layer_cfg_;  // per layer: sliding or global
    float embed_scale_ = 1.0f;
    float final_softcap_ = 0.0f;
};

}  // namespace

std::unique_ptr<Model> make_gemma3(std::shared_ptr<const gguf::File> file, const Options& opts) {
    ArchDefaults d;
    d.rope_base = 1000000.0f;
    d.n_ctx_train = 131072;
    d.n_head_kv = 4;
    d.head_dim = 256;
    HParams hp = read_hparams(*file, d);
    return std::make_unique<Gemma3>(std::move(file), std::move(hp), opts);
}

}  // namespace ds4::model
