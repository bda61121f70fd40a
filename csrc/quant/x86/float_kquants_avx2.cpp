// AVX2 + FMA kernels for the K-quants (256-element super-blocks): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
// Summation order and error bound: x86/simd.h.  Layouts: blocks.h and kernels_ref_k.cpp; each
// decoder below restates the index map it relies on.
//
// Every format is a decoder struct: its constructor unpacks one block (scales as floats; quants
// as one byte per element, in element order, 32 elements per byte-wide instruction, on the
// stack), and group(g).u(j) is vector j of group g.  One driver, rows_impl<Fmt, R>, runs the
// canonical order of x86/simd.h for R activation rows against each group decoded once, so a
// row's operations are the same for every R: dot_<fmt> is the R = 1 instance, dot_rows_<fmt>
// dispatches R = nx, and groups_<fmt> stores the very same u and scales for gemm_groups.
//
// The kernels are bound by vector ALU ops (about two retire per cycle on Zen 3, shuffles,
// conversions and FMAs alike), so each form below is the one with the fewest per weight:
//   Q4_K, Q5_K (group 32) and Q2_K (group 16) have a minimum: u = w = d sc q - dmin m with one
//   rounding (one fmsub, d sc q being exact), as the reference rounds it; scale 1.  Q2_K looks w
//   up in a 4-entry table per group (vpermilps) instead of converting q and forming w per lane.
//   Q3_K, Q6_K (group 16) have none: the byte holds q 2^k in its top bits as a signed value, so a
//   shuffle into the top byte of each lane and one conversion give u = q 2^(24+k) exactly, and
//   the scale is d sc 2^-(24+k) (exact: d is a half, |sc| <= 2^7).
#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "quant/blocks.h"
#include "quant/kernels.h"
#include "quant/x86/simd.h"
#include "quant/x86/avx2_util.h"

namespace ds4::quant::avx2 {
namespace {

inline __m256i bytes32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline void store32(uint8_t* p, __m256i v) { _mm256_store_si256(reinterpret_cast<__m256i*>(p), v); }
inline uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline __m256i splat8(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }
// Byte-wise shifts by a constant, done 16 bits wide: the bits that cross into the neighbouring
// byte are always ones the caller's mask then clears.
template <int S>
inline __m256i shl16(__m256i v) {
    if constexpr (S > 0) return _mm256_slli_epi16(v, S);
    else if constexpr (S < 0) return _mm256_srli_epi16(v, -S);
    else return v;
}

// A group of 16 signed bytes q (16-byte aligned), vector j = bytes 8j .. 8j + 7 in the top byte
// of each lane, converted: q 2^24 (exact).
struct TopBytes16 {
    const uint8_t* q;
    __m256 u(int j) const {
        const __m256i b = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(q)));
        const __m256i c_lo = _mm256_setr_epi8(-1, -1, -1, 0, -1, -1, -1, 1, -1, -1, -1, 2, -1, -1, -1, 3,
                                              -1, -1, -1, 4, -1, -1, -1, 5, -1, -1, -1, 6, -1, -1, -1, 7);
        const __m256i c_hi = _mm256_setr_epi8(-1, -1, -1, 8, -1, -1, -1, 9, -1, -1, -1, 10, -1, -1, -1, 11,
                                              -1, -1, -1, 12, -1, -1, -1, 13, -1, -1, -1, 14, -1, -1, -1, 15);
        return _mm256_cvtepi32_ps(_mm256_shuffle_epi8(b, j == 0 ? c_lo : c_hi));
    }
};

// A group of 32 bytes q (unsigned quants) with the weights d q - m, rounded once (d q is exact).
struct Group32 {
    const uint8_t* q;
    __m256 d, m;
    __m256 u(int j) const { return _mm256_fmsub_ps(d, _mm256_cvtepi32_ps(u8x8(q + 8 * j)), m); }
};

