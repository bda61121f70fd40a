// One attention layer's K and V rows by position (a slot of state.h).
//
// Storage is f32 or f16 in buffers of the model's backend, and grows with use in chunks up to
// n_ctx, so a session that holds 300 tokens of a 32k-context model holds ~300 positions of
// memory. Rewinding forgets rows (they are overwritten later): a KV slot reaches any position at
// or below what it holds.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "state/slot.h"

namespace ds4::state {

class KvSlot final : public Slot {
public:
    // kv_dim: elements of one position's K (and of its V): n_head_kv * head_dim. The backend
    // must outlive the slot's use (not its destruction).
    KvSlot(int64_t kv_dim, int64_t n_ctx, backend::KvType type, backend::Backend& be);

    SlotKind kind() const override { return SlotKind::kv; }
    int64_t kv_dim() const { return kv_dim_; }
    backend::KvType type() const { return type_; }
    int64_t capacity() const { return capacity_; }  // positions allocated now

    void reserve(int64_t n) override;
    void checkpoint(int64_t) override {}
    int64_t rewind(int64_t n, int64_t, int64_t) override { return n; }
    bool reachable(int64_t, int64_t) const override { return true; }
    std::unique_ptr<SlotSnapshot> snapshot(int64_t n_past) const override;
    void check(const SlotSnapshot& snap, int64_t n_past) const override;
    void restore(const SlotSnapshot& snap, int64_t n_past) override;
    std::unique_ptr<SlotSnapshot> load(Reader& r, int64_t n_past) const override;

    // The storage as ops take it (store_kv writes any position < capacity()); attention reads
    // positions [0, n_kv).
    backend::KvView view(int64_t n_kv) const;

private:
    size_t row_bytes() const { return static_cast<size_t>(kv_dim_) * (type_ == backend::KvType::f32 ? 4 : 2); }

    int64_t kv_dim_;
    int64_t n_ctx_;
    backend::KvType type_;
    int64_t capacity_ = 0;
    backend::Backend* be_;
    std::unique_ptr<backend::Buffer> k_, v_;  // [capacity, kv_dim] in type_
};

}  // namespace ds4::state
