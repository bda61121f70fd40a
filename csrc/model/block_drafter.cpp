// See block_drafter.h; the file layout is docs/drafters.md's.
#include "model/block_drafter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace ds4::model {

namespace {

std::string str_key(const gguf::File& f, const std::string& key) {
    const gguf::Value* v = f.find(key);
    return v ? v->as_string() : std::string();
}

}  // namespace

std::shared_ptr<BlockDrafter> BlockDrafter::load(std::shared_ptr<const gguf::File> file, std::shared_ptr<Model> target) {
    const std::string arch = str_key(*file, "general.architecture");
    if (arch != "dflash" && arch != "dspark") {
        throw Error(file->path() + ": not a block drafter (general.architecture '" + arch +
                    "'; a DFlash or DSpark drafter has 'dflash' or 'dspark')");
    }
    HParams hp = read_hparams(*file, ArchDefaults{}, false);
    std::shared_ptr<BlockDrafter> d(new BlockDrafter(std::move(file), std::move(target), std::move(hp)));
    d->target_->lend([&](const Model::Lent& lent) { d->bind(lent); });
    return d;
}

BlockDrafter::BlockDrafter(std::shared_ptr<const gguf::File> file, std::shared_ptr<Model> target, HParams hp)
    : file_(std::move(file)), target_(std::move(target)), hp_(std::move(hp)) {
    check_target();
    const std::string& a = hp_.arch;
    const std::string where = file_->path() + ": ";
    const gguf::Value* bs = file_->find(a + ".block_size");
    block_ = bs ? static_cast<int>(bs->as_int()) : 16;
    if (block_ < 2 || block_ > 64) throw Error(where + a + ".block_size must be in [2, 64], got " + std::to_string(block_));
    const gguf::Value* mask = file_->find(a + ".mask_token_id");
    if (!mask) mask = file_->find("tokenizer.ggml.mask_token_id");
    if (!mask) throw Error(where + "no mask token id (" + a + ".mask_token_id)");
    const int64_t n_vocab = target_->hparams().n_vocab;
    if (mask->as_int() < 0 || mask->as_int() >= n_vocab) {
        throw Error(where + "mask token id " + std::to_string(mask->as_int()) + " is outside the target's vocabulary [0, " +
                    std::to_string(n_vocab) + ")");
    }
    mask_ = static_cast<int32_t>(mask->as_int());
    const gguf::Value* tl = file_->find(a + ".target_layers");
    if (!tl) throw Error(where + "no target layers (" + a + ".target_layers)");
    const gguf::Array& ids = tl->as_array();
    for (size_t i = 0; i < ids.size(); ++i) {
        const int64_t id = ids.int_at(i);
        if (id < 0 || id > target_->hparams().n_layer) {
            throw Error(where + a + ".target_layers holds " + std::to_string(id) + ", outside the target's [0, " +
                        std::to_string(target_->hparams().n_layer) + "]");
        }
        layers_.push_back(static_cast<int>(id));
    }
    if (layers_.empty()) throw Error(where + a + ".target_layers is empty");
    if (const gguf::Value* c = file_->find(a + ".attention.causal"); c && c->as_bool()) {
        throw Error(where + "causal draft attention is not supported (" + a + ".attention.causal)");
    }
    if (const gguf::Value* m = file_->find(a + ".output_multiplier"); m && m->as_float() != 1.0) {
        throw Error(where + "an output multiplier other than 1 is not supported (" + a + ".output_multiplier)");
    }
    for (const LayerParams& L : hp_.layers) {
        if (L.window > 0) throw Error(where + "sliding-window draft layers are not supported");
    }
}

