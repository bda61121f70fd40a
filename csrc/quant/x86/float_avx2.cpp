// AVX2 + FMA + F16C kernels for the float formats and the 32-element legacy blocks, and the AVX2
// kernel table (the K-quants live in x86/float_kquants_avx2.cpp, the tiled GEMM in x86/float_gemm_avx2.cpp).
//
// Every kernel here follows the canonical order of x86/simd.h: per group of 32 elements, four
// vectors u_0..u_3 of exact floats and a scale s, t = u_0 x_0, t = fma(u_j, x_j, t), then
// acc = fma(t, s, acc) into ONE accumulator per activation row, hsum at the end.  One template,
// rows<F, R>, does this for R = 1..4 activation rows: each group is decoded once into registers and
// then feeds R independent t / acc chains, each the exact sequence of operations of R = 1, which
// is the dot kernel itself (dot == dot_rows bit for bit by construction).  groups_q<F> writes the
// same u and s to memory for gemm_groups, and dequant_q<F> multiplies them out.
//
// Cost model (Zen 3): vector ops compete for four pipes and in practice ~2-2.5 retire per cycle,
// and the shuffle pipes are shared with FMA, so the decoders minimise vector ops per group: byte-wide
// ops on all 32 quants at once, one vpshufb per 8 lanes that drops each quant into the top byte of
// its dword (no sign-extension shift: the int32 is q 2^24 and the scale carries 2^-24), one
// vcvtdq2ps, and no per-weight multiply.  Per group of 32 (R = 1): Q8_0 13 vector ops, Q4_0 17,
// Q5_0 20; Q4_1 / Q5_1 add the fma that forms each weight.
#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "quant/blocks.h"
#include "quant/isa_tables.h"
#include "quant/x86/simd.h"
#include "quant/x86/avx2_util.h"

namespace ds4::quant {
namespace avx2 {
namespace {

constexpr int kGroup = 32;  // group_len of every format in this file

// ---- the canonical group step -----------------------------------------------------------------

// t_r = u_0 x_r0, t_r = fma(u_j, x_rj, t_r) (j = 1..3), acc_r = fma(t_r, s, acc_r), for the R
// activation rows x[r] (one pointer per row: constant displacements, few integer registers).
// u(j) is called once per j, so the group is decoded once for all rows.  kUnitScale: s = 1, where
// fma(t, 1, acc) is exactly t + acc (t 1 is exact; one rounding either way), so the add is used.
template <int R, bool kUnitScale, class U>
inline void group_step(const U& u, const float* const (&x)[R], __m256 s, __m256 (&acc)[R]) {
    __m256 t[R];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
        const __m256 uj = u(j);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const __m256 xv = _mm256_loadu_ps(x[r] + 8 * j);
            t[r] = j == 0 ? _mm256_mul_ps(uj, xv) : _mm256_fmadd_ps(uj, xv, t[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r] = kUnitScale ? _mm256_add_ps(t[r], acc[r]) : _mm256_fmadd_ps(t[r], s, acc[r]);
}

// R activation rows x + r ldx, and their accumulators (loops unrolled early, so that both stay in
// registers).
template <int R>
struct RowSet {
    const float* x[R];
    __m256 acc[R];
    RowSet(const float* x0, int64_t ldx) {
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            x[r] = x0 + r * ldx;
            acc[r] = _mm256_setzero_ps();
        }
    }
    void advance() {
#pragma GCC unroll 4
        for (auto& p : x) p += kGroup;
    }
    void store(float* y, int64_t ldy) const {
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) y[r * ldy] = hsum(acc[r]);
    }
};

// ---- quantised formats --------------------------------------------------------------------------
//
// A format F gives kBytes (block size), kD (offset of the f16 scale d), kAhead (prefetch distance),
// kMin, and Block(p, d, m), whose operator()(j) is u_j.  Without a minimum (kMin false), u is the
// quant times 1 / kUnit and s = d kUnit (kUnit a power of two, so both exact).  With a minimum (an
// f16 m right after d), u is the weight fma(d, q, m) itself, rounded as the reference rounds
// d q + m (d q is exact), and s = 1.

// Visits the blocks of a row: f(p, d, m, b) for block b at p, d and m broadcast (m = d without a
// minimum).  Each block converts its own f16 scale: converting 8 blocks' scales at once saves ALU
// ops on long rows but its chunked loop costs more than it saves on the 640..2048-element rows of
// small models (Q8_0 at n = 640: ~7 -> ~12 GB/s from L2).  d and m of the formats with a minimum
// are adjacent, so one 32-bit load and one vcvtph2ps per block give both.
template <class F, class Fn>
inline void for_blocks(const uint8_t* p, int64_t nb, Fn&& f) {
    if constexpr (F::kMin) {
#pragma GCC unroll 2  // loop overhead
        for (int64_t b = 0; b < nb; ++b, p += F::kBytes) {
            prefetch_block<F::kBytes, F::kAhead>(p);
            uint32_t dm;
            std::memcpy(&dm, p + F::kD, sizeof dm);
            const __m128 v = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(dm)));
            f(p, _mm256_broadcastss_ps(v), _mm256_broadcastss_ps(_mm_movehdup_ps(v)), b);
        }
    } else {
#pragma GCC unroll 2
        for (int64_t b = 0; b < nb; ++b, p += F::kBytes) {
            prefetch_block<F::kBytes, F::kAhead>(p);
            uint16_t h;
            std::memcpy(&h, p + F::kD, sizeof h);
            const __m256 d = _mm256_set1_ps(_cvtsh_ss(h) * F::kUnit);
            f(p, d, d, b);
        }
    }
}

