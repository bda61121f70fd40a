// read_hparams: the metadata keys shared by every architecture; see hparams.h.
//
// Defaults for absent keys (transformers' config classes):
//   attention.head_count_kv      = ArchDefaults::n_head_kv, else head_count
//   attention.key_length         = ArchDefaults::head_dim, else embedding_length / head_count
//   attention.value_length       = key_length
//   attention.layer_norm_rms_epsilon, rope.freq_base, context_length: per ArchDefaults
//   rope.dimension_count         = key_length        (full rotary; partial_rotary_factor 1)
//   rope.scaling.type            = none
#include "model/hparams.h"

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
int64_t get_int(const gguf::File& file, const std::string& arch, const std::string& suffix, int64_t dflt,
                bool required, int64_t max = int64_t{1} << 20) {
    const gguf::Value* v = find_key(file, arch, suffix);
    if (!v) {
        if (required) throw Error(file.path() + ": metadata key '" + arch + "." + suffix + "' is missing");
        return dflt;
    }
    const int64_t x = v->as_int();
    if (x <= 0 || x > max) {
        throw Error(file.path() + ": metadata key '" + arch + "." + suffix + "' must be in [1, " +
                    std::to_string(max) + "], got " + std::to_string(x));
    }
    return x;
}

}  // namespace

HParams read_hparams(const gguf::File& file, const ArchDefaults& d) {
    HParams hp;
    hp.arch = file.get("general.architecture").as_string();
    const std::string& a = hp.arch;
    hp.n_embd = get_int(file, a, "embedding_length", 0, true);
    hp.n_layer = static_cast<int>(get_int(file, a, "block_count", 0, true));
    hp.n_head = static_cast<int>(get_int(file, a, "attention.head_count", 0, true));
    hp.n_head_kv = static_cast<int>(get_int(file, a, "attention.head_count_kv", d.n_head_kv > 0 ? d.n_head_kv : hp.n_head, false));
    hp.head_dim = static_cast<int>(
        get_int(file, a, "attention.key_length", d.head_dim > 0 ? d.head_dim : hp.n_embd / hp.n_head, false));
    const int64_t v_dim = get_int(file, a, "attention.value_length", hp.head_dim, false);
    hp.n_ff = get_int(file, a, "feed_forward_length", 0, true, int64_t{1} << 24);
    hp.n_ctx_train = get_int(file, a, "context_length", d.n_ctx_train, false, int64_t{1} << 30);
    hp.norm_eps = static_cast<float>(get_float(file, a, "attention.layer_norm_rms_epsilon", d.norm_eps));
    hp.rope_base = static_cast<float>(get_float(file, a, "rope.freq_base", d.rope_base));
    hp.rope_dims = static_cast<int>(get_int(file, a, "rope.dimension_count", hp.head_dim, false));

    const std::string where = file.path() + ": ";
    if (static_cast<size_t>(hp.n_layer) > file.tensors().size()) {
        throw Error(where + a + ".block_count (" + std::to_string(hp.n_layer) + ") exceeds the " +
                    std::to_string(file.tensors().size()) + " tensors in the file");
    }
    if (v_dim != hp.head_dim) {
        throw Error(where + a + ".attention.value_length (" + std::to_string(v_dim) +
                    ") differs from key_length (" + std::to_string(hp.head_dim) + "): not supported");
    }
    if (hp.n_head % hp.n_head_kv != 0) {
        throw Error(where + "attention.head_count (" + std::to_string(hp.n_head) +
                    ") is not a multiple of head_count_kv (" + std::to_string(hp.n_head_kv) + ")");
    }
    if (hp.rope_dims > hp.head_dim || hp.rope_dims % 2 != 0) {
        throw Error(where + a + ".rope.dimension_count (" + std::to_string(hp.rope_dims) +
                    ") must be even and at most the head size " + std::to_string(hp.head_dim));
    }
    if (const gguf::Value* t = find_key(file, a, "rope.scaling.type")) {
        const std::string& type = t->as_string();
        if (type == "linear") {
            const double factor = get_float(file, a, "rope.scaling.factor", 1.0);
            if (factor <= 0.0) throw Error(where + a + ".rope.scaling.factor must be positive");
            hp.rope_freq_scale = static_cast<float>(1.0 / factor);
        } else if (type != "none") {
            throw Error(where + a + ".rope.scaling.type '" + type + "' is not supported yet (none, linear)");
        }
    }
    const gguf::TensorInfo* emb = file.find_tensor("token_embd.weight");
    if (!emb) throw Error(where + "tensor 'token_embd.weight' is missing (required by " + a + ")");
    if (emb->ne.size() != 2) throw Error(where + "tensor 'token_embd.weight' must be 2-D");
    hp.n_vocab = emb->ne[1];
    return hp;
}

}  // namespace ds4::model
