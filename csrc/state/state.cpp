// State: reservation, commit, rewinding and snapshots over the slots; see state.h.
#include "state/state.h"

#include <algorithm>
#include <string>

namespace ds4::state {

size_t Snapshot::bytes() const {
    size_t total = 0;
    for (const auto& s : slots) total += s ? s->bytes() : 0;
    return total;
}

void Snapshot::save(Writer& w) const {
    w.put<int64_t>(n_past);
    w.put<uint32_t>(static_cast<uint32_t>(slots.size()));
    for (const auto& s : slots) {
        w.put<uint8_t>(s ? 1 : 0);
        if (s) s->save(w);
    }
}

State::State(std::vector<std::unique_ptr<Slot>> slots, int64_t n_ctx, const void* owner)
    : slots_(std::move(slots)), n_ctx_(n_ctx), owner_(owner) {}

RecurrentSlot& State::recurrent(int layer) const {
    Slot* s = slot(layer);
    if (!s || s->kind() != SlotKind::recurrent) throw std::logic_error("layer " + std::to_string(layer) + " has no recurrent slot");
    return static_cast<RecurrentSlot&>(*s);
}

KvSlot& State::kv(int layer) const {
    Slot* s = slot(layer);
    if (!s || s->kind() != SlotKind::kv) throw std::logic_error("layer " + std::to_string(layer) + " has no KV slot");
    return static_cast<KvSlot&>(*s);
}

void State::reserve(int64_t n) {
    if (n > n_ctx_) {
        throw ContextOverflow("context overflow: " + std::to_string(n) + " positions needed, n_ctx is " +
                              std::to_string(n_ctx_) + " (" + std::to_string(n_past_) +
                              " held); truncate the session or load the model with a larger n_ctx");
    }
    for (auto& s : slots_) {
        if (s) s->reserve(n);
    }
    reserved_ = std::max(reserved_, n);
}

void State::commit(int64_t n) {
    if (n < n_past_ || n > reserved_) throw std::logic_error("State::commit outside the reserved positions");
    n_past_ = n;
}

void State::checkpoint() {
    for (auto& s : slots_) {
        if (s) s->checkpoint(n_past_);
    }
    checkpoint_ = n_past_;
}

int64_t State::rollback(int64_t n) {
    if (n < std::max<int64_t>(checkpoint_, 0) || n > n_past_) {
        throw std::out_of_range("rollback(" + std::to_string(n) + "): must be in [" +
                                std::to_string(std::max<int64_t>(checkpoint_, 0)) + ", " + std::to_string(n_past_) +
                                "] (the last checkpoint and the positions held)");
    }
    int64_t from = n;
    for (auto& s : slots_) {
        if (s) from = std::min(from, s->rewind(n, checkpoint_, n_past_));
    }
    n_past_ = from;
    return n - from;
}

void State::truncate(int64_t n) {
    if (n < 0 || n > n_past_) {
        throw std::out_of_range("truncate(" + std::to_string(n) + "): n_past must be in [0, " + std::to_string(n_past_) + "]");
    }
    if (n == n_past_) return;
    for (auto& s : slots_) {
        if (s && s->kind() != SlotKind::kv && n != 0) {
            throw std::out_of_range("truncate(" + std::to_string(n) +
                                    "): a recurrent layer cannot go back without a checkpoint; use a snapshot");
        }
    }
    for (auto& s : slots_) {
        if (s && s->kind() != SlotKind::kv) s->rewind(0, checkpoint_, n_past_);
    }
    n_past_ = n;
    if (checkpoint_ > n) checkpoint_ = -1;
}

bool State::reachable(int64_t n) const {
    if (n < 0 || n > n_past_) return false;
    for (const auto& s : slots_) {
        if (s && !s->reachable(n, n_past_)) return false;
    }
    return true;
}

Snapshot State::snapshot() const {
    Snapshot snap;
    snap.n_past = n_past_;
    for (const auto& s : slots_) snap.slots.push_back(s ? s->snapshot(n_past_) : nullptr);
    return snap;
}

void State::restore(const Snapshot& snap) {
    if (snap.slots.size() != slots_.size()) {
        throw std::invalid_argument("snapshot has " + std::to_string(snap.slots.size()) + " layers, this state " +
                                    std::to_string(slots_.size()));
    }
    if (snap.n_past > n_ctx_) {
        throw std::invalid_argument("snapshot holds " + std::to_string(snap.n_past) +
                                    " positions, more than this session's n_ctx " + std::to_string(n_ctx_));
    }
    for (size_t i = 0; i < slots_.size(); ++i) {
        if (!slots_[i] != !snap.slots[i]) throw std::invalid_argument("snapshot's layer " + std::to_string(i) + " differs in kind");
        if (slots_[i]) slots_[i]->check(*snap.slots[i], snap.n_past);
    }
    for (size_t i = 0; i < slots_.size(); ++i) {
        if (slots_[i]) slots_[i]->restore(*snap.slots[i], snap.n_past);
    }
    reserved_ = std::max(reserved_, snap.n_past);
    n_past_ = snap.n_past;
    checkpoint_ = -1;
}

Snapshot State::load(Reader& r) const {
    Snapshot snap;
    snap.n_past = r.get<int64_t>("the positions held");
    if (snap.n_past < 0) throw std::invalid_argument("state data is corrupt: " + std::to_string(snap.n_past) + " positions");
    const uint32_t n = r.get<uint32_t>("the layer count");
    if (n != slots_.size()) {
        throw std::invalid_argument("state data has " + std::to_string(n) + " layers, this state " + std::to_string(slots_.size()));
    }
    for (size_t i = 0; i < slots_.size(); ++i) {
        const bool present = r.get<uint8_t>("a layer's kind") != 0;
        if (present != static_cast<bool>(slots_[i])) throw std::invalid_argument("state data's layer " + std::to_string(i) + " differs in kind");
        snap.slots.push_back(present ? slots_[i]->load(r, snap.n_past) : nullptr);
    }
    return snap;
}

}  // namespace ds4::state
