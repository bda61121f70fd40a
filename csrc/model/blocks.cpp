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

Weight Loader::matrix(const std::string& name, int64_t n_in, int64_t n_out, backend::Op op) const {
    const gguf::TensorInfo& t = find(name);
    if (t.ne.size() != 2 || t.ne[0] != n_in || t.ne[1] != n_out) shape_error(t, shape_str({n_in, n_out}));
    const quant::TypeInfo* info = quant::type_info(t.type);
    const auto type = static_cast<quant::Type>(t.type);
    if (!info || !be_.supports_op(op, type)) {
        throw Error(file_.path() + ": tensor '" + name + "' has type " + (info ? info->name : "?") +
                    ", which the " + be_.name() + " backend cannot use");
    }
    Weight w;
    w.data = t.data;
    w.type = type;
    w.n_in = n_in;
    w.n_out = n_out;
    w.row_bytes = quant::row_bytes(*info, n_in);
    // Released slice by slice while packing (now, or before the first forward pass when the
    // backend defers packing: the file outlives the backend's use of it).
    const gguf::File* file = &file_;
    if (op == backend::Op::matmul) be_.pack(w, [file](const void* p, size_t bytes) { file->release(p, bytes); });
    return w;
}

std::vector<float> Loader::vec(const std::string& name, int64_t n) const {
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
    return out;
}

std::vector<float> Loader::vec_opt(const std::string& name, int64_t n) const {
    return has(name) ? vec(name, n) : std::vector<float>{};
}

AttnWeights AttnWeights::load(const Loader& ld, const HParams& hp, int il, bool bias, bool qk_norm) {
    const std::string p = "blk." + std::to_string(il) + ".";
    AttnWeights w;
    w.q = ld.matrix(p + "attn_q.weight", hp.n_embd, hp.q_dim());
    w.k = ld.matrix(p + "attn_k.weight", hp.n_embd, hp.kv_dim());
    w.v = ld.matrix(p + "attn_v.weight", hp.n_embd, hp.kv_dim());
    w.o = ld.matrix(p + "attn_output.weight", hp.q_dim(), hp.n_embd);
    if (bias) {
        w.q_bias = ld.vec(p + "attn_q.bias", hp.q_dim());
        w.k_bias = ld.vec(p + "attn_k.bias", hp.kv_dim());
        w.v_bias = ld.vec(p + "attn_v.bias", hp.kv_dim());
    }
    if (qk_norm) {
        w.q_norm = ld.vec(p + "attn_q_norm.weight", hp.head_dim);
        w.k_norm = ld.vec(p + "attn_k_norm.weight", hp.head_dim);
    }
    return w;
}

AttnConfig default_attn_config(const HParams& hp, backend::RopeMode mode) {
    AttnConfig c;
    c.attn.n_head = hp.n_head;
    c.attn.n_head_kv = hp.n_head_kv;
    c.attn.head_dim = hp.head_dim;
    c.attn.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hp.head_dim)));
    c.rope.mode = mode;
    c.rope.n_dims = hp.rope_dims;
    c.rope.freq_base = hp.rope_base;
    c.rope.freq_scale = hp.rope_freq_scale;
    c.norm_eps = hp.norm_eps;
    return c;
}

