// AVX2 + FMA + F16C kernels for the float formats and the 32-element legacy blocks, and the AVX2
// kernel table (the K-quants live in kquants_avx2.cpp, the tiled GEMM in gemm_avx2.cpp).
//
// Every kernel here follows the canonical order of simd_x86.h: per group of 32 elements, four
// vectors u_0..u_3 of exact floats and a scale s, t = u_0 x_0, t = fma(u_j, x_j, t), then
// acc = fma(t, s, acc) into ONE accumulator per activation row, hsum at the end.  One template
// (rows<F, R>) does this for R = 1..4 activation rows: each group is decoded once into registers
// and then feeds R independent t / acc chains, each of them the exact sequence of operations of
// R = 1, which is the dot kernel itself (dot == dot_rows bit for bit by construction).  groups<F>
// writes the same u and s to memory for gemm_groups.
//
// Cost model (Zen 3): about two vector ops retire per cycle, whatever their kind, so the decoders
// minimise vector ops per group: byte-wide ops on all 32 quants at once, one vpshufb per 8 lanes
// that drops each quant into the top byte of its dword (no sign-extension shift: the int32 is
// q 2^24 and the scale carries 2^-24), one vcvtdq2ps, and no per-weight multiply.  The f16 scales
// of 8 blocks are packed in general registers and converted by one vcvtph2ps; each block then
// broadcasts its scale from memory (a load, no ALU op).
#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "quant/blocks.h"
#include "quant/isa_tables.h"
#include "quant/simd_x86.h"
#include "quant/x86_avx2_util.h"

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
// A format F gives: kBytes (block size), kD / kM (offsets of the f16 scale and minimum; kM < 0
// without a minimum), kUnit (u carries q / kUnit, s = d kUnit: a power of two, so exact), and
// Block(p, d, m), whose operator()(j) is u_j (d = d kUnit and m broadcast, used by the formats
// with a minimum, whose u is the weight fma(d, q, m) itself and whose s is 1).

// The f16 field at offset Off of cnt <= 8 consecutive blocks as 8 floats (zeros past cnt): packed
// in general registers, one vcvtph2ps (exact, subnormals included).  The empty asm keeps GCC's SLP
// vectoriser from turning the packing into a dozen vector shuffles (measured ~5% per block).
template <int Bytes, int Off>
inline __m256 f16x8(const uint8_t* p, int cnt) {
    uint64_t h[2] = {0, 0};
    auto put = [&](int i) {
        uint16_t v;
        std::memcpy(&v, p + i * Bytes + Off, sizeof v);
        uint64_t v64 = v;
        __asm__("" : "+r"(v64));
        h[i / 4] |= v64 << (16 * (i % 4));
    };
    if (cnt == 8) {
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) put(i);
    } else {
        for (int i = 0; i < cnt; ++i) put(i);
    }
    return _mm256_cvtph_ps(_mm_set_epi64x(static_cast<int64_t>(h[1]), static_cast<int64_t>(h[0])));
}

// Per-block parameters of up to 8 blocks: d kUnit and m, broadcast from here one block at a time.
template <class F>
struct Params {
    alignas(32) float d[8];
    alignas(32) float m[8];
    Params(const uint8_t* p, int cnt) {
        _mm256_store_ps(d, _mm256_mul_ps(f16x8<F::kBytes, F::kD>(p, cnt), _mm256_set1_ps(F::kUnit)));
        if constexpr (F::kM >= 0) _mm256_store_ps(m, f16x8<F::kBytes, F::kM>(p, cnt));
    }
};

// Top-byte placement: dword i of lane L gets byte first[L] + i of that lane in its top byte, zeros
// below, so vcvtdq2ps gives (int8) byte * 2^24 exactly.
inline __m256i top_bytes(int first0, int first1) {
    const auto b = [](int i) { return static_cast<char>(i); };
    return _mm256_setr_epi8(-1, -1, -1, b(first0), -1, -1, -1, b(first0 + 1), -1, -1, -1, b(first0 + 2), -1, -1, -1,
                            b(first0 + 3),  //
                            -1, -1, -1, b(first1), -1, -1, -1, b(first1 + 1), -1, -1, -1, b(first1 + 2), -1, -1, -1,
                            b(first1 + 3));
}

