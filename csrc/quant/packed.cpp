// The packed layouts (packed.h): packing at load, unpacking and decoding, in scalar code shared
// by every ISA, so the layouts are defined in one place.
#include "quant/packed.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>

#include "quant/block_lanes.h"
#include "quant/blocks.h"
#include "quant/iq_tables.h"
#include "quant/kernels.h"
#include "quant/kernels_ref.h"

namespace ds4::quant {

namespace {

// A format's GGUF block and its packed fields: the bits per stored quant and the integer value
// (int16_gemm.h's q) of a stored quant s: Q8_0 the int8, Q4_0 s - 8, Q4_1 s, the code-book
// formats the book's value at s, Q5_0 the 5-bit two's complement s = (q5 - 16) mod 32, Q5_1 s
// (packed.h); the scale an f16 or (MXFP4) an E8M0 byte.
struct Format {
    int bits;
    bool has_min;
    size_t block_bytes;
    const int8_t* book = nullptr;
    bool e8m0 = false;
    size_t scale_size() const { return e8m0 ? 1 : 2; }
    int value(unsigned s) const {
        switch (bits) {
            case 8: return static_cast<int8_t>(s);
            case 4: return book ? book[s] : static_cast<int>(s) - (has_min ? 0 : 8);
            default: return has_min ? static_cast<int>(s) : static_cast<int>(s ^ 16u) - 16;
        }
    }
};
Format format_of(Type type) {
    switch (type) {
        case Type::Q8_0: return {8, false, sizeof(block_q8_0)};
        case Type::Q4_0: return {4, false, sizeof(block_q4_0)};
        case Type::Q4_1: return {4, true, sizeof(block_q4_1)};
        case Type::Q5_0: return {5, false, sizeof(block_q5_0)};
        case Type::Q5_1: return {5, true, sizeof(block_q5_1)};
        case Type::IQ4_NL: return {4, false, sizeof(block_iq4_nl), kvalues_iq4nl};
        case Type::MXFP4: return {4, false, sizeof(block_mxfp4), kvalues_mxfp4, true};
        default: throw std::invalid_argument("the format has no packed layout");
    }
}

// A GGUF block's fields by byte offset: the scale at 0, m (formats with a minimum), qh (Q5_*), qs.
struct Fields {
    size_t m, qh, qs;
};
Fields fields_of(const Format& f) {
    const size_t m = 2, after = f.has_min ? 4 : f.scale_size();
    return {m, after, f.bits == 5 ? after + 4 : after};
}

// The stored quant of element k of a GGUF block (the 5-bit formats: Q5_0's flipped in bit 4).
unsigned stored_of(const Format& f, const uint8_t* blk, int k) {
    const Fields at = fields_of(f);
    if (f.bits == 8) return blk[at.qs + k];
    const unsigned nib = k < 16 ? blk[at.qs + k] & 0x0Fu : blk[at.qs + k - 16] >> 4;
    if (f.bits == 4) return nib;
    const unsigned q = nib | ((blk[at.qh + k / 8] >> (k % 8)) & 1u) << 4;
    return f.has_min ? q : q ^ 16u;
}
void set_stored(const Format& f, uint8_t* blk, int k, unsigned s) {
    const Fields at = fields_of(f);
    if (f.bits == 8) {
        blk[at.qs + k] = static_cast<uint8_t>(s);
        return;
    }
    const unsigned q = f.bits == 5 && !f.has_min ? s ^ 16u : s;
    blk[at.qs + k % 16] = static_cast<uint8_t>(blk[at.qs + k % 16] | (q & 0x0Fu) << (k < 16 ? 0 : 4));
    if (f.bits == 5) blk[at.qh + k / 8] = static_cast<uint8_t>(blk[at.qh + k / 8] | ((q >> 4) & 1u) << (k % 8));
}

// Where the value s (5 bits) of lane i of vector v of a 5-bit chunk of `blocks` blocks lives.
// visit(byte, bit, width, bytes) is called per field, low bits of s first: `width` bits of s
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
// s into (set) or out of (get) the chunk's quant bytes.
void q5_set(uint8_t* quants, int blocks, int v, int i, unsigned s) {
    int shift = 0;
    q5_fields(blocks, v, i, [&](int byte, int bit, int width, int bytes) {
        uint16_t word = 0;
        std::memcpy(&word, quants + byte, static_cast<size_t>(bytes));
        word = static_cast<uint16_t>(word | ((s >> shift) & ((1u << width) - 1)) << bit);
        std::memcpy(quants + byte, &word, static_cast<size_t>(bytes));
        shift += width;
    });
}
unsigned q5_get(const uint8_t* quants, int blocks, int v, int i) {
    unsigned s = 0;
    int shift = 0;
    q5_fields(blocks, v, i, [&](int byte, int bit, int width, int bytes) {
        uint16_t word = 0;
        std::memcpy(&word, quants + byte, static_cast<size_t>(bytes));
        s |= ((word >> bit) & ((1u << width) - 1)) << shift;
        shift += width;
    });
    return s;
}
// The 4-bit chunks: byte i of group g (16 bytes) holds lane i of vector g (low nibble) and of
// vector g + blocks (high nibble).
unsigned q4_get(const uint8_t* quants, int blocks, int v, int i) {
    return (quants[16 * (v % blocks) + i] >> (4 * (v / blocks))) & 0x0Fu;
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

// The stored value of position p of a packed chunk.
unsigned chunk_get(const Format& f, const uint8_t* quants, int blocks, int p) {
    switch (f.bits) {
        case 8: return quants[p];
        case 4: return q4_get(quants, blocks, p / 16, p % 16);
        default: return q5_get(quants, blocks, p / 16, p % 16);
    }
}

// A chunk of 8 5-bit blocks' quants (Blk: block_q5_0 or block_q5_1, flip: 16 or 0) with each
// 16-bit word assembled at once (q5_fields' layout: word k of lane i holds vectors 3k, 3k + 1 and
// 3k + 2 in bits 0..14 and bit k of vector 15 in bit 15), what q5_set builds a field at a time;
// the load packs ~76M Gemma weights this way.
template <class Blk>
void q5_chunk8(const uint8_t* src, unsigned flip, uint8_t* quants) {
    const auto* g = reinterpret_cast<const Blk*>(src);
    unsigned s[16][16];  // [v][i]: element k of block j is lane 2 j + k % 2 of vector k / 2
    for (int j = 0; j < BlockLanes::kChunk; ++j) {
        uint32_t h;
        std::memcpy(&h, g[j].qh, sizeof h);
        for (int k = 0; k < 16; ++k) {
            const unsigned lo = (g[j].qs[k] & 0x0Fu) | ((h >> k) & 1u) << 4;
            const unsigned hi = (g[j].qs[k] >> 4) | ((h >> (k + 16)) & 1u) << 4;
            s[k / 2][2 * j + k % 2] = lo ^ flip;
            s[(k + 16) / 2][2 * j + k % 2] = hi ^ flip;
        }
    }
    for (int k = 0; k < 5; ++k) {
        for (int i = 0; i < 16; ++i) {
            const auto w = static_cast<uint16_t>(s[3 * k][i] | s[3 * k + 1][i] << 5 | s[3 * k + 2][i] << 10 |
                                                 ((s[15][i] >> k) & 1u) << 15);
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

// The chunk's scales: its blocks' d, then (formats with a minimum) their m.
size_t scale_bytes(const Format& f, int blocks) { return f.scale_size() * static_cast<size_t>(blocks) * (f.has_min ? 2 : 1); }

void pack_row(const Format& f, const uint8_t* src, int64_t n_in, uint8_t* dst) {
    const size_t bytes = f.block_bytes;
    each_chunk(
        n_in,
        [&](int64_t b0, int blocks) {
            const uint8_t* g = src + bytes * b0;
            uint8_t* at = dst + bytes * b0;
            const size_t ss = f.scale_size();
            for (int j = 0; j < blocks; ++j) {
                std::memcpy(at + ss * j, g + bytes * j, ss);
                if (f.has_min) std::memcpy(at + 2 * blocks + 2 * j, g + bytes * j + 2, 2);
            }
            uint8_t* quants = at + scale_bytes(f, blocks);
            const size_t qs = fields_of(f).qs;
            if (f.bits != 5) {
                // Positions 2m and 2m + 1 are consecutive elements of one block: a pair at a time
                // (the 4-bit formats: GGUF byte k < 16 holds elements k and k + 16, whose positions
                // are p and p + 16 blocks, so byte p of the chunk is that byte). A chunk of 8:
                // vector v's lane pair j is block j's pair v.
                const int pairs = f.bits == 8 ? 16 * blocks : 8 * blocks;
                if (blocks == BlockLanes::kChunk) {
                    for (int v = 0; v < pairs / 8; ++v)
                        for (int j = 0; j < 8; ++j) std::memcpy(quants + 16 * v + 2 * j, g + bytes * j + qs + 2 * v, 2);
                } else {
                    for (int p = 0; p < 2 * pairs; p += 2) {
                        const Element e = element_at(blocks, p);
                        std::memcpy(quants + p, g + bytes * e.j + qs + e.k, 2);
                    }
                }
            } else if (blocks == BlockLanes::kChunk) {
                f.has_min ? q5_chunk8<block_q5_1>(g, 0, quants) : q5_chunk8<block_q5_0>(g, 16, quants);
            } else {
                std::memset(quants, 0, static_cast<size_t>(20 * blocks));
                for (int p = 0; p < 32 * blocks; ++p) {
                    const Element e = element_at(blocks, p);
                    q5_set(quants, blocks, p / 16, p % 16, stored_of(f, g + bytes * e.j, e.k));
                }
            }
        },
        [&](int64_t b) { std::memcpy(dst + bytes * b, src + bytes * b, bytes); });
}

void unpack_row(const Format& f, const uint8_t* src, int64_t n_in, uint8_t* dst) {
    const size_t bytes = f.block_bytes;
    each_chunk(
        n_in,
        [&](int64_t b0, int blocks) {
            const uint8_t* at = src + bytes * b0;
            uint8_t* g = dst + bytes * b0;
            std::memset(g, 0, bytes * static_cast<size_t>(blocks));
            const size_t ss = f.scale_size();
            for (int j = 0; j < blocks; ++j) {
                std::memcpy(g + bytes * j, at + ss * j, ss);
                if (f.has_min) std::memcpy(g + bytes * j + 2, at + 2 * blocks + 2 * j, 2);
            }
            const uint8_t* quants = at + scale_bytes(f, blocks);
            for (int p = 0; p < 32 * blocks; ++p) {
                const Element e = element_at(blocks, p);
                set_stored(f, g + bytes * e.j, e.k, chunk_get(f, quants, blocks, p));
            }
        },
        [&](int64_t b) { std::memcpy(dst + bytes * b, src + bytes * b, bytes); });
}

float f16_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return f16_to_f32(h);
}
float scale_at(const Format& f, const uint8_t* p) { return f.e8m0 ? ref::e8m0_to_fp32_half(*p) : f16_at(p); }

// fn(src row, dst row) for each of n_out rows.
template <class Fn>
void each_row(const Format& f, const void* src, int64_t n_in, int64_t n_out, void* dst, Fn fn) {
    const size_t row = static_cast<size_t>(n_in / 32) * f.block_bytes;
    for (int64_t o = 0; o < n_out; ++o) fn(static_cast<const uint8_t*>(src) + o * row, static_cast<uint8_t*>(dst) + o * row);
}

Format checked(Type type, const char* what) {
    if (!has_packed_layout(type)) throw std::invalid_argument(std::string(what) + ": the format has no packed layout");
    return format_of(type);
}

}  // namespace

void pack_rows(Type type, const void* src, int64_t n_in, int64_t n_out, void* dst) {
    const Format f = checked(type, "pack_rows");
    each_row(f, src, n_in, n_out, dst, [&](const uint8_t* s, uint8_t* d) { pack_row(f, s, n_in, d); });
}

void unpack_rows(Type type, const void* src, int64_t n_in, int64_t n_out, void* dst) {
    const Format f = checked(type, "unpack_rows");
    each_row(f, src, n_in, n_out, dst, [&](const uint8_t* s, uint8_t* d) { unpack_row(f, s, n_in, d); });
}

void decode_packed_row(Type type, const void* row, int64_t n_in, int16_t* q, float* sw, float* mw) {
    const Format f = checked(type, "decode_packed_row");
    // A chunk's quants are stored in position order (packed.h), so they decode in place.
    const auto* src = static_cast<const uint8_t*>(row);
    const size_t bytes = f.block_bytes;
    std::fill(mw, mw + n_in / 16, 0.0f);
    const auto minimum = [&](int64_t b, const uint8_t* m) { mw[2 * b] = mw[2 * b + 1] = -f16_at(m); };
    each_chunk(
        n_in,
        [&](int64_t b0, int blocks) {
            const uint8_t* at = src + bytes * b0;
            for (int j = 0; j < blocks; ++j) {
                sw[b0 + j] = scale_at(f, at + f.scale_size() * j);
                if (f.has_min) minimum(b0 + j, at + 2 * blocks + 2 * j);
            }
            const uint8_t* quants = at + scale_bytes(f, blocks);
            for (int p = 0; p < 32 * blocks; ++p) q[32 * b0 + p] = static_cast<int16_t>(f.value(chunk_get(f, quants, blocks, p)));
        },
        [&](int64_t b) {  // a GGUF block
            const uint8_t* at = src + bytes * b;
            sw[b] = scale_at(f, at);
            if (f.has_min) minimum(b, at + fields_of(f).m);
            for (int k = 0; k < 32; ++k) q[32 * b + k] = static_cast<int16_t>(f.value(stored_of(f, at, k)));
        });
}

}  // namespace ds4::quant
