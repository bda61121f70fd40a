// Blocks decoded for the int16 path (int16_gemm.h) 32 weights at a time into two 16-lane int16
// vectors, as decode_row defines them: the K-quants', IQ4_XS's, the grid and ternary formats'
// (scales folded in) for the rows kernels (x86/int16_rows_avx2.cpp, x86/int16_rows_avx512.cpp)
// and their sums (SpanSums), the legacy formats' GGUF blocks
// for the block-lane kernels' natural-order last blocks (x86/int16_blocks_*.cpp), and those
// kernels' TailBlocks.
// Include only from files compiled with AVX2 (or wider) flags; everything is in an unnamed
// namespace, so each translation unit has its own copy, compiled for its own ISA.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "quant/blocks.h"
#include "quant/iq_tables.h"
#include "quant/x86/madd.h"
#include "quant/x86/prefetch.h"

// A span decoder (or a block decoder's per-super-block setup) inlined into every kernel's loop: GCC
// kept IQ1_M's and IQ2_S's spans out of line in the AVX-512 kernels, a call and a store per span (one
// row 3.8 / 6.5 GMAC/s), and Q4_K's setup, a call per row and super-block (an 8-row pass 1.03x the time).
#define DS4_SPAN __attribute__((always_inline))

namespace ds4::quant {
namespace {

// An f16 as a float, exactly (the F16C conversion: _cvtsh_ss's).
inline float f16_to_f32(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))); }

inline __m256i load_u8x16(const uint8_t* p) {
    return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// A block of format Blk read in place: its size and its f16 scale d.
template <class Blk>
struct BlockRef {
    static constexpr int kBytes = sizeof(Blk);
    const Blk& b;
    explicit BlockRef(const uint8_t* p) : b(*reinterpret_cast<const Blk*>(p)) {}
    float d() const { return f16_to_f32(b.d); }
};

// Word k of the 8 int16 in each 128-bit lane of v, in every lane.
inline __m256i word(__m256i v, int k) {
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * k)));
}

// Q4_K and Q5_K (Blk): the super-block's weights, 32 at a time: span(k, v) sets v[0], v[1] to
// elements 32k .. 32k+15 and 32k+16 .. 32k+31 as int16 (sub-block scale applied); mw(0) the minimum
// per sub-block (the int16 path's unit, int16_gemm.h; kUnits per super-block). Span k: nibble k % 2 of qs[32 (k / 2) + l]
// and, for Q5_K, bit k of qh[l] as the fifth bit.
template <class Blk>
struct Q45K : BlockRef<Blk> {
    static constexpr bool kMin = true;
    static constexpr int kUnits = 8;
    static constexpr bool kFive = std::is_same_v<Blk, block_q5_K>;
    using BlockRef<Blk>::b;
    __m256i sc;     // the 6-bit sub-block scales (blocks.h: scale_min_k4) as int16, in both lanes
    __m256 mf;      // dmin * m per sub-block
    __m256i h4[2];  // Q5_K: qh[16 i + l] << 4 in word l of h4[i], widened once per super-block
    explicit Q45K(const uint8_t* p) : BlockRef<Blk>(p) {
        uint64_t s, m;
        scales_mins(b, s, m);
        sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(s))));
        mf = mins(b, m);
        if constexpr (kFive)
            for (int i = 0; i < 2; ++i) h4[i] = _mm256_slli_epi16(load_u8x16(b.qh + 16 * i), 4);
    }
    __m256 mw(int) const { return mf; }
    // The 6-bit sub-block scales s and mins m, a byte each (blocks.h: scale_min_k4). Bytes 0..3 of
    // b.scales hold scales 0..3 and the top bits of scales 4..7, bytes 4..7 the mins likewise,
    // bytes 8..11 the low nibbles of scales and mins 4..7. (Scalar: kept apart, the two words stay
    // in scalar registers, off the vector ports.)
    static void scales_mins(const Blk& b, uint64_t& s, uint64_t& m) {
        uint32_t lo, mid, hi;
        std::memcpy(&lo, b.scales, 4);
        std::memcpy(&mid, b.scales + 4, 4);
        std::memcpy(&hi, b.scales + 8, 4);
        s = (lo & 0x3F3F3F3Fu) | uint64_t{(hi & 0x0F0F0F0Fu) | ((lo >> 6) & 0x03030303u) << 4} << 32;
        m = (mid & 0x3F3F3F3Fu) | uint64_t{((hi >> 4) & 0x0F0F0F0Fu) | ((mid >> 6) & 0x03030303u) << 4} << 32;
    }
    // dmin * m per sub-block (exact: an f16 times a 6-bit integer), as decode_row writes it.
    static __m256 mins(const Blk& b, uint64_t m) {
        return _mm256_mul_ps(_mm256_set1_ps(f16_to_f32(b.dmin)),
                             _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(m)))));
    }
    DS4_SPAN void span(int k, __m256i (&v)[2]) const {
        const uint8_t* qs = b.qs + 32 * (k / 2);
        const __m256i s = word(sc, k);
        for (int i = 0; i < 2; ++i) {
            const __m256i x = load_u8x16(qs + 16 * i);
            __m256i q = k % 2 ? _mm256_srli_epi16(x, 4) : _mm256_and_si256(x, _mm256_set1_epi16(0x0F));
            if constexpr (kFive) q = _mm256_or_si256(q, _mm256_and_si256(_mm256_srli_epi16(h4[i], k), _mm256_set1_epi16(0x10)));
            v[i] = _mm256_mullo_epi16(q, s);
        }
    }
};
using Q4K = Q45K<block_q4_K>;
using Q5K = Q45K<block_q5_K>;

