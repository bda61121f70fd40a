// AVX-512 kernels of the block-lane order (block_lanes.h, int16_gemm.h), for Q8_0 and Q5_0: the
// GEMM over decoded int16 rows and the rows kernels over packed rows (packed.h), two weight rows
// at a time. A zmm holds a chunk vector of weight row o in its low 256 bits and of row o + 1 in
// its high ones, and each activation vector is broadcast to both halves (a load, no shuffle), so
// one vpmaddwd does the 32 multiply-adds the AVX2 kernel (x86/int16_blocks_avx2.cpp) does in two.
// Every lane follows that kernel's arithmetic (the same exact block sums, scale products, fmas
// and final lane tree per weight row): the floats are the AVX2 kernel's, bit for bit. The 32
// registers hold the sums and accumulators of 12 activation rows, so that a verify pass of up
// to 12 rows decodes each weight chunk once (AVX2: 6).

#include <array>
#include <cstring>
#include <utility>

#include "quant/blocks.h"
#include "quant/int16_gemm.h"
#include "quant/packed.h"
#include "quant/x86/avx512_pairs.h"
#include "quant/x86/int16_spans.h"
#include "quant/x86/prefetch.h"

namespace ds4::quant::avx512 {

namespace {

// A weight source gives, per chunk of 8 blocks from block b0, its 16 vectors of both rows in
// order to fn(v, vector) and the 8 scales of each (lanes 0..7 and 8..15); the same for a last
// chunk of 4 (8 vectors; scales in lanes 0..3 and 8..11); and, per row i, for a block left in
// natural order its two halves and its scale.

// Rows as decode_row / decode_packed_row leave them: int16 in the block-lane order, float scales.
struct Decoded {
    const int16_t* q[2];
    const float* sw[2];
    __m512i at(int64_t e) const { return join(q[0] + e, q[1] + e); }
    template <class F>
    void chunk(int64_t b0, F&& fn) const {
        for (int v = 0; v < 16; ++v) fn(v, at(32 * b0 + 16 * v));
    }
    template <class F>
    void chunk4(int64_t b0, F&& fn) const {
        for (int v = 0; v < 8; ++v) fn(v, at(32 * b0 + 16 * v));
    }
    __m512 scales(int64_t b0) const {
        return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(sw[0] + b0)), _mm256_loadu_ps(sw[1] + b0), 1);
    }
    __m512 scales4(int64_t b0) const {
        return _mm512_insertf32x4(_mm512_castps128_ps512(_mm_loadu_ps(sw[0] + b0)), _mm_loadu_ps(sw[1] + b0), 2);
    }
    __m256i half(int i, int64_t b, int h) const { return load256(q[i] + 32 * b + 16 * h); }
    float scale(int i, int64_t b) const { return sw[i][b]; }
    void prefetch(int64_t) const {}
};

// Packed rows (packed.h): a chunk from block b0 starts at byte kBlock b0 with its f16 scales.
template <int kBlock>
struct PackedRows {
    const uint8_t* p[2];
    const uint8_t* at(int i, int64_t b0) const { return p[i] + kBlock * b0; }
    __m512 scales(int64_t b0) const { return _mm512_cvtph_ps(join(load128(at(0, b0)), load128(at(1, b0)))); }
    __m512 scales4(int64_t b0) const {
        return _mm512_cvtph_ps(join(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(at(0, b0))),
                                    _mm_loadl_epi64(reinterpret_cast<const __m128i*>(at(1, b0)))));
    }
    float scale(int i, int64_t b) const {
        uint16_t d;
        std::memcpy(&d, at(i, b), sizeof d);
        return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(d)));
    }
    void prefetch(int64_t b0) const {
        for (int i = 0; i < 2; ++i) prefetch_block<8 * kBlock>(at(i, b0));
    }
};

struct PackedQ8 : PackedRows<34> {
    __m512i vec(int64_t b0, int off) const {
        return _mm512_cvtepi8_epi16(join(load128(at(0, b0) + off), load128(at(1, b0) + off)));
    }
    template <class F>
    void chunk(int64_t b0, F&& fn) const {
        for (int v = 0; v < 16; ++v) fn(v, vec(b0, 16 + 16 * v));
    }
    template <class F>
    void chunk4(int64_t b0, F&& fn) const {
        for (int v = 0; v < 8; ++v) fn(v, vec(b0, 8 + 16 * v));
    }
    __m256i half(int i, int64_t b, int h) const { return _mm256_cvtepi8_epi16(load128(at(i, b) + 2 + 16 * h)); }
};

