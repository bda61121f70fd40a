// The shared decoder; see decoder.h.
#include "model/decoder.h"

#include <cmath>
#include <string>
#include <vector>

#include "model/blocks.h"
#include "model/deltanet.h"
#include "model/moe.h"

namespace ds4::model {

namespace {

class Decoder final : public Model {
public:
    Decoder(std::shared_ptr<const gguf::File> file, HParams hp, const Options& opts, const Family& fam)
        : Model(std::move(file), std::move(hp), opts), fam_(fam) {
        const blocks::Loader ld(*file_, be(), fam.arch);
        ld.require_ops({backend::Op::rms_norm, backend::Op::rope, backend::Op::attention, backend::Op::store_kv,
                        backend::Op::add, backend::Op::mul, backend::Op::glu, backend::Op::softcap, backend::Op::copy});
        const int64_t d = hp_.n_embd;
        tok_embd_ = ld.matrix("token_embd.weight", d, hp_.n_vocab, backend::Op::get_rows);
        if (fam.rope_freqs) rope_freqs_ = ld.vec_opt("rope_freqs.weight", hp_.layers[0].rope_dims / 2);
        bias_ = fam.bias || ld.has("blk.0.attn_q.bias");  // attention_bias=True checkpoints
        for (int il = 0; il < hp_.n_layer; ++il) layers_.push_back(load_layer(ld, hp_.layers[static_cast<size_t>(il)], il));
        const std::string nextn = "blk." + std::to_string(hp_.n_layer) + ".nextn.";
        if (hp_.n_mtp > 0 && ld.has(nextn + "eh_proj.weight")) {
            mtp_ = std::make_unique<Mtp>();
            mtp_->layer = load_layer(ld, hp_.mtp, hp_.n_layer);
            mtp_->eh_proj = ld.matrix(nextn + "eh_proj.weight", 2 * d, d);
            mtp_->enorm = ld.vec(nextn + "enorm.weight", d);
            mtp_->hnorm = ld.vec(nextn + "hnorm.weight", d);
            mtp_->head_norm = ld.vec(nextn + "shared_head_norm.weight", d);
        }
        out_norm_ = ld.vec("output_norm.weight", d);
        output_ = blocks::output_weight(ld, hp_);  // token_embd when output.weight is absent (tied)
        // sqrt(n_embd) rounded to float32, as transformers computes it in the embedding dtype
        embed_scale_ = static_cast<float>(std::sqrt(static_cast<double>(d)));
    }

    bool has_mtp() const override { return mtp_ != nullptr; }

    Lent lent() override {
        return Lent{be(), tok_embd_, fam_.scale_embeddings ? embed_scale_ : 1.0f, output_, hp_.final_softcap};
    }

private:
    struct Layer {
        backend::Vec attn_norm, post_attn_norm, ffn_norm, post_ffn_norm;  // [n_embd]; post_*: sandwich only
        blocks::AttnWeights attn;             // an attention layer's
        std::unique_ptr<deltanet::Layer> delta;  // a gated DeltaNet layer's (its slots point to it)
        blocks::FfnWeights ffn;               // a dense layer's
        moe::Weights moe;                     // a MoE layer's
        blocks::AttnConfig cfg;
    };

    Layer load_layer(const blocks::Loader& ld, const LayerParams& P, int il) {
        const int64_t d = hp_.n_embd;
        const std::string p = "blk." + std::to_string(il) + ".";
        Layer L;
        L.attn_norm = ld.vec(p + "attn_norm.weight", d);
        if (P.kind == LayerKind::delta) {
            ld.require_ops({backend::Op::ssm_conv, backend::Op::gated_delta});
            L.delta = std::make_unique<deltanet::Layer>(deltanet::Weights::load(ld, d, P.delta, il), P.delta, hp_.norm_eps);
            recurrent_ = true;
        } else {
            L.attn = blocks::AttnWeights::load(ld, d, P, il, bias_, fam_.qk_norm);
        }
        L.ffn_norm = ld.vec(p + fam_.ffn_norm + ".weight", d);
        if (P.ffn == FfnKind::moe) {
            ld.require_ops({backend::Op::scatter_add});
            L.moe = moe::Weights::load(ld, d, P.moe, il);
        } else {
            if (P.n_ff == 0) throw Error(file_->path() + ": " + hp_.arch + ".feed_forward_length is missing");
            L.ffn = blocks::FfnWeights::load(ld, d, P, il);
        }
        if (fam_.sandwich_norms) {
            L.post_attn_norm = ld.vec(p + "post_attention_norm.weight", d);
            L.post_ffn_norm = ld.vec(p + "post_ffw_norm.weight", d);
        }
        L.cfg = blocks::attn_config(P, fam_.rope, hp_.norm_eps, rope_freqs_);
        return L;
    }