// The 16 scales of a decoder with a scale per 16 elements (signed bytes s) as int16: sc[0] scales
// 0..7, sc[1] 8..15, each in both lanes.
inline void halves_scales(__m128i s, __m256i (&sc)[2]) {
    sc[0] = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(s));
    sc[1] = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(s, 8)));
}
// Span k of such a decoder from its 32 values as bytes q, sign-extended: elements 0..15 take
// scale 2k, 16..31 scale 2k + 1.
inline void halves_span(__m256i q, const __m256i (&sc)[2], int k, __m256i (&v)[2]) {
    const int h = k / 4, g = k % 4;
    v[0] = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(q)), word(sc[h], 2 * g));
    v[1] = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1)), word(sc[h], 2 * g + 1));
}

// Q6_K: element 128 h + 32 g + l: nibble g / 2 of ql[64 h + 32 (g % 2) + l], bits 2 g of
// qh[32 h + l], value q - 32, scale scales[(32 g + l) / 16 + 8 h].
struct Q6K : BlockRef<block_q6_K> {
    static constexpr bool kMin = false;
    __m256i sc[2];  // the 16 int8 scales as int16: 0..7 and 8..15, each in both lanes
    explicit Q6K(const uint8_t* p) : BlockRef(p) {
        halves_scales(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)), sc);
    }
    // Span k's 32 values q - 32 as int8, in element order.
    __m256i bytes(int k) const {
        const int h = k / 4, g = k % 4;
        const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32 * (g % 2)));
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
        const __m256i lo = g < 2 ? _mm256_and_si256(ql, _mm256_set1_epi8(0x0F))
                                 : _mm256_and_si256(_mm256_srli_epi16(ql, 4), _mm256_set1_epi8(0x0F));
        // bits 2g..2g+1 of each qh byte moved to bits 4..5
        const __m256i hi = _mm256_and_si256(g < 2 ? _mm256_slli_epi16(qh, 4 - 2 * g) : _mm256_srli_epi16(qh, 2 * g - 4),
                                            _mm256_set1_epi8(0x30));
        return _mm256_sub_epi8(_mm256_or_si256(lo, hi), _mm256_set1_epi8(32));
    }
    DS4_SPAN void span(int k, __m256i (&v)[2]) const { halves_span(bytes(k), sc, k, v); }
};

// Q2_K / Q3_K: span k = 4 h + s's 32 crumbs as bytes: crumb s of qs[32 h + l].
inline __m256i k_crumbs(const uint8_t* qs, int k) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (k / 4)));
    return _mm256_and_si256(_mm256_srli_epi16(q, 2 * (k % 4)), _mm256_set1_epi8(3));
}