// Q5_0: the 5-bit field at bit Lo of a word, sign-extended.
template <int Lo>
inline __m512i field5(__m512i word) {
    return _mm512_srai_epi16(_mm512_slli_epi16(word, 11 - Lo), 11);
}
inline __m512i bits(__m512i word, int shift, int16_t mask) {
    return _mm512_and_si512(_mm512_srli_epi16(word, static_cast<unsigned>(shift)), _mm512_set1_epi16(mask));
}
inline __m512i sign_of(__m512i word) {  // bit 15 of a word as the sign of a 5-bit value
    return _mm512_and_si512(_mm512_srai_epi16(word, 15), _mm512_set1_epi16(-16));
}

struct PackedQ5 : PackedRows<22> {
    __m512i word(const uint8_t* const w[2], int k) const { return join(load256(w[0] + 32 * k), load256(w[1] + 32 * k)); }
    template <class F>
    static void fields(const __m512i* words, int n, F& fn) {  // vectors 0 .. 3 n - 1
        for (int k = 0; k < n; ++k) {
            fn(3 * k, field5<0>(words[k]));
            fn(3 * k + 1, field5<5>(words[k]));
            fn(3 * k + 2, field5<10>(words[k]));
        }
    }
    template <class F>
    void chunk(int64_t b0, F&& fn) const {
        const uint8_t* w[2] = {at(0, b0) + 16, at(1, b0) + 16};
        __m512i words[5];
        for (int k = 0; k < 5; ++k) words[k] = word(w, k);
        fields(words, 5, fn);
        // vector 15: bit k of the value in bit 15 of word k; bit 4 is the sign
        __m512i v = _mm512_or_si512(sign_of(words[4]), _mm512_srli_epi16(words[0], 15));
        v = _mm512_or_si512(v, bits(words[1], 14, 2));
        v = _mm512_or_si512(v, bits(words[2], 13, 4));
        fn(15, _mm512_or_si512(v, bits(words[3], 12, 8)));
    }
    template <class F>
    void chunk4(int64_t b0, F&& fn) const {
        const uint8_t* w[2] = {at(0, b0) + 8, at(1, b0) + 8};
        const __m512i words[2] = {word(w, 0), word(w, 1)};
        fields(words, 2, fn);
        // vectors 6 and 7: the nibbles, bit 4 (the sign) in bit 15 of words 0 and 1
        const __m512i nib = _mm512_and_si512(_mm512_cvtepi8_epi16(join(load128(w[0] + 64), load128(w[1] + 64))),
                                             _mm512_set1_epi16(0xFF));
        fn(6, _mm512_or_si512(_mm512_and_si512(nib, _mm512_set1_epi16(0x0F)), sign_of(words[0])));
        fn(7, _mm512_or_si512(_mm512_srli_epi16(nib, 4), sign_of(words[1])));
    }
    __m256i half(int i, int64_t b, int h) const { return q5_0_half(at(i, b), h); }
};

// y[r * ldy] (row 0) and, when nw == 2, y[r * ldy + 1] (row 1) for R activation rows (a, da:
// rows of n and of n / 32). With nw == 1 the source's two rows are the same row.
template <int R, class W>
void block_rows(const W& w, int nw, int64_t n, const int16_t* a, const float* da, float* y, int64_t ldy) {
    const BlockLanes bl(n);
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    __m512i S[R];
    const auto mac = [&](const int16_t* ac) {
        return [&S, ac, n](int v, __m512i q) {
            for (int r = 0; r < R; ++r) {
                S[r] = _mm512_dpwssd_epi32(S[r], q, bcast(ac + r * n + 16 * v));
            }
        };
    };
    for (int64_t b0 = 0; b0 < bl.full; b0 += BlockLanes::kChunk) {
        w.prefetch(b0);
        for (int r = 0; r < R; ++r) S[r] = _mm512_setzero_si512();
        w.chunk(b0, mac(a + 32 * b0));
        const __m512 d = w.scales(b0);
        for (int r = 0; r < R; ++r) {
            const __m512 scale = _mm512_mul_ps(d, _mm512_broadcast_f32x8(_mm256_loadu_ps(da + r * bl.nb + b0)));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[r]), scale, acc[r]);
        }
    }
    if (bl.tail4()) {  // lanes l and l + 4 of a row hold block l: added exactly, then into lanes 0..3
        const int64_t b0 = bl.full;
        for (int r = 0; r < R; ++r) S[r] = _mm512_setzero_si512();
        w.chunk4(b0, mac(a + 32 * b0));
        const __m512 d = w.scales4(b0);
        for (int r = 0; r < R; ++r) {
            const __m512i T = _mm512_add_epi32(S[r], _mm512_shuffle_i32x4(S[r], S[r], _MM_SHUFFLE(2, 3, 0, 1)));
            const __m512 scale = _mm512_mul_ps(d, _mm512_broadcast_f32x4(_mm_loadu_ps(da + r * bl.nb + b0)));
            acc[r] = _mm512_mask_blend_ps(0x0F0F, acc[r], _mm512_fmadd_ps(_mm512_cvtepi32_ps(T), scale, acc[r]));
        }
    } else if (bl.tail > 0) {  // natural order: a block's lanes summed exactly, one fma per block
        for (int r = 0; r < R; ++r) {
            alignas(64) float lanes[16];
            _mm512_store_ps(lanes, acc[r]);
            for (int i = 0; i < nw; ++i) {
                for (int64_t b = bl.full; b < bl.nb; ++b) {
                    const float T = block_sum(w.half(i, b, 0), w.half(i, b, 1), a + r * n + 32 * b);
                    float& lane = lanes[8 * i + b % 8];
                    lane = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(T), _mm_set_ss(w.scale(i, b) * da[r * bl.nb + b]),
                                                      _mm_set_ss(lane)));
                }
            }
            acc[r] = _mm512_load_ps(lanes);
        }
    }
    store_hsums(acc, nw, y, ldy);
}

