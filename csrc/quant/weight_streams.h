// Weight streams: the order in which the kernels that take two weight rows per call (the int16
// rows kernels on AVX-512, the head screen) read a span of rows. A weight stream from DRAM runs at
// the pace of the requests the hardware prefetcher keeps in flight for it, which is too few when
// DRAM answers slowly (Intel Xeon VM at times: one thread's Q4_K rows 6.0 GB/s from one stream,
// 10.4 from four read at once; level when it answers fast; software prefetch, or adjacent rows
// taken from the four streams in turn, gave nothing). So a span is read as kWeightStreams runs of
// rows, a call's two rows from runs 0 and 1, the next call's from runs 2 and 3, read at once.
#pragma once

#include <cstdint>

namespace ds4::quant {

constexpr int64_t kWeightStreams = 4;

// pair(o, run) for the calls over rows [0, nw): rows o and o + run, in the streams' order.
// Returns the rows covered, kWeightStreams * run; the fewer than kWeightStreams left after them
// are the caller's to take as adjacent pairs.
template <class Pair>
inline int64_t stream_pairs(int64_t nw, Pair&& pair) {
    const int64_t run = nw / kWeightStreams;
    for (int64_t i = 0; i < run; ++i) {
        for (int64_t s = 0; s < kWeightStreams; s += 2) pair(s * run + i, run);
    }
    return kWeightStreams * run;
}

}  // namespace ds4::quant