// Q3_K: span k = 4 h + s (elements 128 h + 32 s + l): crumb s of qs[32 h + l], minus 4 where bit k
// of hmask[l] is clear, times the 6-bit scale (minus 32) of its 16 elements.
struct Q3K : BlockRef<block_q3_K> {
    static constexpr bool kMin = false;
    __m256i sc[2];  // the 16 scales as int16: 0..7 and 8..15, each in both lanes
    explicit Q3K(const uint8_t* p) : BlockRef(p) {
        halves_scales(_mm_sub_epi8(scales(b), _mm_set1_epi8(32)), sc);
    }
    // The 16 6-bit scales, a byte each: bytes 0..7 of b.scales hold the low nibbles of scales 0..7
    // and (high nibbles) 8..15, bytes 8..11 two top bits of each, scale j's at bits 2 (j / 4) of
    // byte 8 + j % 4.
    static __m128i scales(const block_q3_K& b) {
        uint32_t lo, mid, hi;
        std::memcpy(&lo, b.scales, 4);
        std::memcpy(&mid, b.scales + 4, 4);
        std::memcpy(&hi, b.scales + 8, 4);
        const uint32_t m4 = 0x0F0F0F0Fu, m2 = 0x03030303u;
        return _mm_setr_epi32(static_cast<int>((lo & m4) | (hi & m2) << 4), static_cast<int>((mid & m4) | (hi >> 2 & m2) << 4),
                              static_cast<int>((lo >> 4 & m4) | (hi >> 4 & m2) << 4),
                              static_cast<int>((mid >> 4 & m4) | (hi >> 6 & m2) << 4));
    }
    // Span k's 32 values as int8, in element order.
    __m256i bytes(int k) const {
        const __m256i m = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask));
        const __m256i lo = k_crumbs(b.qs, k);
        // bit k of each hmask byte moved to bit 2
        const __m256i hi = _mm256_and_si256(k < 2 ? _mm256_slli_epi16(m, 2 - k) : _mm256_srli_epi16(m, k - 2),
                                            _mm256_set1_epi8(4));
        return _mm256_sub_epi8(_mm256_or_si256(lo, hi), _mm256_set1_epi8(4));
    }
    DS4_SPAN void span(int k, __m256i (&v)[2]) const { halves_span(bytes(k), sc, k, v); }
};

// Q2_K: span k = 4 h + s: crumb s of qs[32 h + l] times the 4-bit scale of its 16 elements (low
// nibble of scales[j]); a minimum per 16 elements (the int16 path's unit for Q2_K), dmin times the
// high nibble.
struct Q2K : BlockRef<block_q2_K> {
    static constexpr bool kMin = true;
    static constexpr int kUnits = 16;
    __m256i sc[2];  // the 16 scales as int16: 0..7 and 8..15, each in both lanes
    __m256 mf[2];   // dmin * m per 16 elements: 0..7, 8..15
    explicit Q2K(const uint8_t* p) : BlockRef(p) {
        const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
        const __m128i lo = _mm_and_si128(s, _mm_set1_epi8(0x0F)), hi = _mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(0x0F));
        halves_scales(lo, sc);
        const __m256 dmin = _mm256_set1_ps(f16_to_f32(b.dmin));
        mf[0] = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)));
        mf[1] = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))));
    }
    __m256 mw(int i) const { return mf[i]; }
    // Span k's 32 values (0..3) as bytes, in element order.
    __m256i bytes(int k) const { return k_crumbs(b.qs, k); }
    DS4_SPAN void span(int k, __m256i (&v)[2]) const { halves_span(bytes(k), sc, k, v); }
};

// The code book's values at the 16 codes in the low nibbles of `codes`' bytes, as int16.
inline __m256i book_lookup(const int8_t* values, __m128i codes) {
    const __m128i book = _mm_loadu_si128(reinterpret_cast<const __m128i*>(values));
    return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(book, _mm_and_si128(codes, _mm_set1_epi8(0x0F))));
}

// Byte i of the result 0xFF where bit i of `bits` is set, else 0: the sign bits of a span of the
// grid formats as masks (byte i takes byte i / 8 of `bits` by a shuffle, then its bit i % 8).
inline __m256i sign_masks(uint32_t bits) {
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                                               _mm256_setr_epi64x(0, 0x0101010101010101ll, 0x0202020202020202ll,
                                                                  0x0303030303030303ll));
    const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}
// 32 signed bytes q widened, elements 0..15 times c0 and 16..31 times c1.
inline void times_halves(__m256i q, int c0, int c1, __m256i (&v)[2]) {
    v[0] = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(q)), _mm256_set1_epi16(static_cast<int16_t>(c0)));
    v[1] = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1)), _mm256_set1_epi16(static_cast<int16_t>(c1)));
}
// A span of the grid formats: 32 magnitudes (bytes, < 128), negated under `minus`, widened and
// times c0 (elements 0..15) and c1 (16..31).
inline void grid_span(__m256i mag, __m256i minus, int c0, int c1, __m256i (&v)[2]) {
    times_halves(_mm256_sub_epi8(_mm256_xor_si256(mag, minus), minus), c0, c1, v);
}
inline void grid_span(__m256i mag, __m256i minus, int c, __m256i (&v)[2]) { grid_span(mag, minus, c, c, v); }
// Four 8-byte grid points, grid[index(0)] .. grid[index(3)].
template <class Index>
inline __m256i points4(const uint64_t* grid, Index&& index) {
    return _mm256_setr_epi64x(static_cast<long long>(grid[index(0)]), static_cast<long long>(grid[index(1)]),
                              static_cast<long long>(grid[index(2)]), static_cast<long long>(grid[index(3)]));
}

