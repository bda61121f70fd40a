// A session's state is a set of typed per-layer slots (state.h). A slot holds what one layer
// keeps between forward passes: K/V rows for an attention layer (kv_slot.h); a convolution window
// and a recurrent matrix for a gated-DeltaNet layer; a drafter's own KV.
//
// Slots differ in how they go back in time. A KV slot holds every position, so rewinding is
// forgetting rows. A recurrent slot holds only the state after the last position, so it can go
// back only to a copy taken earlier (checkpoint) and must then be fed the accepted tokens again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "state/serial.h"

namespace ds4::state {

enum class SlotKind { kv, recurrent };

// What a snapshot holds of one slot (its type is the slot's own).
struct SlotSnapshot {
    virtual ~SlotSnapshot() = default;
    virtual size_t bytes() const = 0;
    // Its bytes for a Reader of the same kind of slot (Slot::load).
    virtual void save(Writer& w) const = 0;
};

class Slot {
public:
    virtual ~Slot() = default;
    virtual SlotKind kind() const = 0;

    // Makes positions [0, n) writable (n <= the state's n_ctx, checked by the state).
    virtual void reserve(int64_t n) = 0;
    // The state is about to run a pass that may be partly rejected; it holds n_past positions.
    virtual void checkpoint(int64_t n_past) = 0;
    // Goes back to holding n positions, with `checkpoint` the position of the last checkpoint
    // (-1: none) and n_past the positions held now. Returns the first position whose token must
    // be fed through this slot again to reach n (n itself when nothing must be replayed). Throws
    // std::out_of_range when the slot cannot reach n.
    virtual int64_t rewind(int64_t n, int64_t checkpoint, int64_t n_past) = 0;
    // Whether rewind(n, ..) would succeed (n <= n_past).
    virtual bool reachable(int64_t n, int64_t n_past) const = 0;

    virtual std::unique_ptr<SlotSnapshot> snapshot(int64_t n_past) const = 0;
    // Throws std::invalid_argument if `snap` is not a snapshot of a slot like this one holding
    // n_past positions; restore() is called only after every slot of the state passed it.
    virtual void check(const SlotSnapshot& snap, int64_t n_past) const = 0;
    virtual void restore(const SlotSnapshot& snap, int64_t n_past) = 0;
    // A snapshot saved by a slot like this one holding n_past positions, read back; throws
    // std::invalid_argument for data of another shape or cut short.
    virtual std::unique_ptr<SlotSnapshot> load(Reader& r, int64_t n_past) const = 0;
};

}  // namespace ds4::state