template <class W>
using BlockRowsFn = void (*)(const W&, int, int64_t, const int16_t*, const float*, float*, int64_t);

template <class W, size_t... I>
constexpr std::array<BlockRowsFn<W>, sizeof...(I)> block_rows_table(std::index_sequence<I...>) {
    return {&block_rows<static_cast<int>(I) + 1, W>...};
}

template <class W>
void block_rows_any(const W& w, int nw, int64_t n, const int16_t* a, const float* da, int nx, float* y, int64_t ldy) {
    static constexpr auto fns = block_rows_table<W>(std::make_index_sequence<kBlockRowsMax>());
    fns[static_cast<size_t>(nx - 1)](w, nw, n, a, da, y, ldy);
}

// One row: the AVX2 kernel as far as it goes (a decode step streams the weights from memory,
// where the two-row kernel measured slower), past it this kernel over the row twice.
template <class W, Type T>
void rows_packed_blocks(const void* row, int64_t n, const int16_t* a, const float* da, const float* xs, int nx,
                        float* y, int64_t ldy) {
    if (nx <= avx2::kBlockRowsMax) return avx2::rows_packed(T)(row, n, a, da, xs, nx, y, ldy);
    const auto* p = static_cast<const uint8_t*>(row);
    block_rows_any(W{{{p, p}}}, 1, n, a, da, nx, y, ldy);
}

template <class W>
void rows_packed2_blocks(const void* row, size_t row_bytes, int64_t n, const int16_t* a, const float* da, const float*,
                         int nx, float* y, int64_t ldy) {
    const auto* p = static_cast<const uint8_t*>(row);
    block_rows_any(W{{{p, p + row_bytes}}}, 2, n, a, da, nx, y, ldy);
}

}  // namespace

void gemm_i16_blocks(const int16_t* q, const float* sw, const float*, bool, int, int nw, const int16_t* a,
                     const float* da, const float*, int nx, int64_t n, float* y, int64_t ldy) {
    const int64_t nb = n / kSpan;
    for (int r = 0; r < nx; r += kBlockRowsMax) {
        const int m = nx - r < kBlockRowsMax ? nx - r : kBlockRowsMax;
        for (int o = 0; o < nw; o += 2) {
            const int two = nw - o >= 2 ? 2 : 1, last = o + two - 1;
            const Decoded w{{q + o * n, q + last * n}, {sw + o * nb, sw + last * nb}};
            block_rows_any(w, two, n, a + r * n, da + r * nb, m, y + r * ldy + o, ldy);
        }
    }
}

RowsPackedFn rows_packed(Type type) {
    switch (type) {
        case Type::Q8_0: return &rows_packed_blocks<PackedQ8, Type::Q8_0>;
        case Type::Q5_0: return &rows_packed_blocks<PackedQ5, Type::Q5_0>;
        default: return nullptr;
    }
}

RowsPacked2Fn rows_packed2(Type type) {
    switch (type) {
        case Type::Q8_0: return &rows_packed2_blocks<PackedQ8>;
        case Type::Q5_0: return &rows_packed2_blocks<PackedQ5>;
        default: return nullptr;
    }
}

}  // namespace ds4::quant::avx512
