// Hyper-parameters of a model, read from GGUF metadata ({arch}.* keys): what the whole model
// shares, and per layer what may differ (kind, heads, FFN width, window, RoPE, attention scale).
//
// Where a key is absent the value transformers' config class would use is taken, per
// architecture (ArchDefaults); each default is listed with its source in hparams.cpp and in
// the architecture files. Keys llama.cpp writes as per-layer arrays (head_count,
// head_count_kv, feed_forward_length) may be arrays or scalars. Architecture-specific keys
// (Gemma 3's sliding window pattern, local RoPE base, soft-caps) are read by the architecture
// file itself into the layers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace ds4::model {

// transformers' config defaults for the keys llama.cpp's converters may leave out.
struct ArchDefaults {
    float rope_base = 10000.0f;       // rope_theta
    int64_t n_ctx_train = 2048;       // max_position_embeddings
    float norm_eps = 1e-6f;           // rms_norm_eps
    int n_head_kv = 0;                // num_key_value_heads; 0: head_count
    int head_dim = 0;                 // head_dim; 0: embedding_length / head_count
};

// What a layer's token mixer is: attention over a KV slot, or a gated DeltaNet recurrence over
// a recurrent slot (deltanet.h). Next: MLA.
enum class LayerKind { attention, delta };

// A gated DeltaNet layer's shape ({arch}.ssm.* keys).
struct DeltaNetParams {
    int n_k = 0;                      // ssm.group_count: key heads
    int n_v = 0;                      // ssm.time_step_rank: value heads
    int d_k = 0, d_v = 0;             // ssm.state_size (both), ssm.inner_size / n_v (value)
    int conv_kernel = 0;              // ssm.conv_kernel
    bool tiled = false;               // value head h reads key head h % n_k (qwen35), else h / (n_v / n_k)
    int64_t key_dim() const { return static_cast<int64_t>(n_k) * d_k; }
    int64_t value_dim() const { return static_cast<int64_t>(n_v) * d_v; }
    int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
};

// What a layer's feed-forward block is: one gated FFN, or routed experts (moe.h).
enum class FfnKind { dense, moe };

enum class Gating { softmax, sigmoid };  // the router's probabilities ({arch}.expert_gating_func 1, 2)

struct MoeParams {
    int n_expert = 0;                 // expert_count
    int n_used = 0;                   // expert_used_count: experts per token
    int64_t n_ff = 0;                 // expert_feed_forward_length
    bool norm_weights = true;         // expert_weights_norm: the chosen weights rescaled to sum to 1
    Gating gating = Gating::softmax;
    int64_t n_ff_shared = 0;          // expert_shared_feed_forward_length: a gated shared expert (0: none)
};

struct LayerParams {
    LayerKind kind = LayerKind::attention;
    int n_head = 0;                   // attention.head_count[il]
    int n_head_kv = 0;                // attention.head_count_kv[il]
    int head_dim = 0;                 // attention.key_length (== value_length)
    int64_t n_ff = 0;                 // feed_forward_length[il]
    int64_t window = 0;               // sliding window (0: full causal)
    int rope_dims = 0;                // rope.dimension_count
    float rope_base = 0.0f;           // rope.freq_base (or the family's local base)
    float rope_freq_scale = 1.0f;     // 1 / rope.scaling.factor for linear scaling
    float attn_scale = 0.0f;          // on q·k; 0: 1 / sqrt(head_dim)
    float attn_softcap = 0.0f;        // 0: none
    bool attn_gated = false;          // q_proj also gives a gate: out = o_proj(attn * sigmoid(gate))
    DeltaNetParams delta;             // when kind == delta
    FfnKind ffn = FfnKind::dense;
    MoeParams moe;                    // when ffn == moe

    int64_t q_dim() const { return static_cast<int64_t>(n_head) * head_dim; }
    int64_t kv_dim() const { return static_cast<int64_t>(n_head_kv) * head_dim; }
};

struct HParams {
    std::string arch;                 // general.architecture
    int64_t n_vocab = 0;              // rows of token_embd (the tokenizer may list fewer)
    int64_t n_embd = 0;               // embedding_length
    int n_layer = 0;                  // block_count
    int64_t n_ctx_train = 0;          // context_length
    float norm_eps = 0.0f;            // attention.layer_norm_rms_epsilon
    float final_softcap = 0.0f;       // on the logits; 0: none
    std::vector<LayerParams> layers;  // [n_layer]
    int n_mtp = 0;                    // nextn_predict_layers: MTP blocks after the trunk (block n_layer)
    LayerParams mtp;                  // the MTP block's decoder layer (when n_mtp > 0)
};

// Reads the keys every supported architecture shares. n_vocab comes from the token_embd
// tensor (with_vocab false: 0 where the file has none, a drafter borrowing its target's).
// Throws model::Error naming the key for a missing required key or a bad value.
HParams read_hparams(const gguf::File& file, const ArchDefaults& defaults, bool with_vocab = true);

// Optional typed lookups of "{arch}.{suffix}".
const gguf::Value* find_key(const gguf::File& file, const std::string& arch, const std::string& suffix);
double get_float(const gguf::File& file, const std::string& arch, const std::string& suffix, double dflt);

// Routed experts: every layer holding a router (blk.N.ffn_gate_inp) becomes a MoE layer with
// {arch}.expert_count, expert_used_count (both required then), expert_feed_forward_length
// (default feed_forward_length), expert_weights_norm (default norm_default) and
// expert_gating_func (default softmax).
void read_moe(const gguf::File& file, HParams& hp, bool norm_default);

// Hybrid models (qwen3next, qwen35): every full_attention_interval-th layer (default 4) is gated
// attention, the others gated DeltaNet layers of {arch}.ssm.conv_kernel, state_size,
// group_count, time_step_rank, inner_size (all required); `tiled`: their value heads' order.
void read_hybrid(const gguf::File& file, HParams& hp, bool tiled);

}  // namespace ds4::model