void BlockDrafter::check_target() const {
    const std::string& a = hp_.arch;
    const std::string want_arch = str_key(*file_, a + ".target.architecture");
    const std::string want_vocab = str_key(*file_, a + ".target.vocab_fingerprint");
    const std::string want_weights = str_key(*file_, a + ".target.weights_fingerprint");
    const std::string name = str_key(*file_, a + ".target.name");
    const auto refuse = [&](const std::string& what) {
        throw Error(file_->path() + " is a drafter for " + (name.empty() ? "another model" : "'" + name + "'") +
                    ", not for " + target_->path() + " (" + what + "): do not mix the two checkpoints");
    };
    if (!want_arch.empty() && want_arch != target_->hparams().arch) {
        refuse("architecture '" + want_arch + "' against '" + target_->hparams().arch + "'");
    }
    const Identity& id = target_->identity();
    if (!want_vocab.empty() && want_vocab != id.vocab) refuse("its vocabulary differs");
    if (!want_weights.empty() && want_weights != id.weights) refuse("its weights' shapes differ");
    if (hp_.n_embd != target_->hparams().n_embd) {
        refuse("hidden size " + std::to_string(hp_.n_embd) + " against " + std::to_string(target_->hparams().n_embd));
    }
}

void BlockDrafter::bind(const Model::Lent& lent) {
    const blocks::Loader ld(*file_, lent.be, hp_.arch);
    const int64_t d = hp_.n_embd;
    const std::string& a = hp_.arch;
    embed_scale_ = static_cast<float>(get_float(*file_, a, "input_embedding_scale", lent.embed_scale));
    fc_ = ld.matrix("fc.weight", n_features(), d);
    hidden_norm_ = ld.vec("enc.output_norm.weight", d);
    out_norm_ = ld.vec("output_norm.weight", d);
    for (int il = 0; il < hp_.n_layer; ++il) {
        const LayerParams& P = hp_.layers[static_cast<size_t>(il)];
        if (P.n_ff == 0) throw Error(file_->path() + ": " + a + ".feed_forward_length is missing");
        const std::string p = "blk." + std::to_string(il) + ".";
        Layer L;
        L.attn_norm = ld.vec(p + "attn_norm.weight", d);
        L.attn = blocks::AttnWeights::load(ld, d, P, il, false, true);
        L.ffn_norm = ld.vec(p + "ffn_norm.weight", d);
        L.ffn = blocks::FfnWeights::load(ld, d, P, il);
        L.cfg = blocks::attn_config(P, backend::RopeMode::neox, hp_.norm_eps, backend::Vec{});
        draft_layers_.push_back(std::move(L));
    }
    bind_dspark(ld);
    const PassWork w = PassWork::of(*file_, 0);  // the draft layers (fc runs on context rows only)
    block_bytes_ = w.bytes();
    block_macs_ = w.macs();
    context_macs_ = static_cast<double>(fc_.n_in * fc_.n_out);
    for (const LayerParams& P : hp_.layers) context_macs_ += static_cast<double>(2 * d * P.kv_dim());
}

