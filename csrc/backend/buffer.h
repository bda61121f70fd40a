// Memory a backend owns and the views of it that ops take (backend.h).
//
// Activations (the arena's blocks, arena.h), session state (KV slots) and parameter vectors all
// live in Buffers a backend allocated. On a GPU backend that is device memory, so model code
// never reads or writes through these pointers: it slices views, hands them to ops, and moves
// bytes between the host and a buffer with Backend::write / read / copy. The CPU backend's
// buffers are host memory, which lets it write a pass's outputs straight into the caller's
// arrays (Backend::host_visible).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace ds4::backend {

// Freeing a buffer needs nothing of the backend that made it (a session's state may be
// dropped after its model's backend).
class Buffer {
public:
    virtual ~Buffer() = default;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    void* data() const { return data_; }
    size_t bytes() const { return bytes_; }

protected:
    Buffer() = default;
    void* data_ = nullptr;
    size_t bytes_ = 0;
};

// n rows of dim float32 values, row-major, in a backend's memory.
struct Rows {
    float* data = nullptr;
    int64_t n = 0;
    int64_t dim = 0;

    int64_t size() const { return n * dim; }
    // Rows [first, first + count).
    Rows rows(int64_t first, int64_t count) const { return {data + first * dim, count, dim}; }
    // The same values as n2 rows of dim2 (n2 * dim2 == size()): per-head rows of q or k.
    Rows as(int64_t n2, int64_t dim2) const { return {data, n2, dim2}; }
};

// A parameter vector (a norm's weights, a bias, RoPE frequency divisors) held by the backend;
// empty where the model has none.
struct Vec {
    std::shared_ptr<const Buffer> buf;
    int64_t n = 0;

    bool empty() const { return n == 0; }
    const float* data() const { return buf ? static_cast<const float*>(buf->data()) : nullptr; }
};

}  // namespace ds4::backend
