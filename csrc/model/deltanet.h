// Gated DeltaNet layers (the linear-attention layers of Qwen3-Next): per token, q/k/v from a
// causal depthwise convolution, a gated delta-rule recurrence over per-head matrices, a gated
// RMSNorm and an output projection. The state (convolution window and matrices) lives in the
// sequence's recurrent slot (state/recurrent_slot.h); this layer is also what replays that slot
// after a rejected draft.
//
// GGUF tensors (llama.cpp's qwen3next, qwen35): attn_qkv [n_embd -> q | k | v], attn_gate
// [-> z], ssm_ba [-> (b, a) per key-head group] (qwen3next) or ssm_beta and ssm_alpha [-> n_v]
// (qwen35), ssm_conv1d [conv_kernel per channel], ssm_dt.bias, ssm_a (-exp(A_log)), ssm_norm
// [d_v], ssm_out [value_dim -> n_embd].
#pragma once

#include <cstdint>
#include <vector>

#include "model/blocks.h"
#include "state/recurrent_slot.h"

namespace ds4::model::deltanet {

// Rows logged after a checkpoint at most (a verify pass and the steps after it).
constexpr int64_t kLogRows = 64;

struct Weights {
    backend::Weight qkv, gate, out;
    backend::Weight ba;               // b and a fused per key-head group (qwen3next), or
    backend::Weight beta, alpha;      // apart (qwen35)
    backend::Vec conv, dt_bias, a, norm;

    static Weights load(const blocks::Loader& ld, int64_t n_embd, const DeltaNetParams& p, int il);
};

class Layer final : public state::Recurrence {
public:
    Layer(Weights w, const DeltaNetParams& p, float norm_eps);

    // out[n, n_embd] for x[n, n_embd] (normed) over the rows of pass p (causal runs only),
    // advancing each sequence's slot of `layer` and logging rows after a checkpoint.
    void run(backend::Backend& be, const Pass& p, int layer, backend::Rows x, backend::Rows out);
    void replay(backend::Backend& be, state::RecurrentSlot& slot, int64_t n) const override;
    state::RecurrentShape shape() const;

private:
    // conv(qkv) and the recurrence for one sequence's rows; o: [m, value_dim]
    void recur(backend::Backend& be, state::RecurrentSlot& slot, backend::Rows qkv, backend::Rows a, backend::Rows b,
               backend::Rows o) const;

    Weights w_;
    DeltaNetParams p_;
    float eps_;
    std::vector<int64_t> idx_;  // ssm_ba's b and a rows, reused between passes
};

}  // namespace ds4::model::deltanet
