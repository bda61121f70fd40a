// The arena's mark / release (csrc/backend/arena.h) without the engine: a pass of layers whose
// temporaries are released at each layer's end needs one layer's memory, rows taken before a
// mark survive its release, and the pass after one that grew reuses the grown memory (no fresh
// pages to touch). Prints "N failures"; tests/backend/test_arena.py builds and runs it.
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/arena.h"

namespace {

using ds4::backend::Arena;
using ds4::backend::Buffer;
using ds4::backend::Rows;

struct HostBuffer : Buffer {
    explicit HostBuffer(size_t bytes) {
        data_ = ::operator new(bytes, std::align_val_t{64});
        bytes_ = bytes;
    }
    ~HostBuffer() override { ::operator delete(data_, std::align_val_t{64}); }
};

int failures = 0;

void check(bool ok, const char* what) {
    if (!ok) {
        std::printf("FAIL: %s\n", what);
        ++failures;
    }
}

// One pass: a residual row set, then `layers` layers of `temps` temporaries of rows x dim each,
// released at each layer's end (or not); returns the residual's pointer.
float* pass(Arena& a, int layers, int temps, int64_t rows, int64_t dim, bool release) {
    a.reset();
    const Rows x = a.rows(rows, dim);
    for (int64_t i = 0; i < x.size(); ++i) x.data[i] = static_cast<float>(i);
    for (int l = 0; l < layers; ++l) {
        const Arena::Mark m = a.mark();
        for (int t = 0; t < temps; ++t) {
            const Rows r = a.rows(rows, dim);
            std::memset(r.data, 0xFF, static_cast<size_t>(r.size()) * sizeof(float));  // clobbers a live row if aliased
        }
        if (release) a.release(m);
    }
    return x.data;
}

}  // namespace

int main() {
    int allocs = 0;
    Arena a([&allocs](size_t bytes) {
        ++allocs;
        return std::unique_ptr<Buffer>(new HostBuffer(bytes));
    });
    const int64_t rows = 512, dim = 640, layer_bytes = 6 * rows * dim * 4;
    // Released per layer: what the pass holds is its residual and one layer, whatever the depth.
    const float* x = pass(a, 18, 6, rows, dim, true);
    bool intact = true;
    for (int64_t i = 0; i < rows * dim; ++i) intact = intact && x[i] == static_cast<float>(i);
    check(intact, "rows taken before a mark survive its release");
    const int grown = allocs;
    pass(a, 18, 6, rows, dim, true);
    check(allocs == grown, "the pass after one that grew keeps its largest block (its pages already touched)");
    const size_t one_block = a.capacity();
    check(one_block >= static_cast<size_t>(layer_bytes + rows * dim * 4), "the block holds a layer and the residual");
    check(one_block < static_cast<size_t>(2 * (layer_bytes + rows * dim * 4)), "the block holds no more than the peak");
    const int before = allocs;
    for (int i = 0; i < 4; ++i) pass(a, 18, 6, rows, dim, true);
    check(allocs == before, "passes of the same size allocate nothing");
    // Unreleased, the same pass needs every layer's temporaries: the mark changes what is held.
    Arena b([](size_t bytes) { return std::unique_ptr<Buffer>(new HostBuffer(bytes)); });
    pass(b, 18, 6, rows, dim, false);
    pass(b, 18, 6, rows, dim, false);
    check(b.capacity() >= static_cast<size_t>(18) * layer_bytes, "without release the pass holds every layer");
    // A release across a block the arena grew into: the new block's start is free again, and the
    // rows before the mark (in the old block) are untouched.
    Arena c([](size_t bytes) { return std::unique_ptr<Buffer>(new HostBuffer(bytes)); });
    c.reset();
    const Rows keep = c.rows(4, 16);
    for (int64_t i = 0; i < keep.size(); ++i) keep.data[i] = 7.0f;
    const Arena::Mark m = c.mark();
    const Rows big = c.rows(1 << 12, 1 << 8);  // past the first block: a new one
    c.release(m);
    const Rows again = c.rows(1 << 12, 1 << 8);
    check(again.data == big.data, "a block made since the mark is reused from its start");
    bool kept = true;
    for (int64_t i = 0; i < keep.size(); ++i) kept = kept && keep.data[i] == 7.0f;
    check(kept, "rows in the block before the mark are kept");
    std::printf("%d failures\n", failures);
    return failures == 0 ? 0 : 1;
}
