// The screen kernel of the greedy head (head_screen.h) on AVX-512 VNNI + VBMI: packed Q8_0 rows
// two at a time, each 32-byte block-lane vector regrouped by vpermb so that a 32-bit lane holds 4
// quants of one block, made unsigned (q + 128) and multiplied with the screen's int8 activations
// by vpdpbusd: 64 multiply-adds per instruction, where the exact head's vpdpwssd does 32.

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "quant/block_lanes.h"
#include "quant/head_screen.h"
#include "quant/kernels.h"
#include "quant/weight_streams.h"
#include "quant/x86/avx512_pairs.h"
#include "quant/x86/prefetch.h"

namespace ds4::quant::screen::avx512vbmi {

namespace {

constexpr int kBlock = 34;
// Software prefetch of the weight rows (8 KiB ahead) from `From` activation rows on. Measured
// from DRAM, two threads streaming Gemma's head, against the hardware prefetcher alone: on Zen 4
// 1.5x at 8 rows, 1.1-1.25x at 5-6, even at 4, 0.8-0.85x at 2-3 (there the software prefetches
// only get in the hardware's way); on an Intel Xeon the whole verify pass of 2 and 3 rows took
// 0.88x / 0.86x the time with them (Gemma 3 270M). From 2 rows on on Intel CPUs, 4 on the others.
constexpr int kPrefetchFromIntel = 2, kPrefetchFromOther = 4;

inline uint16_t load_u16(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return h;
}

// vpermb indices, per 256-bit half (the high half reads the high row): a full chunk's vector u
// (block-lane vectors 2u and 2u + 1) into lane j = elements 4u .. 4u + 3 of block j; a chunk of
// 4's vector u into lane j < 4 = elements 8u .. 8u + 3 of block j, lane 4 + j = the next four.
// Built at compile time (rows2 runs once per two vocabulary rows).
struct Index {
    alignas(64) uint8_t full[64];
    alignas(64) uint8_t tail[64];
};
constexpr Index make_index() {
    Index t{};
    for (int h = 0; h < 2; ++h) {
        for (int j = 0; j < 8; ++j)
            for (int s = 0; s < 4; ++s) t.full[32 * h + 4 * j + s] = static_cast<uint8_t>(32 * h + 16 * (s >> 1) + 2 * j + (s & 1));
        for (int g = 0; g < 2; ++g)
            for (int j = 0; j < 4; ++j)
                for (int s = 0; s < 4; ++s)
                    t.tail[32 * h + 16 * g + 4 * j + s] = static_cast<uint8_t>(32 * h + 16 * g + 2 * j + 8 * (s >> 1) + (s & 1));
    }
    return t;
}
constexpr Index kIndex = make_index();

// Rows p0 and p1 (the same row when y1 is null) x R activation rows, the two rows' vectors
// joined in one zmm (row 0 low, row 1 high) against activations broadcast to both halves.
template <int R, bool kPrefetch>
void rows2_halves(const uint8_t* p0, const uint8_t* p1, int64_t n, const int8_t* q, const float* d, const int32_t* neg,
                  float* y0, float* y1, int64_t ldy) {
    const BlockLanes bl(n);
    const __m512i full = _mm512_load_si512(kIndex.full), tail = _mm512_load_si512(kIndex.tail), flip = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512 acc[R];
    __m512i S[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    const auto weights = [&](int64_t off, __m512i idx) {
        const __m512i w = join(load256(p0 + off), load256(p1 + off));
        return _mm512_xor_si512(_mm512_permutexvar_epi8(idx, w), flip);
    };
    for (int64_t b0 = 0; b0 < bl.full; b0 += BlockLanes::kChunk) {
        const int64_t base = kBlock * b0;
        if constexpr (kPrefetch) {
            prefetch_block<8 * kBlock>(p0 + base);
            prefetch_block<8 * kBlock>(p1 + base);
        }
        for (int r = 0; r < R; ++r) S[r] = _mm512_broadcast_i32x8(load256(neg + r * bl.nb + b0));
        for (int u = 0; u < 8; ++u) {
            const __m512i w = weights(base + 16 + 32 * u, full);
            for (int r = 0; r < R; ++r) {
                S[r] = _mm512_dpbusd_epi32(S[r], w, _mm512_broadcast_i64x4(load256(q + r * n + 32 * b0 + 32 * u)));
            }
        }
        const __m512 dw = _mm512_cvtph_ps(join(load128(p0 + base), load128(p1 + base)));
        for (int r = 0; r < R; ++r) {
            const __m512 scale = _mm512_mul_ps(dw, _mm512_broadcast_f32x8(_mm256_loadu_ps(d + r * bl.nb + b0)));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[r]), scale, acc[r]);
        }
    }
    if (bl.tail4()) {  // lanes j and 4 + j hold block j; its -128 sum starts lane j only
        const int64_t b0 = bl.full, base = kBlock * b0;
        for (int r = 0; r < R; ++r) S[r] = _mm512_maskz_broadcast_i32x4(0x0F0F, load128(neg + r * bl.nb + b0));
        for (int u = 0; u < 4; ++u) {
            const __m512i w = weights(base + 8 + 32 * u, tail);
            for (int r = 0; r < R; ++r) {
                S[r] = _mm512_dpbusd_epi32(S[r], w, _mm512_broadcast_i64x4(load256(q + r * n + 32 * b0 + 32 * u)));
            }
        }
        const __m128i h0 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p0 + base));
        const __m128i h1 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p1 + base));
        const __m512 dw = _mm512_cvtph_ps(join(_mm_unpacklo_epi64(h0, h0), _mm_unpacklo_epi64(h1, h1)));
        for (int r = 0; r < R; ++r) {
            const __m512 scale = _mm512_mul_ps(dw, _mm512_broadcast_f32x4(_mm_loadu_ps(d + r * bl.nb + b0)));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[r]), scale, acc[r]);
        }
    }
    store_hsums(acc, y1 ? 2 : 1, y0, ldy);  // y1 is y0 + 1 when there are two rows
}

