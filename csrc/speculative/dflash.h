// The DFlash proposer: a block drafter (model/block_drafter.h) drafts up to block_size - 1
// tokens in one non-causal pass after the token the target evaluates next, conditioned on the
// target's hidden states, which the target's session keeps for it (model/block_feed.h). Greedy
// drafts come from the fused argmax of the target's output projection; exact sampling draws
// each position from the block's distribution there (DraftDraw), which depends on the context
// only, not on the tokens drafted before it: q is exactly what the token was drawn from.
//
// A block pass costs about the same whatever the number of tokens kept from it, so the
// scheduler is told its cost per draft, not per token (Proposer::cost_per_draft).
#pragma once

#include <memory>

#include "model/block_drafter.h"
#include "model/session.h"
#include "speculative/proposer.h"

namespace ds4::speculative {

// Throws model::Error if the drafter was made for another model than the session's,
// std::invalid_argument for a bad confidence. The session starts tracking the drafter
// (Session::track_block). vocab: the tokenizer's size (ids past it are never drafted);
// shortlist: as the draft model's (speculative/draft.h).
std::unique_ptr<Proposer> make_dflash_proposer(model::Session& target, std::shared_ptr<model::BlockDrafter> drafter,
                                               int32_t vocab, float confidence = 0.0f, int64_t shortlist = -1);

}  // namespace ds4::speculative
