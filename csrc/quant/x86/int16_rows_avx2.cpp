// AVX2 int16-path kernels of the K-quants (Q2_K .. Q6_K), IQ4_XS, the grid and ternary formats for a
// few activation rows (decode, verify blocks): each super-block is decoded once into registers, in
// the natural element order (the sub-block scales folded in), and feeds R activation rows. Every
// (weight row, activation row) result is bit for bit what gemm_i16 gives for the same row
// (int16_gemm.h: the same integer lane sums, one conversion and fma per group, the same minimum
// term), so decode, verify blocks and prefill agree.
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
    super_rows<F, R>(w, n, da, xs, y, ldy, SpanSums<F, R>{a, n}, [](__m256 v) { return hsum(v); });
}

template <class F>
void rows_any(const void* w, int64_t n, const int16_t* a, const float* da, const float* xs, int nx, float* y,
              int64_t ldy) {
    using Fn = void (*)(const void*, int64_t, const int16_t*, const float*, const float*, float*, int64_t);
    static constexpr Fn fns[kDotRowsMax] = {&rows_super<F, 1>, &rows_super<F, 2>, &rows_super<F, 3>,
                                           &rows_super<F, 4>};
    fns[nx - 1](w, n, a, da, xs, y, ldy);
}

// A K-quant, IQ4_XS or grid-format row decoded to the GEMM's int16 tile as decode_row writes it (int16_ref.cpp: each
// span's weights times its sub-block scale, d per super-block, the minimum units), from the rows
// kernels' span decoders: the prefill's weight tiles, once per tile of activation rows, where the
// scalar decode_row took 5.6 % of Qwen2.5-Coder 1.5B's AVX2 prefill.
template <class F>
void decode_spans(const void* w, int64_t n, int16_t* q, float* sw, float* mw) {
    const auto* p = static_cast<const uint8_t*>(w);
    for (int64_t bi = 0; bi < n / QK_K; ++bi, p += F::kBytes) {
        const F f(p);
        int16_t* qb = q + bi * QK_K;
        for (int k = 0; k < 8; ++k) {
            __m256i v[2];
            f.span(k, v);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb + 32 * k), v[0]);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb + 32 * k + 16), v[1]);
        }
        sw[bi] = f.d();
        if constexpr (F::kMin)
            for (int i = 0; i < F::kUnits / 8; ++i) _mm256_storeu_ps(mw + bi * F::kUnits + 8 * i, f.mw(i));
    }
}

template <template <class> class Fn, class R>
R by_format(Type type) {
    switch (type) {
        case Type::Q2_K: return Fn<Q2K>::get();
        case Type::Q3_K: return Fn<Q3K>::get();
        case Type::Q4_K: return Fn<Q4K>::get();
        case Type::Q5_K: return Fn<Q5K>::get();
        case Type::Q6_K: return Fn<Q6K>::get();
        case Type::IQ4_XS: return Fn<IQ4XS>::get();
        case Type::IQ2_XXS: return Fn<IQ2XXS>::get();
        case Type::IQ2_XS: return Fn<IQ2XS>::get();
        case Type::IQ2_S: return Fn<IQ2S>::get();
        case Type::IQ1_S: return Fn<IQ1S>::get();
        case Type::IQ1_M: return Fn<IQ1M>::get();
        case Type::TQ1_0: return Fn<TQ10>::get();
        case Type::TQ2_0: return Fn<TQ20>::get();
        case Type::IQ3_XXS: return Fn<IQ3XXS>::get();
        case Type::IQ3_S: return Fn<IQ3S>::get();
        default: return nullptr;
    }
}
template <class F>
struct RowsOf {
    static RowsI16Fn get() { return &rows_any<F>; }
};
template <class F>
struct DecodeOf {
    static DecodeI16Fn get() { return &decode_spans<F>; }
};

}  // namespace

RowsI16Fn rows_i16(Type type) { return by_format<RowsOf, RowsI16Fn>(type); }
DecodeI16Fn decode_i16(Type type) { return by_format<DecodeOf, DecodeI16Fn>(type); }

}  // namespace ds4::quant::DS4_AVX2_NAMESPACE