// The same, a zmm holding two consecutive vectors of one row (lane j: 4 quants of block j from
// vector 2u, lane 8 + j: from 2u + 1), so that each activation vector is one plain 64-byte load
// shared by both rows; at a chunk's end lanes j and 8 + j add (exact int32) into rows2_halves'
// lane sums (row 0 low, row 1 high), and from there the arithmetic is the same.
template <int R, bool kPrefetch>
void rows2_spans(const uint8_t* p0, const uint8_t* p1, int64_t n, const int8_t* q, const float* d, const int32_t* neg,
                 float* y0, float* y1, int64_t ldy) {
    const BlockLanes bl(n);
    const __m512i full = _mm512_load_si512(kIndex.full), tail = _mm512_load_si512(kIndex.tail), flip = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    const auto weights = [&](const uint8_t* p, __m512i idx) {
        __m512i w = _mm512_xor_si512(_mm512_permutexvar_epi8(idx, load512(p)), flip);
        in_register(w);
        return w;
    };
    // One chunk of `vectors` block-lane vectors from block b0, the quants `off` bytes into it; its
    // -128 sums (neg) start lanes `first` of the low half.
    const auto chunk = [&](int64_t b0, int64_t off, int vectors, __m512i idx, __mmask16 first, __m512 dw, auto&& scales) {
        const int64_t base = kBlock * b0;
        __m512i S[2][R];
        for (int r = 0; r < R; ++r) S[0][r] = S[1][r] = _mm512_maskz_loadu_epi32(first, neg + r * bl.nb + b0);
        const int8_t* x = q + 32 * b0;
        int64_t stride = n;
        opaque(stride);
        for (int u = 0; u < vectors / 2; ++u) {
            const __m512i w0 = weights(p0 + base + off + 64 * u, idx), w1 = weights(p1 + base + off + 64 * u, idx);
            for (int r = 0; r < R; ++r) {
                __m512i xv = load512(x + r * stride + 64 * u);
                in_register(xv);
                S[0][r] = _mm512_dpbusd_epi32(S[0][r], w0, xv);
                S[1][r] = _mm512_dpbusd_epi32(S[1][r], w1, xv);
            }
        }
        for (int r = 0; r < R; ++r) {
            const __m512 scale = _mm512_mul_ps(dw, scales(r));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(fold(S[0][r], S[1][r])), scale, acc[r]);
        }
    };
    for (int64_t b0 = 0; b0 < bl.full; b0 += BlockLanes::kChunk) {
        const int64_t base = kBlock * b0;
        if constexpr (kPrefetch) {
            prefetch_block<8 * kBlock>(p0 + base);
            prefetch_block<8 * kBlock>(p1 + base);
        }
        const __m512 dw = _mm512_cvtph_ps(join(load128(p0 + base), load128(p1 + base)));
        chunk(b0, 16, 8, full, 0x00FF, dw,
              [&](int r) { return _mm512_broadcast_f32x8(_mm256_loadu_ps(d + r * bl.nb + b0)); });
    }
    if (bl.tail4()) {  // lanes j and 4 + j hold block j; its -128 sum starts lane j only
        const int64_t b0 = bl.full, base = kBlock * b0;
        const __m128i h0 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p0 + base));
        const __m128i h1 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p1 + base));
        const __m512 dw = _mm512_cvtph_ps(join(_mm_unpacklo_epi64(h0, h0), _mm_unpacklo_epi64(h1, h1)));
        chunk(b0, 8, 4, tail, 0x000F, dw,
              [&](int r) { return _mm512_broadcast_f32x4(_mm_loadu_ps(d + r * bl.nb + b0)); });
    }
    store_hsums(acc, y1 ? 2 : 1, y0, ldy);  // y1 is y0 + 1 when there are two rows
}

