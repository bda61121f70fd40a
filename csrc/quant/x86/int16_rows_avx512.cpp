// AVX-512 int16-path kernels of the K-quants (Q2_K .. Q6_K) and IQ4_XS for a few activation rows (decode,
// verify blocks), one or two weight rows at a time: a span of 32 weights of one row in a zmm
// (Q45KWide, HalvesWide), one plain activation load per span and activation row shared by both weight
// rows, and lanes j and j + 8 folded at the super-block's end into the AVX2 kernel's lane j, from
// where every lane does the AVX2 kernel's arithmetic (x86/int16_rows_avx2.cpp: the same integer
// sums per group, scale products, fmas, minimum terms and final lane trees), so the floats are its
// floats, bit for bit. Up to 8 activation rows per pass (AVX2: 4).

#include <array>
#include <utility>

#include "quant/int16_gemm.h"
#include "quant/x86/avx512_pairs.h"
#include "quant/x86/int16_spans.h"
#include "quant/x86/prefetch.h"

namespace ds4::quant::avx512 {

namespace {

// One weight row of a K-quant (a decode step, the odd row of a verify block): a span in one zmm,
// its 32 int16 weights against its 32 activations by one vpdpwssd, lane j of 16 summing elements
// 2j, 2j + 1 of the span. At the group's end lanes j and j + 8 add into the AVX2 kernel's lane j
// (elements 2j, 2j + 1, 2j + 16, 2j + 17 of every span), the same exact integer, and all that
// follows is the AVX2 kernel's arithmetic on ymm. Per span: ~5 instructions against its ~11.
// Span k's scale is one broadcast load of s2[k] (the scale in both words of a dword: a load-port
// broadcast, where a shuffle per span took the shuffle port from the decoding and the sums).
// Q5_K's fifth bits: the 32 qh bytes widened once per super-block, shifted to bit 4 (bit k of
// qh[l] is span k's), then per span one shift and one ternary-logic op.
template <class Blk>
struct Q45KWide : BlockRef<Blk> {
    static constexpr bool kMin = true;
    static constexpr int kUnits = 8;
    static constexpr bool kFive = Q45K<Blk>::kFive;
    using BlockRef<Blk>::b;
    alignas(32) int32_t s2[8];
    __m256 mf;  // dmin * m per sub-block
    __m512i h4;  // Q5_K: qh[l] << 4 in word l
    DS4_SPAN explicit Q45KWide(const uint8_t* p) : BlockRef<Blk>(p) {
        uint64_t s, m;
        Q45K<Blk>::scales_mins(b, s, m);
        const __m256i v = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(s)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(s2), _mm256_or_si256(v, _mm256_slli_epi32(v, 16)));
        mf = Q45K<Blk>::mins(b, m);
        if constexpr (kFive) h4 = _mm512_slli_epi16(_mm512_cvtepu8_epi16(load256(b.qh)), 4);
    }
    __m512i wide(int k) const {
        const __m512i x = _mm512_cvtepu8_epi16(load256(b.qs + 32 * (k / 2)));
        __m512i q = k % 2 ? _mm512_srli_epi16(x, 4) : _mm512_and_si512(x, _mm512_set1_epi16(0x0F));
        if constexpr (kFive) {  // q | (h4 >> k) & 0x10
            q = _mm512_ternarylogic_epi32(q, _mm512_srli_epi16(h4, k), _mm512_set1_epi16(0x10), 0xF8);
        }
        return _mm512_mullo_epi16(q, broadcast_load(s2 + k));
    }
    __m256 mw(int) const { return mf; }
};
using Q4KWide = Q45KWide<block_q4_K>;
using Q5KWide = Q45KWide<block_q5_K>;
// Q2_K, Q3_K and Q6_K (a scale per 16 elements, Base their AVX2 decoder): elements 0..15 of span
// k take scale 2 (k % 4) of the 8 in sc[k / 4], 16..31 the next.
template <class Base>
struct HalvesWide : Base {
    using Base::Base;
    __m512i wide(int k) const {
        const int h = k / 4, g = k % 4;
        const __m512i s = _mm512_broadcast_i32x4(_mm256_castsi256_si128(this->sc[h]));
        const __m512i pick = join(_mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (2 * g))),
                                  _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (2 * g + 1))));
        return _mm512_mullo_epi16(_mm512_cvtepi8_epi16(this->bytes(k)), _mm512_shuffle_epi8(s, pick));
    }
};
using Q2KWide = HalvesWide<Q2K>;
using Q3KWide = HalvesWide<Q3K>;
using Q6KWide = HalvesWide<Q6K>;