// Byte placement: dword i of lane L gets byte first[L] + i of that lane at byte Pos, zeros
// elsewhere.  Pos 3 (top byte): vcvtdq2ps gives (int8) byte * 2^24 exactly; Pos 0: the unsigned byte.
template <int Pos>
inline __m256i place_bytes(int first0, int first1) {
    const auto e = [=](int k) { return static_cast<char>(k % 4 != Pos ? -1 : (k < 16 ? first0 : first1) + k % 16 / 4); };
    return _mm256_setr_epi8(e(0), e(1), e(2), e(3), e(4), e(5), e(6), e(7), e(8), e(9), e(10), e(11), e(12), e(13),
                            e(14), e(15), e(16), e(17), e(18), e(19), e(20), e(21), e(22), e(23), e(24), e(25), e(26),
                            e(27), e(28), e(29), e(30), e(31));
}

// Q8_0: u_j = q 2^24 from the 16 quant bytes of its half, broadcast to both lanes (elements 0..7
// of a half from bytes 0..3 of lane 0 and 4..7 of lane 1, elements 8..15 from 8..11 and 12..15).
struct Q8_0 {
    static constexpr bool kFloat = false, kMin = false;
    static constexpr int kBytes = sizeof(block_q8_0), kD = offsetof(block_q8_0, d);
    static constexpr float kUnit = 0x1p-24f;
    static constexpr int kAhead = 2048;  // runs at DRAM bandwidth: 2 KiB ahead measured ~10% over 1 KiB
    struct Block {
        __m256i q[2];
        Block(const uint8_t* p, __m256, __m256) {
            const auto* qs = reinterpret_cast<const __m128i*>(p + offsetof(block_q8_0, qs));
            q[0] = _mm256_broadcastsi128_si256(_mm_loadu_si128(qs));
            q[1] = _mm256_broadcastsi128_si256(_mm_loadu_si128(qs + 1));
        }
        __m256 operator()(int j) const {
            return _mm256_cvtepi32_ps(_mm256_shuffle_epi8(q[j / 2], place_bytes<3>(8 * (j % 2), 8 * (j % 2) + 4)));
        }
    };
};

// The lane-split formats keep their 32 quants in one register of bytes: byte 4k + i of lane L is
// element 8k + 4L + i, so u_k is one in-lane place_bytes(4k, 4k) shuffle.  Element e < 16 is the
// low nibble of qs[e], e >= 16 the high nibble of qs[e - 16]: an in-lane shuffle of qs (broadcast
// to both lanes) puts qs bytes {0..3, 8..11} twice in lane 0 and {4..7, 12..15} twice in lane 1
// (cheaper than a lane-crossing vpermd), and a 4-bit right shift of the odd qwords brings their
// high nibbles down.  The bits above each nibble are garbage, for the caller to mask.
inline __m256i nibbles_split(const uint8_t* qs) {
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    const __m256i dup = _mm256_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11,  //
                                         4, 5, 6, 7, 12, 13, 14, 15, 4, 5, 6, 7, 12, 13, 14, 15);
    return _mm256_srlv_epi64(_mm256_shuffle_epi8(v, dup), _mm256_setr_epi64x(0, 4, 0, 4));
}
inline __m256i lo4(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0F)); }