void BlockDrafter::bind_dspark(const blocks::Loader& ld) {
    const std::string& a = hp_.arch;
    const std::string where = file_->path() + ": ";
    const int64_t d = hp_.n_embd, n_vocab = target_->hparams().n_vocab;
    int64_t n_draft = n_vocab;
    if (const gguf::TensorInfo* t = file_->find_tensor("d2t")) {
        // A reduced vocabulary: the drafter's own output rows, each a target id.
        if (t->ne.size() != 1 || (t->type != static_cast<uint32_t>(quant::Type::I32) && t->type != static_cast<uint32_t>(quant::Type::I64))) throw Error(where + "tensor 'd2t' must be a 1-D I32 or I64 array");
        n_draft = t->ne[0];
        for (int64_t i = 0; i < n_draft; ++i) {
            const int64_t id = t->type == static_cast<uint32_t>(quant::Type::I64) ? reinterpret_cast<const int64_t*>(t->data)[i] : reinterpret_cast<const int32_t*>(t->data)[i];
            if (id < 0 || id >= n_vocab) {
                throw Error(where + "d2t maps draft id " + std::to_string(i) + " to " + std::to_string(id) +
                            ", outside the target's vocabulary [0, " + std::to_string(n_vocab) + ")");
            }
            d2t_.push_back(static_cast<int32_t>(id));
        }
        out_ = ld.matrix("output.weight", d, n_draft);
    } else if (ld.has("output.weight")) {
        throw Error(where + "an own output projection needs its 'd2t' map to the target's vocabulary");
    }
    const gguf::TensorInfo* w1 = file_->find_tensor("markov_w1.weight");
    if (w1) {
        // A row per target token, or, over a reduced vocabulary, per draft token and one more
        // that every other token shares (ds4's compact layout).
        const bool compact = !d2t_.empty() && w1->ne.size() == 2 && w1->ne[1] == n_draft + 1;
        if (w1->ne.size() != 2 || (w1->ne[1] != n_vocab && !compact)) {
            throw Error(where + "markov_w1.weight must have a row per token of the target's " + std::to_string(n_vocab) +
                        (d2t_.empty() ? "" : " or of the draft vocabulary and one more (" + std::to_string(n_draft + 1) + ")"));
        }
        const int64_t rank = w1->ne[0];
        markov_w1_ = ld.matrix("markov_w1.weight", rank, w1->ne[1], backend::Op::get_rows);
        if (compact) {
            w1_row_.assign(static_cast<size_t>(n_vocab), static_cast<int32_t>(n_draft));
            for (size_t j = 0; j < d2t_.size(); ++j) w1_row_[static_cast<size_t>(d2t_[j])] = static_cast<int32_t>(j);
        }
        markov_w2_ = ld.matrix("markov_w2.weight", rank, n_draft);
        if (ld.has("conf_proj.weight")) {
            conf_ = ld.matrix("conf_proj.weight", d + rank, 1);
            if (const gguf::TensorInfo* b = file_->find_tensor("conf_proj.bias")) {
                if (b->type != static_cast<uint32_t>(quant::Type::F32) || b->n_elements() != 1) throw Error(where + "conf_proj.bias must be one F32 value");
                conf_bias_ = *reinterpret_cast<const float*>(b->data);
            }
        }
    } else if (!d2t_.empty()) {
        throw Error(where + "a reduced draft vocabulary (d2t) needs the Markov head of a DSpark drafter");
    }
    const gguf::Value* fa = file_->find(a + ".sample_from_anchor");
    from_anchor_ = fa ? fa->as_bool() : w1 != nullptr;
    if (from_anchor_ && !w1) throw Error(where + a + ".sample_from_anchor needs a DSpark drafter's Markov head");
    row_.resize(static_cast<size_t>(n_vocab));
}

BlockDrafter::~BlockDrafter() {
    target_->lend([&](const Model::Lent& lent) {
        for (const backend::Weight* w : {&fc_, &out_, &markov_w2_, &conf_}) {
            if (w->data) lent.be.drop_packed(*w);
        }
        for (const Layer& L : draft_layers_) {
            for (const backend::Weight* w : {&L.attn.q, &L.attn.k, &L.attn.v, &L.attn.o, &L.ffn.gate, &L.ffn.up, &L.ffn.down}) {
                lent.be.drop_packed(*w);
            }
        }
    });
}

std::unique_ptr<state::State> BlockDrafter::new_state() const {
    std::vector<std::unique_ptr<state::Slot>> slots;
    target_->lend([&](const Model::Lent& lent) {
        for (const LayerParams& P : hp_.layers) {
            slots.push_back(std::make_unique<state::KvSlot>(P.kv_dim(), target_->n_ctx(), target_->kv_type(), lent.be));
        }
    });
    return std::make_unique<state::State>(std::move(slots), target_->n_ctx(), this);
}