// The header of a Q4_K / Q5_K block: d, dmin (halves) and the 6-bit scales sc_j and mins m_j in
// scales[12] (scale_min_k4: for j < 4 the low 6 bits of bytes j and j + 4; for j >= 4 the
// nibbles of byte j + 4 and the top 2 bits of bytes j - 4 and j).  All 16 bytes are loaded at
// once and unpacked with byte shuffles; then d1[j] = d sc_j and m1[j] = dmin m_j, both exact,
// as the reference forms them.
inline void k4_header(const uint8_t* p, float* d1, float* m1) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));  // scale byte k at 4 + k
    // Bytes sc_0..3 | sc_4..7 | m_0..3 | m_4..7: their low parts, then their top 2 bits.
    const __m128i lo = _mm_shuffle_epi8(b, _mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15));
    const __m128i hi = _mm_shuffle_epi8(b, _mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 8, 9, 10, 11));
    const __m128i lo_masked = _mm_and_si128(_mm_srlv_epi32(lo, _mm_setr_epi32(0, 0, 0, 4)),
                                            _mm_setr_epi32(0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F));
    const __m128i sm = _mm_or_si128(lo_masked, _mm_and_si128(_mm_srli_epi16(hi, 2), _mm_set1_epi8(0x30)));
    const __m256 dd = _mm256_castps128_ps256(_mm_cvtph_ps(b));  // d, dmin
    const __m256 d = _mm256_permutevar8x32_ps(dd, _mm256_setzero_si256());
    const __m256 dmin = _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(1));
    _mm256_store_ps(d1, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sm))));
    _mm256_store_ps(m1, _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(sm, sm)))));
}

// Q4_K: qs[32 c + l] holds element 64 c + l (low nibble, sub-block 2c) and 64 c + 32 + l (high
// nibble, sub-block 2c + 1).  Group g = sub-block g.
struct Q4K {
    static constexpr int kBytes = sizeof(block_q4_K), kGroup = 32;
    static constexpr bool kHasMin = true;
    alignas(32) uint8_t q[QK_K];
    alignas(32) float d1[8], m1[8];
    explicit Q4K(const uint8_t* p) {
        k4_header(p, d1, m1);
        const __m256i m4 = splat8(0x0F);
        for (int c = 0; c < 4; ++c) {
            const __m256i v = bytes32(p + offsetof(block_q4_K, qs) + 32 * c);
            store32(q + 64 * c, _mm256_and_si256(v, m4));
            store32(q + 64 * c + 32, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
        }
    }
    Group32 group(int g) const { return {q + 32 * g, _mm256_broadcast_ss(&d1[g]), _mm256_broadcast_ss(&m1[g])}; }
};

// Q5_K: as Q4_K plus a fifth bit: element 64 c + l takes bit 2c of qh[l] and 64 c + 32 + l bit
// 2c + 1, as bit 4 of the quant.
struct Q5K {
    static constexpr int kBytes = sizeof(block_q5_K), kGroup = 32;
    static constexpr bool kHasMin = true;
    alignas(32) uint8_t q[QK_K];
    alignas(32) float d1[8], m1[8];
    // Bit B of each byte of h moved to bit 4.
    template <int B>
    static __m256i bit4(__m256i h) {
        return shl16<4 - B>(_mm256_and_si256(h, splat8(1 << B)));
    }
    template <int C>
    void chunk(const uint8_t* p, __m256i h) {
        const __m256i m4 = splat8(0x0F);
        const __m256i v = bytes32(p + offsetof(block_q5_K, qs) + 32 * C);
        store32(q + 64 * C, _mm256_or_si256(_mm256_and_si256(v, m4), bit4<2 * C>(h)));
        store32(q + 64 * C + 32, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), bit4<2 * C + 1>(h)));
    }
    explicit Q5K(const uint8_t* p) {
        k4_header(p, d1, m1);
        const __m256i h = bytes32(p + offsetof(block_q5_K, qh));
        chunk<0>(p, h);
        chunk<1>(p, h);
        chunk<2>(p, h);
        chunk<3>(p, h);
    }
    Group32 group(int g) const { return {q + 32 * g, _mm256_broadcast_ss(&d1[g]), _mm256_broadcast_ss(&m1[g])}; }
};

