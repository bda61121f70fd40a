// KvCache: growth, truncation and snapshots; see kv_cache.h.
#include "state/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace ds4::state {

namespace {
// Growth step: positions are added in multiples of this (or doubled, if larger), so a long
// decode reallocates O(log n) times, not once per token.
constexpr int64_t kChunk = 256;
}  // namespace

size_t KvSnapshot::bytes() const {
    size_t total = 0;
    for (const auto& b : k) total += b.size();
    for (const auto& b : v) total += b.size();
    return total;
}

KvCache::KvCache(int n_layer, int64_t kv_dim, int64_t n_ctx, backend::KvType type)
    : n_layer_(n_layer), kv_dim_(kv_dim), n_ctx_(n_ctx), type_(type),
      k_(static_cast<size_t>(n_layer)), v_(static_cast<size_t>(n_layer)) {}

void KvCache::reserve(int64_t n) {
    if (n > n_ctx_) {
        throw ContextOverflow("context overflow: " + std::to_string(n) + " positions needed, n_ctx is " +
                              std::to_string(n_ctx_) + " (" + std::to_string(n_past_) +
                              " held); truncate the session or load the model with a larger n_ctx");
    }
    if (n <= capacity_) return;
    int64_t cap = std::max((n + kChunk - 1) / kChunk * kChunk, 2 * capacity_);
    cap = std::min(cap, n_ctx_);
    const size_t bytes = static_cast<size_t>(cap) * row_bytes();
    // resize keeps the valid prefix; the new tail is never read before it is written
    for (int l = 0; l < n_layer_; ++l) {
        k_[static_cast<size_t>(l)].resize(bytes);
        v_[static_cast<size_t>(l)].resize(bytes);
    }
    capacity_ = cap;
}

void* KvCache::k_row(int layer, int64_t pos) {
    return k_[static_cast<size_t>(layer)].data() + static_cast<size_t>(pos) * row_bytes();
}

void* KvCache::v_row(int layer, int64_t pos) {
    return v_[static_cast<size_t>(layer)].data() + static_cast<size_t>(pos) * row_bytes();
}

backend::KvView KvCache::view(int layer, int64_t n_kv) const {
    backend::KvView view;
    view.k = k_[static_cast<size_t>(layer)].data();
    view.v = v_[static_cast<size_t>(layer)].data();
    view.type = type_;
    view.n_kv = n_kv;
    return view;
}

void KvCache::commit(int64_t n) {
    if (n < 0 || n > capacity_) throw std::logic_error("KvCache::commit past the reserved positions");
    n_past_ = n;
}

void KvCache::truncate(int64_t n) {
    if (n < 0 || n > n_past_) {
        throw std::out_of_range("truncate(" + std::to_string(n) + "): n_past must be in [0, " +
                                std::to_string(n_past_) + "]");
    }
    n_past_ = n;
}

KvSnapshot KvCache::snapshot() const {
    KvSnapshot s;
    s.n_past = n_past_;
    s.n_layer = n_layer_;
    s.kv_dim = kv_dim_;
    s.type = type_;
    const size_t bytes = static_cast<size_t>(n_past_) * row_bytes();
    for (int l = 0; l < n_layer_; ++l) {
        const auto& k = k_[static_cast<size_t>(l)];
        const auto& v = v_[static_cast<size_t>(l)];
        s.k.emplace_back(k.begin(), k.begin() + static_cast<std::ptrdiff_t>(bytes));
        s.v.emplace_back(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(bytes));
    }
    return s;
}

void KvCache::restore(const KvSnapshot& s) {
    if (s.n_layer != n_layer_ || s.kv_dim != kv_dim_ || s.type != type_ ||
        s.k.size() != static_cast<size_t>(n_layer_) || s.v.size() != static_cast<size_t>(n_layer_)) {
        throw std::invalid_argument("snapshot does not match this session's cache (layers, width or KV type)");
    }
    if (s.n_past > n_ctx_) {
        throw std::invalid_argument("snapshot holds " + std::to_string(s.n_past) +
                                    " positions, more than this session's n_ctx " + std::to_string(n_ctx_));
    }
    const size_t bytes = static_cast<size_t>(s.n_past) * row_bytes();
    for (int l = 0; l < n_layer_; ++l) {
        if (s.k[static_cast<size_t>(l)].size() != bytes || s.v[static_cast<size_t>(l)].size() != bytes) {
            throw std::invalid_argument("snapshot is corrupt: layer " + std::to_string(l) + " has the wrong size");
        }
    }
    reserve(s.n_past);
    for (int l = 0; l < n_layer_; ++l) {
        if (bytes == 0) continue;
        std::memcpy(k_[static_cast<size_t>(l)].data(), s.k[static_cast<size_t>(l)].data(), bytes);
        std::memcpy(v_[static_cast<size_t>(l)].data(), s.v[static_cast<size_t>(l)].data(), bytes);
    }
    n_past_ = s.n_past;
}

}  // namespace ds4::state
