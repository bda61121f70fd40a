// The draft-model proposer: a separate, smaller GGUF with the same tokenizer drafts in its own
// session, kept in step with the target's context (what was accepted stays cached; a rejected
// suffix is truncated away before the next draft). Nothing runs on it until the scheduler first
// picks it: the prompt is fed as the first probe's catch-up, and its step and feed costs start
// from priors (its weight bytes and multiply-adds against the target's) until timed. It drafts greedily, or, for exact sampling,
// draws from its own distribution and reports it (Draft::q).
#pragma once

#include <memory>

#include "model/model.h"
#include "speculative/proposer.h"
#include "tokenizer/tokenizer.h"

namespace ds4::speculative {

// The draft's default shortlist: its output projection scores only the first kShortlist token
// ids, which in BPE vocabularies (ids in merge order, a proxy for frequency) cover ~93-96 % of
// the tokens of code and prose; the rest of the projection, most of a small model's bytes per
// token, is not read. Exact either way: a draft only proposes, and its q is what it drew from.
constexpr int64_t kShortlist = 32768;

// Throws std::invalid_argument naming the first difference if the draft's vocabulary (size,
// token texts, BOS / EOS ids) is not the target's. confidence > 0 ends a draft where the draft
// model's most likely token has a lower probability (its sampling distribution when it samples,
// softmax of the raw logits when greedy): llama.cpp's --draft-p-min. shortlist: the draft scores
// only the first `shortlist` token ids (0: all; < 0: kShortlist for vocabularies over twice that).
std::unique_ptr<Proposer> make_draft_proposer(std::shared_ptr<model::Model> draft, const model::Model& target,
                                              const tok::Tokenizer& draft_tok, const tok::Tokenizer& target_tok,
                                              float confidence = 0.0f, int64_t shortlist = -1);

}  // namespace ds4::speculative