// The sign masks of IQ2_XXS / IQ3_XXS's four 7-bit sign indices (aux's low 28 bits), a table load
// each (the 8 sign bits as bytes): fewer instructions than the bits' assembly and sign_masks.
inline __m256i ksign_masks(uint32_t aux) { return points4(ksign_masks_iq2xs, [aux](int i) { return (aux >> (7 * i)) & 127; }); }
// IQ2_XXS: span k = group k (int16_ref.cpp): its four grid points' magnitudes by four 8-byte
// table loads, times 2 s + 1 with the signs of ksign_masks; d / 8 the super-block's scale.
struct IQ2XXS : BlockRef<block_iq2_xxs> {
    static constexpr bool kMin = false;
    using BlockRef::BlockRef;
    float d() const { return f16_to_f32(b.d) * 0.125f; }
    DS4_SPAN void span(int k, __m256i (&v)[2]) const {
        uint32_t idx, aux;
        std::memcpy(&idx, b.qs + 4 * k, 4);
        std::memcpy(&aux, b.qs + 4 * k + 2, 4);
        const __m256i mag = points4(iq2xxs_grid, [idx](int i) { return (idx >> (8 * i)) & 0xFF; });
        grid_span(mag, ksign_masks(aux), static_cast<int>(2 * (aux >> 28) + 1), v);
    }
};
// IQ2_XS: span k = group k: four u16 of a 9-bit grid index and a 7-bit sign index (ksigns), the
// odd multipliers of its two 16-element halves (nibbles of scales[k]); d / 8 the super-block's scale.
struct IQ2XS : BlockRef<block_iq2_xs> {
    static constexpr bool kMin = false;
    using BlockRef::BlockRef;
    float d() const { return f16_to_f32(b.d) * 0.125f; }
    DS4_SPAN void span(int k, __m256i (&v)[2]) const {
        uint64_t q;
        std::memcpy(&q, b.qs + 4 * k, 8);
        const auto at = [q](int i) { return static_cast<int>((q >> (16 * i)) & 0xFFFF); };
        const __m256i mag = points4(iq2xs_grid, [&](int i) { return at(i) & 511; });
        const __m256i minus = points4(ksign_masks_iq2xs, [&](int i) { return at(i) >> 9; });
        grid_span(mag, minus, odd_scale_iq2(b.scales, 2 * k), odd_scale_iq2(b.scales, 2 * k + 1), v);
    }
};
// IQ2_S: span k = group k: grid points index_iq2_s(4 k + i), the sign bits of qs[32 + 4 k ..],
// scales as IQ2_XS's.
struct IQ2S : BlockRef<block_iq2_s> {
    static constexpr bool kMin = false;
    using BlockRef::BlockRef;
    float d() const { return f16_to_f32(b.d) * 0.125f; }
    DS4_SPAN void span(int k, __m256i (&v)[2]) const {
        const __m256i mag = points4(iq2s_grid, [&](int i) { return index_iq2_s(b, 4 * k + i); });
        uint32_t signs;
        std::memcpy(&signs, b.qs + QK_K / 8 + 4 * k, 4);
        grid_span(mag, sign_masks(signs), odd_scale_iq2(b.scales, 2 * k), odd_scale_iq2(b.scales, 2 * k + 1), v);
    }
};
// The IQ1 formats' bytes 8 g +- 1 (int16_ref.cpp) from four grid points (g = -1, 0, 1 as int8) and
// the shift per byte (+1 or -1); 8 g by a word shift, the bits crossing into the next byte masked.
// (Not vpsignb: SIMDe's emulation, which the tests build, gets its zero case wrong.)
inline __m256i iq1_bytes(__m256i points, __m256i shift) {
    return _mm256_add_epi8(_mm256_and_si256(_mm256_slli_epi16(points, 3), _mm256_set1_epi8(static_cast<char>(0xF8))), shift);
}
// IQ1_S: span k = group k: grid points index_iq1_s(4 k + i), one shift sign and odd multiplier.
struct IQ1S : BlockRef<block_iq1_s> {
    static constexpr bool kMin = false;
    using BlockRef::BlockRef;
    float d() const { return f16_to_f32(b.d) * 0.125f; }
    DS4_SPAN void span(int k, __m256i (&v)[2]) const {
        const __m256i g = points4(iq1s_grid, [&](int i) { return index_iq1_s(b, 4 * k + i); });
        const int c = odd_scale_iq1_s(b, k);
        times_halves(iq1_bytes(g, _mm256_set1_epi8(shift_down_iq1_s(b, k) ? -1 : 1)), c, c, v);
    }
};
// IQ1_M: span k = group k: grid points index_iq1_m(4 k + i) with a shift sign each, the odd
// multipliers of the two halves; d / 8 the super-block's scale (d from the scales' top nibbles).
struct IQ1M {
    static constexpr bool kMin = false;
    static constexpr int kBytes = sizeof(block_iq1_m);
    const block_iq1_m& b;
    explicit IQ1M(const uint8_t* p) : b(*reinterpret_cast<const block_iq1_m*>(p)) {}
    float d() const { return f16_to_f32(d_iq1_m(b)) * 0.125f; }
    DS4_SPAN void span(int k, __m256i (&v)[2]) const {
        uint16_t h;  // the four points' nibbles: 3 index bits, then the shift's sign
        std::memcpy(&h, b.qh + 2 * k, 2);
        const __m256i g = points4(iq1s_grid, [&](int i) { return b.qs[4 * k + i] | ((h >> (4 * i)) & 7) << 8; });
        // lane i all ones where bit 4 i + 3 of h is set, then -1 or +1 per byte
        const __m256i bit = _mm256_setr_epi64x(0x8, 0x80, 0x800, 0x8000);
        const __m256i down = _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x(h), bit), bit);
        times_halves(iq1_bytes(g, _mm256_or_si256(down, _mm256_set1_epi8(1))), odd_scale_iq1_m(b, 2 * k),
                     odd_scale_iq1_m(b, 2 * k + 1), v);
    }
};
// TQ2_0: span k = 4 c + s: crumb s of qs[32 c + l], minus 1.
struct TQ20 : BlockRef<block_tq2_0> {
    static constexpr bool kMin = false;
    using BlockRef::BlockRef;
    DS4_SPAN void span(int k, __m256i (&v)[2]) const {
        const __m256i q = _mm256_sub_epi8(k_crumbs(b.qs, k), _mm256_set1_epi8(1));
        v[0] = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q));
        v[1] = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1));
    }
};
// TQ1_0: 16 ternary digits as int16 from bytes x (widened) and each one's power of 3, m: (x m mod
// 256) 3 / 256 - 1 (blocks.h: digit_tq1_0).
inline __m256i tq1_digits(__m128i x, __m256i m) {
    const __m256i q = _mm256_and_si256(_mm256_mullo_epi16(_mm256_cvtepu8_epi16(x), m), _mm256_set1_epi16(0xFF));
    return _mm256_sub_epi16(_mm256_srli_epi16(_mm256_mullo_epi16(q, _mm256_set1_epi16(3)), 8), _mm256_set1_epi16(1));
}
// TQ1_0: span k < 5: digit k of qs[0..31]; spans 5 and 6: digits 2 (k - 5) and 2 (k - 5) + 1 of
// qs[32..47]; span 7: digit 4 of qs[32..47], then digit l / 4 of qh[l % 4].
struct TQ10 : BlockRef<block_tq1_0> {
    static constexpr bool kMin = false;
    using BlockRef::BlockRef;
    DS4_SPAN void span(int k, __m256i (&v)[2]) const {
        const auto load16 = [](const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); };
        if (k < 5) {
            const __m256i m = _mm256_set1_epi16(kPow3Tq1[k]);
            v[0] = tq1_digits(load16(b.qs), m);
            v[1] = tq1_digits(load16(b.qs + 16), m);
        } else if (k < 7) {
            v[0] = tq1_digits(load16(b.qs + 32), _mm256_set1_epi16(kPow3Tq1[2 * (k - 5)]));
            v[1] = tq1_digits(load16(b.qs + 32), _mm256_set1_epi16(kPow3Tq1[2 * (k - 5) + 1]));
        } else {
            uint32_t h;
            std::memcpy(&h, b.qh, 4);
            v[0] = tq1_digits(load16(b.qs + 32), _mm256_set1_epi16(kPow3Tq1[4]));
            v[1] = tq1_digits(_mm_set1_epi32(static_cast<int>(h)),
                              _mm256_setr_epi16(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27));
        }
    }
};
// IQ3_XXS: span k = group k: its eight grid points (4 magnitudes each) by one gather, the signs
// and scale as IQ2_XXS's from the u32 at qs[64 + 4 k]; d / 4 the super-block's scale.
struct IQ3XXS : BlockRef<block_iq3_xxs> {
    static constexpr bool kMin = false;
    using BlockRef::BlockRef;
    float d() const { return f16_to_f32(b.d) * 0.25f; }
    DS4_SPAN void span(int k, __m256i (&v)[2]) const {
        uint32_t aux;
        std::memcpy(&aux, b.qs + QK_K / 4 + 4 * k, 4);
        const __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * k)));
        const __m256i mag = _mm256_i32gather_epi32(reinterpret_cast<const int*>(iq3xxs_grid), idx, 4);
        grid_span(mag, ksign_masks(aux), static_cast<int>(2 * (aux >> 28) + 1), v);
    }
};
// IQ3_S: span k = group k: its eight grid points (qs[8 k + i] and bit i of qh[k] as the ninth
// bit) by one gather, the sign bits of signs[4 k ..], times 1 + 2 s; d the super-block's scale.
struct IQ3S : BlockRef<block_iq3_s> {
    static constexpr bool kMin = false;
    using BlockRef::BlockRef;
    DS4_SPAN void span(int k, __m256i (&v)[2]) const {
        const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * k)));
        const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b.qh[k]), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
                                            _mm256_set1_epi32(1));
        const __m256i idx = _mm256_or_si256(lo, _mm256_slli_epi32(hi, 8));
        const __m256i mag = _mm256_i32gather_epi32(reinterpret_cast<const int*>(iq3s_grid), idx, 4);
        uint32_t signs;
        std::memcpy(&signs, b.signs + 4 * k, 4);
        grid_span(mag, sign_masks(signs), 1 + 2 * ((b.scales[k / 2] >> (4 * (k % 2))) & 0x0F), v);
    }
};

