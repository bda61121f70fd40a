// The attention KV cache of one session: per layer, K and V rows by position.
//
// Storage is f32 (default) or f16 and grows with use in chunks up to n_ctx, so a session that
// holds 300 tokens of a 32k-context model holds ~300 positions of memory. Positions
// [0, n_past) are valid; truncate() just lowers n_past (rows past it are overwritten later).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "backend/backend.h"

namespace ds4::state {

// Evaluating would take the cache past its n_ctx positions.
class ContextOverflow : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A copy of a cache's valid positions. Taking one copies n_past * n_layer * 2 * kv_dim
// elements (e.g. Gemma 3 270M, f32: 36 KiB per position, so 36 MiB at 1,000 tokens) and
// restoring copies them back; cheap next to re-evaluating the prefix, not free.
struct KvSnapshot {
    int64_t n_past = 0;
    int n_layer = 0;
    int64_t kv_dim = 0;
    backend::KvType type = backend::KvType::f32;
    std::vector<std::vector<uint8_t>> k, v;  // per layer: [n_past, kv_dim] in `type`

    size_t bytes() const;
};

class KvCache {
public:
    // kv_dim: elements of one position's K (and of its V) in one layer (n_head_kv * head_dim).
    KvCache(int n_layer, int64_t kv_dim, int64_t n_ctx, backend::KvType type);

    int n_layer() const { return n_layer_; }
    int64_t kv_dim() const { return kv_dim_; }
    int64_t n_ctx() const { return n_ctx_; }
    int64_t n_past() const { return n_past_; }
    int64_t capacity() const { return capacity_; }  // positions allocated now
    backend::KvType type() const { return type_; }
    size_t elem_bytes() const { return type_ == backend::KvType::f32 ? 4 : 2; }

    // Makes positions [0, n) writable. Throws ContextOverflow if n > n_ctx.
    void reserve(int64_t n);
    // Rows of position `pos` in `layer`: kv_dim elements each (pos < capacity()).
    void* k_row(int layer, int64_t pos);
    void* v_row(int layer, int64_t pos);
    // What attention reads for `layer`: positions [0, n_kv).
    backend::KvView view(int layer, int64_t n_kv) const;

    // Marks positions [0, n) valid after a forward pass wrote them (n <= capacity()).
    void commit(int64_t n);
    // Forgets positions >= n; throws std::out_of_range if n is not in [0, n_past].
    void truncate(int64_t n);

    KvSnapshot snapshot() const;
    // Throws std::invalid_argument if the snapshot has another shape, type or n_ctx overflow.
    void restore(const KvSnapshot& snap);

private:
    size_t row_bytes() const { return static_cast<size_t>(kv_dim_) * elem_bytes(); }

    int n_layer_;
    int64_t kv_dim_;
    int64_t n_ctx_;
    backend::KvType type_;
    int64_t n_past_ = 0;
    int64_t capacity_ = 0;
    std::vector<std::vector<uint8_t>> k_, v_;  // per layer: [capacity, kv_dim] in type_
};

}  // namespace ds4::state
