// Building blocks of the decoder (decoder.h): binding tensors with shape checks, the attention
// block (projections, q/k norms, RoPE, KV write, attention, output projection), the gated FFN
// and the output head.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "model/hparams.h"
#include "model/request.h"
#include "state/kv_slot.h"

namespace ds4::model::blocks {

using backend::Backend;
using backend::Rows;
using backend::Vec;
using backend::Weight;

// Binds tensors of `file` by name, checking presence, shape and that the backend runs their
// format; every failure is a model::Error naming the file, the tensor and what was expected.
class Loader {
public:
    Loader(const gguf::File& file, Backend& be, std::string arch)
        : file_(file), be_(be), arch_(std::move(arch)) {}

    // A matrix of n_out rows of n_in elements (ggml ne = [n_in, n_out]), used with `op`. A
    // matmul weight the backend repacks (Backend::pack) has its mapped pages released.
    Weight matrix(const std::string& name, int64_t n_in, int64_t n_out,
                  backend::Op op = backend::Op::matmul) const;
    // A stack of n_mat such matrices (ggml ne = [n_in, n_out, n_mat]: routed experts).
    Weight stack(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_mat) const;
    // A matrix of one row, stored as [n_in] or [n_in, 1] (a shared expert's gate).
    Weight row(const std::string& name, int64_t n_in) const;
    bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }
    // Throws model::Error naming the first op the backend does not run.
    void require_ops(std::initializer_list<backend::Op> ops) const;
    // A vector of n elements (norm weights, biases), dequantised to float once at load and
    // handed to the backend.
    Vec vec(const std::string& name, int64_t n) const;
    // vec() if the tensor exists, else an empty one.
    Vec vec_opt(const std::string& name, int64_t n) const;
    // A whole tensor of shape ne (ggml order) as one vector (a convolution's taps).
    Vec tensor(const std::string& name, const std::vector<int64_t>& ne) const;

private:
    const gguf::TensorInfo& find(const std::string& name) const;
    Weight bind(const gguf::TensorInfo& t, int64_t n_in, int64_t n_out, int64_t n_mat, backend::Op op) const;
    [[noreturn]] void shape_error(const gguf::TensorInfo& t, const std::string& expected) const;

    const gguf::File& file_;
    Backend& be_;
    std::string arch_;
};

// One attention layer's weights; optional parts are empty.
struct AttnWeights {
    Weight q, k, v, o;                        // [n_embd -> q_dim (2 q_dim gated)], [-> kv_dim] x2, [q_dim -> n_embd]
    Vec q_bias, k_bias, v_bias;               // [q_dim], [kv_dim], [kv_dim] (qwen2)
    Vec q_norm, k_norm;                       // [head_dim] RMSNorm per head (qwen3, gemma3)

    // blk.{il}.attn_{q,k,v,output}.weight; biases / q,k norms when `bias` / `qk_norm`.
    bool gated = false;                       // each head's q rows followed by its gate's (qwen3next)

    static AttnWeights load(const Loader& ld, int64_t n_embd, const LayerParams& L, int il, bool bias, bool qk_norm);
};

struct AttnConfig {
    backend::AttnParams attn;
    backend::RopeParams rope;
    float norm_eps = 0.0f;                    // of the q/k norms
};

// A layer's attention parameters: heads, scale (1/sqrt(head_dim) unless set), window,
// soft-cap, RoPE; freq_factors: the optional per-pair RoPE divisors (llama 3), or empty.
AttnConfig attn_config(const LayerParams& L, backend::RopeMode mode, float norm_eps, const Vec& freq_factors);

// Host scratch of attention(), reused between passes.
struct AttnScratch {
    std::vector<int64_t> idx;          // unzip's rows
    std::vector<backend::KvView> kv;   // each sequence's cache of the layer
};

// out[n, n_embd] = self-attention of x[n, n_embd] (already normed) for the rows of pass p,
// after writing each run's new K/V rows of `layer` into its state's slot.
void attention(Backend& be, const AttnWeights& w, const AttnConfig& cfg, const Pass& p, int layer, Rows x, Rows out,
               AttnScratch& scratch);

// The keys and values attention() computes from x[n, n_embd] (already normed) at positions
// pos[n]: projections, biases, the k norm, RoPE on k.
void key_values(Backend& be, const AttnWeights& w, const AttnConfig& cfg, Rows x, const int32_t* pos, Rows k, Rows v);
// Writes key_values() of x at consecutive positions pos[0], pos[0] + 1, ... into `slot`, with no
// query: a block drafter's context rows, whose keys and values come from its target's features.
void store_key_values(Backend& be, const AttnWeights& w, const AttnConfig& cfg, const state::KvSlot& slot,
                      const int32_t* pos, Rows x);

// src seen as rows of `unit` floats alternating between two tensors (a fused projection's
// per-head halves): the even rows into even, the odd ones into odd. idx: host scratch.
void unzip(Backend& be, Rows src, int64_t unit, Rows even, Rows odd, std::vector<int64_t>& idx);

struct FfnWeights {
    Weight gate, up, down;                    // [n_embd -> n_ff] x2, [n_ff -> n_embd]
    static FfnWeights load(const Loader& ld, int64_t n_embd, const LayerParams& L, int il);
};

// out[n, n_embd] = down(act(gate(x)) * up(x)) for x[n, n_embd]
void ffn(Backend& be, const FfnWeights& w, backend::Act act, Rows x, Rows out);

// The output projection: `output.weight`, or token_embd when the file has none (tied).
Weight output_weight(const Loader& ld, const HParams& hp);

// The output head for the rows rows[0..n_rows) of x[., n_embd]: logits[n_rows, n_vocab] =
// out_w · rms_norm(row, norm), then cap * tanh(v / cap) when cap > 0. Skipping the rows nobody
// reads saves the output projection, the largest matmul, for most of a prefill. With argmax
// non-null, writes each row's greedy token there instead (the rows themselves are never
// materialised). head_rows > 0 scores only the first head_rows vocabulary entries (a
// drafter's shortlist; rounded up to whole tiles of a packed matrix); the others read as -inf.
void head(Backend& be, const Weight& out_w, const Vec& norm, float eps, float cap, Rows x, const int64_t* rows,
          int64_t n_rows, float* logits, int32_t* argmax, int64_t head_rows = 0);
// The same head for sampled rows: out[i] the shortlist of row rows[i] within margin[i] of its
// largest logit, or of its keep[i] largest where keep[i] > 0 (request.h's Shortlisted), its logits in full where the backend cannot
// shortlist it (or cap > 0: the soft-cap's ties are the full row's).
void head_shortlist(Backend& be, const Weight& out_w, const Vec& norm, float eps, float cap, Rows x,
                    const int64_t* rows, int64_t n_rows, const float* margin, const int32_t* keep, Shortlisted* out);

}  // namespace ds4::model::blocks
