// The packed layouts (packed.h): packing at load and unpacking for the GEMM, in scalar code
// shared by every ISA, so the layout is defined in one place.
#include "quant/packed.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "quant/block_lanes.h"
#include "quant/blocks.h"
#include "quant/kernels.h"

namespace ds4::quant {

namespace {

constexpr int kQ5Words = 5;
constexpr size_t kQ5TileBlock = kPackRows * sizeof(uint16_t) + kQ5Words * 16 * sizeof(uint16_t);
static_assert(kQ5TileBlock == kPackRows * sizeof(block_q5_0), "a packed Q5_0 tile has the GGUF size");

// The 5-bit quant q of element e of a GGUF block.
int q5_of(const block_q5_0& b, int e) {
    const int nib = e < 16 ? b.qs[e] & 0x0F : b.qs[e - 16] >> 4;
    return nib | ((b.qh[e / 8] >> (e % 8)) & 1) << 4;
}

// The 5-bit field of half h, lane `lane` in a block's words (packed.h).
unsigned q5_field(const uint16_t (&words)[kQ5Words][16], int h, int lane) {
    if (h < 15) return (words[h / 3][lane] >> (5 * (h % 3))) & 31u;
    unsigned v = 0;
    for (int k = 0; k < kQ5Words; ++k) v |= ((words[k][lane] >> 15) & 1u) << k;
    return v;
}

void pack_q5_0_tile(const uint8_t* rows, size_t row_bytes, int64_t nb, uint8_t* tile) {
    for (int64_t bi = 0; bi < nb; ++bi) {
        uint8_t* out = tile + bi * kQ5TileBlock;
        uint16_t words[kQ5Words][16] = {};
        for (int rho = 0; rho < kPackRows; ++rho) {
            const auto& b = reinterpret_cast<const block_q5_0*>(rows + rho * row_bytes)[bi];
            std::memcpy(out + rho * sizeof(uint16_t), &b.d, sizeof(uint16_t));
            for (int e = 0; e < 32; ++e) {
                const int h = 2 * rho + e / 16, lane = e % 16;
                const unsigned v = static_cast<unsigned>(q5_of(b, e) ^ 16);  // (q - 16) mod 32
                if (h < 15) {
                    words[h / 3][lane] |= static_cast<uint16_t>(v << (5 * (h % 3)));
                } else {
                    for (int k = 0; k < kQ5Words; ++k) words[k][lane] |= static_cast<uint16_t>(((v >> k) & 1) << 15);
                }
            }
        }
        std::memcpy(out + kPackRows * sizeof(uint16_t), words, sizeof words);
    }
}

void unpack_q5_0_tile(const uint8_t* tile, int64_t nb, uint8_t* rows, size_t row_bytes) {
    for (int64_t bi = 0; bi < nb; ++bi) {
        const uint8_t* in = tile + bi * kQ5TileBlock;
        uint16_t words[kQ5Words][16];
        std::memcpy(words, in + kPackRows * sizeof(uint16_t), sizeof words);
        for (int rho = 0; rho < kPackRows; ++rho) {
            auto& b = reinterpret_cast<block_q5_0*>(rows + rho * row_bytes)[bi];
            std::memcpy(&b.d, in + rho * sizeof(uint16_t), sizeof(uint16_t));
            std::memset(b.qh, 0, sizeof b.qh);
            std::memset(b.qs, 0, sizeof b.qs);
            for (int e = 0; e < 32; ++e) {
                const int h = 2 * rho + e / 16, lane = e % 16;
                const unsigned q = q5_field(words, h, lane) ^ 16;
                b.qs[e % 16] |= static_cast<uint8_t>((q & 0x0F) << (e < 16 ? 0 : 4));
                b.qh[e / 8] |= static_cast<uint8_t>((q >> 4) << (e % 8));
            }
        }
    }
}

// Q8_0, row by row (packed.h): whole chunks of 8 blocks and a last chunk of 4 as their scales
// then their quants in the block-lane order; any other last chunk as in GGUF. `fn(b, k, off)`
// visits element k of block b at byte `off` of the packed row, `scale(b, off)` its f16 scale.
template <class Elem, class Scale>
void q8_0_layout(int64_t n_in, Elem elem, Scale scale) {
    const BlockLanes bl(n_in);
    const auto chunk = [&](int64_t b0, int64_t blocks) {  // packed at byte 34 b0, lanes at 32 b0
        const int64_t off = 34 * b0;
        for (int64_t b = b0; b < b0 + blocks; ++b) {
            scale(b, off + 2 * (b - b0));
            for (int k = 0; k < 32; ++k) elem(b, k, off + 2 * blocks + (bl.position(b, k) - 32 * b0));
        }
    };
    for (int64_t b0 = 0; b0 < bl.full; b0 += BlockLanes::kChunk) chunk(b0, BlockLanes::kChunk);
    if (bl.tail4()) {
        chunk(bl.full, 4);
        return;
    }
    for (int64_t b = bl.full; b < bl.nb; ++b) {
        scale(b, 34 * b);
        for (int k = 0; k < 32; ++k) elem(b, k, 34 * b + 2 + k);
    }
}

void pack_q8_0_row(const uint8_t* src, int64_t n_in, uint8_t* dst) {
    const auto* blocks = reinterpret_cast<const block_q8_0*>(src);
    q8_0_layout(
        n_in, [&](int64_t b, int k, int64_t off) { dst[off] = static_cast<uint8_t>(blocks[b].qs[k]); },
        [&](int64_t b, int64_t off) { std::memcpy(dst + off, &blocks[b].d, sizeof(uint16_t)); });
}

void unpack_q8_0_row(const uint8_t* src, int64_t n_in, uint8_t* dst) {
    auto* blocks = reinterpret_cast<block_q8_0*>(dst);
    q8_0_layout(
        n_in, [&](int64_t b, int k, int64_t off) { blocks[b].qs[k] = static_cast<int8_t>(src[off]); },
        [&](int64_t b, int64_t off) { std::memcpy(&blocks[b].d, src + off, sizeof(uint16_t)); });
}

void decode_q8_0_row(const uint8_t* src, int64_t n_in, int16_t* q, float* sw) {
    const BlockLanes bl(n_in);
    q8_0_layout(
        n_in, [&](int64_t b, int k, int64_t off) { q[bl.position(b, k)] = static_cast<int8_t>(src[off]); },
        [&](int64_t b, int64_t off) {
            uint16_t d;
            std::memcpy(&d, src + off, sizeof d);
            sw[b] = f16_to_f32(d);
        });
}

}  // namespace

int pack_tile_rows(Type type) { return type == Type::Q8_0 ? 1 : kPackRows; }

void decode_tile(Type type, const void* tile, int64_t n_in, int16_t* q, float* sw, float* mw) {
    if (!has_packed_layout(type)) throw std::invalid_argument("decode_tile: the format has no packed layout");
    const int64_t nb = n_in / 32;
    std::fill(mw, mw + pack_tile_rows(type) * (n_in / 16), 0.0f);
    if (type == Type::Q8_0) {
        decode_q8_0_row(static_cast<const uint8_t*>(tile), n_in, q, sw);
        return;
    }
    for (int64_t bi = 0; bi < nb; ++bi) {
        const uint8_t* in = static_cast<const uint8_t*>(tile) + bi * kQ5TileBlock;
        uint16_t d[kPackRows], words[kQ5Words][16];
        std::memcpy(d, in, sizeof d);
        std::memcpy(words, in + sizeof d, sizeof words);
        for (int rho = 0; rho < kPackRows; ++rho) {
            sw[rho * nb + bi] = f16_to_f32(d[rho]);
            int16_t* out = q + rho * n_in + bi * 32;
            for (int s = 0; s < 2; ++s) {
                const int h = 2 * rho + s;
                for (int lane = 0; lane < 16; ++lane) {
                    out[16 * s + lane] = static_cast<int16_t>(static_cast<int>(q5_field(words, h, lane) ^ 16) - 16);
                }
            }
        }
    }
}

bool has_packed_layout(Type type) { return type == Type::Q5_0 || type == Type::Q8_0; }

void pack_rows(Type type, const void* src, int64_t n_in, int64_t n_out, void* dst) {
    if (!has_packed_layout(type)) throw std::invalid_argument("pack_rows: the format has no packed layout");
    if (type == Type::Q8_0) {
        const size_t row = static_cast<size_t>(n_in / 32) * sizeof(block_q8_0);
        for (int64_t o = 0; o < n_out; ++o)
            pack_q8_0_row(static_cast<const uint8_t*>(src) + o * row, n_in, static_cast<uint8_t*>(dst) + o * row);
        return;
    }
    const size_t row = static_cast<size_t>(n_in / 32) * sizeof(block_q5_0);
    const auto* s = static_cast<const uint8_t*>(src);
    auto* d = static_cast<uint8_t*>(dst);
    const int64_t tiled = n_out / kPackRows * kPackRows;
    for (int64_t o = 0; o < tiled; o += kPackRows) pack_q5_0_tile(s + o * row, row, n_in / 32, d + o * row);
    std::memcpy(d + tiled * row, s + tiled * row, static_cast<size_t>(n_out - tiled) * row);
}

void unpack_tile(Type type, const void* tile, int64_t n_in, void* dst) {
    if (!has_packed_layout(type)) throw std::invalid_argument("unpack_tile: the format has no packed layout");
    if (type == Type::Q8_0) {
        unpack_q8_0_row(static_cast<const uint8_t*>(tile), n_in, static_cast<uint8_t*>(dst));
        return;
    }
    const size_t row = static_cast<size_t>(n_in / 32) * sizeof(block_q5_0);
    unpack_q5_0_tile(static_cast<const uint8_t*>(tile), n_in / 32, static_cast<uint8_t*>(dst), row);
}

}  // namespace ds4::quant