// The fifth bits of Q5_0 / Q5_1 in the lane-split order, as 16 h per byte.  Byte 4k + i of lane L
// takes qh byte k and isolates bit 4L + i (2^b or 0); vpsignb turns that into 16 or 0 without a
// compare (the bit-7 bytes read as negative, so their constant is -16).
inline __m256i q5_high16(const uint8_t* qhp) {
    uint32_t qh;
    std::memcpy(&qh, qhp, sizeof qh);
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,  //
                                            0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m256i bits = _mm256_setr_epi8(1, 2, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8,  //
                                          16, 32, 64, -128, 16, 32, 64, -128, 16, 32, 64, -128, 16, 32, 64, -128);
    const __m256i c16 = _mm256_setr_epi8(16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16,  //
                                         16, 16, 16, -16, 16, 16, 16, -16, 16, 16, 16, -16, 16, 16, 16, -16);
    const __m256i h = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)), spread);
    return _mm256_sign_epi8(c16, _mm256_and_si256(h, bits));
}

// u_k from lane-split bytes b: without a minimum, (int8) b 2^24 (top byte); with one, the weight
// fma(d, b, m) of the unsigned byte (low byte).
template <bool kMin>
struct SplitBlock {
    __m256i b;
    __m256 d, m;
    __m256 operator()(int k) const {
        if constexpr (kMin)
            return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_shuffle_epi8(b, place_bytes<0>(4 * k, 4 * k))), m);
        else
            return _mm256_cvtepi32_ps(_mm256_shuffle_epi8(b, place_bytes<3>(4 * k, 4 * k)));
    }
};

// Q4_0: byte q - 8 (int8), u = (q - 8) 2^24.
struct Q4_0 {
    static constexpr bool kFloat = false, kMin = false;
    static constexpr int kBytes = sizeof(block_q4_0), kD = offsetof(block_q4_0, d);
    static constexpr float kUnit = 0x1p-24f;
    static constexpr int kAhead = kPrefetchAhead;
    struct Block : SplitBlock<false> {
        Block(const uint8_t* p, __m256 dv, __m256 mv)
            : SplitBlock{_mm256_sub_epi8(lo4(nibbles_split(p + offsetof(block_q4_0, qs))), _mm256_set1_epi8(8)),
                         dv, mv} {}
    };
};

// Q4_1: u = fma(d, q, m).  Each 8 quants go into the low bytes of the dwords by one u8x8 shuffle
// (2 shuffles per block against 5 on the lane-split path: this format spends 8 FMAs per group, and
// the FMA pipes share a port with the shuffles).
struct Q4_1 {
    static constexpr bool kFloat = false, kMin = true;
    static constexpr int kBytes = sizeof(block_q4_1), kD = offsetof(block_q4_1, d);
    static constexpr int kAhead = kPrefetchAhead;
    static_assert(offsetof(block_q4_1, m) == kD + 2);
    struct Block {
        __m256i a[2];
        __m256 d, m;
        Block(const uint8_t* p, __m256 dv, __m256 mv)
            : a{u8x8(p + offsetof(block_q4_1, qs)), u8x8(p + offsetof(block_q4_1, qs) + 8)}, d(dv), m(mv) {}
        __m256 operator()(int j) const {
            const __m256i q = j < 2 ? _mm256_and_si256(a[j], _mm256_set1_epi32(0x0F)) : _mm256_srli_epi32(a[j - 2], 4);
            return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q), m);
        }
    };
};

// Q5_0: byte q - 16 = (nibble | 0xF0) + 16 h (int8), u = (q - 16) 2^24.
struct Q5_0 {
    static constexpr bool kFloat = false, kMin = false;
    static constexpr int kBytes = sizeof(block_q5_0), kD = offsetof(block_q5_0, d);
    static constexpr float kUnit = 0x1p-24f;
    static constexpr int kAhead = kPrefetchAhead;
    struct Block : SplitBlock<false> {
        Block(const uint8_t* p, __m256 dv, __m256 mv) : SplitBlock{bytes(p), dv, mv} {}
        static __m256i bytes(const uint8_t* p) {
            const __m256i nm = _mm256_or_si256(nibbles_split(p + offsetof(block_q5_0, qs)), _mm256_set1_epi8(-16));
            return _mm256_add_epi8(nm, q5_high16(p + offsetof(block_q5_0, qh)));
        }
    };
};

// Q5_1: byte q = nibble | 16 h, u = fma(d, q, m).
struct Q5_1 {
    static constexpr bool kFloat = false, kMin = true;
    static constexpr int kBytes = sizeof(block_q5_1), kD = offsetof(block_q5_1, d);
    static constexpr int kAhead = kPrefetchAhead;
    static_assert(offsetof(block_q5_1, m) == kD + 2);
    struct Block : SplitBlock<true> {
        Block(const uint8_t* p, __m256 dv, __m256 mv) : SplitBlock{bytes(p), dv, mv} {}
        static __m256i bytes(const uint8_t* p) {
            return _mm256_or_si256(lo4(nibbles_split(p + offsetof(block_q5_1, qs))),
                                   q5_high16(p + offsetof(block_q5_1, qh)));
        }
    };
};