// IQ4_XS: span k = sub-block k: elements 0..15 the code book's values at the low nibbles of
// qs[16 k + l], 16..31 at the high ones, times the sub-block's 6-bit scale minus 32.
struct IQ4XS : BlockRef<block_iq4_xs> {
    static constexpr bool kMin = false;
    __m256i sc;  // the 8 scales minus 32 as int16, in both lanes
    explicit IQ4XS(const uint8_t* p) : BlockRef(p) {
        sc = _mm256_broadcastsi128_si256(
            _mm_sub_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(scales(b)))), _mm_set1_epi16(32)));
    }
    // The 8 6-bit scales, byte j scale j: the nibbles of scales_l and the bit pairs of scales_h
    // spread to a byte each.
    static uint64_t scales(const block_iq4_xs& b) {
        uint32_t l;
        std::memcpy(&l, b.scales_l, 4);
        uint64_t lo = l, hi = b.scales_h;
        lo = (lo | lo << 16) & 0x0000FFFF0000FFFFull;
        lo = (lo | lo << 8) & 0x00FF00FF00FF00FFull;
        lo = (lo | lo << 4) & 0x0F0F0F0F0F0F0F0Full;
        hi = (hi | hi << 24) & 0x000000FF000000FFull;
        hi = (hi | hi << 12) & 0x000F000F000F000Full;
        hi = (hi | hi << 6) & 0x0303030303030303ull;
        return lo | hi << 4;
    }
    DS4_SPAN void span(int k, __m256i (&v)[2]) const {
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * k));
        const __m256i s = word(sc, k);
        v[0] = _mm256_mullo_epi16(book_lookup(kvalues_iq4nl, x), s);
        v[1] = _mm256_mullo_epi16(book_lookup(kvalues_iq4nl, _mm_srli_epi16(x, 4)), s);
    }
};

