// Gated DeltaNet layers; see deltanet.h.
#include "model/deltanet.h"

#include <string>

#include "model/model.h"

namespace ds4::model::deltanet {

using backend::Rows;

Weights Weights::load(const blocks::Loader& ld, int64_t n_embd, const DeltaNetParams& p, int il) {
    const std::string pre = "blk." + std::to_string(il) + ".";
    Weights w;
    w.qkv = ld.matrix(pre + "attn_qkv.weight", n_embd, p.conv_dim());
    w.gate = ld.matrix(pre + "attn_gate.weight", n_embd, p.value_dim());
    if (ld.has(pre + "ssm_ba.weight")) {
        w.ba = ld.matrix(pre + "ssm_ba.weight", n_embd, 2 * p.n_v);
    } else {
        w.beta = ld.matrix(pre + "ssm_beta.weight", n_embd, p.n_v);
        w.alpha = ld.matrix(pre + "ssm_alpha.weight", n_embd, p.n_v);
    }
    w.out = ld.matrix(pre + "ssm_out.weight", p.value_dim(), n_embd);
    w.conv = ld.tensor(pre + "ssm_conv1d.weight", {p.conv_kernel, p.conv_dim()});
    w.dt_bias = ld.vec(pre + "ssm_dt.bias", p.n_v);
    w.a = ld.vec(pre + "ssm_a", p.n_v);
    w.norm = ld.vec(pre + "ssm_norm.weight", p.d_v);
    return w;
}

Layer::Layer(Weights w, const DeltaNetParams& p, float norm_eps) : w_(std::move(w)), p_(p), eps_(norm_eps) {}

state::RecurrentShape Layer::shape() const {
    state::RecurrentShape s;
    s.conv_kernel = p_.conv_kernel;
    s.conv_channels = p_.conv_dim();
    s.state_rows = static_cast<int64_t>(p_.n_v) * p_.d_k;
    s.state_cols = p_.d_v;
    s.log_widths = {p_.conv_dim(), p_.n_v, p_.n_v};  // the projection's q/k/v, a, b
    s.log_rows = kLogRows;
    return s;
}

void Layer::recur(backend::Backend& be, state::RecurrentSlot& slot, Rows qkv, Rows a, Rows b, Rows o) const {
    const Rows mixed = be.arena().rows(qkv.n, qkv.dim);
    be.ssm_conv(qkv, w_.conv, p_.conv_kernel, slot.conv(), mixed);
    const backend::DeltaParams dp{p_.n_k, p_.n_v, p_.d_k, p_.d_v, p_.tiled};
    be.gated_delta(mixed, a, b, w_.a, w_.dt_bias, dp, slot.matrices(), o);
}

void Layer::run(backend::Backend& be, const Pass& p, int layer, Rows x, Rows out) {
    const int64_t n = p.n;
    backend::Arena& arena = be.arena();
    const Rows qkv = arena.rows(n, p_.conv_dim()), z = arena.rows(n, p_.value_dim());
    be.matmul(w_.qkv, x, qkv);
    be.matmul(w_.gate, x, z);
    const Rows b = arena.rows(n, p_.n_v), a = arena.rows(n, p_.n_v);
    if (w_.ba.data) {
        // ssm_ba holds (b, a) per key-head group, n_v / n_k values each: split into b and a
        const Rows ba = arena.rows(n, 2 * p_.n_v);
        be.matmul(w_.ba, x, ba);
        blocks::unzip(be, ba, p_.n_v / p_.n_k, b, a, idx_);
    } else {
        be.matmul(w_.beta, x, b);
        be.matmul(w_.alpha, x, a);
    }
    const Rows o = arena.rows(n, p_.value_dim());
    for (int s = 0; s < p.req.n_seqs; ++s) {
        const int64_t f = p.first[s], m = p.first[s + 1] - f;
        state::RecurrentSlot& slot = p.req.seqs[s].state->recurrent(layer);
        const bool log = slot.logging(p.n_past[s], m);
        if (log) {
            const int64_t at = slot.logged();
            be.copy(slot.log(0).rows(at, m), qkv.rows(f, m));
            be.copy(slot.log(1).rows(at, m), a.rows(f, m));
            be.copy(slot.log(2).rows(at, m), b.rows(f, m));
        }
        recur(be, slot, qkv.rows(f, m), a.rows(f, m), b.rows(f, m), o.rows(f, m));
        if (log) slot.add_logged(m);
    }
    // gated RMSNorm per value head: norm(o) * w * silu(z)
    const Rows heads = o.as(n * p_.n_v, p_.d_v);
    be.rms_norm(heads, w_.norm, eps_, heads);
    be.glu(z, o, backend::Act::silu, o);
    be.matmul(w_.out, o, out);
}

void Layer::replay(backend::Backend& be, state::RecurrentSlot& slot, int64_t n) const {
    if (n == 0) return;
    const Rows o = be.arena().rows(n, p_.value_dim());  // not needed: the state is what replays
    recur(be, slot, slot.log(0).rows(0, n), slot.log(1).rows(0, n), slot.log(2).rows(0, n), o);
}

}  // namespace ds4::model::deltanet
