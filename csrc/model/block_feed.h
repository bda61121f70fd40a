// A block drafter's side of a session (Session::track_block; model/block_drafter.h). Before the
// drafter can draft after position P, its state must hold a context row for every position
// p < P, made from the target's hidden states at p after the drafter's target layers. A session
// that tracks a block drafter keeps those hidden states from every pass it runs and feeds them
// lazily: the rows a verify pass accepted go in with the next draft, in one pass of the
// drafter; a pass of more than kEager rows (a prompt) is fed at once, so that its rows are not
// held (their share of the work is paid with the prefill). The drafter's state lives here, with
// the session, so a later generation on the session drafts without feeding the context again.
//
// A pass whose hidden states were not kept (rows given as embeddings, a batched step, a
// snapshot taken before tracking) leaves the feed stale: the next draft first re-evaluates the
// context in a scratch state of the target to recover them (lag() counts it).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/block_drafter.h"
#include "model/feed.h"

namespace ds4::model {

class BlockFeed final : public Feed {
public:
    static constexpr int64_t kEager = 32;   // rows of one pass fed with it (a prompt)
    static constexpr int64_t kChunk = 512;  // rows of a prompt fed at a time, of a re-evaluation per pass

    explicit BlockFeed(std::shared_ptr<BlockDrafter> drafter);
    BlockFeed(const BlockFeed& other);  // the drafter's state copied too (a session snapshot)

    Captures before(int64_t at, int64_t n) override;
    void committed(state::State& st, const std::vector<int32_t>& tokens, int64_t at, int64_t n) override;
    void lost() override;
    void rewound(int64_t n) override;
    int64_t lag(int64_t p) const override;
    bool stale() const override { return stale_; }
    const void* drafter() const override { return d_.get(); }
    std::unique_ptr<Feed> clone() const override { return std::make_unique<BlockFeed>(*this); }

    // A block pass after `anchor`, the token the target evaluates next at p = tokens.size()
    // (the session's positions): feeds the context rows the drafter lacks (after recovering
    // them when stale), then drafts (BlockDrafter::draft). False, nothing drafted, where the
    // context cannot be recovered (positions given as embeddings) or the block would not fit.
    bool draft(const std::vector<int32_t>& tokens, int32_t anchor, int64_t n, bool logits, int64_t head_rows,
               const BlockPick& pick);

private:
    // Feeds the rows held (positions [fed, fed + rows)) to the drafter.
    void feed();
    // Appends rows [r0, r0 + m) of the current pass of n rows to the rows held.
    void append(int64_t r0, int64_t m, int64_t n);
    bool resync(const std::vector<int32_t>& tokens);

    std::shared_ptr<BlockDrafter> d_;
    std::unique_ptr<state::State> st_;  // the drafter's: context rows of positions [0, n_past)
    int64_t width_;                     // floats of one position's features
    bool stale_ = false;
    std::vector<float> rows_;           // features of positions [st_->n_past(), ...) not fed yet
    std::vector<float> pass_;           // the current pass's captures [n_layers, n, n_embd]
};

}  // namespace ds4::model
