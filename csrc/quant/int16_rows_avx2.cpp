// AVX2 int16-path kernels for a few activation rows (decode, verify blocks): each block is
// decoded once into registers, in the natural element order (the K-quants' sub-block scales
// folded in), and feeds R activation rows. Every (weight row, activation row) result is bit for
// bit what gemm_i16 gives for the same row (int16_gemm.h: the same integer lane sums, one
// conversion and fma per group, the same minimum term), so decode, verify blocks and prefill
// agree.
//
// Per 32 weights and one row: Q4_0 ~12 vector ops, Q4_K ~10, Q6_K ~16, against ~20, ~20 and
// ~25 on the float path. (Q8_0 and Q5_0 take the block lanes over packed rows instead:
// int16_blocks_avx2.cpp.)
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/int16_gemm.h"
#include "quant/x86_avx2_util.h"

namespace ds4::quant::avx2 {

namespace {

inline __m256i load_u8x16(const uint8_t* p) {
    return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// A block of format Blk read in place: its size and its f16 scale d.
template <class Blk>
struct BlockRef {
    static constexpr int kBytes = sizeof(Blk);
    const Blk& b;
    explicit BlockRef(const uint8_t* p) : b(*reinterpret_cast<const Blk*>(p)) {}
    float d() const { return _cvtsh_ss(b.d); }
};

// Word k of the 8 int16 in each 128-bit lane of v, in every lane.
inline __m256i word(__m256i v, int k) {
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * k)));
}

// The super-block's weights, 32 at a time: span(k, v) sets v[0], v[1] to elements 32k .. 32k+15
// and 32k+16 .. 32k+31 as int16 (sub-block scale applied); mw the minimum per half (halves
// 0..7, 8..15).
struct Q4K : BlockRef<block_q4_K> {
    static constexpr bool kSuper = true;
    static constexpr bool kMin = true;
    __m256i sc;  // the 6-bit sub-block scales (blocks.h: scale_min_k4) as int16, in both lanes
    __m256 mw[2];
    explicit Q4K(const uint8_t* p) : BlockRef(p) {
        // Bytes 0..3 hold scales 0..3 and the top bits of scales 4..7, bytes 4..7 the mins likewise,
        // bytes 8..11 the low nibbles of scales and mins 4..7.
        uint32_t lo, mid, hi;
        std::memcpy(&lo, b.scales, 4);
        std::memcpy(&mid, b.scales + 4, 4);
        std::memcpy(&hi, b.scales + 8, 4);
        const uint64_t s = (lo & 0x3F3F3F3Fu) | uint64_t{(hi & 0x0F0F0F0Fu) | ((lo >> 6) & 0x03030303u) << 4} << 32;
        const uint64_t m = (mid & 0x3F3F3F3Fu) | uint64_t{((hi >> 4) & 0x0F0F0F0Fu) | ((mid >> 6) & 0x03030303u) << 4} << 32;
        sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(s))));
        // dmin * m per half, as decode_row writes it
        const __m256 mf = _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(b.dmin)),
                                        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(m)))));
        mw[0] = _mm256_permutevar8x32_ps(mf, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
        mw[1] = _mm256_permutevar8x32_ps(mf, _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7));
    }
    void span(int k, __m256i (&v)[2]) const {
        const uint8_t* qs = b.qs + 32 * (k / 2);
        const __m256i s = word(sc, k);
        for (int i = 0; i < 2; ++i) {
            const __m256i x = load_u8x16(qs + 16 * i);
            const __m256i q = k % 2 ? _mm256_srli_epi16(x, 4) : _mm256_and_si256(x, _mm256_set1_epi16(0x0F));
            v[i] = _mm256_mullo_epi16(q, s);
        }
    }
};