// IQ4_XS: span k's 32 code-book values from one 16-byte load broadcast to both lanes (the low
// lane's low nibbles, the high lane's high ones, by a per-lane shift), its scale a broadcast load
// as Q45KWide's.
struct IQ4XSWide : BlockRef<block_iq4_xs> {
    static constexpr bool kMin = false;
    alignas(32) int32_t s2[8];
    explicit IQ4XSWide(const uint8_t* p) : BlockRef(p) {
        const __m256i v = _mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(IQ4XS::scales(b)))),
                                           _mm256_set1_epi32(32));
        _mm256_store_si256(reinterpret_cast<__m256i*>(s2), _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)),
                                                                           _mm256_slli_epi32(v, 16)));
    }
    __m512i wide(int k) const {
        const __m256i x = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * k)));
        const __m256i book = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kvalues_iq4nl)));
        const __m256i nib = _mm256_and_si256(_mm256_srlv_epi32(x, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0F));
        return _mm512_mullo_epi16(_mm512_cvtepi8_epi16(_mm256_shuffle_epi8(book, nib)), broadcast_load(s2 + k));
    }
};

// The grid and ternary formats (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, TQ1_0,
// TQ2_0): the AVX2 decoder's span, both halves in one zmm.
template <class Base>
struct SpanWide : Base {
    using Base::Base;
    __m512i wide(int k) const {
        __m256i v[2];
        this->span(k, v);
        return join(v[0], v[1]);
    }
};

// y[r * ldy] (row p0) and y[r * ldy + 1] (row p1) for R activation rows, F a wide decoder (one
// span of a row in a zmm, above): per span, both rows' spans against one plain load of the
// activations, and at the super-block's end lanes j and j + 8 of each row's sums folded into the
// AVX2 kernel's lane j (row p0 in the low half, p1 in the high one), from where the arithmetic is
// the AVX2 kernel's.
template <class F, int R>
void rows_super(const uint8_t* p0, const uint8_t* p1, int nw, int64_t n, const int16_t* a, const float* da,
                const float* xs, float* y, int64_t ldy) {
    const int64_t nb = n / QK_K, mstride = n / kHalf;
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t bi = 0; bi < nb; ++bi, p0 += F::kBytes, p1 += F::kBytes) {
        prefetch_block<F::kBytes>(p0);
        prefetch_block<F::kBytes>(p1);
        const F f0(p0), f1(p1);
        __m512i S[2][R];
        for (int r = 0; r < R; ++r) S[0][r] = S[1][r] = _mm512_setzero_si512();
        const int16_t* x = a + bi * QK_K;
        int64_t stride = act_stride(n);
        opaque(stride);
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
            const __m512i q0 = f0.wide(k), q1 = f1.wide(k);
            for (int r = 0; r < R; ++r) {
                __m512i xv = load512(x + r * stride + 32 * k);
                in_register(xv);
                S[0][r] = _mm512_dpwssd_epi32(S[0][r], q0, xv);
                S[1][r] = _mm512_dpwssd_epi32(S[1][r], q1, xv);
            }
        }
        const __m512 d = join(_mm256_set1_ps(f0.d()), _mm256_set1_ps(f1.d()));
        for (int r = 0; r < R; ++r) {
            const __m512i T = fold(S[0][r], S[1][r]);
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(T), _mm512_mul_ps(d, _mm512_set1_ps(da[r * nb + bi])), acc[r]);
            if constexpr (F::kMin)  // the super-block's minimum units, 8 at a time, both rows' in one zmm
                for (int i = 0; i < F::kUnits / 8; ++i) {
                    const __m256 xm = _mm256_loadu_ps(xs + r * mstride + F::kUnits * bi + 8 * i);
                    acc[r] = _mm512_fnmadd_ps(join(f0.mw(i), f1.mw(i)), _mm512_broadcast_f32x8(xm), acc[r]);
                }
        }
    }
    store_hsums(acc, nw, y, ldy);
}

template <class F>
using RowsFn = void (*)(const uint8_t*, const uint8_t*, int, int64_t, const int16_t*, const float*, const float*,
                        float*, int64_t);

