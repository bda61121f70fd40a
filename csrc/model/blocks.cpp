// Shared blocks of the architecture files; see blocks.h.
#include "model/blocks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "model/model.h"
#include "quant/kernels.h"
#include "quant/packed.h"

namespace ds4::model::blocks {

using backend::Arena;

namespace {

std::string shape_str(const std::vector<int64_t>& ne) {
    std::string s = "[";
    for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + "]";
}

}  // namespace

const gguf::TensorInfo& Loader::find(const std::string& name) const {
    const gguf::TensorInfo* t = file_.find_tensor(name);
    if (!t) throw Error(file_.path() + ": tensor '" + name + "' is missing (required by " + arch_ + ")");
    return *t;
}

void Loader::shape_error(const gguf::TensorInfo& t, const std::string& expected) const {
    throw Error(file_.path() + ": tensor '" + t.name + "' has shape " + shape_str(t.ne) + ", expected " +
                expected + " for " + arch_);
}

void Loader::require_ops(std::initializer_list<backend::Op> ops) const {
    for (backend::Op op : ops) {
        if (!be_.supports_op(op)) {
            throw Error(file_.path() + ": the " + be_.name() + " backend cannot run " + backend::op_name(op) +
                        ", which " + arch_ + " needs");
        }
    }
}

Weight Loader::matrix(const std::string& name, int64_t n_in, int64_t n_out, backend::Op op) const {
    const gguf::TensorInfo& t = find(name);
    if (t.ne.size() != 2 || t.ne[0] != n_in || t.ne[1] != n_out) shape_error(t, shape_str({n_in, n_out}));
    return bind(t, n_in, n_out, 1, op);
}

Weight Loader::stack(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_mat) const {
    const gguf::TensorInfo& t = find(name);
    if (t.ne.size() != 3 || t.ne[0] != n_in || t.ne[1] != n_out || t.ne[2] != n_mat) {
        shape_error(t, shape_str({n_in, n_out, n_mat}));
    }
    return bind(t, n_in, n_out, n_mat, backend::Op::matmul);
}

Weight Loader::row(const std::string& name, int64_t n_in) const {
    const gguf::TensorInfo& t = find(name);
    if (!(t.ne.size() == 1 || (t.ne.size() == 2 && t.ne[1] == 1)) || t.ne[0] != n_in) shape_error(t, shape_str({n_in, 1}));
    return bind(t, n_in, 1, 1, backend::Op::matmul);
}

Weight Loader::bind(const gguf::TensorInfo& t, int64_t n_in, int64_t n_out, int64_t n_mat, backend::Op op) const {
    const quant::TypeInfo* info = quant::type_info(t.type);
    const auto type = static_cast<quant::Type>(t.type);
    if (!info || !be_.supports_op(op, type)) {
        throw Error(file_.path() + ": tensor '" + t.name + "' has type " + (info ? info->name : "?") +
                    ", which the " + be_.name() + " backend cannot use");
    }
    Weight w;
    w.data = t.data;
    w.type = type;
    w.n_in = n_in;
    w.n_out = n_out;
    w.n_mat = n_mat;
    w.row_bytes = quant::row_bytes(*info, n_in);
    // Released slice by slice while packing (now, or before the first forward pass when the
    // backend defers packing: the file outlives the backend's use of it).
    const gguf::File* file = &file_;
    if (op == backend::Op::matmul) be_.pack(w, [file](const void* p, size_t bytes) { file->release(p, bytes); });
    return w;
}

Vec Loader::vec(const std::string& name, int64_t n) const {
    const gguf::TensorInfo& t = find(name);
    if (t.ne.empty() || t.ne[0] != n || t.n_elements() != n) shape_error(t, shape_str({n}));
    const quant::Kernels& k = quant::kernels(static_cast<quant::Type>(t.type));
    const quant::TypeInfo* info = quant::type_info(t.type);
    if (!k.dequant || !info || n % info->block_size != 0) {
        throw Error(file_.path() + ": tensor '" + name + "' has type " + (info ? info->name : "?") +
                    ", which cannot be dequantised here");
    }
    std::vector<float> out(static_cast<size_t>(n));
    k.dequant(t.data, out.data(), n);
    return be_.upload(out.data(), n);
}

Vec Loader::tensor(const std::string& name, const std::vector<int64_t>& ne) const {
    const gguf::TensorInfo& t = find(name);
    if (t.ne != ne) shape_error(t, shape_str(ne));
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    const quant::Kernels& k = quant::kernels(static_cast<quant::Type>(t.type));
    const quant::TypeInfo* info = quant::type_info(t.type);
    if (!k.dequant || !info || ne[0] % info->block_size != 0) {
        throw Error(file_.path() + ": tensor '" + name + "' has type " + (info ? info->name : "?") +
                    ", which cannot be dequantised here");
    }
    std::vector<float> out(static_cast<size_t>(n));
    k.dequant(t.data, out.data(), n);
    return be_.upload(out.data(), n);
}

Vec Loader::vec_opt(const std::string& name, int64_t n) const {
    return has(name) ? vec(name, n) : Vec{};
}

AttnWeights AttnWeights::load(const Loader& ld, int64_t n_embd, const LayerParams& L, int il, bool bias,
                              bool qk_norm) {
    const std::string p = "blk." + std::to_string(il) + ".";
    AttnWeights w;
    w.gated = L.attn_gated;
    w.q = ld.matrix(p + "attn_q.weight", n_embd, (w.gated ? 2 : 1) * L.q_dim());
    w.k = ld.matrix(p + "attn_k.weight", n_embd, L.kv_dim());
    w.v = ld.matrix(p + "attn_v.weight", n_embd, L.kv_dim());
    w.o = ld.matrix(p + "attn_output.weight", L.q_dim(), n_embd);
    if (bias) {
        w.q_bias = ld.vec(p + "attn_q.bias", L.q_dim());
        w.k_bias = ld.vec(p + "attn_k.bias", L.kv_dim());
        w.v_bias = ld.vec(p + "attn_v.bias", L.kv_dim());
    }
    if (qk_norm) {
        w.q_norm = ld.vec(p + "attn_q_norm.weight", L.head_dim);
        w.k_norm = ld.vec(p + "attn_k_norm.weight", L.head_dim);
    }
    return w;
}

AttnConfig attn_config(const LayerParams& L, backend::RopeMode mode, float norm_eps, const Vec& freq_factors) {
    AttnConfig c;
    c.attn.n_head = L.n_head;
    c.attn.n_head_kv = L.n_head_kv;
    c.attn.head_dim = L.head_dim;
    c.attn.scale = L.attn_scale > 0.0f ? L.attn_scale
                                       : static_cast<float>(1.0 / std::sqrt(static_cast<double>(L.head_dim)));
    c.attn.softcap = L.attn_softcap;
    c.attn.window = L.window;
    c.rope.mode = mode;
    c.rope.n_dims = L.rope_dims;
    c.rope.freq_base = L.rope_base;
    c.rope.freq_scale = L.rope_freq_scale;
    c.rope.freq_factors = freq_factors.data();
    c.norm_eps = norm_eps;
    return c;
}

void unzip(Backend& be, Rows src, int64_t unit, Rows even, Rows odd, std::vector<int64_t>& idx) {
    const int64_t half = src.size() / unit / 2;
    idx.resize(static_cast<size_t>(half));
    const Rows units = src.as(2 * half, unit);
    for (int64_t i = 0; i < half; ++i) idx[static_cast<size_t>(i)] = 2 * i;
    be.gather(units, idx.data(), even.as(half, unit));
    for (int64_t i = 0; i < half; ++i) idx[static_cast<size_t>(i)] = 2 * i + 1;
    be.gather(units, idx.data(), odd.as(half, unit));
}

namespace {

// key_values() after the k and v projections.
void finish_key_values(Backend& be, const AttnWeights& w, const AttnConfig& cfg, Rows x, const int32_t* pos, Rows k,
                       Rows v) {
    const int hd = cfg.attn.head_dim;
    if (!w.k_bias.empty()) be.add_rows(k, w.k_bias);
    if (!w.v_bias.empty()) be.add_rows(v, w.v_bias);
    if (!w.k_norm.empty()) be.rms_norm(k.as(x.n * cfg.attn.n_head_kv, hd), w.k_norm, cfg.norm_eps, k.as(x.n * cfg.attn.n_head_kv, hd));
    be.rope(k, cfg.attn.n_head_kv, pos, cfg.rope);
}

}  // namespace

void key_values(Backend& be, const AttnWeights& w, const AttnConfig& cfg, Rows x, const int32_t* pos, Rows k, Rows v) {
    const Weight* ws[] = {&w.k, &w.v};
    const Rows ys[] = {k, v};
    be.matmuls(ws, 2, x, ys);
    finish_key_values(be, w, cfg, x, pos, k, v);
}

void store_key_values(Backend& be, const AttnWeights& w, const AttnConfig& cfg, const state::KvSlot& slot,
                      const int32_t* pos, Rows x) {
    const Rows k = be.arena().rows(x.n, w.k.n_out), v = be.arena().rows(x.n, w.v.n_out);
    key_values(be, w, cfg, x, pos, k, v);
    be.store_kv(slot.view(pos[0] + x.n), pos[0], k, v);
}

void attention(Backend& be, const AttnWeights& w, const AttnConfig& cfg, const Pass& p, int layer, Rows x, Rows out,
               AttnScratch& scratch) {
    const int64_t n = p.n;
    const int hd = cfg.attn.head_dim;
    const int n_head = cfg.attn.n_head;
    const int64_t q_dim = static_cast<int64_t>(n_head) * hd;
    Arena& arena = be.arena();
    const Rows q = arena.rows(n, q_dim);      // [n, n_head * head_dim]
    const Rows k = arena.rows(n, w.k.n_out);  // [n, n_head_kv * head_dim]
    const Rows v = arena.rows(n, w.v.n_out);
    Rows gate;
    // 1. projections (+ biases), of one input; a gated q projection gives each head's q then its gate
    const Rows qg = w.gated ? arena.rows(n, 2 * q_dim) : q;
    const Weight* ws[] = {&w.q, &w.k, &w.v};
    const Rows ys[] = {qg, k, v};
    be.matmuls(ws, 3, x, ys);
    if (w.gated) {
        gate = arena.rows(n, q_dim);
        unzip(be, qg, hd, q, gate, scratch.idx);
    }
    if (!w.q_bias.empty()) be.add_rows(q, w.q_bias);
    // 2. per-head RMSNorm of q, before RoPE; 3. rotary position embedding (k and v alike)
    if (!w.q_norm.empty()) be.rms_norm(q.as(n * n_head, hd), w.q_norm, cfg.norm_eps, q.as(n * n_head, hd));
    be.rope(q, n_head, p.pos, cfg.rope);
    finish_key_values(be, w, cfg, x, p.pos, k, v);
    // 4. per sequence: write its K/V rows at their positions; then every sequence attends over
    // its slot, in one op
    const Rows att = arena.rows(n, q_dim);
    scratch.kv.resize(static_cast<size_t>(p.req.n_seqs));
    for (int s = 0; s < p.req.n_seqs; ++s) {
        const int64_t f = p.first[s], m = p.first[s + 1] - f, p0 = p.n_past[s];
        const backend::KvView kv = p.req.seqs[s].state->kv(layer).view(p0 + m);
        be.store_kv(kv, p0, k.rows(f, m), v.rows(f, m));
        scratch.kv[static_cast<size_t>(s)] = kv;
    }
    be.attention_seqs(q, p.pos, p.last, p.first, scratch.kv.data(), p.req.n_seqs, cfg.attn, att);
    // 5. output projection (of the gated heads)
    if (w.gated) be.glu(gate, att, backend::Act::sigmoid, att);
    be.matmul(w.o, att, out);
}

FfnWeights FfnWeights::load(const Loader& ld, int64_t n_embd, const LayerParams& L, int il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    FfnWeights w;
    w.gate = ld.matrix(p + "ffn_gate.weight", n_embd, L.n_ff);
    w.up = ld.matrix(p + "ffn_up.weight", n_embd, L.n_ff);
    w.down = ld.matrix(p + "ffn_down.weight", L.n_ff, n_embd);
    return w;
}

void ffn(Backend& be, const FfnWeights& w, backend::Act act, Rows x, Rows out) {
    const Rows gate = be.arena().rows(x.n, w.gate.n_out);  // [n, n_ff]
    const Rows up = be.arena().rows(x.n, w.up.n_out);
    const Weight* ws[] = {&w.gate, &w.up};
    const Rows ys[] = {gate, up};
    be.matmuls(ws, 2, x, ys);
    be.glu(gate, up, act, gate);
    be.matmul(w.down, gate, out);
}

Weight output_weight(const Loader& ld, const HParams& hp) {
    const std::string name = ld.has("output.weight") ? "output.weight" : "token_embd.weight";
    return ld.matrix(name, hp.n_embd, hp.n_vocab);
}

namespace {

// The head's input: rows[0..n_rows) of x, normed. Consecutive rows (a prefill's last, a verify
// block) are normed from where they are, others gathered.
Rows head_input(Backend& be, const Vec& norm, float eps, Rows x, const int64_t* rows, int64_t n_rows) {
    const Rows h = be.arena().rows(n_rows, x.dim);  // [n_rows, n_embd]
    const bool consecutive = rows[n_rows - 1] - rows[0] == n_rows - 1;
    if (!consecutive) be.gather(x, rows, h);
    be.rms_norm(consecutive ? x.rows(rows[0], n_rows) : h, norm, eps, h);
    return h;
}

}  // namespace

void head_shortlist(Backend& be, const Weight& out_w, const Vec& norm, float eps, float cap, Rows x,
                    const int64_t* rows, int64_t n_rows, const float* margin, const int32_t* keep, Shortlisted* out) {
    if (n_rows == 0) return;
    const Rows h = head_input(be, norm, eps, x, rows, n_rows);
    for (int64_t r = 0; r < n_rows; ++r) out[r].list.ok = false;
    if (cap == 0.0f) {
        for (int64_t r = 0; r < n_rows; ++r) {
            backend::Shortlist& s = out[r].list;
            s.x.resize(static_cast<size_t>(x.dim));
            be.download(s.x.data(), h.rows(r, 1));
        }
        be.matmul_shortlist(out_w, h, margin, keep, [out](int64_t r) -> backend::Shortlist& { return out[r].list; });
    }
    for (int64_t r = 0; r < n_rows; ++r) {  // the rows the backend left whole, one by one (batch invariance)
        if (out[r].list.ok) continue;
        out[r].full.resize(static_cast<size_t>(out_w.n_out));
        const Rows y = be.output_rows(out[r].full.data(), 1, out_w.n_out);
        be.matmul(out_w, h.rows(r, 1), y);
        if (cap > 0.0f) be.softcap(y, cap);
        be.finish_output(y, out[r].full.data());
    }
}

void head(Backend& be, const Weight& out_w, const Vec& norm, float eps, float cap, Rows x, const int64_t* rows,
          int64_t n_rows, float* logits, int32_t* argmax, int64_t head_rows) {
    if (n_rows == 0) return;
    const Rows h = head_input(be, norm, eps, x, rows, n_rows);
    // The shortlist is a prefix of the rows: a view of the same matrix (rows are packed one by one).
    Weight w = out_w;
    if (head_rows > 0 && head_rows < out_w.n_out) w.n_out = head_rows;
    if (argmax) {
        be.matmul_argmax(w, h, cap, argmax);
        return;
    }
    if (w.n_out == out_w.n_out) {
        const Rows y = be.output_rows(logits, n_rows, w.n_out);
        be.matmul(w, h, y);
        if (cap > 0.0f) be.softcap(y, cap);
        be.finish_output(y, logits);
        return;
    }
    const Rows part = be.arena().rows(n_rows, w.n_out);
    be.matmul(w, h, part);
    if (cap > 0.0f) be.softcap(part, cap);
    for (int64_t r = 0; r < n_rows; ++r) {
        float* row = logits + r * out_w.n_out;
        be.download(row, part.rows(r, 1));
        std::fill(row + w.n_out, row + out_w.n_out, -std::numeric_limits<float>::infinity());
    }
}

}  // namespace ds4::model::blocks
