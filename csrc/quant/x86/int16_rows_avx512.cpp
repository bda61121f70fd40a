// AVX-512 int16-path kernels of the natural-order formats (Q4_0, Q4_1, Q5_1, Q4_K, Q6_K) for a few
// activation rows (verify blocks), two weight rows at a time: each span is decoded per row as the
// AVX2 kernel decodes it (x86/int16_spans.h), the two rows' vectors joined in one zmm (row o low,
// row o + 1 high), each activation vector broadcast to both halves and vpdpwssd accumulating the
// exact integer sums. Every lane does the AVX2 kernel's arithmetic (x86/int16_rows_avx2.cpp: the same
// integer sums per group, scale products, fmas, minimum terms and final lane trees), so
// the floats are its floats, bit for bit. Up to 8 activation rows per pass (AVX2: 4).

#include <array>
#include <cmath>
#include <utility>

#include "quant/int16_gemm.h"
#include "quant/x86/avx512_pairs.h"
#include "quant/x86/int16_spans.h"
#include "quant/x86/prefetch.h"

namespace ds4::quant::avx512 {

namespace {

// y[0] = row o's sum of acc (less its minimum term c, for the formats with one) and, when nw == 2,
// y[1] = row o + 1's.
template <bool kMin>
inline void store(__m512 acc, __m512 c, int nw, float* y) {
    y[0] = kMin ? hsum_lo(acc) - hsum_lo(c) : hsum_lo(acc);
    if (nw == 2) y[1] = kMin ? hsum_hi(acc) - hsum_hi(c) : hsum_hi(acc);
}

// y[r * ldy] (row p0) and, when nw == 2, y[r * ldy + 1] (row p1) for R activation rows.
template <class F, int R>
void rows_super(const uint8_t* p0, const uint8_t* p1, int nw, int64_t n, const int16_t* a, const float* da,
                const float* xs, float* y, int64_t ldy) {
    const int64_t nb = n / QK_K, halves = n / kHalf;
    __m512 acc[R], c[R];
    for (int r = 0; r < R; ++r) acc[r] = c[r] = _mm512_setzero_ps();
    for (int64_t bi = 0; bi < nb; ++bi, p0 += F::kBytes, p1 += F::kBytes) {
        prefetch_block<F::kBytes>(p0);
        prefetch_block<F::kBytes>(p1);
        const F f0(p0), f1(p1);
        __m512i S[R];
        for (int r = 0; r < R; ++r) S[r] = _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int k = 0; k < 8; ++k) {
            __m256i v0[2], v1[2];
            f0.span(k, v0);
            f1.span(k, v1);
            for (int i = 0; i < 2; ++i) {
                const __m512i q = join(v0[i], v1[i]);
                for (int r = 0; r < R; ++r) {
                    S[r] = _mm512_dpwssd_epi32(S[r], q, bcast(a + r * n + bi * QK_K + 32 * k + 16 * i));
                }
            }
        }
        const __m512 d = join(_mm256_set1_ps(f0.d()), _mm256_set1_ps(f1.d()));
        for (int r = 0; r < R; ++r) {
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[r]), _mm512_mul_ps(d, _mm512_set1_ps(da[r * nb + bi])), acc[r]);
            if constexpr (F::kMin) {
                const float* x = xs + r * halves + 16 * bi;
                c[r] = _mm512_fmadd_ps(join(f0.mw[0], f1.mw[0]), _mm512_broadcast_f32x8(_mm256_loadu_ps(x)), c[r]);
                c[r] = _mm512_fmadd_ps(join(f0.mw[1], f1.mw[1]), _mm512_broadcast_f32x8(_mm256_loadu_ps(x + 8)), c[r]);
            }
        }
    }
    for (int r = 0; r < R; ++r) store<F::kMin>(acc[r], c[r], nw, y + r * ldy);
}