void attention(Backend& be, const AttnWeights& w, const AttnConfig& cfg, const BatchView& b, int layer,
               const float* x, float* out) {
    const int64_t n = b.n;
    const int hd = cfg.attn.head_dim;
    const int64_t q_dim = w.q.n_out;
    const int64_t kv_dim = w.k.n_out;
    std::vector<float> q(static_cast<size_t>(n * q_dim));    // [n, n_head, head_dim]
    std::vector<float> k(static_cast<size_t>(n * kv_dim));   // [n, n_head_kv, head_dim]
    std::vector<float> v(static_cast<size_t>(n * kv_dim));   // [n, n_head_kv, head_dim]
    // 1. projections (+ biases)
    be.matmul(w.q, x, n, q.data());
    be.matmul(w.k, x, n, k.data());
    be.matmul(w.v, x, n, v.data());
    if (!w.q_bias.empty()) be.add_rows(q.data(), w.q_bias.data(), n, q_dim);
    if (!w.k_bias.empty()) be.add_rows(k.data(), w.k_bias.data(), n, kv_dim);
    if (!w.v_bias.empty()) be.add_rows(v.data(), w.v_bias.data(), n, kv_dim);
    // 2. per-head RMSNorm of q and k, before RoPE
    if (!w.q_norm.empty()) be.rms_norm(q.data(), w.q_norm.data(), n * cfg.attn.n_head, hd, cfg.norm_eps, q.data());
    if (!w.k_norm.empty()) be.rms_norm(k.data(), w.k_norm.data(), n * cfg.attn.n_head_kv, hd, cfg.norm_eps, k.data());
    // 3. rotary position embedding
    be.rope(q.data(), n, cfg.attn.n_head, hd, b.pos, cfg.rope);
    be.rope(k.data(), n, cfg.attn.n_head_kv, hd, b.pos, cfg.rope);
    // 4. append K/V at their positions, then attend over the cache
    const backend::KvType kt = b.kv.type();
    be.store_kv(b.kv.k_row(layer, b.pos[0]), kt, k.data(), n, kv_dim);
    be.store_kv(b.kv.v_row(layer, b.pos[0]), kt, v.data(), n, kv_dim);
    std::vector<float> att(static_cast<size_t>(n * q_dim));  // [n, n_head, head_dim]
    be.attention(q.data(), n, b.pos, b.kv.view(layer, b.pos[n - 1] + 1), cfg.attn, att.data());
    // 5. output projection
    be.matmul(w.o, att.data(), n, out);
}

FfnWeights FfnWeights::load(const Loader& ld, const HParams& hp, int il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    FfnWeights w;
    w.gate = ld.matrix(p + "ffn_gate.weight", hp.n_embd, hp.n_ff);
    w.up = ld.matrix(p + "ffn_up.weight", hp.n_embd, hp.n_ff);
    w.down = ld.matrix(p + "ffn_down.weight", hp.n_ff, hp.n_embd);
    return w;
}

void ffn(Backend& be, const FfnWeights& w, backend::Act act, const float* x, int64_t n, float* out) {
    std::vector<float> gate(static_cast<size_t>(n * w.gate.n_out));  // [n, n_ff]
    std::vector<float> up(static_cast<size_t>(n * w.up.n_out));      // [n, n_ff]
    be.matmul(w.gate, x, n, gate.data());
    be.matmul(w.up, x, n, up.data());
    be.glu(gate.data(), up.data(), n * w.gate.n_out, act, gate.data());
    be.matmul(w.down, gate.data(), n, out);
}

Weight output_weight(const Loader& ld, const HParams& hp) {
    const std::string name = ld.has("output.weight") ? "output.weight" : "token_embd.weight";
    return ld.matrix(name, hp.n_embd, hp.n_vocab);
}

void head(Backend& be, const Weight& out_w, const std::vector<float>& norm, float eps, float cap, const float* x,
          int64_t n, int64_t n_out, float* logits, int32_t* argmax, int64_t head_rows) {
    const float* last = x + (n - n_out) * out_w.n_in;
    std::vector<float> h(static_cast<size_t>(n_out * out_w.n_in));  // [n_out, n_embd]
    be.rms_norm(last, norm.data(), n_out, out_w.n_in, eps, h.data());
    // The shortlist is a prefix of the rows: a view of the same matrix (rows are packed one by one).
    Weight w = out_w;
    if (head_rows > 0 && head_rows < out_w.n_out) w.n_out = head_rows;
    if (argmax) {
        be.matmul_argmax(w, h.data(), n_out, cap, argmax);
        return;
    }
    if (w.n_out == out_w.n_out) {
        be.matmul(w, h.data(), n_out, logits);
        if (cap > 0.0f) be.softcap(logits, n_out * w.n_out, cap);
        return;
    }
    std::vector<float> part(static_cast<size_t>(n_out * w.n_out));
    be.matmul(w, h.data(), n_out, part.data());
    if (cap > 0.0f) be.softcap(part.data(), n_out * w.n_out, cap);
    for (int64_t r = 0; r < n_out; ++r) {
        float* row = logits + r * out_w.n_out;
        std::copy(part.begin() + r * w.n_out, part.begin() + (r + 1) * w.n_out, row);
        std::fill(row + w.n_out, row + out_w.n_out, -std::numeric_limits<float>::infinity());
    }
}

}  // namespace ds4::model::blocks