// Q6_K: 16 int8 scales, one per 16 elements.  Within half h, element 128 h + 32 j + l (j < 4,
// l < 32) is q - 32 with q = nibble | 2 high bits << 4: the nibble ql[64 h + 32 (j & 1) + l]
// >> 4 (j >> 1), the high bits (qh[32 h + l] >> 2 j) & 3.  Each byte is built as (q << 2) ^ 0x80,
// whose signed value is 4 (q - 32); flipping the top bit of every 2-bit field of qh once does the
// ^ 0x80 for all four j.  So u = (q - 32) 2^26, scale d sc 2^-26.
struct Q6K {
    static constexpr int kBytes = sizeof(block_q6_K), kGroup = 16;
    static constexpr bool kHasMin = false;
    static constexpr float kUnscale = 0x1p-26f;
    alignas(32) uint8_t q[QK_K];
    alignas(32) float scale[16];
    explicit Q6K(const uint8_t* p) {
        const __m256 d = _mm256_set1_ps(load_f16(p + kBytes - 2) * kUnscale);
        const uint8_t* sc = p + offsetof(block_q6_K, scales);
        for (int k = 0; k < 2; ++k) {
            const __m256i s = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc + 8 * k)));
            _mm256_store_ps(scale + 8 * k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(s)));
        }
        const __m256i m3c = splat8(0x3C), mc0 = splat8(0xC0);
        for (int h = 0; h < 2; ++h) {
            const uint8_t* ql = p + offsetof(block_q6_K, ql) + 64 * h;
            const __m256i a = bytes32(ql), b = bytes32(ql + 32);
            const __m256i hb = _mm256_xor_si256(bytes32(p + offsetof(block_q6_K, qh) + 32 * h), splat8(0xAA));
            const auto mix = [&](__m256i lo, __m256i hi) {
                return _mm256_or_si256(_mm256_and_si256(lo, m3c), _mm256_and_si256(hi, mc0));
            };
            uint8_t* out = q + 128 * h;
            store32(out, mix(shl16<2>(a), shl16<6>(hb)));
            store32(out + 32, mix(shl16<2>(b), shl16<4>(hb)));
            store32(out + 64, mix(shl16<-2>(a), shl16<2>(hb)));
            store32(out + 96, mix(shl16<-2>(b), hb));
        }
    }
    TopBytes16 group(int g) const { return TopBytes16{q + 16 * g}; }
};

