// The packed layouts (packed.h): packing at load, unpacking and decoding, in scalar code shared
// by every ISA, so the layouts are defined in one place.
#include "quant/packed.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "quant/block_lanes.h"
#include "quant/blocks.h"
#include "quant/kernels.h"

namespace ds4::quant {

namespace {

// The 5-bit quant q of element k of a GGUF Q5_0 block.
int q5_of(const block_q5_0& b, int k) {
    const int nib = k < 16 ? b.qs[k] & 0x0F : b.qs[k - 16] >> 4;
    return nib | ((b.qh[k / 8] >> (k % 8)) & 1) << 4;
}
void set_q5(block_q5_0& b, int k, int q) {
    b.qs[k % 16] = static_cast<uint8_t>(b.qs[k % 16] | (q & 0x0F) << (k < 16 ? 0 : 4));
    b.qh[k / 8] = static_cast<uint8_t>(b.qh[k / 8] | ((q >> 4) & 1) << (k % 8));
}

// Where the value u (5 bits) of lane i of vector v of a Q5_0 chunk of `blocks` blocks lives.
// visit(byte, bit, width) is called per field: `width` bits of u from bit `bit` of the 16-bit
// little-endian word at `byte` of the quants (after the scales); low bits of u first.
template <class Visit>
void q5_fields(int blocks, int v, int i, Visit visit) {
    const int lane = 2 * i;
    if (blocks == 4 && v >= 6) {  // the nibbles, then bit 4 in bit 15 of word v - 6
        visit(64 + i, (v - 6) * 4, 4, 1);
        visit(32 * (v - 6) + lane, 15, 1, 2);
        return;
    }
    if (v < 15) {
        visit(32 * (v / 3) + lane, 5 * (v % 3), 5, 2);
        return;
    }
    for (int k = 0; k < 5; ++k) visit(32 * k + lane, 15, 1, 2);
}
// u into (set) or out of (get) the chunk's quant bytes.
void q5_set(uint8_t* quants, int blocks, int v, int i, unsigned u) {
    int shift = 0;
    q5_fields(blocks, v, i, [&](int byte, int bit, int width, int bytes) {
        uint16_t word = 0;
        std::memcpy(&word, quants + byte, static_cast<size_t>(bytes));
        word = static_cast<uint16_t>(word | ((u >> shift) & ((1u << width) - 1)) << bit);
        std::memcpy(quants + byte, &word, static_cast<size_t>(bytes));
        shift += width;
    });
}
unsigned q5_get(const uint8_t* quants, int blocks, int v, int i) {
    unsigned u = 0;
    int shift = 0;
    q5_fields(blocks, v, i, [&](int byte, int bit, int width, int bytes) {
        uint16_t word = 0;
        std::memcpy(&word, quants + byte, static_cast<size_t>(bytes));
        u |= ((word >> bit) & ((1u << width) - 1)) << shift;
        shift += width;
    });
    return u;
}

// One row of format Blk, chunk by chunk: scale(b, byte) per block (its f16 scale at `byte` of
// the packed row) and elem(b, k, chunk, blocks, p) per element (position p of its chunk, which
// starts at byte `chunk` of the packed row and has `blocks` blocks; blocks == 0 for a block
// left in GGUF order, whose element k is then at position k of the block at byte `chunk`).
template <class Blk, class Scale, class Elem>
void walk(int64_t n_in, Scale scale, Elem elem) {
    constexpr int64_t kBytes = sizeof(Blk);
    const BlockLanes bl(n_in);
    const auto chunk = [&](int64_t b0, int blocks) {
        const int64_t at = kBytes * b0;
        for (int64_t b = b0; b < b0 + blocks; ++b) {
            scale(b, at + 2 * (b - b0));
            for (int k = 0; k < 32; ++k) elem(b, k, at, blocks, bl.position(b, k) - 32 * b0);
        }
    };
    for (int64_t b0 = 0; b0 < bl.full; b0 += BlockLanes::kChunk) chunk(b0, BlockLanes::kChunk);
    if (bl.tail4()) {
        chunk(bl.full, 4);
        return;
    }
    for (int64_t b = bl.full; b < bl.nb; ++b) {
        scale(b, kBytes * b);
        for (int k = 0; k < 32; ++k) elem(b, k, kBytes * b, 0, k);
    }
}

// The quants of a chunk start after its scales.
int64_t quants_at(int64_t chunk, int blocks) { return chunk + 2 * blocks; }

void pack_row(Type type, const uint8_t* src, int64_t n_in, uint8_t* dst) {
    if (type == Type::Q8_0) {
        const auto* g = reinterpret_cast<const block_q8_0*>(src);
        walk<block_q8_0>(
            n_in, [&](int64_t b, int64_t at) { std::memcpy(dst + at, &g[b].d, 2); },
            [&](int64_t b, int k, int64_t at, int blocks, int64_t p) {
                dst[blocks ? quants_at(at, blocks) + p : at + 2 + k] = static_cast<uint8_t>(g[b].qs[k]);
            });
        return;
    }
    const auto* g = reinterpret_cast<const block_q5_0*>(src);
    std::memset(dst, 0, static_cast<size_t>(n_in / 32) * sizeof(block_q5_0));
    walk<block_q5_0>(
        n_in, [&](int64_t b, int64_t at) { std::memcpy(dst + at, &g[b].d, 2); },
        [&](int64_t b, int k, int64_t at, int blocks, int64_t p) {
            if (blocks == 0) {
                if (k == 0) std::memcpy(dst + at, &g[b], sizeof(block_q5_0));
                return;
            }
            q5_set(dst + quants_at(at, blocks), blocks, static_cast<int>(p / 16), static_cast<int>(p % 16),
                   static_cast<unsigned>(q5_of(g[b], k) ^ 16));
        });
}

void unpack_row(Type type, const uint8_t* src, int64_t n_in, uint8_t* dst) {
    if (type == Type::Q8_0) {
        auto* g = reinterpret_cast<block_q8_0*>(dst);
        walk<block_q8_0>(
            n_in, [&](int64_t b, int64_t at) { std::memcpy(&g[b].d, src + at, 2); },
            [&](int64_t b, int k, int64_t at, int blocks, int64_t p) {
                g[b].qs[k] = static_cast<int8_t>(src[blocks ? quants_at(at, blocks) + p : at + 2 + k]);
            });
        return;
    }
    auto* g = reinterpret_cast<block_q5_0*>(dst);
    std::memset(dst, 0, static_cast<size_t>(n_in / 32) * sizeof(block_q5_0));
    walk<block_q5_0>(
        n_in, [&](int64_t b, int64_t at) { std::memcpy(&g[b].d, src + at, 2); },
        [&](int64_t b, int k, int64_t at, int blocks, int64_t p) {
            if (blocks == 0) {
                if (k == 0) std::memcpy(&g[b], src + at, sizeof(block_q5_0));
                return;
            }
            const unsigned u = q5_get(src + quants_at(at, blocks), blocks, static_cast<int>(p / 16), static_cast<int>(p % 16));
            set_q5(g[b], k, static_cast<int>(u ^ 16));
        });
}

size_t block_bytes(Type type) { return type == Type::Q8_0 ? sizeof(block_q8_0) : sizeof(block_q5_0); }

void check(Type type, const char* what) {
    if (!has_packed_layout(type)) throw std::invalid_argument(std::string(what) + ": the format has no packed layout");
}

}  // namespace

void pack_rows(Type type, const void* src, int64_t n_in, int64_t n_out, void* dst) {
    check(type, "pack_rows");
    const size_t row = static_cast<size_t>(n_in / 32) * block_bytes(type);
    for (int64_t o = 0; o < n_out; ++o)
        pack_row(type, static_cast<const uint8_t*>(src) + o * row, n_in, static_cast<uint8_t*>(dst) + o * row);
}

void unpack_rows(Type type, const void* src, int64_t n_in, int64_t n_out, void* dst) {
    check(type, "unpack_rows");
    const size_t row = static_cast<size_t>(n_in / 32) * block_bytes(type);
    for (int64_t o = 0; o < n_out; ++o)
        unpack_row(type, static_cast<const uint8_t*>(src) + o * row, n_in, static_cast<uint8_t*>(dst) + o * row);
}

void decode_packed_row(Type type, const void* row, int64_t n_in, int16_t* q, float* sw, float* mw) {
    check(type, "decode_packed_row");
    // A chunk's quants are stored in position order (packed.h), so they decode in place.
    const auto* src = static_cast<const uint8_t*>(row);
    const int64_t bytes = static_cast<int64_t>(block_bytes(type));
    const BlockLanes bl(n_in);
    std::fill(mw, mw + n_in / 16, 0.0f);
    const auto chunk = [&](int64_t b0, int blocks) {
        const uint8_t* at = src + bytes * b0;
        for (int i = 0; i < blocks; ++i) {
            uint16_t d;
            std::memcpy(&d, at + 2 * i, sizeof d);
            sw[b0 + i] = f16_to_f32(d);
        }
        const uint8_t* quants = at + 2 * blocks;
        int16_t* out = q + 32 * b0;
        for (int p = 0; p < 32 * blocks; ++p) {
            out[p] = type == Type::Q8_0 ? static_cast<int8_t>(quants[p])
                                        : static_cast<int16_t>(static_cast<int>(q5_get(quants, blocks, p / 16, p % 16) ^ 16) - 16);
        }
    };
    for (int64_t b0 = 0; b0 < bl.full; b0 += BlockLanes::kChunk) chunk(b0, BlockLanes::kChunk);
    if (bl.tail4()) {
        chunk(bl.full, 4);
        return;
    }
    for (int64_t b = bl.full; b < bl.nb; ++b) {  // GGUF blocks
        const uint8_t* at = src + bytes * b;
        uint16_t d;
        std::memcpy(&d, at, sizeof d);
        sw[b] = f16_to_f32(d);
        for (int k = 0; k < 32; ++k) {
            q[32 * b + k] = type == Type::Q8_0 ? static_cast<int8_t>(at[2 + k])
                                               : static_cast<int16_t>(q5_of(*reinterpret_cast<const block_q5_0*>(at), k) - 16);
        }
    }
}

}  // namespace ds4::quant
