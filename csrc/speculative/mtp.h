// The built-in MTP proposer: the target's own MTP block (nextn; model/mtp_feed.h) drafts in the
// target's session. A draft's first step joins the token the target evaluates next with the
// target's hidden state at the position before; each chained step joins the token just drafted
// with the block's own output hidden state. Greedy drafts come from the fused argmax of the
// shared head; exact sampling draws them from the block's distribution (DraftDraw).
//
// Depth (the seed's Qwen policy): one token ahead by default; a chained step more engages while
// the recent drafts were accepted whole (kPerfect in a row), and drops after repeated rejections
// of the deepest token (kMisses in a row), up to `max_depth`; or a fixed depth (> 0). A draft
// is always the depth's length; the scheduler decides whether to draft at all, judging drafts of
// up to max_depth (so that a block whose single drafts do not pay but whose chained ones do is
// not kept from learning that), its ledger keeping speculation from losing.
#pragma once

#include <memory>

#include "model/session.h"
#include "speculative/proposer.h"

namespace ds4::speculative {

// The adaptive depth on its own: what the proposer asks for and how verdicts move it.
class MtpDepth {
public:
    static constexpr int kPerfect = 4;  // drafts accepted whole before one more step engages
    static constexpr int kMisses = 2;   // rejections of the deepest token before it disengages

    MtpDepth(int max_depth, int fixed) : max_(max_depth), fixed_(fixed) {}
    int now() const { return fixed_ > 0 ? fixed_ : depth_; }
    int most() const { return fixed_ > 0 ? fixed_ : max_; }
    bool fixed() const { return fixed_ > 0; }
    // A draft of k tokens had its first `accepted` accepted.
    void verified(int k, int accepted);

private:
    int max_, fixed_;
    int depth_ = 1;
    int perfect_ = 0, misses_ = 0;
};

// Throws model::Error if the target has no MTP block, std::invalid_argument for a bad depth or
// confidence. The session starts tracking MTP (Session::track_mtp). vocab: the tokenizer's
// size (ids past it are never drafted); shortlist: as the draft model's (speculative/draft.h).
std::unique_ptr<Proposer> make_mtp_proposer(model::Session& target, int32_t vocab, int max_depth, int fixed_depth,
                                            float confidence = 0.0f, int64_t shortlist = -1);

}  // namespace ds4::speculative