// Q3_K: 16 six-bit scales (value - 32): low 4 bits in s[i] (i < 8) or s[i - 8] >> 4, top 2 bits
// (s[8 + i % 4] >> 2 (i / 4)) & 3.  Within half h, element 128 h + 32 j + l is
// ((qs[32 h + l] >> 2 j) & 3) - (bit 4 h + j of hmask[l] ? 0 : 4): a 3-bit two's complement
// number whose sign bit is the inverted hmask bit.  Each byte holds it in bits 5..7, signed value
// 32 q, so u = q 2^29 and the scale is d (sc - 32) 2^-29.
struct Q3K {
    static constexpr int kBytes = sizeof(block_q3_K), kGroup = 16;
    static constexpr bool kHasMin = false;
    static constexpr float kUnscale = 0x1p-29f;
    alignas(32) uint8_t q[QK_K];
    alignas(32) float scale[16];
    template <int H, int J>
    void field(__m256i v, __m256i hm) {
        const __m256i lo = _mm256_and_si256(shl16<5 - 2 * J>(v), splat8(0x60));
        const __m256i sign = _mm256_andnot_si256(shl16<7 - 4 * H - J>(hm), splat8(0x80));
        store32(q + 128 * H + 32 * J, _mm256_or_si256(lo, sign));
    }
    template <int H>
    void half(const uint8_t* p, __m256i hm) {
        const __m256i v = bytes32(p + offsetof(block_q3_K, qs) + 32 * H);
        field<H, 0>(v, hm);
        field<H, 1>(v, hm);
        field<H, 2>(v, hm);
        field<H, 3>(v, hm);
    }
    explicit Q3K(const uint8_t* p) {
        uint32_t a[3];
        std::memcpy(a, p + offsetof(block_q3_K, scales), sizeof a);
        constexpr uint32_t low4 = 0x0F0F0F0F, low2 = 0x03030303;
        const auto sc4 = [&](uint32_t lo, int shift) { return lo | ((a[2] >> shift) & low2) << 4; };
        const __m128i s = _mm_sub_epi8(
            _mm_setr_epi32(static_cast<int>(sc4(a[0] & low4, 0)), static_cast<int>(sc4(a[1] & low4, 2)),
                           static_cast<int>(sc4((a[0] >> 4) & low4, 4)), static_cast<int>(sc4((a[1] >> 4) & low4, 6))),
            _mm_set1_epi8(32));
        const __m256 d = _mm256_set1_ps(load_f16(p + kBytes - 2) * kUnscale);
        _mm256_store_ps(scale, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s))));
        _mm256_store_ps(scale + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(s, s)))));
        const __m256i hm = bytes32(p + offsetof(block_q3_K, hmask));
        half<0>(p, hm);
        half<1>(p, hm);
    }
    TopBytes16 group(int g) const { return TopBytes16{q + 16 * g}; }
};

// Q2_K: scales[g] = sc | m << 4 per 16 elements; within half h, element 128 h + 32 j + l =
// (qs[32 h + l] >> 2 j) & 3.  A group has only four distinct weights d sc q - dmin m, q = 0..3:
// they form one 4-entry table per group, and vpermilps, which reads only the low 2 bits of each
// lane, looks the weights up from the raw shifted bytes (no masking).
struct Q2K {
    static constexpr int kBytes = sizeof(block_q2_K), kGroup = 16;
    static constexpr bool kHasMin = true;
    alignas(32) uint8_t q[QK_K];
    alignas(32) float dl[16], ml[16];
    explicit Q2K(const uint8_t* p) {
        // Scale byte g into lane g % 8 of a dword of its own, then sc = its low nibble and
        // m = its high nibble; d and dmin converted together.
        const __m256i s = _mm256_broadcastsi128_si256(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + offsetof(block_q2_K, scales))));
        const __m256 dd = _mm256_castps128_ps256(_mm_cvtph_ps(_mm_cvtsi32_si128(load_u32(p + offsetof(block_q2_K, d)))));
        const __m256 d = _mm256_permutevar8x32_ps(dd, _mm256_setzero_si256());
        const __m256 dmin = _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(1));
        const __m256i lo8 = _mm256_setr_epi8(0, -1, -1, -1, 1, -1, -1, -1, 2, -1, -1, -1, 3, -1, -1, -1,
                                             4, -1, -1, -1, 5, -1, -1, -1, 6, -1, -1, -1, 7, -1, -1, -1);
        const __m256i hi8 = _mm256_setr_epi8(8, -1, -1, -1, 9, -1, -1, -1, 10, -1, -1, -1, 11, -1, -1, -1,
                                             12, -1, -1, -1, 13, -1, -1, -1, 14, -1, -1, -1, 15, -1, -1, -1);
        for (int k = 0; k < 2; ++k) {
            const __m256i b = _mm256_shuffle_epi8(s, k == 0 ? lo8 : hi8);
            _mm256_store_ps(dl + 8 * k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_and_si256(b, _mm256_set1_epi32(0x0F)))));
            _mm256_store_ps(ml + 8 * k, _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4))));
        }
        for (int h = 0; h < 2; ++h) {
            const __m256i v = bytes32(p + offsetof(block_q2_K, qs) + 32 * h);
            store32(q + 128 * h, v);
            store32(q + 128 * h + 32, _mm256_srli_epi16(v, 2));
            store32(q + 128 * h + 64, _mm256_srli_epi16(v, 4));
            store32(q + 128 * h + 96, _mm256_srli_epi16(v, 6));
        }
    }
    // The group's four weights, looked up by the low 2 bits of each lane.
    struct Group {
        const uint8_t* q;
        __m256 table;
        __m256 u(int j) const { return _mm256_permutevar_ps(table, u8x8(q + 8 * j)); }
    };
    Group group(int g) const {
        return {q + 16 * g, _mm256_fmsub_ps(_mm256_broadcast_ss(&dl[g]), _mm256_setr_ps(0, 1, 2, 3, 0, 1, 2, 3),
                                            _mm256_broadcast_ss(&ml[g]))};
    }
};

