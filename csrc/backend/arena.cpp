// Arena: see arena.h.
#include "backend/arena.h"

#include <algorithm>
#include <cstdint>

namespace ds4::backend {

namespace {

constexpr size_t kAlign = 16;          // floats: 64 bytes
constexpr size_t kMinBlock = 1 << 16;  // floats
constexpr int kShrinkAfter = 64;

// Floats to skip from p to the next 64-byte boundary.
size_t pad_of(const float* p) {
    const auto at = reinterpret_cast<uintptr_t>(p) / sizeof(float);
    return (kAlign - at % kAlign) % kAlign;
}

}  // namespace

void Arena::reset() {
    // One block of what the last pass took; and after a long prompt, decode steps give the
    // memory back (kShrinkAfter passes in a row needing under a quarter of the block shrink it
    // to the largest of them: verify passes between decode steps do not make it flap).
    const bool split = blocks_.size() > 1;
    const bool small = blocks_.size() == 1 && blocks_[0].size > kMinBlock && high_ * 4 < blocks_[0].size;
    small_passes_ = small ? small_passes_ + 1 : 0;
    small_high_ = small ? std::max(small_high_, high_) : 0;
    if (split || small_passes_ >= kShrinkAfter) {
        const size_t size = std::max(split ? high_ : small_high_, kMinBlock);
        small_passes_ = 0;
        small_high_ = 0;
        blocks_.clear();
        blocks_.push_back({std::unique_ptr<float[]>(new float[size]), size});
    }
    used_ = 0;
    high_ = 0;
}

float* Arena::floats(size_t n) {
    n = (n + kAlign - 1) / kAlign * kAlign;
    high_ += n + kAlign;  // what this takes from a fresh block, whatever its padding
    if (!blocks_.empty()) {
        Block& b = blocks_.back();
        const size_t pad = pad_of(b.data.get() + used_);
        if (used_ + pad + n <= b.size) {
            float* p = b.data.get() + used_ + pad;
            used_ += pad + n;
            return p;
        }
    }
    const size_t size = std::max({n + kAlign, kMinBlock, blocks_.empty() ? size_t{0} : 2 * blocks_.back().size});
    blocks_.push_back({std::unique_ptr<float[]>(new float[size]), size});
    Block& b = blocks_.back();
    const size_t pad = pad_of(b.data.get());
    used_ = pad + n;
    return b.data.get() + pad;
}

size_t Arena::capacity() const {
    size_t total = 0;
    for (const Block& b : blocks_) total += b.size;
    return total * sizeof(float);
}

}  // namespace ds4::backend
