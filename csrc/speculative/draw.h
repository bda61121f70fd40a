// How a model proposer (a draft model, the MTP block) turns its logits row into a draft token:
// greedily, or, for exact sampling, drawn from its own distribution q under the target's
// sampling settings (penalties aside), q reported in Draft::q; and where a confidence cut-off
// ends the draft.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sample/sampler.h"
#include "speculative/proposer.h"

namespace ds4::speculative {

class DraftDraw {
public:
    // confidence > 0 ends a draft where the most likely token's probability is below it.
    explicit DraftDraw(float confidence) : confidence_(confidence) {}
    // Exact sampling: draws from q under `params` with its own random stream (see
    // Proposer::sample_drafts); rows of Draft::q have n_target entries. Temperature 0: greedy.
    void sample(const sample::SamplingParams& params, int32_t n_vocab, int32_t n_target);
    // Whether the token is the argmax of the logits and nothing else is needed (no sampling,
    // no cut-off): the proposer may compute it without the logits.
    bool argmax_only() const { return !sampler_ && confidence_ <= 0.0f; }
    // The draft token from row[n] (modified: ids from `vocab` on are never drafted); -1 where the
    // confidence is below the cut-off, which reads the distribution before any draw, so it does
    // not bias exact acceptance. A drawn token's q is appended to draft->q.
    int32_t pick(float* row, int32_t n, int32_t vocab, Draft* draft);

private:
    float confidence_;
    std::unique_ptr<sample::Sampler> sampler_;
    int32_t n_target_ = 0;
    std::vector<float> q_;
};

}  // namespace ds4::speculative
