// A recurrent layer's state (a slot of state.h): what a gated DeltaNet layer carries from one
// position to the next, its convolution window ([k - 1, channels]) and its recurrent matrices
// ([rows, cols]), both in buffers of the model's backend, zero before the first position.
//
// Such a state holds only the last position, so going back needs a copy taken earlier. At a
// checkpoint (before a verify pass) the slot copies its state, and from then on the layer logs
// each row's inputs to its recurrence (a few thousand floats per row, no matrix of state).
// Rewinding to n restores the copy and runs the recurrence again over the logged rows up to n,
// through the layer's own ops (Recurrence): a rejected draft costs a copy and a recurrence over
// the accepted rows, never a pass of the model, and no position before the checkpoint is fed
// again.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "state/slot.h"

namespace ds4::state {

class RecurrentSlot;

// The layer side of a recurrent slot: advances the slot's state over logged rows.
class Recurrence {
public:
    virtual ~Recurrence() = default;
    // Runs the recurrence over the slot's logged rows [0, n) from its state (the checkpoint's).
    virtual void replay(backend::Backend& be, RecurrentSlot& slot, int64_t n) const = 0;
};

struct RecurrentShape {
    int conv_kernel = 0;              // the convolution keeps conv_kernel - 1 inputs
    int64_t conv_channels = 0;
    int64_t state_rows = 0, state_cols = 0;
    std::vector<int64_t> log_widths;  // floats per row of each logged input
    int64_t log_rows = 0;             // rows logged after a checkpoint at most
};

class RecurrentSlot final : public Slot {
public:
    // rec and be must outlive the slot's use (not its destruction).
    RecurrentSlot(const RecurrentShape& shape, const Recurrence& rec, backend::Backend& be);

    SlotKind kind() const override { return SlotKind::recurrent; }
    void reserve(int64_t) override {}
    void checkpoint(int64_t n_past) override;
    // Back to n in [checkpoint, n_past] when the rows since the checkpoint were logged, or to 0
    // (the zero state), else std::out_of_range; returns n: nothing needs feeding again.
    int64_t rewind(int64_t n, int64_t checkpoint, int64_t n_past) override;
    bool reachable(int64_t n, int64_t n_past) const override;
    std::unique_ptr<SlotSnapshot> snapshot(int64_t n_past) const override;
    void check(const SlotSnapshot& snap, int64_t n_past) const override;
    void restore(const SlotSnapshot& snap, int64_t n_past) override;
    std::unique_ptr<SlotSnapshot> load(Reader& r, int64_t n_past) const override;

    const RecurrentShape& shape() const { return shape_; }
    backend::Rows conv() const { return rows(conv_, shape_.conv_kernel - 1, shape_.conv_channels); }
    backend::Rows matrices() const { return rows(state_, shape_.state_rows, shape_.state_cols); }

    // A pass is about to advance the state by rows at positions [pos, pos + n): whether the
    // layer must log their inputs (log(i).rows(logged(), n)), then logged(n). A pass that does
    // not continue the log, or would overflow it, drops the checkpoint.
    bool logging(int64_t pos, int64_t n);
    int64_t logged() const { return logged_; }
    void add_logged(int64_t n) { logged_ += n; }
    backend::Rows log(size_t i) const { return rows(logs_[i], shape_.log_rows, shape_.log_widths[i]); }

private:
    static backend::Rows rows(const std::unique_ptr<backend::Buffer>& b, int64_t n, int64_t dim) {
        return {static_cast<float*>(b->data()), n, dim};
    }
    size_t state_bytes() const;
    void copy_state(backend::Buffer& conv_to, backend::Buffer& state_to, const backend::Buffer& conv_from,
                    const backend::Buffer& state_from);

    RecurrentShape shape_;
    const Recurrence* rec_;
    backend::Backend* be_;
    std::unique_ptr<backend::Buffer> conv_, state_, conv_ckpt_, state_ckpt_;
    std::vector<std::unique_ptr<backend::Buffer>> logs_;
    int64_t ckpt_ = -1;   // the checkpoint's position, -1: none
    int64_t logged_ = 0;  // rows logged since it
};

}  // namespace ds4::state