// Q8_0: u_j = q 2^24 from the 16 quant bytes of its half, broadcast to both lanes (elements 0..7
// of a half from bytes 0..3 of lane 0 and 4..7 of lane 1, elements 8..15 from 8..11 and 12..15).
struct Q8_0 {
    static constexpr bool kFloat = false;
    static constexpr int kBytes = sizeof(block_q8_0), kD = offsetof(block_q8_0, d), kM = -1;
    static constexpr float kUnit = 0x1p-24f;
    struct Block {
        __m256i q[2];
        Block(const uint8_t* p, __m256, __m256) {
            const auto* qs = reinterpret_cast<const __m128i*>(p + offsetof(block_q8_0, qs));
            q[0] = _mm256_broadcastsi128_si256(_mm_loadu_si128(qs));
            q[1] = _mm256_broadcastsi128_si256(_mm_loadu_si128(qs + 1));
        }
        __m256 operator()(int j) const {
            return _mm256_cvtepi32_ps(_mm256_shuffle_epi8(q[j / 2], top_bytes(8 * (j % 2), 8 * (j % 2) + 4)));
        }
    };
};

// The 4-bit and 5-bit formats keep their 32 quants in one register of bytes, "lane-split": byte
// 4k + i of lane L is element 8k + 4L + i, so u_k is one in-lane top_bytes(4k, 4k) shuffle.  Element
// e < 16 is the low nibble of qs[e], e >= 16 the high nibble of qs[e - 16]: an in-lane shuffle of
// qs (broadcast to both lanes) puts qs bytes {0..3, 8..11} twice in lane 0 and {4..7, 12..15}
// twice in lane 1 (cheaper than a lane-crossing vpermd), and a 4-bit right shift of the odd qwords
// brings their high nibbles down.  The bits above each nibble are garbage, for the caller to mask.
inline __m256i nibbles_split(const uint8_t* qs) {
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    const __m256i dup = _mm256_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11,  //
                                         4, 5, 6, 7, 12, 13, 14, 15, 4, 5, 6, 7, 12, 13, 14, 15);
    return _mm256_srlv_epi64(_mm256_shuffle_epi8(v, dup), _mm256_setr_epi64x(0, 4, 0, 4));
}

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

// u_k from lane-split bytes b: (int8) b 2^24, optionally as the weight fma(d, u, m).
template <bool kMin>
struct SplitBlock {
    __m256i b;
    __m256 d, m;
    __m256 operator()(int k) const {
        const __m256 u = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(b, top_bytes(4 * k, 4 * k)));
        return kMin ? _mm256_fmadd_ps(d, u, m) : u;
    }
};

inline __m256i lo4(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0F)); }

// Q4_0: byte q - 8 (int8), u = (q - 8) 2^24.
struct Q4_0 {
    static constexpr bool kFloat = false;
    static constexpr int kBytes = sizeof(block_q4_0), kD = offsetof(block_q4_0, d), kM = -1;
    static constexpr float kUnit = 0x1p-24f;
    struct Block : SplitBlock<false> {
        Block(const uint8_t* p, __m256 dv, __m256 mv)
            : SplitBlock{_mm256_sub_epi8(lo4(nibbles_split(p + offsetof(block_q4_0, qs))), _mm256_set1_epi8(8)),
                         dv, mv} {}
    };
};

// Q4_1: w = fma(d, q, m), formed exactly as the reference rounds d q + m (d q is exact).
struct Q4_1 {
    static constexpr bool kFloat = false;
    static constexpr int kBytes = sizeof(block_q4_1), kD = offsetof(block_q4_1, d), kM = offsetof(block_q4_1, m);
    static constexpr float kUnit = 0x1p-24f;
    struct Block : SplitBlock<true> {
        Block(const uint8_t* p, __m256 dv, __m256 mv)
            : SplitBlock{lo4(nibbles_split(p + offsetof(block_q4_1, qs))), dv, mv} {}
    };
};

