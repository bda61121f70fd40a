// Routed experts (Qwen3-MoE and the MoE layers of the hybrids): a router scores n_expert gated
// FFNs per token, the n_used best are run on it, and their outputs are summed with the router's
// weights; then a shared expert, where the layer has one, weighted by its own sigmoid gate.
//
// Routing runs on the host: the router's logits come back (n x n_expert floats), each row picks
// its experts, and rows are grouped by expert. Each chosen expert then runs once over the rows
// that chose it, reading only its own matrices of the stacks, and adds its weighted output into
// theirs. A row's sum is taken in ascending expert order (as transformers' loop over experts),
// whatever the other rows chose, and a matmul's row never depends on the rows that share its
// pass (backend.h), so neither does a row's result.
#pragma once

#include <cstdint>
#include <vector>

#include "model/blocks.h"
#include "model/hparams.h"

namespace ds4::model::moe {

struct Weights {
    backend::Weight router;           // [n_embd -> n_expert] (ffn_gate_inp)
    backend::Weight gate, up, down;   // stacks of n_expert: [n_embd -> n_ff] x2, [n_ff -> n_embd]
    blocks::FfnWeights shared;        // the shared expert (MoeParams::n_ff_shared > 0)
    backend::Weight shared_gate;      // [n_embd -> 1]: its weight per token, sigmoid(x . w)

    // blk.{il}.ffn_gate_inp, ffn_{gate,up,down}_exps; ffn_{gate,up,down}_shexp, ffn_gate_inp_shexp
    static Weights load(const blocks::Loader& ld, int64_t n_embd, const MoeParams& m, int il);
};

// The routing's host memory, sized by the largest pass so far and reused (a decode step
// allocates nothing). One per model: its passes run one at a time.
class Router {
public:
    // out[n, n_embd] = sum over each row's chosen experts e of weight_e * ffn_e(x)
    void run(backend::Backend& be, const Weights& w, const MoeParams& m, backend::Act act, backend::Rows x,
             backend::Rows out);

private:
    // Picks each row's experts and weights from the router's logits, then groups the rows by
    // expert (first_[e]..first_[e + 1] in rows_ / weights_).
    void route(const MoeParams& m, int64_t n);

    std::vector<float> logits_;       // [n, n_expert], then the rows' probabilities
    std::vector<int32_t> order_;      // [n_expert] a row's experts, best first
    std::vector<int32_t> chosen_;     // [n, n_used]
    std::vector<float> chosen_w_;     // [n, n_used]
    std::vector<int64_t> first_;      // [n_expert + 1]
    std::vector<int64_t> next_;       // [n_expert] the next free place of each expert's group
    std::vector<int64_t> rows_;       // [n * n_used] grouped by expert
    std::vector<float> weights_;      // [n * n_used]
    std::vector<int64_t> all_;        // [n] 0..n-1: the shared expert's rows
    std::vector<float> shared_w_;     // [n] its weights
};

}  // namespace ds4::model::moe