// -1 in the lanes of elements 16 i .. 16 i + 15 whose fifth bit (bit e of qh) is set.
inline __m256i fifth_bits(const uint8_t* qh, int i) {
    uint16_t h;
    std::memcpy(&h, qh + 2 * i, sizeof h);
    const __m256i bit = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
                                          static_cast<int16_t>(0x8000));
    return _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_set1_epi16(static_cast<int16_t>(h)), bit), bit);
}
// E8M0 exponents (int32 lanes) as MXFP4 scales: kernels_ref.h's e8m0_to_fp32_half, 2^(e - 128)
// (e < 2: the subnormals 2^-128 and 2^-127).
inline __m256 e8m0_half(__m256i e) {
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, one), 23);
    const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(subnormal, normal, _mm256_cmpgt_epi32(e, one)));
}
inline __m256 e8m0_half8(const uint8_t* p) { return e8m0_half(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))); }

// A GGUF block of a legacy or code-book format (Blk) read in place, for the blocks a block-lane
// row keeps in the natural order: half(h) its elements 16 h .. 16 h + 15 as int16 q (int16_gemm.h:
// Q4_0 the nibble - 8, Q5_0 the 5-bit quant - 16, IQ4_NL / MXFP4 the code book's value), d() its
// scale, mw() its minimum term's weight (-m; 0 without one).
template <class Blk>
struct LegacyBlock : BlockRef<Blk> {
    static constexpr bool kQ8 = std::is_same_v<Blk, block_q8_0>;
    static constexpr bool kFifth = std::is_same_v<Blk, block_q5_0> || std::is_same_v<Blk, block_q5_1>;
    static constexpr bool kMin = std::is_same_v<Blk, block_q4_1> || std::is_same_v<Blk, block_q5_1>;
    using BlockRef<Blk>::b;
    explicit LegacyBlock(const uint8_t* p) : BlockRef<Blk>(p) {}
    float d() const {
        if constexpr (std::is_same_v<Blk, block_mxfp4>) {
            return _mm256_cvtss_f32(e8m0_half(_mm256_set1_epi32(b.e)));
        } else {
            return BlockRef<Blk>::d();
        }
    }
    __m256i half(int h) const {
        if constexpr (kQ8) {
            return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * h)));
        } else if constexpr (CodeBook<Blk>::kIs) {
            const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
            return book_lookup(CodeBook<Blk>::values(), h ? _mm_srli_epi16(x, 4) : x);
        } else {
            const __m256i x = load_u8x16(b.qs);  // byte j: element j (low nibble) and j + 16 (high)
            __m256i q = h ? _mm256_srli_epi16(x, 4) : _mm256_and_si256(x, _mm256_set1_epi16(0x0F));
            if constexpr (kFifth) q = _mm256_or_si256(q, _mm256_and_si256(fifth_bits(b.qh, h), _mm256_set1_epi16(16)));
            if constexpr (!kMin) q = _mm256_sub_epi16(q, _mm256_set1_epi16(kFifth ? 16 : 8));
            return q;
        }
    }
    float mw() const {
        if constexpr (kMin) return -f16_to_f32(b.m);
        return 0.0f;
    }
};

