// AVX2 int16-path kernels for a few activation rows (decode, verify blocks): each block is
// decoded once into registers, in the natural element order (the K-quants' sub-block scales
// folded in), and feeds R activation rows. Every (weight row, activation row) result is bit for
// bit what gemm_i16 gives for the same row (int16_gemm.h: the same integer lane sums, one
// conversion and fma per group, the same minimum term), so decode, verify blocks and prefill
// agree.
//
// Per 32 weights and one row: Q4_0 ~12 vector ops, Q4_K ~10, Q6_K ~16, against ~20, ~20 and
// ~25 on the float path. (Q8_0 and Q5_0 take the block lanes over packed rows instead:
// x86/int16_blocks_avx2.cpp.)
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/int16_gemm.h"
#include "quant/x86/avx2_util.h"
#include "quant/x86/int16_spans.h"

namespace ds4::quant::DS4_AVX2_NAMESPACE {

namespace {

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
            const auto* ap = reinterpret_cast<const __m256i*>(a + r * act_stride(n) + bi * kSpan);
            const __m256i S = madd2(v[0], _mm256_loadu_si256(ap), v[1], _mm256_loadu_si256(ap + 1));
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
    const auto sums = [a, n](const F& f, int64_t bi, __m256i (&S)[R]) {
        for (int r = 0; r < R; ++r) S[r] = _mm256_setzero_si256();
        const auto step = [&](int k) {
            __m256i v[2];
            f.span(k, v);
            for (int r = 0; r < R; ++r) {
                const auto* ap = reinterpret_cast<const __m256i*>(a + r * act_stride(n) + bi * QK_K + 32 * k);
                S[r] = madd_acc(S[r], v[0], _mm256_loadu_si256(ap));
                S[r] = madd_acc(S[r], v[1], _mm256_loadu_si256(ap + 1));
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
    };
    super_rows<F, R>(w, n, da, xs, y, ldy, sums, [](__m256 v) { return hsum(v); });
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

}  // namespace ds4::quant::DS4_AVX2_NAMESPACE
