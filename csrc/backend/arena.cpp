// Arena: see arena.h.
#include "backend/arena.h"

#include <algorithm>
#include <cstdint>

namespace ds4::backend {

namespace {

constexpr size_t kAlign = 16;          // floats: 64 bytes (blocks start 64-byte aligned)
constexpr size_t kMinBlock = 1 << 16;  // floats
constexpr int kShrinkAfter = 64;

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
        // The last (largest) block, when it holds the pass alone: its pages are already touched.
        Block keep = split && blocks_.back().size >= size ? std::move(blocks_.back()) : block(size);
        blocks_.clear();
        blocks_.push_back(std::move(keep));
    }
    used_ = 0;
    live_ = 0;
    high_ = 0;
}

float* Arena::floats(size_t n) {
    n = (n + kAlign - 1) / kAlign * kAlign;  // keeps every start 64-byte aligned
    live_ += n;
    high_ = std::max(high_, live_);
    if (!blocks_.empty() && used_ + n <= blocks_.back().size) {
        float* p = blocks_.back().data() + used_;
        used_ += n;
        return p;
    }
    const size_t size = std::max({n, kMinBlock, blocks_.empty() ? size_t{0} : 2 * blocks_.back().size});
    blocks_.push_back(block(size));
    used_ = n;
    return blocks_.back().data();
}

void Arena::release(const Mark& m) {
    live_ = m.live;
    // A block made since the mark holds only rows taken since: its start is free again.
    used_ = blocks_.size() == m.blocks ? m.used : 0;
}

Rows Arena::rows(int64_t n, int64_t dim) {
    return {floats(static_cast<size_t>(n * dim)), n, dim};
}

size_t Arena::capacity() const {
    size_t total = 0;
    for (const Block& b : blocks_) total += b.size;
    return total * sizeof(float);
}

}  // namespace ds4::backend
