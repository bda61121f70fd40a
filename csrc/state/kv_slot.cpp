// KvSlot: growth and snapshots; see kv_slot.h.
#include "state/kv_slot.h"

#include <algorithm>
#include <stdexcept>
#include <vector>
#include <string>

namespace ds4::state {

namespace {

// Growth step: positions are added in multiples of this (or doubled, if larger), so a long
// decode reallocates O(log n) times, not once per token.
constexpr int64_t kChunk = 256;

// The valid rows of one slot: [n_past, kv_dim] of K and of V.
struct KvSlotSnapshot final : SlotSnapshot {
    int64_t kv_dim = 0;
    backend::KvType type = backend::KvType::f32;
    std::vector<uint8_t> k, v;
    size_t bytes() const override { return k.size() + v.size(); }
    void save(Writer& w) const override {
        w.put<char>('K');
        w.put<uint8_t>(static_cast<uint8_t>(type));
        w.put<int64_t>(kv_dim);
        w.put<uint64_t>(k.size());
        w.bytes(k.data(), k.size());
        w.bytes(v.data(), v.size());
    }
};

}  // namespace

KvSlot::KvSlot(int64_t kv_dim, int64_t n_ctx, backend::KvType type, backend::Backend& be)
    : kv_dim_(kv_dim), n_ctx_(n_ctx), type_(type), be_(&be) {}

void KvSlot::reserve(int64_t n) {
    if (n <= capacity_) return;
    int64_t cap = std::max((n + kChunk - 1) / kChunk * kChunk, 2 * capacity_);
    cap = std::min(cap, n_ctx_);
    // Every position held so far moves over (rows past a rewind too: cheaper than tracking
    // them); the new tail is never read before it is written.
    const size_t bytes = static_cast<size_t>(cap) * row_bytes(), old = static_cast<size_t>(capacity_) * row_bytes();
    for (std::unique_ptr<backend::Buffer>* buf : {&k_, &v_}) {
        std::unique_ptr<backend::Buffer> grown = be_->alloc(bytes);
        if (*buf) be_->copy(grown->data(), (*buf)->data(), old);
        *buf = std::move(grown);
    }
    capacity_ = cap;
}

backend::KvView KvSlot::view(int64_t n_kv) const {
    backend::KvView view;
    view.k = k_ ? k_->data() : nullptr;
    view.v = v_ ? v_->data() : nullptr;
    view.type = type_;
    view.dim = kv_dim_;
    view.n_kv = n_kv;
    return view;
}

std::unique_ptr<SlotSnapshot> KvSlot::snapshot(int64_t n_past) const {
    auto s = std::make_unique<KvSlotSnapshot>();
    s->kv_dim = kv_dim_;
    s->type = type_;
    const size_t bytes = static_cast<size_t>(n_past) * row_bytes();
    s->k.resize(bytes);
    s->v.resize(bytes);
    if (bytes == 0) return s;
    be_->read(s->k.data(), k_->data(), bytes);
    be_->read(s->v.data(), v_->data(), bytes);
    return s;
}

void KvSlot::check(const SlotSnapshot& snap, int64_t n_past) const {
    const auto* s = dynamic_cast<const KvSlotSnapshot*>(&snap);
    if (!s || s->kv_dim != kv_dim_ || s->type != type_) {
        throw std::invalid_argument("snapshot does not match this session's KV slot (width or KV type)");
    }
    const size_t bytes = static_cast<size_t>(n_past) * row_bytes();
    if (s->k.size() != bytes || s->v.size() != bytes) {
        throw std::invalid_argument("snapshot is corrupt: a KV slot holds " + std::to_string(s->k.size()) +
                                    " bytes for " + std::to_string(n_past) + " positions");
    }
}

void KvSlot::restore(const SlotSnapshot& snap, int64_t n_past) {
    const auto& s = static_cast<const KvSlotSnapshot&>(snap);
    const size_t bytes = static_cast<size_t>(n_past) * row_bytes();
    reserve(n_past);
    if (bytes == 0) return;
    be_->write(k_->data(), s.k.data(), bytes);
    be_->write(v_->data(), s.v.data(), bytes);
}

std::unique_ptr<SlotSnapshot> KvSlot::load(Reader& r, int64_t n_past) const {
    if (r.get<char>("a layer's kind") != 'K') throw std::invalid_argument("state data holds another kind of layer than KV");
    auto s = std::make_unique<KvSlotSnapshot>();
    s->type = static_cast<backend::KvType>(r.get<uint8_t>("a KV slot's type"));
    s->kv_dim = r.get<int64_t>("a KV slot's width");
    if (s->type != type_ || s->kv_dim != kv_dim_) {
        throw std::invalid_argument("state data does not match this session's KV slot (width or KV type)");
    }
    const uint64_t bytes = r.get<uint64_t>("a KV slot's size");
    if (bytes != static_cast<uint64_t>(n_past) * row_bytes()) {
        throw std::invalid_argument("state data is corrupt: a KV slot holds " + std::to_string(bytes) + " bytes for " +
                                    std::to_string(n_past) + " positions");
    }
    s->k.resize(bytes);
    s->v.resize(bytes);
    r.bytes(s->k.data(), bytes, "a KV slot's K rows");
    r.bytes(s->v.data(), bytes, "a KV slot's V rows");
    return s;
}

}  // namespace ds4::state