// The same interface over a block of a decoded block-lane row kept in the natural order.
struct DecodedBlock {
    const int16_t* q;
    float d_, mw_;
    __m256i half(int h) const { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 16 * h)); }
    float d() const { return d_; }
    float mw() const { return mw_; }
};

// The last 1..3 or 5..7 blocks of a block-lane row (block_lanes.h: they keep the natural order
// and its arithmetic, int16_gemm.h), decoded once for all activation rows: per block and
// activation row one pair of madds, a conversion and an fma into all eight lanes. The minimum
// term's halves 2 i and 2 i + 1 go to lanes 2 i % 8 and (2 i + 1) % 8, in order.
struct TailBlocks {
    int t;
    __m256i q[7][2];
    float sw[7];
    __m256 mw[2];       // the halves' weights, 8 per vector
    __m256i hlive[2];   // -1 in the lanes of halves < 2 t
    // blk(i): block full + i (LegacyBlock, or a packed row's block of the same interface).
    template <class Block>
    TailBlocks(int tail, Block&& blk) : t(tail) {
        alignas(32) float m[16] = {};
        for (int i = 0; i < t; ++i) {
            const auto bi = blk(i);
            q[i][0] = bi.half(0);
            q[i][1] = bi.half(1);
            sw[i] = bi.d();
            m[2 * i] = m[2 * i + 1] = bi.mw();
        }
        mw[0] = _mm256_load_ps(m);
        mw[1] = _mm256_load_ps(m + 8);
        const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        hlive[0] = _mm256_cmpgt_epi32(_mm256_set1_epi32(2 * tail), iota);
        hlive[1] = _mm256_cmpgt_epi32(_mm256_set1_epi32(2 * tail - 8), iota);
    }
    // acc with the blocks of one activation row added: a, da at the row's first tail element and scale.
    __m256 add(__m256 acc, const int16_t* a, const float* da) const {
        for (int i = 0; i < t; ++i) {
            const auto* ap = reinterpret_cast<const __m256i*>(a + 32 * i);
            const __m256i S = madd2(q[i][0], _mm256_loadu_si256(ap), q[i][1], _mm256_loadu_si256(ap + 1));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S), _mm256_set1_ps(sw[i] * da[i]), acc);
        }
        return acc;
    }
    // c with the minimum terms of one activation row added: xs at the row's first tail half.
    __m256 add_min(__m256 c, const float* xs) const {
        for (int k = 0; k < (t > 4 ? 2 : 1); ++k) {
            const __m256 x = _mm256_maskload_ps(xs + 8 * k, hlive[k]);
            c = _mm256_blendv_ps(c, _mm256_fmadd_ps(mw[k], x, c), _mm256_castsi256_ps(hlive[k]));
        }
        return c;
    }
};

