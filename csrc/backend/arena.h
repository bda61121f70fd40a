// Activations of one forward pass: a bump allocator the backend owns, emptied at the start of
// every pass and sized to the passes it serves, so that a decode step allocates nothing (one
// block, reused); a long prompt's block is given back once passes need under a quarter of it.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace ds4::backend {

class Arena {
public:
    // Forgets everything taken. If the last pass needed more than one block, the next starts
    // with a single block of what it took; after many passes in a row needing under a quarter
    // of the block, with one of what the largest of them took.
    void reset();
    // n floats, 64-byte aligned, valid until the next reset(); contents undefined.
    float* floats(size_t n);
    // Bytes held now (the high-water mark of the passes so far, after a reset).
    size_t capacity() const;

private:
    struct Block {
        std::unique_ptr<float[]> data;
        size_t size = 0;  // floats
    };
    std::vector<Block> blocks_;
    size_t used_ = 0;       // floats taken from the last block
    size_t high_ = 0;       // floats this pass would take from one fresh block
    int small_passes_ = 0;  // passes in a row that needed under a quarter of the block
    size_t small_high_ = 0; // the most one of them needed
};

}  // namespace ds4::backend