// The legacy formats (Q4_0, Q4_1, Q5_1): one group per block, as the AVX2 kernel's rows_legacy,
// the minimum term four blocks (eight halves) per vector fma and a last partial four lane by lane.
template <class F, int R>
void rows_legacy(const uint8_t* p0, const uint8_t* p1, int nw, int64_t n, const int16_t* a, const float* da,
                 const float* xs, float* y, int64_t ldy) {
    const int64_t nb = n / kSpan, halves = n / kHalf;
    __m512 acc[R], c[R];
    for (int r = 0; r < R; ++r) acc[r] = c[r] = _mm512_setzero_ps();
    const auto block = [&](int64_t bi, float (&m)[2]) {
        prefetch_block<F::kBytes>(p0 + bi * F::kBytes);
        prefetch_block<F::kBytes>(p1 + bi * F::kBytes);
        const F f0(p0 + bi * F::kBytes), f1(p1 + bi * F::kBytes);
        __m256i v0[2], v1[2];
        f0.span(v0);
        f1.span(v1);
        const __m512i q0 = join(v0[0], v1[0]), q1 = join(v0[1], v1[1]);
        const __m512 d = join(_mm256_set1_ps(f0.d()), _mm256_set1_ps(f1.d()));
        for (int r = 0; r < R; ++r) {
            const int16_t* ap = a + r * n + bi * kSpan;
            const __m512i S = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(_mm512_setzero_si512(), q0, bcast(ap)), q1,
                                                  bcast(ap + kHalf));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S), _mm512_mul_ps(d, _mm512_set1_ps(da[r * nb + bi])), acc[r]);
        }
        m[0] = f0.mw();
        m[1] = f1.mw();
    };
    int64_t bi = 0;
    float m[4][2];
    if constexpr (F::kMin) {
        for (; bi + 4 <= nb; bi += 4) {
            for (int j = 0; j < 4; ++j) block(bi + j, m[j]);
            const auto pairs = [&](int i) {
                return _mm256_setr_ps(m[0][i], m[0][i], m[1][i], m[1][i], m[2][i], m[2][i], m[3][i], m[3][i]);
            };
            const __m512 mv = join(pairs(0), pairs(1));
            for (int r = 0; r < R; ++r)
                c[r] = _mm512_fmadd_ps(mv, _mm512_broadcast_f32x8(_mm256_loadu_ps(xs + r * halves + 2 * bi)), c[r]);
        }
    }
    alignas(64) float cl[R][16];
    for (int r = 0; r < R; ++r) _mm512_store_ps(cl[r], c[r]);
    for (; bi < nb; ++bi) {
        block(bi, m[0]);
        if constexpr (F::kMin) {
            for (int r = 0; r < R; ++r)
                for (int i = 0; i < nw; ++i)
                    for (int64_t h = 2 * bi; h < 2 * bi + 2; ++h)
                        cl[r][8 * i + h % 8] = std::fma(m[0][i], xs[r * halves + h], cl[r][8 * i + h % 8]);
        }
    }
    for (int r = 0; r < R; ++r) store<F::kMin>(acc[r], _mm512_load_ps(cl[r]), nw, y + r * ldy);
}

template <class F, int R>
void rows_of(const uint8_t* p0, const uint8_t* p1, int nw, int64_t n, const int16_t* a, const float* da,
             const float* xs, float* y, int64_t ldy) {
    if constexpr (F::kSuper) {
        rows_super<F, R>(p0, p1, nw, n, a, da, xs, y, ldy);
    } else {
        rows_legacy<F, R>(p0, p1, nw, n, a, da, xs, y, ldy);
    }
}

template <class F>
using RowsFn = void (*)(const uint8_t*, const uint8_t*, int, int64_t, const int16_t*, const float*, const float*,
                        float*, int64_t);

template <class F, size_t... I>
constexpr std::array<RowsFn<F>, sizeof...(I)> rows_table(std::index_sequence<I...>) {
    return {&rows_of<F, static_cast<int>(I) + 1>...};
}

template <class F>
void rows_any(const uint8_t* p0, const uint8_t* p1, int nw, int64_t n, const int16_t* a, const float* da,
              const float* xs, int nx, float* y, int64_t ldy) {
    static constexpr auto fns = rows_table<F>(std::make_index_sequence<kRowsMax>());
    fns[static_cast<size_t>(nx - 1)](p0, p1, nw, n, a, da, xs, y, ldy);
}

// One row: the AVX2 kernel as far as it goes (a decode step), past it this kernel over the row twice.
template <class F, Type T>
void rows1(const void* w, int64_t n, const int16_t* a, const float* da, const float* xs, int nx, float* y,
           int64_t ldy) {
    if (nx <= kDotRowsMax) return avx2::rows_i16(T)(w, n, a, da, xs, nx, y, ldy);
    const auto* p = static_cast<const uint8_t*>(w);
    rows_any<F>(p, p, 1, n, a, da, xs, nx, y, ldy);
}

template <class F>
void rows2(const void* w, size_t row_bytes, int64_t n, const int16_t* a, const float* da, const float* xs, int nx,
           float* y, int64_t ldy) {
    const auto* p = static_cast<const uint8_t*>(w);
    rows_any<F>(p, p + row_bytes, 2, n, a, da, xs, nx, y, ldy);
}

}  // namespace

using Q4_0 = Legacy<block_q4_0, false, false>;
using Q4_1 = Legacy<block_q4_1, false, true>;
using Q5_1 = Legacy<block_q5_1, true, true>;

RowsI16Fn rows_i16(Type type) {
    switch (type) {
        case Type::Q4_0: return &rows1<Q4_0, Type::Q4_0>;
        case Type::Q4_1: return &rows1<Q4_1, Type::Q4_1>;
        case Type::Q5_1: return &rows1<Q5_1, Type::Q5_1>;
        case Type::Q4_K: return &rows1<Q4K, Type::Q4_K>;
        case Type::Q6_K: return &rows1<Q6K, Type::Q6_K>;
        default: return nullptr;
    }
}

RowsPacked2Fn rows2_i16(Type type) {
    switch (type) {
        case Type::Q4_0: return &rows2<Q4_0>;
        case Type::Q4_1: return &rows2<Q4_1>;
        case Type::Q5_1: return &rows2<Q5_1>;
        case Type::Q4_K: return &rows2<Q4K>;
        case Type::Q6_K: return &rows2<Q6K>;
        default: return nullptr;
    }
}

}  // namespace ds4::quant::avx512
