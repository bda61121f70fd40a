// The packed layouts (packed.h): packing at load, unpacking and decoding, in scalar code shared
// by every ISA, so the layouts are defined in one place.
#include "quant/packed.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

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
// visit(byte, bit, width, bytes) is called per field, low bits of u first: `width` bits of u
// from bit `bit` of the little-endian field of `bytes` bytes (a word's lane, or a nibble's byte)
// at `byte` of the quants (after the scales).
template <class Visit>
void q5_fields(int blocks, int v, int i, Visit visit) {
    const int lane = 2 * i;  // the lane's byte in a word
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

// Position p of a chunk of `blocks` (8 or 4) blocks holds element k of block j of the chunk
// (block_lanes.h).
struct Element {
    int j, k;
};
Element element_at(int blocks, int p) {
    const int v = p / 16, lane = (p % 16) / 2, t = p % 2;
    if (blocks == BlockLanes::kChunk) return {lane, 2 * v + t};
    return {lane % 4, 2 * (2 * v + lane / 4) + t};
}

// A chunk of 8 Q5_0 blocks' quants with each 16-bit word assembled at once (q5_fields' layout:
// word k of lane i holds vectors 3k, 3k + 1 and 3k + 2 in bits 0..14 and bit k of vector 15 in
// bit 15), what q5_set builds a field at a time; the load packs ~76M Gemma weights this way.
void q5_chunk8(const block_q5_0* g, uint8_t* quants) {
    unsigned u[16][16];  // [v][i]: element k of block j is lane 2 j + k % 2 of vector k / 2
    for (int j = 0; j < BlockLanes::kChunk; ++j) {
        uint32_t h;
        std::memcpy(&h, g[j].qh, sizeof h);
        for (int k = 0; k < 16; ++k) {
            const unsigned lo = (g[j].qs[k] & 0x0Fu) | ((h >> k) & 1u) << 4;
            const unsigned hi = (g[j].qs[k] >> 4) | ((h >> (k + 16)) & 1u) << 4;
            u[k / 2][2 * j + k % 2] = lo ^ 16u;
            u[(k + 16) / 2][2 * j + k % 2] = hi ^ 16u;
        }
    }
    for (int k = 0; k < 5; ++k) {
        for (int i = 0; i < 16; ++i) {
            const auto w = static_cast<uint16_t>(u[3 * k][i] | u[3 * k + 1][i] << 5 | u[3 * k + 2][i] << 10 |
                                                 ((u[15][i] >> k) & 1u) << 15);
            std::memcpy(quants + 32 * k + 2 * i, &w, sizeof w);
        }
    }
}

// Calls chunk(b0, blocks) for each chunk of a row in the block-lane order and gguf(b) for
// each block left in GGUF order.
template <class Chunk, class Gguf>
void each_chunk(int64_t n_in, Chunk chunk, Gguf gguf) {
    const BlockLanes bl(n_in);
    for (int64_t b0 = 0; b0 < bl.full; b0 += BlockLanes::kChunk) chunk(b0, BlockLanes::kChunk);
    if (bl.tail4()) {
        chunk(bl.full, 4);
        return;
    }
    for (int64_t b = bl.full; b < bl.nb; ++b) gguf(b);
}

template <class Blk>
void pack_row(const uint8_t* src, int64_t n_in, uint8_t* dst) {
    const auto* g = reinterpret_cast<const Blk*>(src);
    constexpr int64_t kBytes = sizeof(Blk);
    each_chunk(
        n_in,
        [&](int64_t b0, int blocks) {
            uint8_t* at = dst + kBytes * b0;
            for (int j = 0; j < blocks; ++j) std::memcpy(at + 2 * j, &g[b0 + j].d, 2);
            uint8_t* quants = at + 2 * blocks;
            if constexpr (std::is_same_v<Blk, block_q8_0>) {
                // Positions 2m and 2m + 1 are consecutive elements of one block: a pair at a time
                // (a chunk of 8: vector v's lane pair j is block j's elements 2v, 2v + 1).
                if (blocks == BlockLanes::kChunk) {
                    for (int v = 0; v < 16; ++v)
                        for (int j = 0; j < 8; ++j) std::memcpy(quants + 16 * v + 2 * j, g[b0 + j].qs + 2 * v, 2);
                } else {
                    for (int p = 0; p < 32 * blocks; p += 2) {
                        const Element e = element_at(blocks, p);
                        std::memcpy(quants + p, g[b0 + e.j].qs + e.k, 2);
                    }
                }
            } else if (blocks == BlockLanes::kChunk) {
                q5_chunk8(g + b0, quants);
            } else {
                std::memset(quants, 0, static_cast<size_t>(20 * blocks));
                for (int p = 0; p < 32 * blocks; ++p) {
                    const Element e = element_at(blocks, p);
                    q5_set(quants, blocks, p / 16, p % 16, static_cast<unsigned>(q5_of(g[b0 + e.j], e.k) ^ 16));
                }
            }
        },
        [&](int64_t b) { std::memcpy(dst + kBytes * b, &g[b], kBytes); });
}

template <class Blk>
void unpack_row(const uint8_t* src, int64_t n_in, uint8_t* dst) {
    auto* g = reinterpret_cast<Blk*>(dst);
    constexpr int64_t kBytes = sizeof(Blk);
    each_chunk(
        n_in,
        [&](int64_t b0, int blocks) {
            const uint8_t* at = src + kBytes * b0;
            for (int j = 0; j < blocks; ++j) {
                std::memcpy(&g[b0 + j].d, at + 2 * j, 2);
                if constexpr (std::is_same_v<Blk, block_q5_0>) {
                    std::memset(g[b0 + j].qh, 0, sizeof g[b0 + j].qh);
                    std::memset(g[b0 + j].qs, 0, sizeof g[b0 + j].qs);
                }
            }
            const uint8_t* quants = at + 2 * blocks;
            for (int p = 0; p < 32 * blocks; ++p) {
                const Element e = element_at(blocks, p);
                if constexpr (std::is_same_v<Blk, block_q8_0>) {
                    g[b0 + e.j].qs[e.k] = static_cast<int8_t>(quants[p]);
                } else {
                    set_q5(g[b0 + e.j], e.k, static_cast<int>(q5_get(quants, blocks, p / 16, p % 16) ^ 16));
                }
            }
        },
        [&](int64_t b) { std::memcpy(&g[b], src + kBytes * b, kBytes); });
}

size_t block_bytes(Type type) { return type == Type::Q8_0 ? sizeof(block_q8_0) : sizeof(block_q5_0); }

void check(Type type, const char* what) {
    if (!has_packed_layout(type)) throw std::invalid_argument(std::string(what) + ": the format has no packed layout");
}

// fn(src row, dst row) for each of n_out rows of `type` (Q8_0 or Q5_0).
template <class Fn>
void each_row(Type type, const void* src, int64_t n_in, int64_t n_out, void* dst, Fn fn) {
    const size_t row = static_cast<size_t>(n_in / 32) * block_bytes(type);
    for (int64_t o = 0; o < n_out; ++o) fn(static_cast<const uint8_t*>(src) + o * row, static_cast<uint8_t*>(dst) + o * row);
}

}  // namespace