template <class F, size_t... I>
constexpr std::array<RowsFn<F>, sizeof...(I)> rows_table(std::index_sequence<I...>) {
    return {&rows_super<F, static_cast<int>(I) + 1>...};
}

template <class F>
void rows_any(const uint8_t* p0, const uint8_t* p1, int nw, int64_t n, const int16_t* a, const float* da,
              const float* xs, int nx, float* y, int64_t ldy) {
    static constexpr auto fns = rows_table<F>(std::make_index_sequence<kRowsMax>());
    fns[static_cast<size_t>(nx - 1)](p0, p1, nw, n, a, da, xs, y, ldy);
}

template <class F, int R>
void row_wide(const void* w, int64_t n, const int16_t* a, const float* da, const float* xs, float* y, int64_t ldy) {
    const auto sums = [a, n](const F& f, int64_t bi, __m256i (&S)[R]) {
        // even and odd spans in two chains (vpdpwssd's latency), added exactly at the end
        __m512i T[2][R];
        for (int r = 0; r < R; ++r) T[0][r] = T[1][r] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
            const __m512i q = f.wide(k);
            for (int r = 0; r < R; ++r) {
                const int16_t* ap = a + r * act_stride(n) + bi * QK_K + 32 * k;
                T[k % 2][r] = _mm512_dpwssd_epi32(T[k % 2][r], q, _mm512_loadu_si512(ap));
            }
        }
        for (int r = 0; r < R; ++r) {
            const __m512i t = _mm512_add_epi32(T[0][r], T[1][r]);
            S[r] = _mm256_add_epi32(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
        }
    };
    super_rows<F, R>(w, n, da, xs, y, ldy, sums, [](__m256 v) { return hsum8(v); });
}

using WideFn = void (*)(const void*, int64_t, const int16_t*, const float*, const float*, float*, int64_t);

template <class F, size_t... I>
constexpr std::array<WideFn, sizeof...(I)> wide_table(std::index_sequence<I...>) {
    return {&row_wide<F, static_cast<int>(I) + 1>...};
}

template <class F>
void rows1_wide(const void* w, int64_t n, const int16_t* a, const float* da, const float* xs, int nx, float* y,
                int64_t ldy) {
    static constexpr auto fns = wide_table<F>(std::make_index_sequence<kRowsMax>());
    fns[static_cast<size_t>(nx - 1)](w, n, a, da, xs, y, ldy);
}

// The span formats (SpanWide) at one activation row: the AVX2 kernel's 256-bit spans, without the
// join into a zmm, which costs more than the wider multiply-adds save there (one thread, GMAC/s:
// TQ1_0 11.8 -> 16.8, IQ3_XXS 6.8 -> 9.9; no format slower).
template <class F>
void rows1_span(const void* w, int64_t n, const int16_t* a, const float* da, const float* xs, int nx, float* y,
                int64_t ldy) {
    if (nx == 1) {
        super_rows<F, 1>(w, n, da, xs, y, ldy, SpanSums<F, 1>{a, n}, [](__m256 v) { return hsum8(v); });
    } else {
        rows1_wide<F>(w, n, a, da, xs, nx, y, ldy);
    }
}

template <class F>
void rows2(const void* w, size_t row_bytes, int64_t n, const int16_t* a, const float* da, const float* xs, int nx,
           float* y, int64_t ldy) {
    const auto* p = static_cast<const uint8_t*>(w);
    rows_any<F>(p, p + row_bytes, 2, n, a, da, xs, nx, y, ldy);
}

// Super-block bi's scale sw[bi] and its minimum units, as decode_row writes them.
template <class F>
void store_scales(const F& f, int64_t bi, float* sw, float* mw) {
    sw[bi] = f.d();
    if constexpr (F::kMin)
        for (int i = 0; i < F::kUnits / 8; ++i) _mm256_storeu_ps(mw + bi * F::kUnits + 8 * i, f.mw(i));
}

// A K-quant row decoded to the GEMM's int16 tile as decode_row writes it (int16_ref.cpp: each
// span's weights times its sub-block scale, d per super-block, dmin * m per sub-block), a span per
// store: a pass of I16Kernels::gemm_from rows or more decodes each weight row once for all
// their activation rows instead of once per pass of the rows kernel.
template <class F>
void decode_wide(const void* w, int64_t n, int16_t* q, float* sw, float* mw) {
    const auto* p = static_cast<const uint8_t*>(w);
    for (int64_t bi = 0; bi < n / QK_K; ++bi, p += F::kBytes) {
        const F f(p);
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) _mm512_storeu_si512(q + bi * QK_K + 32 * k, f.wide(k));
        store_scales(f, bi, sw, mw);
    }
}