    int n_slots() const override { return hp_.n_layer + (mtp_ ? 1 : 0); }

    std::unique_ptr<state::Slot> make_slot(int layer) const override {
        if (layer == hp_.n_layer) {  // the MTP block's own KV
            return std::make_unique<state::KvSlot>(hp_.mtp.kv_dim(), n_ctx_, opts_.kv_type, *backend_);
        }
        const Layer& L = layers_[static_cast<size_t>(layer)];
        if (!L.delta) return Model::make_slot(layer);
        return std::make_unique<state::RecurrentSlot>(L.delta->shape(), *L.delta, *backend_);
    }

    void run(const Pass& p) override {
        if (recurrent_) {
            for (int s = 0; s < p.req.n_seqs; ++s) {
                if (p.req.seqs[s].attend == Attend::block) {
                    throw Error("forward: a block pass (non-causal rows that commit nothing) cannot run through the "
                                "recurrent layers of " + hp_.arch);
                }
            }
        }
        const int64_t n = p.n, d = hp_.n_embd;
        const float eps = hp_.norm_eps;
        backend::Backend& be = this->be();
        const backend::Rows x = be.arena().rows(n, d);  // residual stream
        const backend::Rows h = be.arena().rows(n, d);  // scratch
        const backend::Rows y = be.arena().rows(n, d);
        // 1. embeddings: looked up (and scaled), or given
        if (p.req.tokens) {
            be.get_rows(tok_embd_, p.req.tokens, x);
            if (fam_.scale_embeddings) be.scale(x, embed_scale_);
        } else {
            be.upload(x, p.req.embeddings);
        }
        capture(p, 0, x);
        for (int il = 0; il < hp_.n_layer; ++il) {
            const backend::Arena::Mark temporaries = be.arena().mark();
            layer(p, layers_[static_cast<size_t>(il)], hp_.layers[static_cast<size_t>(il)], il, x, h, y);
            be.arena().release(temporaries);
            if (il + 1 < hp_.n_layer) capture(p, il + 1, x);
        }
        // 4. the final norm (for captures of the last index) and the output head
        capture(p, hp_.n_layer, x);
        const float cap = hp_.final_softcap;
        blocks::head(be, output_, out_norm_, eps, cap, x, p.out_logits, p.n_logits, p.req.logits, nullptr,
                     p.req.head_rows);
        blocks::head(be, output_, out_norm_, eps, cap, x, p.out_argmax, p.n_argmax, nullptr, p.req.argmax,
                     p.req.head_rows);
        blocks::head_shortlist(be, output_, out_norm_, eps, cap, x, p.out_shortlist, p.n_shortlist, p.req.margins,
                               p.req.keeps, p.req.shortlists);
    }

    // x += [post_norm] mixer(norm(x)); x += [post_norm] ffn(norm(x)); h and y: scratch rows.
    void layer(const Pass& p, const Layer& L, const LayerParams& P, int il, backend::Rows x, backend::Rows h,
               backend::Rows y) {
        backend::Backend& be = this->be();
        const float eps = hp_.norm_eps;
        be.rms_norm(x, L.attn_norm, eps, h);
        if (L.delta) {
            L.delta->run(be, p, il, h, y);
        } else {
            blocks::attention(be, L.attn, L.cfg, p, il, h, y, attn_);
        }
        if (fam_.sandwich_norms) be.rms_norm(y, L.post_attn_norm, eps, y);
        be.add(x, y);
        be.rms_norm(x, L.ffn_norm, eps, h);
        if (P.ffn == FfnKind::moe) {
            router_.run(be, L.moe, P.moe, fam_.act, h, y);
        } else {
            blocks::ffn(be, L.ffn, fam_.act, h, y);
        }
        if (fam_.sandwich_norms) be.rms_norm(y, L.post_ffn_norm, eps, y);
        be.add(x, y);
    }

