// Activations of one forward pass: a bump allocator over buffers of the backend that owns it,
// emptied at the start of every pass and sized to the passes it serves, so that a decode step
// allocates nothing (one block, reused); a long prompt's block is given back once passes need
// under a quarter of it. A layer's temporaries are given back at its end (mark / release), so a
// pass needs one layer's worth, not the sum over layers: a 512-row Gemma 3 270M prompt took
// ~0.5 GB of fresh pages, whose first touch (the kernel zeroing them) was a fifth of the prefill.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/buffer.h"

namespace ds4::backend {

class Arena {
public:
    // alloc(bytes): a 64-byte aligned buffer of the backend.
    using AllocFn = std::function<std::unique_ptr<Buffer>(size_t)>;
    explicit Arena(AllocFn alloc) : alloc_(std::move(alloc)) {}

    // Forgets everything taken. If the last pass needed more than one block, the next starts
    // with a single block of what it took; after many passes in a row needing under a quarter
    // of the block, with one of what the largest of them took.
    void reset();
    // n rows of dim floats, 64-byte aligned, valid until the next reset() (or the release() of a
    // mark taken before them); contents undefined.
    Rows rows(int64_t n, int64_t dim);
    // A point to come back to: release(m) gives back every row taken since mark() returned m (the
    // backend runs ops in order, so a later op may reuse memory an earlier one read).
    struct Mark {
        size_t blocks, used, live;
    };
    Mark mark() const { return {blocks_.size(), used_, live_}; }
    void release(const Mark& m);
    // Bytes held now (the high-water mark of the passes so far, after a reset).
    size_t capacity() const;

private:
    struct Block {
        std::unique_ptr<Buffer> buf;
        size_t size = 0;  // floats
        float* data() const { return static_cast<float*>(buf->data()); }
    };
    float* floats(size_t n);
    Block block(size_t floats) const { return {alloc_(floats * sizeof(float)), floats}; }

    AllocFn alloc_;
    std::vector<Block> blocks_;
    size_t used_ = 0;       // floats taken from the last block
    size_t live_ = 0;       // floats taken and not released, as if from one block
    size_t high_ = 0;       // the most live_ has been this pass: the one block it needs
    int small_passes_ = 0;  // passes in a row that needed under a quarter of the block
    size_t small_high_ = 0; // the most one of them needed
};

}  // namespace ds4::backend