void BlockDrafter::context(state::State& st, const float* features, int64_t n) {
    if (st.owner() != this) throw Error("block drafter: the state belongs to another model");
    if (n <= 0) return;
    const int64_t p0 = st.n_past();
    target_->lend([&](const Model::Lent& lent) {  // the scratch is shared by every session: under the lock
        st.reserve(p0 + n);
        pos_.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) pos_[static_cast<size_t>(i)] = static_cast<int32_t>(p0 + i);
        backend::Backend& be = lent.be;
        const backend::Rows f = be.arena().rows(n, n_features()), x = be.arena().rows(n, hp_.n_embd);
        be.upload(f, features);
        be.matmul(fc_, f, x);
        be.rms_norm(x, hidden_norm_, hp_.norm_eps, x);
        for (size_t il = 0; il < draft_layers_.size(); ++il) {
            const Layer& L = draft_layers_[il];
            blocks::store_key_values(be, L.attn, L.cfg, st.kv(static_cast<int>(il)), pos_.data(), x);
        }
    });
    st.commit(p0 + n);
}

void BlockDrafter::draft(state::State& st, int32_t anchor, int64_t n, bool logits, int64_t head_rows,
                         const BlockPick& pick) {
    if (st.owner() != this) throw Error("block drafter: the state belongs to another model");
    if (n < 1 || n > max_draft()) {
        throw Error("block drafter: " + std::to_string(n) + " tokens asked of a block that drafts 1 .. " +
                    std::to_string(max_draft()));
    }
    if (anchor < 0 || anchor >= target_->hparams().n_vocab) {
        throw Error("block drafter: anchor token " + std::to_string(anchor) + " is outside the vocabulary");
    }
    const int64_t p0 = st.n_past(), b = block_, d = hp_.n_embd, r0 = from_anchor_ ? 0 : 1;
    target_->lend([&](const Model::Lent& lent) {  // the scratch is shared by every session: under the lock
        st.reserve(p0 + b);  // throws ContextOverflow when the block does not fit
        ids_.assign(static_cast<size_t>(b), mask_);
        ids_[0] = anchor;
        pos_.resize(static_cast<size_t>(b));
        last_.assign(static_cast<size_t>(b), static_cast<int32_t>(p0 + b - 1));
        for (int64_t i = 0; i < b; ++i) pos_[static_cast<size_t>(i)] = static_cast<int32_t>(p0 + i);
        rows_.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) rows_[static_cast<size_t>(i)] = r0 + i;
        backend::Backend& be = lent.be;
        backend::Arena& arena = be.arena();
        const backend::Rows x = arena.rows(b, d), h = arena.rows(b, d), y = arena.rows(b, d);
        be.get_rows(lent.embeddings, ids_.data(), x);
        if (embed_scale_ != 1.0f) be.scale(x, embed_scale_);
        const SeqRows seq{&st, b, Attend::block};
        const Request req = Request::of(seq, ids_.data());
        const int64_t first[2] = {0, b};
        const Pass p{req, b, pos_.data(), last_.data(), first, &p0, nullptr, 0, nullptr, 0, nullptr, 0, nullptr, 0};
        for (size_t il = 0; il < draft_layers_.size(); ++il) {
            const Layer& L = draft_layers_[il];
            be.rms_norm(x, L.attn_norm, hp_.norm_eps, h);
            blocks::attention(be, L.attn, L.cfg, p, static_cast<int>(il), h, y, attn_);
            be.add(x, y);
            be.rms_norm(x, L.ffn_norm, hp_.norm_eps, h);
            blocks::ffn(be, L.ffn, backend::Act::silu, h, y);
            be.add(x, y);
        }
        if (markov_w1_.data) {
            const backend::Rows hn = arena.rows(n, d);
            be.rms_norm(x.rows(r0, n), out_norm_, hp_.norm_eps, hn);
            markov(be, lent, hn, n, anchor, logits, pick);
            return;
        }
        // DFlash: every position from the block alone, in one pass of the output head.
        const int64_t n_vocab = target_->hparams().n_vocab;
        out_logits_.resize(logits ? static_cast<size_t>(n * n_vocab) : 0);
        out_ids_.resize(static_cast<size_t>(n));
        blocks::head(be, lent.output, out_norm_, hp_.norm_eps, lent.softcap, x, rows_.data(), n,
                     logits ? out_logits_.data() : nullptr, logits ? nullptr : out_ids_.data(), head_rows);
        for (int64_t i = 0; i < n; ++i) {
            BlockRow row;
            row.i = i;
            if (logits) {
                row.logits = out_logits_.data() + i * n_vocab;
                row.argmax = static_cast<int32_t>(std::max_element(row.logits, row.logits + n_vocab) - row.logits);
            } else {
                row.argmax = out_ids_[static_cast<size_t>(i)];
            }
            if (pick(row) < 0) break;
        }
    });
}

