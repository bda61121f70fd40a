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
#include <memory>
#include <string>
#include <vector>

#include "model/blocks.h"
#include "model/model.h"

namespace ds4::model {

// What a block pass returns for rows 1 .. n of the block (a row each).
struct BlockOut {
    float* logits = nullptr;    // [n, n_vocab of the target] or null
    int32_t* argmax = nullptr;  // [n] or null
    int64_t head_rows = 0;      // > 0: score only the first head_rows ids, the rest -inf
};

class BlockDrafter {
public:
    // Binds the drafter's tensors on target's backend. Throws Error for a file that is not a
    // block drafter, or one made for another target (its fingerprint names both).
    static std::shared_ptr<BlockDrafter> load(std::shared_ptr<const gguf::File> file, std::shared_ptr<Model> target);
    ~BlockDrafter();
    BlockDrafter(const BlockDrafter&) = delete;
    BlockDrafter& operator=(const BlockDrafter&) = delete;

    const std::string& path() const { return file_->path(); }
    const std::string& kind() const { return hp_.arch; }  // "dflash" | "dspark"
    Model& target() const { return *target_; }
    int block_size() const { return block_; }
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
    // One block pass after the positions st holds: rows 1 .. n (n < block_size()) return `out`.
    // Writes the block's keys and values past n_past (overwritten by the next context rows).
    void draft(state::State& st, int32_t anchor, int64_t n, const BlockOut& out);

private:
    struct Layer {
        backend::Vec attn_norm, ffn_norm;
        blocks::AttnWeights attn;
        blocks::FfnWeights ffn;
    };
    BlockDrafter(std::shared_ptr<const gguf::File> file, std::shared_ptr<Model> target, HParams hp);
    void bind(const Model::Lent& lent);
    void check_target() const;

    std::shared_ptr<const gguf::File> file_;
    std::shared_ptr<Model> target_;
    HParams hp_;
    int block_ = 0;
    int32_t mask_ = -1;
    std::vector<int> layers_;
    float embed_scale_ = 1.0f;
    blocks::AttnConfig cfg_;
    backend::Weight fc_;
    backend::Vec hidden_norm_, out_norm_;
    std::vector<Layer> draft_layers_;
    double block_bytes_ = 0, block_macs_ = 0, context_macs_ = 0;
    // Scratch of the pass being run (passes are serialised by the target's lock).
    std::vector<int32_t> pos_, last_, ids_;
    std::vector<int64_t> rows_, idx_;
};

// A fingerprint of a model's vocabulary (its size and every token's bytes) and of its weights
// (the tensor directory and the first MiB of the token embeddings), as a drafter file records its
// target's: 16 hex digits each.
std::string vocab_fingerprint(const gguf::File& file);
std::string weights_fingerprint(const gguf::File& file);

}  // namespace ds4::model