using Rows2Fn = void (*)(const uint8_t*, const uint8_t*, int64_t, const int8_t*, const float*, const int32_t*, float*,
                         float*, int64_t);

// Measured from DRAM (Zen 4, one thread, Gemma's head): the one-row layout 1.28x the joined rows
// at 8 activation rows, 0.84-0.94x at 4-7.
template <int R, int From>
constexpr Rows2Fn rows2() {
    return R < 8 ? &rows2_halves<R, R >= From> : &rows2_spans<R, R >= From>;
}
template <int From, size_t... I>
constexpr std::array<Rows2Fn, sizeof...(I)> table(std::index_sequence<I...>) {
    return {rows2<static_cast<int>(I) + 1, From>()...};
}

}  // namespace

void row_norms(const uint8_t* rows, size_t row_bytes, int64_t nw, int64_t n, float* norms) {
    // Σ q² per block in int32 lanes: byte pair i of a 32-byte vector of a chunk lands in lane i,
    // which holds block i % 8 (a chunk of 4: block i % 4).
    const BlockLanes bl(n);
    alignas(64) int32_t lanes[16];
    for (int64_t o = 0; o < nw; ++o) {
        const uint8_t* w = rows + static_cast<size_t>(o) * row_bytes;
        double ss = 0.0;
        const auto squares = [&](const uint8_t* quants, int vectors) {
            __m512i acc = _mm512_setzero_si512();
            for (int u = 0; u < vectors; ++u) {
                const __m512i v = _mm512_cvtepi8_epi16(load256(quants + 32 * u));
                acc = _mm512_dpwssd_epi32(acc, v, v);
            }
            _mm512_store_si512(lanes, acc);
        };
        for (int64_t b0 = 0; b0 < bl.full; b0 += BlockLanes::kChunk) {
            const uint8_t* chunk = w + kBlock * b0;
            squares(chunk + 16, 8);
            for (int j = 0; j < 8; ++j) {
                const double s = f16_to_f32(load_u16(chunk + 2 * j));
                ss += s * s * (lanes[j] + lanes[j + 8]);
            }
        }
        if (bl.tail4()) {
            const uint8_t* chunk = w + kBlock * bl.full;
            squares(chunk + 8, 4);
            for (int j = 0; j < 4; ++j) {
                const double s = f16_to_f32(load_u16(chunk + 2 * j));
                ss += s * s * (lanes[j] + lanes[j + 4] + lanes[j + 8] + lanes[j + 12]);
            }
        }
        norms[o] = norm_above(ss);
    }
}