void pack_rows(Type type, const void* src, int64_t n_in, int64_t n_out, void* dst) {
    check(type, "pack_rows");
    each_row(type, src, n_in, n_out, dst, [&](const uint8_t* s, uint8_t* d) {
        type == Type::Q8_0 ? pack_row<block_q8_0>(s, n_in, d) : pack_row<block_q5_0>(s, n_in, d);
    });
}

void unpack_rows(Type type, const void* src, int64_t n_in, int64_t n_out, void* dst) {
    check(type, "unpack_rows");
    each_row(type, src, n_in, n_out, dst, [&](const uint8_t* s, uint8_t* d) {
        type == Type::Q8_0 ? unpack_row<block_q8_0>(s, n_in, d) : unpack_row<block_q5_0>(s, n_in, d);
    });
}

void decode_packed_row(Type type, const void* row, int64_t n_in, int16_t* q, float* sw, float* mw) {
    check(type, "decode_packed_row");
    // A chunk's quants are stored in position order (packed.h), so they decode in place.
    const auto* src = static_cast<const uint8_t*>(row);
    const int64_t bytes = static_cast<int64_t>(block_bytes(type));
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
    each_chunk(n_in, chunk, [&](int64_t b) {  // a GGUF block
        const uint8_t* at = src + bytes * b;
        uint16_t d;
        std::memcpy(&d, at, sizeof d);
        sw[b] = f16_to_f32(d);
        for (int k = 0; k < 32; ++k) {
            q[32 * b + k] = type == Type::Q8_0 ? static_cast<int8_t>(at[2 + k])
                                               : static_cast<int16_t>(q5_of(*reinterpret_cast<const block_q5_0*>(at), k) - 16);
        }
    });
}

}  // namespace ds4::quant