template <class F, int R>
void rows_q(const void* w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy) {
    RowSet<R> rs(x, ldx);
    for_blocks<F>(static_cast<const uint8_t*>(w), n / kGroup, [&rs](const uint8_t* p, __m256 d, __m256 m, int64_t) {
        group_step<R, F::kMin>(typename F::Block(p, d, m), rs.x, d, rs.acc);
        rs.advance();
    });
    rs.store(y, ldy);
}

template <class F>
void groups_q(const void* w, int64_t n, float* u, float* scales) {
    for_blocks<F>(static_cast<const uint8_t*>(w), n / kGroup, [&](const uint8_t* p, __m256 d, __m256 m, int64_t b) {
        const typename F::Block blk(p, d, m);
        for (int j = 0; j < 4; ++j) _mm256_storeu_ps(u + b * kGroup + 8 * j, blk(j));
        scales[b] = F::kMin ? 1.0f : _mm256_cvtss_f32(d);
    });
}

// Dequantisation of the formats without a minimum: u s = (q / kUnit)(d kUnit) = d q, exact, as
// the reference forms it.
template <class F>
void dequant_q(const void* src, float* dst, int64_t n) {
    static_assert(!F::kMin);
    for_blocks<F>(static_cast<const uint8_t*>(src), n / kGroup, [&](const uint8_t* p, __m256 d, __m256 m, int64_t b) {
        const typename F::Block blk(p, d, m);
        for (int j = 0; j < 4; ++j) _mm256_storeu_ps(dst + b * kGroup + 8 * j, _mm256_mul_ps(blk(j), d));
    });
}

// ---- float formats --------------------------------------------------------------------------------
//
// u = w, s = 1, groups of 32; the last partial group goes through zero-padded copies of the
// weights and of every activation row, so nothing past the row is read.

struct F32 {
    static constexpr bool kFloat = true;
    static constexpr int kBytes = 4;
    static __m256 load8(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
};
struct F16 {
    static constexpr bool kFloat = true;
    static constexpr int kBytes = 2;
    static __m256 load8(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
};
// bf16 is the top half of an f32: one in-lane shuffle of the 8 values, broadcast to both lanes.
struct BF16 {
    static constexpr bool kFloat = true;
    static constexpr int kBytes = 2;
    static __m256 load8(const uint8_t* p) {
        const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        const __m256i place = _mm256_setr_epi8(-1, -1, 0, 1, -1, -1, 2, 3, -1, -1, 4, 5, -1, -1, 6, 7,  //
                                               -1, -1, 8, 9, -1, -1, 10, 11, -1, -1, 12, 13, -1, -1, 14, 15);
        return _mm256_castsi256_ps(_mm256_shuffle_epi8(v, place));
    }
};

template <class F, int R>
void rows_float(const void* w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy) {
    const auto* p = static_cast<const uint8_t*>(w);
    const __m256 one = _mm256_set1_ps(1.0f);
    RowSet<R> rs(x, ldx);
    int64_t i = 0;
    for (; i + kGroup <= n; i += kGroup, p += kGroup * F::kBytes) {
        prefetch_block<kGroup * F::kBytes>(p);
        group_step<R, true>([p](int j) { return F::load8(p + 8 * j * F::kBytes); }, rs.x, one, rs.acc);
        rs.advance();
    }
    if (i < n) {
        const auto m = static_cast<size_t>(n - i);
        alignas(32) uint8_t wb[kGroup * F::kBytes] = {};
        alignas(32) float xb[R][kGroup] = {};
        const float* xp[R];
        std::memcpy(wb, p, m * F::kBytes);
        for (int r = 0; r < R; ++r) {
            std::memcpy(xb[r], rs.x[r], m * sizeof(float));
            xp[r] = xb[r];
        }
        group_step<R, true>([&wb](int j) { return F::load8(wb + 8 * j * F::kBytes); }, xp, one, rs.acc);
    }
    rs.store(y, ldy);
}

// R = 1..4 at run time; R = 1 is the dot kernel.
template <class F, int R>
void rows(const void* w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy) {
    if constexpr (F::kFloat)
        rows_float<F, R>(w, x, ldx, n, y, ldy);
    else
        rows_q<F, R>(w, x, ldx, n, y, ldy);
}
using RowsFn = void (*)(const void*, const float*, int64_t, int64_t, float*, int64_t);
template <class F>
void rows_any(const void* w, const float* x, int64_t ldx, int nx, int64_t n, float* y, int64_t ldy) {
    static constexpr RowsFn fns[kDotRowsMax] = {&rows<F, 1>, &rows<F, 2>, &rows<F, 3>, &rows<F, 4>};
    fns[nx - 1](w, x, ldx, n, y, ldy);
}
template <class F>
float dot_one(const void* w, const float* x, int64_t n) {
    float y;
    rows<F, 1>(w, x, 0, n, &y, 0);
    return y;
}

}  // namespace

#define DS4_AVX2_ROWS(fmt, F)                                                                        \
    float dot_##fmt(const void* w, const float* x, int64_t n) { return dot_one<F>(w, x, n); }            \
    void dot_rows_##fmt(const void* w, const float* x, int64_t ldx, int nx, int64_t n, float* y, int64_t ldy) { \
        rows_any<F>(w, x, ldx, nx, n, y, ldy);                                                            \
    }
