// AVX2 int16-path kernels of the K-quants (Q2_K .. Q6_K) and IQ4_XS for a few activation rows (decode,
// verify blocks): each super-block is decoded once into registers, in the natural element order
// (the sub-block scales folded in), and feeds R activation rows. Every (weight row, activation row) result is bit for
// bit what gemm_i16 gives for the same row (int16_gemm.h: the same integer lane sums, one
// conversion and fma per group, the same minimum term), so decode, verify blocks and prefill
// agree.
//
// Per 32 weights and one row: Q4_K ~10 vector ops, Q6_K ~16, against ~20 and ~25 on the float
// path. (The legacy formats take the block lanes over packed rows instead:
// x86/int16_blocks_avx2.cpp.)
#include <immintrin.h>


#include "quant/blocks.h"
#include "quant/int16_gemm.h"
#include "quant/x86/avx2_util.h"
#include "quant/x86/int16_spans.h"

namespace ds4::quant::DS4_AVX2_NAMESPACE {

namespace {

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

template <class F>
void rows_any(const void* w, int64_t n, const int16_t* a, const float* da, const float* xs, int nx, float* y,
              int64_t ldy) {
    using Fn = void (*)(const void*, int64_t, const int16_t*, const float*, const float*, float*, int64_t);
    static constexpr Fn fns[kDotRowsMax] = {&rows_super<F, 1>, &rows_super<F, 2>, &rows_super<F, 3>,
                                           &rows_super<F, 4>};
    fns[nx - 1](w, n, a, da, xs, y, ldy);
}

}  // namespace

RowsI16Fn rows_i16(Type type) {
    switch (type) {
        case Type::Q2_K: return &rows_any<Q2K>;
        case Type::Q3_K: return &rows_any<Q3K>;
        case Type::Q4_K: return &rows_any<Q4K>;
        case Type::Q5_K: return &rows_any<Q5K>;
        case Type::Q6_K: return &rows_any<Q6K>;
        case Type::IQ4_XS: return &rows_any<IQ4XS>;
        default: return nullptr;
    }
}

}  // namespace ds4::quant::DS4_AVX2_NAMESPACE
