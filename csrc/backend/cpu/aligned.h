// Storage on 64-byte boundaries for what the SIMD kernels stream: a 512-bit load from a base that is
// only malloc's 16-byte aligned straddles two cache lines every time, and the K-quant GEMM over its
// decoded tile and activation rows ran 1.3-1.4x slower for it on an Intel Xeon (AVX-512).
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace ds4::backend::cpu {

inline constexpr size_t kAlign = 64;

template <class T>
struct AlignedAllocator {
    using value_type = T;
    AlignedAllocator() = default;
    template <class U>
    AlignedAllocator(const AlignedAllocator<U>&) noexcept {}
    T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kAlign})); }
    void deallocate(T* p, size_t) noexcept { ::operator delete(p, std::align_val_t{kAlign}); }
    template <class U>
    bool operator==(const AlignedAllocator<U>&) const noexcept { return true; }
    template <class U>
    bool operator!=(const AlignedAllocator<U>&) const noexcept { return false; }
};

template <class T>
using AlignedVector = std::vector<T, AlignedAllocator<T>>;

// `count` elements of T rounded up to whole 64-byte lines, so that per-thread slices of one buffer
// start on lines too.
template <class T>
constexpr size_t round_to_lines(size_t count) {
    constexpr size_t per = kAlign / sizeof(T);
    return (count + per - 1) / per * per;
}

}  // namespace ds4::backend::cpu