    // The MTP block over rows at pos0..: x = eh_proj([enorm(embed(token)), hnorm(hidden)]), its
    // layer on the MTP slot (index n_layer), then, for the last n_out rows, the head norm and the
    // shared output head.
    void run_mtp(state::State& st, const MtpRows& r) override {
        backend::Backend& be = this->be();
        const int64_t n = r.n, d = hp_.n_embd;
        const int64_t n_out = r.n_out < 0 ? n : r.n_out;
        const float eps = hp_.norm_eps;
        const Mtp& m = *mtp_;
        backend::Arena& arena = be.arena();
        const backend::Rows e = arena.rows(n, d), hs = arena.rows(n, d), joined = arena.rows(n, 2 * d);
        be.get_rows(tok_embd_, r.tokens, e);
        if (fam_.scale_embeddings) be.scale(e, embed_scale_);
        be.upload(hs, r.hidden);
        be.rms_norm(e, m.enorm, eps, e);
        be.rms_norm(hs, m.hnorm, eps, hs);
        for (int64_t i = 0; i < n; ++i) {  // [embedding | hidden] per row
            const backend::Rows row = joined.rows(i, 1).as(2, d);
            be.copy(row.rows(0, 1), e.rows(i, 1));
            be.copy(row.rows(1, 1), hs.rows(i, 1));
        }
        const backend::Rows x = arena.rows(n, d), h = arena.rows(n, d), y = arena.rows(n, d);
        be.matmul(m.eh_proj, joined, x);
        mtp_pos_.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) mtp_pos_[static_cast<size_t>(i)] = static_cast<int32_t>(r.pos0 + i);
        const SeqRows seq{&st, n, Attend::causal};
        const Request req = Request::of(seq, r.tokens);
        const int64_t first[2] = {0, n};
        const Pass p{req, n, mtp_pos_.data(), mtp_pos_.data(), first, &r.pos0, nullptr, 0, nullptr, 0, nullptr, 0, nullptr, 0};
        layer(p, m.layer, hp_.mtp, hp_.n_layer, x, h, y);
        if (n_out == 0) return;
        const backend::Rows last = x.rows(n - n_out, n_out);
        if (r.out.hidden) {
            const backend::Rows out = be.output_rows(r.out.hidden, n_out, d);
            be.rms_norm(last, m.head_norm, eps, out);
            be.finish_output(out, r.out.hidden);
        }
        mtp_rows_.resize(static_cast<size_t>(n_out));
        for (int64_t i = 0; i < n_out; ++i) mtp_rows_[static_cast<size_t>(i)] = n - n_out + i;
        if (r.out.logits || r.out.argmax) {
            blocks::head(be, output_, m.head_norm, eps, hp_.final_softcap, x, mtp_rows_.data(), n_out, r.out.logits,
                         r.out.argmax, r.out.head_rows);
        }
    }

    // Writes the captured rows of x into every capture of hidden-state index `index`.
    void capture(const Pass& p, int index, backend::Rows x) {
        const int64_t d = hp_.n_embd;
        for (int c = 0; c < p.req.n_capture; ++c) {
            if (p.req.capture_layers[c] != index) continue;
            float* dst = p.req.hidden + static_cast<size_t>(c) * static_cast<size_t>(p.n_captured * d);
            const backend::Rows rows = be().output_rows(dst, p.n_captured, d);
            be().gather(x, p.captured, rows);
            if (index == hp_.n_layer) be().rms_norm(rows, out_norm_, hp_.norm_eps, rows);
            be().finish_output(rows, dst);
        }
    }

    Family fam_;
    backend::Weight tok_embd_, output_;
    backend::Vec rope_freqs_, out_norm_;
    std::vector<Layer> layers_;
    float embed_scale_ = 1.0f;
    moe::Router router_;         // MoE layers' routing scratch (passes run one at a time)
    blocks::AttnScratch attn_;   // attention's host scratch, reused
    bool recurrent_ = false;     // some layer is a gated DeltaNet
    bool bias_ = false;          // q/k/v biases
    // The built-in MTP block (nextn): its decoder layer, the fc joining the normed embedding and
    // hidden state, and its norms.
    struct Mtp {
        Layer layer;
        backend::Weight eh_proj;
        backend::Vec enorm, hnorm, head_norm;
    };
    std::unique_ptr<Mtp> mtp_;
    std::vector<int32_t> mtp_pos_;
    std::vector<int64_t> mtp_rows_;
};

}  // namespace

std::unique_ptr<Model> make_decoder(std::shared_ptr<const gguf::File> file, const Options& opts, const Family& family) {
    HParams hp = read_hparams(*file, family.defaults);
    if (family.read_keys) family.read_keys(*file, hp);
    return std::make_unique<Decoder>(std::move(file), std::move(hp), opts, family);
}

}  // namespace ds4::model
