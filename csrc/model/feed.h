// What a session keeps for a drafter that conditions on the hidden states of its passes (the
// built-in MTP block: mtp_feed.h; a block drafter: block_feed.h). The session calls it around
// every pass that commits positions, and when it rewinds or loses track.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/request.h"
#include "state/state.h"

namespace ds4::model {

class Feed {
public:
    virtual ~Feed() = default;
    // Around a pass committing n rows from position `at` (the state's n_past): what the pass
    // keeps of them (empty when stale: nothing to keep), then, once it committed, their tokens
    // (the session's, [0, at + n)). committed() may feed the drafter.
    virtual Captures before(int64_t at, int64_t n) = 0;
    virtual void committed(state::State& st, const std::vector<int32_t>& tokens, int64_t at, int64_t n) = 0;
    // Rows were committed without their hidden states (a batched pass, embeddings, a restore).
    virtual void lost() = 0;
    // The state went back to n positions.
    virtual void rewound(int64_t n) = 0;
    // Rows the drafter must take before drafting after position p (the state's n_past): the
    // rows it lacks, or p itself when stale (the context is then evaluated again first).
    virtual int64_t lag(int64_t p) const = 0;
    virtual bool stale() const = 0;
    // What it feeds (the model of an MTP block, a block drafter): a snapshot's feed is
    // restored only into a feed of the same drafter.
    virtual const void* drafter() const = 0;
    // A copy for a session snapshot.
    virtual std::unique_ptr<Feed> clone() const = 0;
};

}  // namespace ds4::model
