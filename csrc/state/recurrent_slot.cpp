// RecurrentSlot: checkpoints, replay and snapshots; see recurrent_slot.h.
#include "state/recurrent_slot.h"

#include <stdexcept>
#include <string>

namespace ds4::state {

namespace {

struct RecurrentSnapshot final : SlotSnapshot {
    std::vector<float> conv, state;
    size_t bytes() const override { return (conv.size() + state.size()) * sizeof(float); }
    void save(Writer& w) const override {
        w.put<char>('R');
        for (const std::vector<float>* v : {&conv, &state}) {
            w.put<uint64_t>(v->size());
            w.bytes(v->data(), v->size() * sizeof(float));
        }
    }
};

}  // namespace

RecurrentSlot::RecurrentSlot(const RecurrentShape& shape, const Recurrence& rec, backend::Backend& be)
    : shape_(shape), rec_(&rec), be_(&be) {
    const auto f = sizeof(float);
    conv_ = be.alloc(static_cast<size_t>((shape.conv_kernel - 1) * shape.conv_channels) * f);
    state_ = be.alloc(static_cast<size_t>(shape.state_rows * shape.state_cols) * f);
    be.fill(conv(), 0.0f);
    be.fill(matrices(), 0.0f);
}

size_t RecurrentSlot::state_bytes() const { return static_cast<size_t>(shape_.state_rows * shape_.state_cols) * sizeof(float); }

void RecurrentSlot::copy_state(backend::Buffer& conv_to, backend::Buffer& state_to, const backend::Buffer& conv_from,
                               const backend::Buffer& state_from) {
    be_->copy(conv_to.data(), conv_from.data(), conv_from.bytes());
    be_->copy(state_to.data(), state_from.data(), state_bytes());
}

void RecurrentSlot::checkpoint(int64_t n_past) {
    if (!conv_ckpt_) {  // made on first use: a session that never speculates holds no copy
        conv_ckpt_ = be_->alloc(conv_->bytes());
        state_ckpt_ = be_->alloc(state_bytes());
        for (int64_t w : shape_.log_widths) logs_.push_back(be_->alloc(static_cast<size_t>(shape_.log_rows * w) * sizeof(float)));
    }
    copy_state(*conv_ckpt_, *state_ckpt_, *conv_, *state_);
    ckpt_ = n_past;
    logged_ = 0;
}

bool RecurrentSlot::logging(int64_t pos, int64_t n) {
    if (ckpt_ < 0) return false;
    if (pos != ckpt_ + logged_ || logged_ + n > shape_.log_rows) {
        ckpt_ = -1;  // the log would no longer lead from the checkpoint to the state
        return false;
    }
    return true;
}

bool RecurrentSlot::reachable(int64_t n, int64_t n_past) const {
    return n == n_past || n == 0 || (ckpt_ >= 0 && ckpt_ <= n && n <= ckpt_ + logged_);
}

int64_t RecurrentSlot::rewind(int64_t n, int64_t, int64_t n_past) {
    if (n == n_past) return n;
    if (n == 0) {  // the state before the first position
        be_->fill(conv(), 0.0f);
        be_->fill(matrices(), 0.0f);
        ckpt_ = -1;
        return 0;
    }
    if (ckpt_ < 0 || n < ckpt_ || n > ckpt_ + logged_) {
        throw std::out_of_range("a recurrent layer cannot go back to position " + std::to_string(n) +
                                (ckpt_ < 0 ? std::string(" without a checkpoint")
                                           : " (it can reach " + std::to_string(ckpt_) + ".." +
                                                 std::to_string(ckpt_ + logged_) + ")") +
                                "; use a snapshot");
    }
    copy_state(*conv_, *state_, *conv_ckpt_, *state_ckpt_);
    rec_->replay(*be_, *this, n - ckpt_);
    logged_ = n - ckpt_;  // the log still leads from the checkpoint to every position up to n
    return n;
}

std::unique_ptr<SlotSnapshot> RecurrentSlot::snapshot(int64_t) const {
    auto s = std::make_unique<RecurrentSnapshot>();
    s->conv.resize(conv_->bytes() / sizeof(float));
    s->state.resize(state_bytes() / sizeof(float));
    be_->read(s->conv.data(), conv_->data(), conv_->bytes());
    be_->read(s->state.data(), state_->data(), state_bytes());
    return s;
}

void RecurrentSlot::check(const SlotSnapshot& snap, int64_t) const {
    const auto* s = dynamic_cast<const RecurrentSnapshot*>(&snap);
    if (!s || s->conv.size() * sizeof(float) != conv_->bytes() || s->state.size() * sizeof(float) != state_bytes()) {
        throw std::invalid_argument("snapshot does not match this session's recurrent layer (its shape)");
    }
}

void RecurrentSlot::restore(const SlotSnapshot& snap, int64_t) {
    const auto& s = static_cast<const RecurrentSnapshot&>(snap);
    be_->write(conv_->data(), s.conv.data(), conv_->bytes());
    be_->write(state_->data(), s.state.data(), state_bytes());
    ckpt_ = -1;
}

std::unique_ptr<SlotSnapshot> RecurrentSlot::load(Reader& r, int64_t) const {
    if (r.get<char>("a layer's kind") != 'R') {
        throw std::invalid_argument("state data holds another kind of layer than recurrent");
    }
    auto s = std::make_unique<RecurrentSnapshot>();
    const size_t want[2] = {conv_->bytes() / sizeof(float), state_bytes() / sizeof(float)};
    std::vector<float>* parts[2] = {&s->conv, &s->state};
    for (int i = 0; i < 2; ++i) {
        const uint64_t n = r.get<uint64_t>("a recurrent slot's size");
        if (n != want[i]) throw std::invalid_argument("state data does not match this session's recurrent layer (its shape)");
        parts[i]->resize(n);
        r.bytes(parts[i]->data(), n * sizeof(float), "a recurrent slot's state");
    }
    return s;
}

}  // namespace ds4::state