int64_t filter(const float* y, const float* norm, int64_t m, float b, float margin, float floor, float* lo, int32_t* idx,
               float* up) {
    // vmaxps returns its second operand where either is NaN: the running maximum never takes one.
    const __m512 vb = _mm512_set1_ps(b);
    const auto masked = [m](int64_t i) { return static_cast<__mmask16>(m - i >= 16 ? 0xFFFF : (1u << (m - i)) - 1); };
    __m512 l = _mm512_set1_ps(*lo);
    for (int64_t i = 0; i < m; i += 16) {
        const __mmask16 k = masked(i);
        const __m512 v = _mm512_fnmadd_ps(_mm512_maskz_loadu_ps(k, norm + i), vb, _mm512_maskz_loadu_ps(k, y + i));
        l = _mm512_mask_max_ps(l, k, v, l);
    }
    const float lmax = _mm512_reduce_max_ps(l);
    *lo = lmax;
    const __m512 vl = _mm512_set1_ps(std::max(lmax - margin, floor));
    const __m512i step = _mm512_set1_epi32(16);
    __m512i ids = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    int64_t c = 0;
    for (int64_t i = 0; i < m; i += 16, ids = _mm512_add_epi32(ids, step)) {
        const __mmask16 k = masked(i);
        const __m512 u = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, norm + i), vb, _mm512_maskz_loadu_ps(k, y + i));
        const __mmask16 keep = _mm512_mask_cmp_ps_mask(k, u, vl, _CMP_NLT_UQ);  // not below, or NaN
        if (keep) {
            _mm512_mask_compressstoreu_epi32(idx + c, keep, ids);
            _mm512_mask_compressstoreu_ps(up + c, keep, u);
            c += __builtin_popcount(keep);
        }
    }
    return c;
}

void scores(const uint8_t* rows, size_t row_bytes, int64_t nw, int64_t n, const int8_t* q, const float* d,
            const int32_t* neg, int nx, float* y, int64_t ldy) {
    static constexpr auto intel = table<kPrefetchFromIntel>(std::make_index_sequence<kRowsMax>());
    static constexpr auto other = table<kPrefetchFromOther>(std::make_index_sequence<kRowsMax>());
    static const bool on_intel = intel_cpu();
    const Rows2Fn fn = (on_intel ? intel : other)[static_cast<size_t>(nx - 1)];
    const auto at = [rows, row_bytes](int64_t o) { return rows + static_cast<size_t>(o) * row_bytes; };
    // The rows as weight streams (quant/weight_streams.h; Intel Xeon VM, DRAM answering fast, one
    // process alternating blocks of passes: Gemma 3 270M's 2- / 4- / 8-row verify passes 1.10x /
    // 1.09x / 1.03x, Qwen2.5-Coder 0.5B's 4 / 8 / 16 rows 1.07x / 1.04x / 1.02x), each pair's
    // scores written apart through `both`.
    float both[2 * kRowsMax];
    const int64_t done = stream_pairs(nw, [&](int64_t o, int64_t run) {
        fn(at(o), at(o + run), n, q, d, neg, both, both + 1, 2);
        for (int r = 0; r < nx; ++r) {
            y[r * ldy + o] = both[2 * r];
            y[r * ldy + o + run] = both[2 * r + 1];
        }
    });
    for (int64_t o = done; o < nw; o += 2) {  // fewer than kWeightStreams rows left
        const bool two = o + 1 < nw;
        fn(at(o), two ? at(o + 1) : at(o), n, q, d, neg, y + o, two ? y + o + 1 : nullptr, ldy);
    }
}

}  // namespace ds4::quant::screen::avx512vbmi
