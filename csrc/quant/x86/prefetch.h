// Software prefetch of a weight stream, shared by the x86 kernels. A matmul of few activation
// rows is a pure stream of weight rows from DRAM; the hardware prefetcher alone leaves a core
// waiting on it. The distance: on Zen 5, 8 KiB ahead measured 7-10 % faster decode steps than
// 1 KiB and ~1.7x the int8 screen's rate at 8 rows (head_screen.h); on Zen 3, 1 KiB measured
// ~8 % over no prefetch for Q8_0 (its timing at 8 KiB is still to be taken).
#pragma once

#include <xmmintrin.h>

#include <cstdint>

namespace ds4::quant {

constexpr int kPrefetchAhead = 8192;

// The lines of `Bytes` bytes at p, Ahead bytes on. A block sharing a line with its neighbour
// re-issues a prefetch, which costs one load-port slot.
template <int Bytes, int Ahead = kPrefetchAhead>
inline void prefetch_block(const void* p) {
    for (int off = 0; off < Bytes; off += 64) _mm_prefetch(static_cast<const char*>(p) + Ahead + off, _MM_HINT_T0);
}

}  // namespace ds4::quant