void BlockDrafter::markov(backend::Backend& be, const Model::Lent& lent, backend::Rows h, int64_t n, int32_t anchor,
                          bool logits, const BlockPick& pick) {
    backend::Arena& arena = be.arena();
    const int64_t d = hp_.n_embd, rank = markov_w1_.n_in;
    const backend::Weight& head = out_.data ? out_ : lent.output;
    const int64_t n_draft = head.n_out;
    const backend::Rows base = arena.rows(n, n_draft), bias = arena.rows(1, n_draft);
    const backend::Rows joined = arena.rows(1, d + rank), conf = arena.rows(1, 1);
    const backend::Rows w1{joined.data + d, 1, rank};  // [hidden | w1 row], the confidence head's input
    be.matmul(head, h, base);
    if (!out_.data && lent.softcap > 0.0f) be.softcap(base, lent.softcap);
    draft_row_.resize(static_cast<size_t>(n_draft));
    int32_t prev = anchor;
    for (int64_t i = 0; i < n; ++i) {
        // l_i = U_i + W2 W1[x_{i-1}]: the Markov correction by the token drafted before
        const int32_t w1_row = w1_row_.empty() ? prev : w1_row_[static_cast<size_t>(prev)];
        be.get_rows(markov_w1_, &w1_row, w1);
        be.matmul(markov_w2_, w1, bias);
        const backend::Rows li = base.rows(i, 1);
        be.add(li, bias);
        BlockRow row;
        row.i = i;
        if (conf_.data) {
            be.copy(backend::Rows{joined.data, 1, d}, h.rows(i, 1));
            be.matmul(conf_, joined, conf);
            float c = 0.0f;
            be.read(&c, conf.data, sizeof c);
            row.confidence = 1.0f / (1.0f + std::exp(-(c + conf_bias_)));
        }
        be.read(draft_row_.data(), li.data, static_cast<size_t>(n_draft) * sizeof(float));
        // the argmax over the draft vocabulary, the lowest target id on ties (as over the target's)
        row.argmax = -1;
        float top = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < n_draft; ++j) {
            const float v = draft_row_[static_cast<size_t>(j)];
            const int32_t id = d2t_.empty() ? static_cast<int32_t>(j) : d2t_[static_cast<size_t>(j)];
            if (row.argmax < 0 || v > top || (v == top && id < row.argmax)) {
                top = v;
                row.argmax = id;
            }
        }
        if (logits) {  // over the target's vocabulary, only when a sampler reads it
            if (d2t_.empty()) {
                std::copy(draft_row_.begin(), draft_row_.end(), row_.begin());
            } else {
                std::fill(row_.begin(), row_.end(), -std::numeric_limits<float>::infinity());
                for (int64_t j = 0; j < n_draft; ++j) row_[static_cast<size_t>(d2t_[static_cast<size_t>(j)])] = draft_row_[static_cast<size_t>(j)];
            }
            row.logits = row_.data();
        }
        prev = pick(row);
        if (prev < 0 || prev >= target_->hparams().n_vocab) break;
    }
}

}  // namespace ds4::model