#define DS4_AVX2_QUANT(fmt, F) \
    DS4_AVX2_ROWS(fmt, F)      \
    void groups_##fmt(const void* w, int64_t n, float* u, float* scales) { groups_q<F>(w, n, u, scales); }

DS4_AVX2_ROWS(f32, F32)
DS4_AVX2_ROWS(f16, F16)
DS4_AVX2_ROWS(bf16, BF16)
DS4_AVX2_QUANT(q4_0, Q4_0)
DS4_AVX2_QUANT(q4_1, Q4_1)
DS4_AVX2_QUANT(q5_0, Q5_0)
DS4_AVX2_QUANT(q5_1, Q5_1)
DS4_AVX2_QUANT(q8_0, Q8_0)

#undef DS4_AVX2_ROWS
#undef DS4_AVX2_QUANT

void dequant_q5_0(const void* src, float* dst, int64_t n) { dequant_q<Q5_0>(src, dst, n); }
void dequant_q8_0(const void* src, float* dst, int64_t n) { dequant_q<Q8_0>(src, dst, n); }

}  // namespace avx2

const Kernels& avx2_kernels(Type type) {
    using namespace avx2;
    static const Kernels none;
    // {dequant, dot, dot_rows, decode_groups, gemm_groups, group_len}
    static const Kernels f32{nullptr, &dot_f32, &dot_rows_f32};
    static const Kernels f16{nullptr, &dot_f16, &dot_rows_f16};
    static const Kernels bf16{nullptr, &dot_bf16, &dot_rows_bf16};
    static const Kernels q4_0{nullptr, &dot_q4_0, &dot_rows_q4_0, &groups_q4_0, &gemm_groups, 32};
    static const Kernels q4_1{nullptr, &dot_q4_1, &dot_rows_q4_1, &groups_q4_1, &gemm_groups, 32};
    static const Kernels q5_0{&dequant_q5_0, &dot_q5_0, &dot_rows_q5_0, &groups_q5_0, &gemm_groups, 32};
    static const Kernels q5_1{nullptr, &dot_q5_1, &dot_rows_q5_1, &groups_q5_1, &gemm_groups, 32};
    static const Kernels q8_0{&dequant_q8_0, &dot_q8_0, &dot_rows_q8_0, &groups_q8_0, &gemm_groups, 32};
    static const Kernels q2_K{nullptr, &dot_q2_K, &dot_rows_q2_K, &groups_q2_K, &gemm_groups, 16};
    static const Kernels q3_K{nullptr, &dot_q3_K, &dot_rows_q3_K, &groups_q3_K, &gemm_groups, 16};
    static const Kernels q4_K{&dequant_q4_K, &dot_q4_K, &dot_rows_q4_K, &groups_q4_K, &gemm_groups, 32};
    static const Kernels q5_K{nullptr, &dot_q5_K, &dot_rows_q5_K, &groups_q5_K, &gemm_groups, 32};
    static const Kernels q6_K{&dequant_q6_K, &dot_q6_K, &dot_rows_q6_K, &groups_q6_K, &gemm_groups, 16};
    switch (type) {
        case Type::F32: return f32;
        case Type::F16: return f16;
        case Type::BF16: return bf16;
        case Type::Q4_0: return q4_0;
        case Type::Q4_1: return q4_1;
        case Type::Q5_0: return q5_0;
        case Type::Q5_1: return q5_1;
        case Type::Q8_0: return q8_0;
        case Type::Q2_K: return q2_K;
        case Type::Q3_K: return q3_K;
        case Type::Q4_K: return q4_K;
        case Type::Q5_K: return q5_K;
        case Type::Q6_K: return q6_K;
        default: return none;
    }
}

}  // namespace ds4::quant
