// read_hparams: the metadata keys shared by every architecture; see hparams.h.
//
// Defaults for absent keys (transformers' config classes):
//   attention.head_count_kv      = ArchDefaults::n_head_kv, else head_count (per layer or one value)
//   attention.key_length         = ArchDefaults::head_dim, else embedding_length / head_count
//   attention.value_length       = key_length
//   attention.layer_norm_rms_epsilon, rope.freq_base, context_length: per ArchDefaults
//   rope.dimension_count         = key_length        (full rotary; partial_rotary_factor 1)
//   rope.scaling.type            = none
#include "model/hparams.h"

#include <algorithm>
#include <string>

#include "model/model.h"

namespace ds4::model {

const gguf::Value* find_key(const gguf::File& file, const std::string& arch, const std::string& suffix) {
    return file.find(arch + "." + suffix);
}

double get_float(const gguf::File& file, const std::string& arch, const std::string& suffix, double dflt) {
    const gguf::Value* v = find_key(file, arch, suffix);
    return v ? v->as_float() : dflt;
}

namespace {

// Sizes are checked against generous ceilings before anything is allocated from them or
// narrowed to int: a hostile file must get an error, not a division by zero or a huge allocation.
void check_range(const gguf::File& file, const std::string& key, int64_t x, int64_t max) {
    if (x <= 0 || x > max) {
        throw Error(file.path() + ": metadata key '" + key + "' must be in [1, " + std::to_string(max) + "], got " +
                    std::to_string(x));
    }
}

int64_t get_int(const gguf::File& file, const std::string& arch, const std::string& suffix, int64_t dflt,
                bool required, int64_t max = int64_t{1} << 20) {
    const gguf::Value* v = find_key(file, arch, suffix);
    if (!v) {
        if (required) throw Error(file.path() + ": metadata key '" + arch + "." + suffix + "' is missing");
        return dflt;
    }
    const int64_t x = v->as_int();
    check_range(file, arch + "." + suffix, x, max);
    return x;
}

// A key llama.cpp writes either once or per layer (an array of n_layer integers).
std::vector<int64_t> get_layer_ints(const gguf::File& file, const std::string& arch, const std::string& suffix,
                                    int n_layer, int64_t dflt, bool required, int64_t max = int64_t{1} << 20) {
    const gguf::Value* v = find_key(file, arch, suffix);
    if (!v || v->type != gguf::ValueType::ARRAY) {
        return std::vector<int64_t>(static_cast<size_t>(n_layer), get_int(file, arch, suffix, dflt, required, max));
    }
    const gguf::Array& a = v->as_array();
    const std::string key = arch + "." + suffix;
    if (a.size() != static_cast<size_t>(n_layer)) {
        throw Error(file.path() + ": metadata key '" + key + "' has " + std::to_string(a.size()) + " entries for " +
                    std::to_string(n_layer) + " layers");
    }
    std::vector<int64_t> out(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
        out[i] = a.int_at(i);
        check_range(file, key + "[" + std::to_string(i) + "]", out[i], max);
    }
    return out;
}

}  // namespace

HParams read_hparams(const gguf::File& file, const ArchDefaults& d, bool with_vocab) {
    HParams hp;
    hp.arch = file.get("general.architecture").as_string();
    const std::string& a = hp.arch;
    const std::string where = file.path() + ": ";
    hp.n_embd = get_int(file, a, "embedding_length", 0, true);
    // block_count includes the MTP blocks that follow the trunk (nextn_predict_layers).
    hp.n_mtp = static_cast<int>(get_int(file, a, "nextn_predict_layers", 0, false, 16));
    hp.n_layer = static_cast<int>(get_int(file, a, "block_count", 0, true) - hp.n_mtp);
    if (hp.n_layer < 1) throw Error(where + a + ".block_count leaves no layer besides the MTP blocks");
    if (static_cast<size_t>(hp.n_layer) > file.tensors().size()) {
        throw Error(where + a + ".block_count (" + std::to_string(hp.n_layer) + ") exceeds the " +
                    std::to_string(file.tensors().size()) + " tensors in the file");
    }
    hp.n_ctx_train = get_int(file, a, "context_length", d.n_ctx_train, false, int64_t{1} << 30);
    hp.norm_eps = static_cast<float>(get_float(file, a, "attention.layer_norm_rms_epsilon", d.norm_eps));

    const std::vector<int64_t> n_head = get_layer_ints(file, a, "attention.head_count", hp.n_layer, 0, true);
    std::vector<int64_t> n_head_kv = n_head;
    if (find_key(file, a, "attention.head_count_kv")) {
        n_head_kv = get_layer_ints(file, a, "attention.head_count_kv", hp.n_layer, 0, true);
    } else if (d.n_head_kv > 0) {
        n_head_kv.assign(n_head.size(), d.n_head_kv);
    }
    // Absent from MoE-only files (qwen35moe); a dense FFN then fails to load, naming the key.
    std::vector<int64_t> n_ff(static_cast<size_t>(hp.n_layer), 0);
    if (find_key(file, a, "feed_forward_length")) {
        n_ff = get_layer_ints(file, a, "feed_forward_length", hp.n_layer, 0, true, int64_t{1} << 24);
    }
    const auto head_dim = static_cast<int>(
        get_int(file, a, "attention.key_length", d.head_dim > 0 ? d.head_dim : hp.n_embd / n_head[0], false));
    const int64_t v_dim = get_int(file, a, "attention.value_length", head_dim, false);
    if (v_dim != head_dim) {
        throw Error(where + a + ".attention.value_length (" + std::to_string(v_dim) +
                    ") differs from key_length (" + std::to_string(head_dim) + "): not supported");
    }
    const auto rope_base = static_cast<float>(get_float(file, a, "rope.freq_base", d.rope_base));
    const auto rope_dims = static_cast<int>(get_int(file, a, "rope.dimension_count", head_dim, false));
    if (rope_dims > head_dim || rope_dims % 2 != 0) {
        throw Error(where + a + ".rope.dimension_count (" + std::to_string(rope_dims) +
                    ") must be even and at most the head size " + std::to_string(head_dim));
    }
    float rope_freq_scale = 1.0f;
    if (const gguf::Value* t = find_key(file, a, "rope.scaling.type")) {
        const std::string& type = t->as_string();
        if (type == "linear") {
            const double factor = get_float(file, a, "rope.scaling.factor", 1.0);
            if (factor <= 0.0) throw Error(where + a + ".rope.scaling.factor must be positive");
            rope_freq_scale = static_cast<float>(1.0 / factor);
        } else if (type != "none") {
            throw Error(where + a + ".rope.scaling.type '" + type + "' is not supported yet (none, linear)");
        }
    }
    for (int il = 0; il < hp.n_layer; ++il) {
        const auto i = static_cast<size_t>(il);
        LayerParams L;
        L.n_head = static_cast<int>(n_head[i]);
        L.n_head_kv = static_cast<int>(n_head_kv[i]);
        L.head_dim = head_dim;
        L.n_ff = n_ff[i];
        L.rope_dims = rope_dims;
        L.rope_base = rope_base;
        L.rope_freq_scale = rope_freq_scale;
        if (L.n_head % L.n_head_kv != 0) {
            throw Error(where + "attention.head_count (" + std::to_string(L.n_head) +
                        ") is not a multiple of head_count_kv (" + std::to_string(L.n_head_kv) + ") in layer " +
                        std::to_string(il));
        }
        hp.layers.push_back(L);
    }
    const gguf::TensorInfo* emb = file.find_tensor("token_embd.weight");
    if (!emb && !with_vocab) return hp;
    if (!emb) throw Error(where + "tensor 'token_embd.weight' is missing (required by " + a + ")");
    if (emb->ne.size() != 2) throw Error(where + "tensor 'token_embd.weight' must be 2-D");
    hp.n_vocab = emb->ne[1];
    return hp;
}

void read_moe(const gguf::File& file, HParams& hp, bool norm_default) {
    const std::string& a = hp.arch;
    for (int il = 0; il < hp.n_layer + std::min(hp.n_mtp, 1); ++il) {
        if (!file.find_tensor("blk." + std::to_string(il) + ".ffn_gate_inp.weight")) continue;
        LayerParams& L = il < hp.n_layer ? hp.layers[static_cast<size_t>(il)] : hp.mtp;
        MoeParams& m = L.moe;
        m.n_expert = static_cast<int>(get_int(file, a, "expert_count", 0, true, 1 << 16));
        m.n_used = static_cast<int>(get_int(file, a, "expert_used_count", 0, true, m.n_expert));
        m.n_ff = get_int(file, a, "expert_feed_forward_length", L.n_ff, false, int64_t{1} << 24);
        const gguf::Value* norm = find_key(file, a, "expert_weights_norm");
        m.norm_weights = norm ? norm->as_bool() : norm_default;
        const int64_t gating = get_int(file, a, "expert_gating_func", 1, false, 2);
        m.gating = gating == 2 ? Gating::sigmoid : Gating::softmax;
        if (file.find_tensor("blk." + std::to_string(il) + ".ffn_gate_inp_shexp.weight")) {
            m.n_ff_shared = get_int(file, a, "expert_shared_feed_forward_length", L.n_ff, false, int64_t{1} << 24);
        }
        L.ffn = FfnKind::moe;
    }
}

void read_hybrid(const gguf::File& file, HParams& hp, bool tiled) {
    const std::string& a = hp.arch;
    const int64_t interval = get_int(file, a, "full_attention_interval", 4, false, 1 << 16);
    DeltaNetParams d;
    d.conv_kernel = static_cast<int>(get_int(file, a, "ssm.conv_kernel", 0, true, 64));
    d.d_k = static_cast<int>(get_int(file, a, "ssm.state_size", 0, true, 1 << 12));
    d.n_k = static_cast<int>(get_int(file, a, "ssm.group_count", 0, true, 1 << 12));
    d.n_v = static_cast<int>(get_int(file, a, "ssm.time_step_rank", 0, true, 1 << 12));
    const int64_t inner = get_int(file, a, "ssm.inner_size", 0, true, int64_t{1} << 24);
    if (d.n_v % d.n_k != 0 || inner % d.n_v != 0) {
        throw Error(file.path() + ": " + a + ".ssm.time_step_rank (" + std::to_string(d.n_v) +
                    ") must be a multiple of ssm.group_count (" + std::to_string(d.n_k) + ") and divide ssm.inner_size (" +
                    std::to_string(inner) + ")");
    }
    d.d_v = static_cast<int>(inner / d.n_v);
    d.tiled = tiled;
    for (int il = 0; il < hp.n_layer; ++il) {
        LayerParams& L = hp.layers[static_cast<size_t>(il)];
        if ((il + 1) % interval == 0) {
            L.attn_gated = true;
        } else {
            L.kind = LayerKind::delta;
            L.delta = d;
        }
    }
    // The MTP block's layer is a gated-attention layer like the trunk's (read_moe may add experts).
    for (const LayerParams& L : hp.layers) {
        if (L.kind == LayerKind::attention) hp.mtp = L;
    }
}

}  // namespace ds4::model