// Q5_0: byte q - 16 = (nibble | 0xF0) + 16 h (int8), u = (q - 16) 2^24.
struct Q5_0 {
    static constexpr bool kFloat = false;
    static constexpr int kBytes = sizeof(block_q5_0), kD = offsetof(block_q5_0, d), kM = -1;
    static constexpr float kUnit = 0x1p-24f;
    struct Block : SplitBlock<false> {
        Block(const uint8_t* p, __m256 dv, __m256 mv)
            : SplitBlock{bytes(p), dv, mv} {}
        static __m256i bytes(const uint8_t* p) {
            const __m256i nm = _mm256_or_si256(nibbles_split(p + offsetof(block_q5_0, qs)), _mm256_set1_epi8(-16));
            return _mm256_add_epi8(nm, q5_high16(p + offsetof(block_q5_0, qh)));
        }
    };
};

// Q5_1: byte q = nibble | 16 h, w = fma(d, q, m).
struct Q5_1 {
    static constexpr bool kFloat = false;
    static constexpr int kBytes = sizeof(block_q5_1), kD = offsetof(block_q5_1, d), kM = offsetof(block_q5_1, m);
    static constexpr float kUnit = 0x1p-24f;
    struct Block : SplitBlock<true> {
        Block(const uint8_t* p, __m256 dv, __m256 mv)
            : SplitBlock{bytes(p), dv, mv} {}
        static __m256i bytes(const uint8_t* p) {
            return _mm256_or_si256(lo4(nibbles_split(p + offsetof(block_q5_1, qs))),
                                   q5_high16(p + offsetof(block_q5_1, qh)));
        }
    };
};

// Visits the blocks of a row in chunks of 8 (one Params each): f(p, d, m, b) for block b.
template <class F, class Fn>
inline void for_blocks(const uint8_t* p, int64_t nb, Fn&& f) {
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
        const int cnt = nb - b0 < 8 ? static_cast<int>(nb - b0) : 8;
        const Params<F> prm(p, cnt);
#pragma GCC unroll 2  // loop overhead: ~3% for the Q8_0 dot
        for (int i = 0; i < cnt; ++i, p += F::kBytes) {
            prefetch_block<F::kBytes>(p);
            const __m256 d = _mm256_broadcast_ss(&prm.d[i]);
            const __m256 m = F::kM >= 0 ? _mm256_broadcast_ss(&prm.m[i]) : d;
            f(p, d, m, b0 + i);
        }
    }
}

template <class F, int R>
void rows_q(const void* w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy) {
    RowSet<R> rs(x, ldx);
    for_blocks<F>(static_cast<const uint8_t*>(w), n / kGroup, [&rs](const uint8_t* p, __m256 d, __m256 m, int64_t) {
        group_step<R, (F::kM >= 0)>(typename F::Block(p, d, m), rs.x, d, rs.acc);
        rs.advance();
    });
    rs.store(y, ldy);
}

template <class F>
void groups_q(const void* w, int64_t n, float* u, float* scales) {
    for_blocks<F>(static_cast<const uint8_t*>(w), n / kGroup, [&](const uint8_t* p, __m256 d, __m256 m, int64_t b) {
        const typename F::Block blk(p, d, m);
        for (int j = 0; j < 4; ++j) _mm256_storeu_ps(u + b * kGroup + 8 * j, blk(j));
        scales[b] = F::kM >= 0 ? 1.0f : _mm256_cvtss_f32(d);
    });
}

// Dequantisation of the formats without a minimum: u s = (q / kUnit)(d kUnit) = d q, exact, as
// the reference forms it.
template <class F>
void dequant_q(const void* src, float* dst, int64_t n) {
    static_assert(F::kM < 0);
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
    static const Kernels q2_K{nullptr, &dot_q2_K};
    static const Kernels q3_K{nullptr, &dot_q3_K};
    static const Kernels q4_K{&dequant_q4_K, &dot_q4_K};
    static const Kernels q5_K{nullptr, &dot_q5_K};
    static const Kernels q6_K{&dequant_q6_K, &dot_q6_K};
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
