// The shared decoder; see decoder.h.
#include "model/decoder.h"

#include <cmath>
#include <string>
#include <vector>

#include "model/blocks.h"

namespace ds4::model {

namespace {

class Decoder final : public Model {
public:
    Decoder(std::shared_ptr<const gguf::File> file, HParams hp, const Options& opts, const Family& fam)
        : Model(std::move(file), std::move(hp), opts), fam_(fam) {
        const blocks::Loader ld(*file_, be(), fam.arch);
        ld.require_ops({backend::Op::rms_norm, backend::Op::rope, backend::Op::attention, backend::Op::store_kv,
                        backend::Op::add, backend::Op::mul, backend::Op::glu, backend::Op::softcap});
        const int64_t d = hp_.n_embd;
        tok_embd_ = ld.matrix("token_embd.weight", d, hp_.n_vocab, backend::Op::get_rows);
        if (fam.rope_freqs) rope_freqs_ = ld.vec_opt("rope_freqs.weight", hp_.layers[0].rope_dims / 2);
        const bool bias = fam.bias || ld.has("blk.0.attn_q.bias");  // attention_bias=True checkpoints
        for (int il = 0; il < hp_.n_layer; ++il) {
            const LayerParams& P = hp_.layers[static_cast<size_t>(il)];
            const std::string p = "blk." + std::to_string(il) + ".";
            Layer L;
            L.attn_norm = ld.vec(p + "attn_norm.weight", d);
            L.attn = blocks::AttnWeights::load(ld, d, P, il, bias, fam.qk_norm);
            L.ffn_norm = ld.vec(p + "ffn_norm.weight", d);
            L.ffn = blocks::FfnWeights::load(ld, d, P, il);
            if (fam.sandwich_norms) {
                L.post_attn_norm = ld.vec(p + "post_attention_norm.weight", d);
                L.post_ffn_norm = ld.vec(p + "post_ffw_norm.weight", d);
            }
            L.cfg = blocks::attn_config(P, fam.rope, hp_.norm_eps, rope_freqs_.empty() ? nullptr : rope_freqs_.data());
            layers_.push_back(std::move(L));
        }
        out_norm_ = ld.vec("output_norm.weight", d);
        output_ = blocks::output_weight(ld, hp_);  // token_embd when output.weight is absent (tied)
        // sqrt(n_embd) rounded to float32, as transformers computes it in the embedding dtype
        embed_scale_ = static_cast<float>(std::sqrt(static_cast<double>(d)));
    }

private:
    struct Layer {
        std::vector<float> attn_norm, post_attn_norm, ffn_norm, post_ffn_norm;  // [n_embd]; post_*: sandwich only
        blocks::AttnWeights attn;
        blocks::FfnWeights ffn;
        blocks::AttnConfig cfg;
    };

    void run(const Pass& p) override {
        const int64_t n = p.n, d = hp_.n_embd;
        const float eps = hp_.norm_eps;
        const auto size = static_cast<size_t>(n * d);
        float* x = be().arena().floats(size);  // [n, n_embd] residual stream
        float* h = be().arena().floats(size);  // [n, n_embd] scratch
        float* y = be().arena().floats(size);
        // 1. embeddings: looked up (and scaled), or given
        if (p.req.tokens) {
            be().get_rows(tok_embd_, p.req.tokens, n, x);
            if (fam_.scale_embeddings) be().scale(x, embed_scale_, n * d);
        } else {
            std::copy(p.req.embeddings, p.req.embeddings + n * d, x);
        }
        capture(p, 0, x);
        for (int il = 0; il < hp_.n_layer; ++il) {
            const Layer& L = layers_[static_cast<size_t>(il)];
            // 2. x += [post_norm] attention(norm(x))
            be().rms_norm(x, L.attn_norm.data(), n, d, eps, h);
            blocks::attention(be(), L.attn, L.cfg, p, il, h, y);
            if (fam_.sandwich_norms) be().rms_norm(y, L.post_attn_norm.data(), n, d, eps, y);
            be().add(x, y, n * d);
            // 3. x += [post_norm] ffn(norm(x)), gated
            be().rms_norm(x, L.ffn_norm.data(), n, d, eps, h);
            blocks::ffn(be(), L.ffn, fam_.act, h, n, y);
            if (fam_.sandwich_norms) be().rms_norm(y, L.post_ffn_norm.data(), n, d, eps, y);
            be().add(x, y, n * d);
            if (il + 1 < hp_.n_layer) capture(p, il + 1, x);
        }
        // 4. the final norm (for captures of the last index) and the output head
        capture(p, hp_.n_layer, x);
        const float cap = hp_.final_softcap;
        blocks::head(be(), output_, out_norm_, eps, cap, x, p.out_logits, p.n_logits, p.req.logits, nullptr,
                     p.req.head_rows);
        blocks::head(be(), output_, out_norm_, eps, cap, x, p.out_argmax, p.n_argmax, nullptr, p.req.argmax,
                     p.req.head_rows);
    }

    // Writes the captured rows of x into every capture of hidden-state index `index`.
    void capture(const Pass& p, int index, const float* x) {
        const int64_t d = hp_.n_embd;
        for (int c = 0; c < p.req.n_capture; ++c) {
            if (p.req.capture_layers[c] != index) continue;
            float* dst = p.req.hidden + static_cast<size_t>(c) * static_cast<size_t>(p.n_captured * d);
            blocks::gather_rows(x, d, p.captured, p.n_captured, dst);
            if (index == hp_.n_layer) be().rms_norm(dst, out_norm_.data(), p.n_captured, d, hp_.norm_eps, dst);
        }
    }

    Family fam_;
    backend::Weight tok_embd_, output_;
    std::vector<float> rope_freqs_, out_norm_;
    std::vector<Layer> layers_;
    float embed_scale_ = 1.0f;
};

}  // namespace

std::unique_ptr<Model> make_decoder(std::shared_ptr<const gguf::File> file, const Options& opts, const Family& family) {
    HParams hp = read_hparams(*file, family.defaults);
    if (family.read_keys) family.read_keys(*file, hp);
    return std::make_unique<Decoder>(std::move(file), std::move(hp), opts, family);
}

}  // namespace ds4::model