// Q6_K: element 128 h + 32 g + l: nibble g / 2 of ql[64 h + 32 (g % 2) + l], bits 2 g of
// qh[32 h + l], value q - 32, scale scales[(32 g + l) / 16 + 8 h].
struct Q6K : BlockRef<block_q6_K> {
    static constexpr bool kSuper = true;
    static constexpr bool kMin = false;
    __m256i sc[2];  // the 16 int8 scales as int16: 0..7 and 8..15, each in both lanes
    explicit Q6K(const uint8_t* p) : BlockRef(p) {
        const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
        sc[0] = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(s));
        sc[1] = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_srli_si128(s, 8)));
    }
    void span(int k, __m256i (&v)[2]) const {
        const int h = k / 4, g = k % 4;
        const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32 * (g % 2)));
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
        const __m256i lo = g < 2 ? _mm256_and_si256(ql, _mm256_set1_epi8(0x0F))
                                 : _mm256_and_si256(_mm256_srli_epi16(ql, 4), _mm256_set1_epi8(0x0F));
        // bits 2g..2g+1 of each qh byte moved to bits 4..5
        const __m256i hi = _mm256_and_si256(g < 2 ? _mm256_slli_epi16(qh, 4 - 2 * g) : _mm256_srli_epi16(qh, 2 * g - 4),
                                            _mm256_set1_epi8(0x30));
        const __m256i q = _mm256_sub_epi8(_mm256_or_si256(lo, hi), _mm256_set1_epi8(32));
        v[0] = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(q)), word(sc[h], 2 * g));
        v[1] = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1)), word(sc[h], 2 * g + 1));
    }
};

// The 32-element legacy formats: span(p, v) sets v[0], v[1] to elements 0..15 and 16..31.
inline void nibbles(const uint8_t* qs, __m256i (&v)[2]) {
    const __m256i x = load_u8x16(qs);  // byte j: element j (low nibble) and j + 16 (high)
    v[0] = _mm256_and_si256(x, _mm256_set1_epi16(0x0F));
    v[1] = _mm256_srli_epi16(x, 4);
}
// -1 in the lanes of elements 16 i .. 16 i + 15 whose fifth bit (bit e of qh) is set.
inline __m256i fifth_bits(const uint8_t* qh, int i) {
    uint16_t h;
    std::memcpy(&h, qh + 2 * i, sizeof h);
    const __m256i bit = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
                                          static_cast<int16_t>(0x8000));
    return _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_set1_epi16(static_cast<int16_t>(h)), bit), bit);
}
template <class Blk, bool kFifth, bool kHasMin>
struct Legacy : BlockRef<Blk> {
    static constexpr bool kSuper = false;
    static constexpr bool kMin = kHasMin;
    using BlockRef<Blk>::b;
    explicit Legacy(const uint8_t* p) : BlockRef<Blk>(p) {}
    float mw() const {
        if constexpr (kHasMin) return -_cvtsh_ss(b.m);
        return 0.0f;
    }
    void span(__m256i (&v)[2]) const {
        nibbles(b.qs, v);
        for (int i = 0; i < 2; ++i) {
            static_assert(!kFifth || kHasMin, "Q5_0 takes the block lanes (int16_blocks_avx2.cpp)");
            if constexpr (kFifth) {  // q | 16 where the bit is set
                v[i] = _mm256_or_si256(v[i], _mm256_and_si256(fifth_bits(b.qh, i), _mm256_set1_epi16(16)));
            } else if constexpr (!kHasMin) {
                v[i] = _mm256_sub_epi16(v[i], _mm256_set1_epi16(8));
            }
        }
    }
};
// y[r] for the legacy formats: one group per block, so one conversion and fma per block and row.
// The minimum term (Q4_1, Q5_1) takes eight halves (four blocks) per vector fma, in the
// reference's lane order (half h into lane h % 8); a last partial four goes lane by lane.
template <class F, int R>
void rows_legacy(const void* w, int64_t n, const int16_t* a, const float* da, const float* xs, float* y,
                 int64_t ldy) {
    const auto* p = static_cast<const uint8_t*>(w);
    const int64_t nb = n / kSpan, halves = n / kHalf;
    __m256 acc[R], c[R];
    for (int r = 0; r < R; ++r) acc[r] = c[r] = _mm256_setzero_ps();
    const auto block = [&](int64_t bi) {
        prefetch_block<F::kBytes>(p + bi * F::kBytes);
        const F f(p + bi * F::kBytes);
        __m256i v[2];
        f.span(v);
        const float d = f.d();
        for (int r = 0; r < R; ++r) {
            const auto* ap = reinterpret_cast<const __m256i*>(a + r * n + bi * kSpan);
            const __m256i S = _mm256_add_epi32(_mm256_madd_epi16(v[0], _mm256_loadu_si256(ap)),
                                               _mm256_madd_epi16(v[1], _mm256_loadu_si256(ap + 1)));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S), _mm256_set1_ps(d * da[r * nb + bi]), acc[r]);
        }
        return f.mw();
    };
    int64_t bi = 0;
    if constexpr (F::kMin) {
        for (; bi + 4 <= nb; bi += 4) {
            const float m0 = block(bi), m1 = block(bi + 1), m2 = block(bi + 2), m3 = block(bi + 3);
            const __m256 m = _mm256_setr_ps(m0, m0, m1, m1, m2, m2, m3, m3);
            for (int r = 0; r < R; ++r) c[r] = _mm256_fmadd_ps(m, _mm256_loadu_ps(xs + r * halves + 2 * bi), c[r]);
        }
    }
    alignas(32) float cl[R][8];
    for (int r = 0; r < R; ++r) _mm256_store_ps(cl[r], c[r]);
    for (; bi < nb; ++bi) {
        const float m = block(bi);
        if constexpr (F::kMin) {
            for (int r = 0; r < R; ++r)
                for (int64_t h = 2 * bi; h < 2 * bi + 2; ++h) cl[r][h % 8] = std::fma(m, xs[r * halves + h], cl[r][h % 8]);
        }
    }
    for (int r = 0; r < R; ++r) y[r * ldy] = F::kMin ? hsum(acc[r]) - hsum(_mm256_load_ps(cl[r])) : hsum(acc[r]);
}

