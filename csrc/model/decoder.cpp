// The shared pre-norm decoder; see decoder.h.
#include "model/decoder.h"

#include <string>
#include <vector>

#include "model/blocks.h"

namespace ds4::model {

namespace {

class Decoder final : public Model {
public:
    Decoder(std::shared_ptr<const gguf::File> file, HParams hp, const Options& opts, const DecoderConfig& cfg)
        : Model(std::move(file), std::move(hp), opts) {
        const blocks::Loader ld(*file_, be(), cfg.arch);
        tok_embd_ = ld.matrix("token_embd.weight", hp_.n_embd, hp_.n_vocab, backend::Op::get_rows);
        if (cfg.rope_freqs) rope_freqs_ = ld.vec_opt("rope_freqs.weight", hp_.rope_dims / 2);
        const bool bias = cfg.bias || ld.has("blk.0.attn_q.bias");  // attention_bias=True checkpoints
        for (int il = 0; il < hp_.n_layer; ++il) {
            const std::string p = "blk." + std::to_string(il) + ".";
            layers_.push_back({ld.vec(p + "attn_norm.weight", hp_.n_embd),
                               blocks::AttnWeights::load(ld, hp_, il, bias, cfg.qk_norm),
                               ld.vec(p + "ffn_norm.weight", hp_.n_embd), blocks::FfnWeights::load(ld, hp_, il)});
        }
        out_norm_ = ld.vec("output_norm.weight", hp_.n_embd);
        output_ = blocks::output_weight(ld, hp_);  // token_embd when output.weight is absent (tied)
        attn_cfg_ = blocks::default_attn_config(hp_, cfg.rope);
        if (!rope_freqs_.empty()) attn_cfg_.rope.freq_factors = rope_freqs_.data();
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
            // 2. x += attention(norm(x))
            be().rms_norm(x.data(), L.attn_norm.data(), n, d, hp_.norm_eps, h.data());
            blocks::attention(be(), L.attn, attn_cfg_, {b.pos, n, b.kv}, il, h.data(), y.data());
            be().add(x.data(), y.data(), n * d);
            // 3. x += ffn(norm(x)), SiLU-gated
            be().rms_norm(x.data(), L.ffn_norm.data(), n, d, hp_.norm_eps, h.data());
            blocks::ffn(be(), L.ffn, backend::Act::silu, h.data(), n, y.data());
            be().add(x.data(), y.data(), n * d);
        }
        // 4. final norm and output projection
        blocks::head(be(), output_, out_norm_, hp_.norm_eps, 0.0f, x.data(), n, b.n_out, b.logits, b.argmax, b.head_rows);
    }

    backend::Weight tok_embd_, output_;
    std::vector<float> rope_freqs_, out_norm_;
    std::vector<Layer> layers_;
    blocks::AttnConfig attn_cfg_;
};

}  // namespace

std::unique_ptr<Model> make_decoder(std::shared_ptr<const gguf::File> file, const Options& opts,
                                    const ArchDefaults& defaults, const DecoderConfig& cfg) {
    HParams hp = read_hparams(*file, defaults);
    return std::make_unique<Decoder>(std::move(file), std::move(hp), opts, cfg);
}

}  // namespace ds4::model
