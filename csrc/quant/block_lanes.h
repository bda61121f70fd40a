// The block-lane order of the int16 path (int16_gemm.h), for the 32-element legacy formats (Q4_0,
// Q4_1, Q5_0, Q5_1, Q8_0): the elements of a row are stored so that one 16-lane int16 vector
// holds a pair of elements from each of 8 consecutive blocks, and vpmaddwd then leaves each
// block's products in its own 32-bit lane.
// Kernels sum a block exactly in one lane and take one conversion and fma per 8 blocks, where
// the natural order needs them per block (~1.7x fewer ops per multiply-add on Zen 3).
//
// A row of nb = n / 32 blocks: each chunk of 8 blocks c .. c + 7 (256 elements) holds, at
// position 16 v + 2 j + t of the chunk, element 2 v + t of block c + j (v < 16, j < 8, t < 2).
// A last chunk of exactly 4 blocks holds at 16 v + 2 l + t element 2 p + t of block l % 4, where
// p = 2 v + l / 4 (v < 8, l < 8): each block in two lanes. A last chunk of 1..3 or 5..7 blocks
// keeps the natural order, and the natural order's arithmetic (int16_gemm.h).
#pragma once

#include <cstdint>
#include <cstring>

namespace ds4::quant {

struct BlockLanes {
    static constexpr int kChunk = 8;  // blocks per chunk
    int64_t nb, full, tail;           // blocks, blocks in whole chunks, blocks after them
    explicit BlockLanes(int64_t n) : nb(n / 32), full(nb / kChunk * kChunk), tail(nb - full) {}
    bool tail4() const { return tail == 4; }
    // Whether block b is one of a last chunk kept in the natural order.
    bool natural(int64_t b) const { return b >= full && !tail4(); }

    // Position of element k (< 32) of block b.
    int64_t position(int64_t b, int k) const {
        const int t = k % 2, pair = k / 2;
        if (b < full) return b / kChunk * 256 + 16 * pair + 2 * (b % kChunk) + t;
        if (tail4()) return full * 32 + 16 * (pair / 2) + 2 * ((b - full) + 4 * (pair % 2)) + t;
        return b * 32 + k;
    }

    // v[position(b, k)] = the natural v[32 b + k], in place, a chunk at a time.
    template <class T>
    void to_lanes_in_place(T* v) const {
        T buf[256];
        const int64_t chunks = (nb + kChunk - 1) / kChunk;
        for (int64_t c = 0; c < chunks; ++c) {
            const int64_t b0 = c * kChunk, blocks = nb - b0 < kChunk ? nb - b0 : kChunk;
            std::memcpy(buf, v + b0 * 32, static_cast<size_t>(blocks) * 32 * sizeof(T));
            if (blocks == kChunk) {  // a transpose of 8 blocks x 16 pairs into 16 pairs x 8 blocks
                T* out = v + b0 * 32;
                for (int pair = 0; pair < 16; ++pair) {
                    for (int j = 0; j < kChunk; ++j) {
                        std::memcpy(out + 16 * pair + 2 * j, buf + 32 * j + 2 * pair, 2 * sizeof(T));
                    }
                }
                continue;
            }
            for (int64_t b = b0; b < b0 + blocks; ++b)
                for (int k = 0; k < 32; ++k) v[position(b, k)] = buf[(b - b0) * 32 + k];
        }
    }
};

}  // namespace ds4::quant