// The canonical order of x86/simd.h for R activation rows x + r ldx against one weight row: per
// group, t = u_0 x_0, t = fma(u_j, x_j, t), acc = fma(t, s, acc), one accumulator per row; each
// group is decoded once for all R rows.  With s = 1 the fma rounds exactly as the add used here.
template <class Fmt, int R>
void rows_impl(const void* w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy) {
    constexpr int G = Fmt::kGroup / 8;
    const auto* p = static_cast<const uint8_t*>(w);
    const float* xr[R];
    __m256 acc[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
        xr[r] = x + r * ldx;
        acc[r] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / QK_K; ++i, p += Fmt::kBytes) {
        prefetch_block<Fmt::kBytes>(p);
        const Fmt blk(p);
        // Not unrolled further: fully unrolled, GCC spills the partial sums of R > 1 rows.
#pragma GCC unroll 2
        for (int g = 0; g < QK_K / Fmt::kGroup; ++g) {
            const auto grp = blk.group(g);
            __m256 t[R];
#pragma GCC unroll 4
            for (int j = 0; j < G; ++j) {
                const __m256 u = grp.u(j);
#pragma GCC unroll 4
                for (int r = 0; r < R; ++r) {
                    const __m256 xv = _mm256_loadu_ps(xr[r] + Fmt::kGroup * g + 8 * j);
                    t[r] = j == 0 ? _mm256_mul_ps(u, xv) : _mm256_fmadd_ps(u, xv, t[r]);
                }
            }
            if constexpr (Fmt::kHasMin) {
#pragma GCC unroll 4
                for (int r = 0; r < R; ++r) acc[r] = _mm256_add_ps(t[r], acc[r]);
            } else {
                const __m256 s = _mm256_broadcast_ss(&blk.scale[g]);
#pragma GCC unroll 4
                for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(t[r], s, acc[r]);
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) xr[r] += QK_K;
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) y[r * ldy] = hsum(acc[r]);
}

template <class Fmt>
float dot(const void* w, const float* x, int64_t n) {
    float y;
    rows_impl<Fmt, 1>(w, x, 0, n, &y, 0);
    return y;
}

template <class Fmt>
void rows(const void* w, const float* x, int64_t ldx, int nx, int64_t n, float* y, int64_t ldy) {
    switch (nx) {
        case 1: return rows_impl<Fmt, 1>(w, x, ldx, n, y, ldy);
        case 2: return rows_impl<Fmt, 2>(w, x, ldx, n, y, ldy);
        case 3: return rows_impl<Fmt, 3>(w, x, ldx, n, y, ldy);
        case 4: return rows_impl<Fmt, 4>(w, x, ldx, n, y, ldy);
        default: return;  // 1 <= nx <= kDotRowsMax (kernels.h)
    }
}
static_assert(kDotRowsMax == 4, "rows<> dispatches nx = 1..4");

// u[0..n) and one scale per group, exactly the floats rows_impl uses.
template <class Fmt>
void groups(const void* w, int64_t n, float* u, float* scales) {
    constexpr int G = Fmt::kGroup / 8, NG = QK_K / Fmt::kGroup;
    const auto* p = static_cast<const uint8_t*>(w);
    for (int64_t i = 0; i < n / QK_K; ++i, p += Fmt::kBytes, u += QK_K, scales += NG) {
        const Fmt blk(p);
        for (int g = 0; g < NG; ++g) {
            const auto grp = blk.group(g);
            for (int j = 0; j < G; ++j) _mm256_storeu_ps(u + Fmt::kGroup * g + 8 * j, grp.u(j));
            if constexpr (Fmt::kHasMin) scales[g] = 1.0f;
            else scales[g] = blk.scale[g];
        }
    }
}

}  // namespace

