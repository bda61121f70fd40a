// A DFlash / DSpark block drafter (docs/drafters.md): a few decoder layers that draft a block of
// tokens in one non-causal pass, conditioned on hidden states of their target model.
//
//   context   each committed position p of the target contributes a row of features: the
//             target's hidden states after layers target_layers (capture indices, request.h),
//             side by side, fused by fc and hidden_norm into one n_embd row, from which every
//             draft layer projects the keys and values of position p (no query, no MLP)
//   block     rows [anchor, mask x (B - 1)] at positions P .. P + B - 1 (P: the positions the
//             drafter holds, the anchor the token the target evaluates next), embedded with the
//             target's token embeddings, through the draft layers, each row attending to the
//             context and to every row of the block; rows 1 .. B - 1, after the final norm,
//             through the target's output projection (or the drafter's own over a reduced
//             vocabulary) give the drafted tokens for positions P + 1 ..
//
// The drafter runs on its target's backend, under its pass lock (Model::lend); its context
// keys and values live in a state of its own, one KV slot per draft layer, that rewinds like
// any KV state (a block pass writes past the held positions and commits nothing).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/blocks.h"
#include "model/model.h"

namespace ds4::model {

// A drafted position as a block pass hands it to its caller: position i of the draft (the
// token after the anchor at i = 0), its logits over the target's vocabulary (ids the drafter
// cannot draft read -inf; null when only the argmax was asked for), their argmax, and the
// confidence head's estimate that the token there is accepted if the earlier ones were (1
// without a confidence head).
struct BlockRow {
    int64_t i = 0;
    float* logits = nullptr;
    int32_t argmax = -1;
    float confidence = 1.0f;
};
// Returns the token drafted at the row (what a Markov head conditions the next row on), or -1
// to end the draft there.
using BlockPick = std::function<int32_t(const BlockRow&)>;

class BlockDrafter {
public:
    // Binds the drafter's tensors on target's backend. Throws Error for a file that is not a
    // block drafter, or one made for another target (its fingerprint names both).
    static std::shared_ptr<BlockDrafter> load(std::shared_ptr<const gguf::File> file, std::shared_ptr<Model> target);
    ~BlockDrafter();
    BlockDrafter(const BlockDrafter&) = delete;
    BlockDrafter& operator=(const BlockDrafter&) = delete;

    const std::string& path() const { return file_->path(); }
    // "dspark" for a drafter with a Markov head (DSpark), else "dflash".
    const char* kind() const { return markov_w1_.data ? "dspark" : "dflash"; }
    Model& target() const { return *target_; }
    int block_size() const { return block_; }
    // Tokens one block pass drafts at most: block_size() when the anchor's row predicts the first
    // (DSpark's default), else block_size() - 1 (the anchor's row predicts nothing).
    int max_draft() const { return from_anchor_ ? block_ : block_ - 1; }
    bool has_confidence() const { return conf_.data != nullptr; }
    int32_t mask_token() const { return mask_; }
    // The target's hidden states each context row joins, as capture indices (request.h).
    const std::vector<int>& layers() const { return layers_; }
    int64_t n_features() const { return static_cast<int64_t>(layers_.size()) * hp_.n_embd; }
    // Weight bytes a block pass reads, its multiply-adds per block row and per context row, the
    // output head aside (the scheduler's priors).
    double block_bytes() const { return block_bytes_; }
    double block_macs() const { return block_macs_; }
    double context_macs() const { return context_macs_; }

    // The drafter's state for one sequence: a KV slot per draft layer, n_ctx as the target's.
    std::unique_ptr<state::State> new_state() const;
    // Appends n context rows at positions st.n_past() .. from features[n, n_features()].
    void context(state::State& st, const float* features, int64_t n);
    // One block pass after the positions st holds, drafting up to n <= max_draft() tokens: each
    // drafted position, in order, goes to pick (with its logits when `logits`, else only their
    // argmax), which says what was drafted there or ends the draft. head_rows > 0 scores only
    // the first head_rows ids of the target's output projection. Writes the block's keys and
    // values past n_past (overwritten by the next context rows).
    void draft(state::State& st, int32_t anchor, int64_t n, bool logits, int64_t head_rows, const BlockPick& pick);

private:
    struct Layer {
        backend::Vec attn_norm, ffn_norm;
        blocks::AttnWeights attn;
        blocks::FfnWeights ffn;
        blocks::AttnConfig cfg;
    };
    BlockDrafter(std::shared_ptr<const gguf::File> file, std::shared_ptr<Model> target, HParams hp);
    void bind(const Model::Lent& lent);
    void bind_dspark(const blocks::Loader& ld);
    void check_target() const;
    // DSpark's heads over the final-normed rows h[n, n_embd], position by position (block_drafter.cpp).
    void markov(backend::Backend& be, const Model::Lent& lent, backend::Rows h, int64_t n, int32_t anchor, bool logits,
                const BlockPick& pick);

    std::shared_ptr<const gguf::File> file_;
    std::shared_ptr<Model> target_;
    HParams hp_;
    int block_ = 0;
    int32_t mask_ = -1;
    std::vector<int> layers_;
    float embed_scale_ = 1.0f;
    backend::Weight fc_;
    backend::Vec hidden_norm_, out_norm_;
    std::vector<Layer> draft_layers_;
    bool from_anchor_ = false;           // the anchor's row predicts the first drafted token
    // DSpark: its own output projection over a reduced vocabulary (d2t_: each row's target id;
    // empty: the target's projection), the Markov head (w1: a row of rank R per previous token,
    // w2: R -> the draft vocabulary) and the confidence head ([hidden; w1 row] -> 1, plus a bias).
    backend::Weight out_, markov_w1_, markov_w2_, conf_;
    float conf_bias_ = 0.0f;
    std::vector<int32_t> d2t_;
    std::vector<int32_t> w1_row_;        // compact W1: each target token's row (empty: its id)
    std::vector<float> row_;             // one drafted position's logits over the target's vocabulary
    std::vector<float> draft_row_;       // ... over the drafter's
    std::vector<float> out_logits_;      // a DFlash pass's rows
    std::vector<int32_t> out_ids_;
    double block_bytes_ = 0, block_macs_ = 0, context_macs_ = 0;
    // Scratch of the pass being run, filled under the target's pass lock (shared by every session).
    std::vector<int32_t> pos_, last_, ids_;
    std::vector<int64_t> rows_;
    blocks::AttnScratch attn_;
};

}  // namespace ds4::model