template <class F, int R>
void rows_super(const void* w, int64_t n, const int16_t* a, const float* da, const float* xs, float* y,
                int64_t ldy) {
    const auto* p = static_cast<const uint8_t*>(w);
    const int64_t nb = n / QK_K, halves = n / kHalf;
    __m256 acc[R], c[R];
    for (int r = 0; r < R; ++r) acc[r] = c[r] = _mm256_setzero_ps();
    for (int64_t bi = 0; bi < nb; ++bi, p += F::kBytes) {
        prefetch_block<F::kBytes>(p);
        const F f(p);
        __m256i S[R];
        for (int r = 0; r < R; ++r) S[r] = _mm256_setzero_si256();
        const auto step = [&](int k) {
            __m256i v[2];
            f.span(k, v);
            for (int r = 0; r < R; ++r) {
                const auto* ap = reinterpret_cast<const __m256i*>(a + r * n + bi * QK_K + 32 * k);
                S[r] = _mm256_add_epi32(S[r], _mm256_madd_epi16(v[0], _mm256_loadu_si256(ap)));
                S[r] = _mm256_add_epi32(S[r], _mm256_madd_epi16(v[1], _mm256_loadu_si256(ap + 1)));
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
        const float d = f.d();
        for (int r = 0; r < R; ++r) {
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S[r]), _mm256_set1_ps(d * da[r * nb + bi]), acc[r]);
            if constexpr (F::kMin) {
                const float* x = xs + r * halves + 16 * bi;
                c[r] = _mm256_fmadd_ps(f.mw[0], _mm256_loadu_ps(x), c[r]);
                c[r] = _mm256_fmadd_ps(f.mw[1], _mm256_loadu_ps(x + 8), c[r]);
            }
        }
    }
    for (int r = 0; r < R; ++r) y[r * ldy] = F::kMin ? hsum(acc[r]) - hsum(c[r]) : hsum(acc[r]);
}

template <class F, int R>
void rows(const void* w, int64_t n, const int16_t* a, const float* da, const float* xs, float* y, int64_t ldy) {
    if constexpr (F::kSuper) {
        rows_super<F, R>(w, n, a, da, xs, y, ldy);
    } else {
        rows_legacy<F, R>(w, n, a, da, xs, y, ldy);
    }
}

template <class F>
void rows_any(const void* w, int64_t n, const int16_t* a, const float* da, const float* xs, int nx, float* y,
              int64_t ldy) {
    using Fn = void (*)(const void*, int64_t, const int16_t*, const float*, const float*, float*, int64_t);
    static constexpr Fn fns[kDotRowsMax] = {&rows<F, 1>, &rows<F, 2>, &rows<F, 3>, &rows<F, 4>};
    fns[nx - 1](w, n, a, da, xs, y, ldy);
}

}  // namespace

RowsI16Fn rows_i16(Type type) {
    switch (type) {
        case Type::Q4_0: return &rows_any<Legacy<block_q4_0, false, false>>;
        case Type::Q4_1: return &rows_any<Legacy<block_q4_1, false, true>>;
        case Type::Q5_1: return &rows_any<Legacy<block_q5_1, true, true>>;
        case Type::Q4_K: return &rows_any<Q4K>;
        case Type::Q6_K: return &rows_any<Q6K>;
        default: return nullptr;
    }
}

}  // namespace ds4::quant::avx2