// Two rows decoded into the paired layout (int16_gemm.h, I16Kernels::decode_pair): span k of rows
// o (f0) and o + 1 (f1) as two stores of [o's half | o + 1's half], by fold's shuffles.
template <class F>
void decode_pair_wide(const void* w, size_t row_bytes, int64_t n, int16_t* q, float* sw, float* mw) {
    const auto* p = static_cast<const uint8_t*>(w);
    const int64_t nb = n / QK_K;
    for (int64_t bi = 0; bi < nb; ++bi, p += F::kBytes) {
        prefetch_block<F::kBytes>(p);  // a verify pass's weight stream (Qwen2.5-Coder 1.5B, 16 rows: 5 % faster)
        prefetch_block<F::kBytes>(p + row_bytes);
        const F f0(p), f1(p + row_bytes);
        int16_t* qb = q + 2 * bi * QK_K;
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
            const __m512i a = f0.wide(k), b = f1.wide(k);
            _mm512_storeu_si512(qb + 64 * k, _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)));
            _mm512_storeu_si512(qb + 64 * k + 32, _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
        }
        store_scales(f0, bi, sw, mw);
        store_scales(f1, bi, sw + nb, mw + n / kHalf);
    }
}

template <template <class> class Fn, class R>
R by_format(Type type) {
    switch (type) {
        case Type::Q2_K: return Fn<Q2KWide>::get();
        case Type::Q3_K: return Fn<Q3KWide>::get();
        case Type::Q4_K: return Fn<Q4KWide>::get();
        case Type::Q5_K: return Fn<Q5KWide>::get();
        case Type::Q6_K: return Fn<Q6KWide>::get();
        case Type::IQ4_XS: return Fn<IQ4XSWide>::get();
        case Type::IQ2_XXS: return Fn<SpanWide<IQ2XXS>>::get();
        case Type::IQ2_XS: return Fn<SpanWide<IQ2XS>>::get();
        case Type::IQ2_S: return Fn<SpanWide<IQ2S>>::get();
        case Type::IQ1_S: return Fn<SpanWide<IQ1S>>::get();
        case Type::IQ1_M: return Fn<SpanWide<IQ1M>>::get();
        case Type::TQ1_0: return Fn<SpanWide<TQ10>>::get();
        case Type::TQ2_0: return Fn<SpanWide<TQ20>>::get();
        case Type::IQ3_XXS: return Fn<SpanWide<IQ3XXS>>::get();
        case Type::IQ3_S: return Fn<SpanWide<IQ3S>>::get();
        default: return R{};
    }
}
template <class F>
struct RowsOf {
    static RowsI16Fn get() { return &rows1_wide<F>; }
};
template <class B>
struct RowsOf<SpanWide<B>> {
    static RowsI16Fn get() { return &rows1_span<SpanWide<B>>; }
};
template <class F>
struct DecodeOf {
    static DecodeI16Fn get() { return &decode_wide<F>; }
};
template <class F>
struct DecodePairOf {
    static DecodePairI16Fn get() { return &decode_pair_wide<F>; }
};
template <class F>
struct Rows2Of {
    static RowsPacked2Fn get() { return &rows2<F>; }
};
// The pairs kernel at one activation row for the decoders that fill a zmm natively, not the span
// formats' (rows1_span).
template <class F>
struct PairsOneRow {
    static bool get() { return true; }
};
template <class B>
struct PairsOneRow<SpanWide<B>> {
    static bool get() { return false; }
};

}  // namespace

RowsI16Fn rows_i16(Type type) { return by_format<RowsOf, RowsI16Fn>(type); }
DecodeI16Fn decode_i16(Type type) { return by_format<DecodeOf, DecodeI16Fn>(type); }
DecodePairI16Fn decode_pair_i16(Type type) { return by_format<DecodePairOf, DecodePairI16Fn>(type); }
RowsPacked2Fn rows2_i16(Type type) { return by_format<Rows2Of, RowsPacked2Fn>(type); }

bool rows2_one_row(Type type) { return by_format<PairsOneRow, bool>(type); }

}  // namespace ds4::quant::avx512
