// One sequence's state: a typed slot per layer that keeps something between passes (slot.h),
// and the number of positions held.
//
// A forward pass reserves positions, the layers write their slots, and the pass commits the new
// positions (a block pass writes and commits nothing). Going back:
//   - checkpoint() before a pass that may be partly rejected (a speculative verify pass);
//   - rollback(n) afterwards, to any n from the checkpoint on: KV slots forget rows, recurrent
//     slots restore their checkpoint copy; it returns how many tokens (those before n) must be
//     fed again to bring the recurrent slots to n. Never the whole context;
//   - truncate(n) to any position the slots can reach (every position for KV-only states);
//   - snapshot()/restore() copy every slot.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "state/kv_slot.h"
#include "state/recurrent_slot.h"
#include "state/slot.h"

namespace ds4::state {

// Evaluating would take the state past its n_ctx positions.
class ContextOverflow : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Every slot's copy at one position. Taking one copies each slot's valid part (KV: n_past rows
// of K and V per attention layer; Gemma 3 270M, f32: 36 KiB per position), restoring copies it
// back: cheap next to re-evaluating the prefix, not free.
struct Snapshot {
    int64_t n_past = 0;
    std::vector<std::unique_ptr<SlotSnapshot>> slots;  // per layer; null where the layer keeps nothing
    size_t bytes() const;
    // Its bytes for State::load of a state of the same shape.
    void save(Writer& w) const;
};

class State {
public:
    // slots: per layer, null for a layer that keeps nothing between passes. owner: the model
    // whose passes may use it (checked by the model).
    State(std::vector<std::unique_ptr<Slot>> slots, int64_t n_ctx, const void* owner = nullptr);

    const void* owner() const { return owner_; }
    int64_t n_past() const { return n_past_; }
    int64_t n_ctx() const { return n_ctx_; }
    int n_layer() const { return static_cast<int>(slots_.size()); }
    Slot* slot(int layer) const { return slots_[static_cast<size_t>(layer)].get(); }
    // The KV (recurrent) slot of `layer`; throws std::logic_error if that layer has another kind.
    KvSlot& kv(int layer) const;
    RecurrentSlot& recurrent(int layer) const;

    // Makes positions [0, n) writable in every slot. Throws ContextOverflow if n > n_ctx.
    void reserve(int64_t n);
    // Marks positions [0, n) held after a pass wrote them (n_past <= n <= reserved).
    void commit(int64_t n);

    void checkpoint();
    // The position of the last checkpoint, or -1.
    int64_t checkpoint_pos() const { return checkpoint_; }
    // Back to n positions, checkpoint_pos() <= n <= n_past(); returns how many tokens before n
    // the caller must feed again (0 when every slot is KV). Throws std::out_of_range otherwise.
    int64_t rollback(int64_t n);
    // Back to any n in [0, n_past] that every slot can reach without a replay (recurrent
    // slots: 0 only); throws std::out_of_range for a position out of range or one only a replay
    // could reach.
    void truncate(int64_t n);
    // Whether going back to n (rollback or truncate) is possible.
    bool reachable(int64_t n) const;

    Snapshot snapshot() const;
    // Throws std::invalid_argument if the snapshot comes from a state of another shape.
    void restore(const Snapshot& snap);
    // A snapshot saved from a state of this shape, read back (restore() checks it fits n_ctx);
    // throws std::invalid_argument for data of another shape or cut short.
    Snapshot load(Reader& r) const;

private:
    std::vector<std::unique_ptr<Slot>> slots_;
    int64_t n_ctx_;
    const void* owner_;
    int64_t n_past_ = 0;
    int64_t reserved_ = 0;
    int64_t checkpoint_ = -1;
};

}  // namespace ds4::state
