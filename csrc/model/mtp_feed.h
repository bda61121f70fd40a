// The built-in MTP block's side of a session (Model::has_mtp). Before the block can draft after
// position P, its slot must hold, for every position p < P, the row joining the token at p with
// the target's hidden state (after its final norm) at p - 1, zeros before the first. A session
// that tracks MTP keeps the hidden states its passes produce until the block has taken them, and
// feeds them lazily: the rows a verify pass accepted go in with the next draft's first step, in
// one pass of the block, and so do the steps decoded while the block sat out, up to kBehind
// rows. A pass of more than kEager rows (a prompt) is fed at once: its share of the block's work
// is paid in the prefill (about one layer's in n_layer), not by the first draft.
//
// A pass whose hidden states were not kept (rows given as embeddings, a batched step, a
// snapshot taken before tracking) leaves the feed stale: the next draft first re-evaluates the
// context in a scratch state to recover them, the one case that pays a prefill (lag() counts it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/feed.h"
#include "model/model.h"
#include "state/state.h"

namespace ds4::model {

class MtpFeed final : public Feed {
public:
    // Rows of one pass fed with it (a prompt, not a verify pass).
    static constexpr int64_t kEager = 32;
    // Rows kept behind at most (what a first draft after a pause catches up).
    static constexpr int64_t kBehind = 128;
    // Rows a re-evaluation of the context feeds per pass.
    static constexpr int64_t kChunk = 512;

    explicit MtpFeed(Model& model);

    // Feed's calls; the pass keeps its hidden states after the final norm.
    Captures before(int64_t at, int64_t n) override;
    void committed(state::State& st, const std::vector<int32_t>& tokens, int64_t at, int64_t n) override;
    void lost() override { stale_ = true; }
    void rewound(int64_t n) override;
    int64_t lag(int64_t p) const override { return stale_ ? p : std::max<int64_t>(0, p - fed_); }
    bool stale() const override { return stale_; }
    const void* drafter() const override { return model_; }
    std::unique_ptr<Feed> clone() const override { return std::make_unique<MtpFeed>(*this); }
    // The first step of a draft after `tok`, the token the target evaluates next at p (the
    // state's n_past; tokens: the session's [0, p)): feeds the rows the block lacks and tok's
    // row, writing `out` for tok's. Returns false, writing nothing, where the context cannot be
    // fed (positions given as embeddings).
    bool draft(state::State& st, const std::vector<int32_t>& tokens, int32_t tok, const MtpOut& out);
    // A chained step: tok's row at pos, with a previous step's hidden (its `out.hidden`).
    void chain(state::State& st, int64_t pos, int32_t tok, const float* hidden, const MtpOut& out);

private:
    // Feeds rows [fed_, p) and, when tok >= 0, tok's row at p (outputs for the last row).
    void feed(state::State& st, const std::vector<int32_t>& tokens, int64_t p, int32_t tok, const MtpOut* out);
    // Recovers the hidden states of [0, p) by evaluating tokens in a scratch state and feeds them.
    bool resync(state::State& st, const std::vector<int32_t>& tokens, int64_t p);
    // Keeps only the hidden states the next rows need.
    void trim();

    // Where a pass of n rows writes its hidden states (null when stale).
    float* keep(int64_t at, int64_t n);

    Model* model_;
    int64_t d_;
    int final_norm_;         // the capture index after the final norm
    int64_t fed_ = 0;        // the block's slot holds rows [0, fed_)
    int32_t fed_tok_ = -1;   // the token of row fed_ - 1 when a draft fed it ahead of the target
    bool stale_ = false;
    int64_t h0_ = -1;        // hid_ holds the hidden states of positions [h0_, h0_ + rows) (-1: zeros)
    std::vector<float> hid_;
    std::vector<float> pass_;     // the current pass's hidden states
    std::vector<int32_t> toks_;   // a feed's tokens
};

}  // namespace ds4::model