float dot_q2_K(const void* w, const float* x, int64_t n) { return dot<Q2K>(w, x, n); }
float dot_q3_K(const void* w, const float* x, int64_t n) { return dot<Q3K>(w, x, n); }
float dot_q4_K(const void* w, const float* x, int64_t n) { return dot<Q4K>(w, x, n); }
float dot_q5_K(const void* w, const float* x, int64_t n) { return dot<Q5K>(w, x, n); }
float dot_q6_K(const void* w, const float* x, int64_t n) { return dot<Q6K>(w, x, n); }

void dot_rows_q2_K(const void* w, const float* x, int64_t ldx, int nx, int64_t n, float* y, int64_t ldy) {
    rows<Q2K>(w, x, ldx, nx, n, y, ldy);
}
void dot_rows_q3_K(const void* w, const float* x, int64_t ldx, int nx, int64_t n, float* y, int64_t ldy) {
    rows<Q3K>(w, x, ldx, nx, n, y, ldy);
}
void dot_rows_q4_K(const void* w, const float* x, int64_t ldx, int nx, int64_t n, float* y, int64_t ldy) {
    rows<Q4K>(w, x, ldx, nx, n, y, ldy);
}
void dot_rows_q5_K(const void* w, const float* x, int64_t ldx, int nx, int64_t n, float* y, int64_t ldy) {
    rows<Q5K>(w, x, ldx, nx, n, y, ldy);
}
void dot_rows_q6_K(const void* w, const float* x, int64_t ldx, int nx, int64_t n, float* y, int64_t ldy) {
    rows<Q6K>(w, x, ldx, nx, n, y, ldy);
}

void groups_q2_K(const void* w, int64_t n, float* u, float* scales) { groups<Q2K>(w, n, u, scales); }
void groups_q3_K(const void* w, int64_t n, float* u, float* scales) { groups<Q3K>(w, n, u, scales); }
void groups_q4_K(const void* w, int64_t n, float* u, float* scales) { groups<Q4K>(w, n, u, scales); }
void groups_q5_K(const void* w, int64_t n, float* u, float* scales) { groups<Q5K>(w, n, u, scales); }
void groups_q6_K(const void* w, int64_t n, float* u, float* scales) { groups<Q6K>(w, n, u, scales); }

// Q4_K's u is the weight itself.
void dequant_q4_K(const void* src, float* dst, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / QK_K; ++i, p += sizeof(block_q4_K), dst += QK_K) {
        const Q4K blk(p);
        for (int g = 0; g < 8; ++g) {
            const auto grp = blk.group(g);
            for (int j = 0; j < 4; ++j) _mm256_storeu_ps(dst + 32 * g + 8 * j, grp.u(j));
        }
    }
}

// Q6_K's weight is u times its group's scale: (q - 32) 2^26 (d sc 2^-26), the exact product d sc (q - 32).
void dequant_q6_K(const void* src, float* dst, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / QK_K; ++i, p += sizeof(block_q6_K), dst += QK_K) {
        const Q6K blk(p);
        for (int g = 0; g < 16; ++g) {
            const auto grp = blk.group(g);
            const __m256 s = _mm256_broadcast_ss(&blk.scale[g]);
            for (int j = 0; j < 2; ++j) _mm256_storeu_ps(dst + 16 * g + 8 * j, _mm256_mul_ps(grp.u(j), s));
        }
    }
}

}  // namespace ds4::quant::avx2
