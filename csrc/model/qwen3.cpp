// Qwen3 (dense): the Llama decoder with a per-head RMSNorm on q and k before RoPE (no q/k/v
// biases) and NEOX RoPE (GGUF keeps HF's half-split q/k layout for this family).
// Defaults for absent keys (Qwen3Config): rope_theta 10000, max_position_embeddings 32768,
// rms_norm_eps 1e-6, num_key_value_heads 32, head_dim 128. The optional
// sliding window (use_sliding_window, off in every released model) is not implemented.
#include "model/blocks.h"
#include "model/model.h"

namespace ds4::model {

namespace {

class Qwen3 final : public Model {
public:
    Qwen3(std::shared_ptr<const gguf::File> file, HParams hp, const Options& opts)
        : Model(std::move(file), std::move(hp), opts) {
        const blocks::Loader ld(*file_, be(), "qwen3");
        tok_embd_ = ld.matrix("token_embd.weight", hp_.n_embd, hp_.n_vocab, backend::Op::get_rows);
        for (int il = 0; il < hp_.n_layer; ++il) {
            const std::string p = "blk." + std::to_string(il) + ".";
            layers_.push_back({ld.vec(p + "attn_norm.weight", hp_.n_embd),
                               blocks::AttnWeights::load(ld, hp_, il, /*bias=*/false, /*qk_norm=*/true),
                               ld.vec(p + "ffn_norm.weight", hp_.n_embd), blocks::FfnWeights::load(ld, hp_, il)});
        }
        out_norm_ = ld.vec("output_norm.weight", hp_.n_embd);
        output_ = blocks::output_weight(ld, hp_);
        attn_cfg_ = blocks::default_attn_config(hp_, backend::RopeMode::neox);
    }

private:
    struct Layer {
        std::vector<float> attn_norm;
        blocks::AttnWeights attn;
        std::vector<float> ffn_norm;
        blocks::FfnWeights ffn;
    };

    void forward(const Batch& b) override {
        const int64_t n = b.n, d = hp_.n_embd;
        std::vector<float> x(static_cast<size_t>(n * d));  // [n, n_embd] residual stream
        std::vector<float> h(x.size()), y(x.size());       // [n, n_embd] scratch
        // 1. token embeddings
        be().get_rows(tok_embd_, b.tokens, n, x.data());
        for (int il = 0; il < hp_.n_layer; ++il) {
            const Layer& L = layers_[static_cast<size_t>(il)];
            // 2. x += attention(norm(x)), q and k RMS-normed per head
            be().rms_norm(x.data(), L.attn_norm.data(), n, d, hp_.norm_eps, h.data());
            blocks::attention(be(), L.attn, attn_cfg_, {b.pos, n, b.kv}, il, h.data(), y.data());
            be().add(x.data(), y.data(), n * d);
            // 3. x += ffn(norm(x)), SiLU-gated
            be().rms_norm(x.data(), L.ffn_norm.data(), n, d, hp_.norm_eps, h.data());
            blocks::ffn(be(), L.ffn, backend::Act::silu, h.data(), n, y.data());
            be().add(x.data(), y.data(), n * d);
        }
        // 4. final norm and output projection (tied to token_embd when output.weight is absent)
        blocks::head(be(), output_, out_norm_, hp_.norm_eps, x.data(), n, b.n_out, b.logits);
    }

    backend::Weight tok_embd_, output_;
    std::vector<float> out_norm_;
    std::vector<Layer> layers_;
    blocks::AttnConfig attn_cfg_;
};

}  // namespace

std::unique_ptr<Model> make_qwen3(std::shared_ptr<const gguf::File> file, const Options& opts) {
    ArchDefaults d;
    d.rope_base = 10000.0f;
    d.n_ctx_train = 32768;
    d.n_head_kv = 32;
    d.head_dim = 128;
    HParams hp = read_hparams(*file, d);
    return std::make_unique<Qwen3>(std::move(file), std::move(hp), opts);
}

}  // namespace ds4::model