// The frame of the K-quants' rows kernels (F: Q2K .. Q6K or a wider decoder of theirs) for R
// activation rows: per super-block, sums(f, bi, S) sets S[r] to row r's 8 exact lane sums, then
// acc_r += (float)S_r * (d * da_r) and acc_r -= the sub-blocks' minima, as int16_gemm.h defines
// them, and y[r * ldy] = lane_sum(acc_r), lane_sum being the ISA's copy of the 8-lane tree.
template <class F, int R, class Sums, class LaneSum>
inline void super_rows(const void* w, int64_t n, const float* da, const float* xs, float* y, int64_t ldy, Sums&& sums,
                       LaneSum&& lane_sum) {
    const auto* p = static_cast<const uint8_t*>(w);
    const int64_t nb = n / QK_K, stride = n / kHalf;
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t bi = 0; bi < nb; ++bi, p += F::kBytes) {
        prefetch_block<F::kBytes>(p);
        const F f(p);
        __m256i S[R];
        sums(f, bi, S);
        const float d = f.d();
        for (int r = 0; r < R; ++r) {
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S[r]), _mm256_set1_ps(d * da[r * nb + bi]), acc[r]);
            // the super-block's minimum units (8 or 16) in the eight lanes, in order
            if constexpr (F::kMin)
                for (int i = 0; i < F::kUnits / 8; ++i)
                    acc[r] = _mm256_fnmadd_ps(f.mw(i), _mm256_loadu_ps(xs + r * stride + F::kUnits * bi + 8 * i), acc[r]);
        }
    }
    for (int r = 0; r < R; ++r) y[r * ldy] = lane_sum(acc[r]);
}

// The sums of super_rows over a decoder's spans (256 bits each): S[r] = activation row r's 8 lane
// sums against super-block bi.
template <class F, int R>
struct SpanSums {
    const int16_t* a;
    int64_t n;
    void operator()(const F& f, int64_t bi, __m256i (&S)[R]) const {
        // each span's two halves into two sums per row, added exactly at the end: with vpdpwssd
        // (AVX-VNNI, AVX-512) one chain of them waits on its latency (one row of IQ3_XXS on
        // AVX-512 6.8 -> 9.1 GMAC/s; the other formats level)
        __m256i T[R];
        for (int r = 0; r < R; ++r) S[r] = T[r] = _mm256_setzero_si256();
        const auto step = [&](int k) {
            __m256i v[2];
            f.span(k, v);
            for (int r = 0; r < R; ++r) {
                const auto* ap = reinterpret_cast<const __m256i*>(a + r * act_stride(n) + bi * QK_K + 32 * k);
                S[r] = madd_acc(S[r], v[0], _mm256_loadu_si256(ap));
                T[r] = madd_acc(T[r], v[1], _mm256_loadu_si256(ap + 1));
            }
        };
        // Unrolled over all 8 spans, more than two rows make the compiler hoist every span's
        // products and spill them (4 rows: ~180 stack accesses per block); a rolled loop keeps
        // the lane sums in registers.
        if constexpr (R > 2) {
#pragma GCC unroll 2
            for (int k = 0; k < 8; ++k) step(k);
        } else {
#pragma GCC unroll 8
            for (int k = 0; k < 8; ++k) step(k);
        }
        for (int r = 0; r < R; ++r) S[r] = _mm256_add_epi32(S[r], T[r]);
    }
};

}  // namespace
}  // namespace ds4::quant
