// The activation quantiser of the block-lane formats (the legacy formats) on AVX-512: each block of 32
// floats quantised as x86/int16_gemm_avx2.cpp's quantize_i16 does it (the same maximum, scale,
// products and rounding, saturated to int16) and written straight into the block-lane order
// (block_lanes.h) by register transposes, where quantize_row took quantize_i16 and then
// BlockLanes::to_lanes_in_place's copies of two-element pairs (together ~6 % of a prefill on
// Zen 4). The half sums xs (the minimum term's, int16_gemm.h) are written for Q4_1 / Q5_1 only.

#include <cmath>
#include <limits>

#include "quant/block_lanes.h"
#include "quant/int16_gemm.h"
#include "quant/x86/avx512_pairs.h"

namespace ds4::quant::avx512 {

namespace {

inline int32_t sum8(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1)));
}

// Block x[32] quantised: its 32 int16 as 16 pairs (int32 lane v: elements 2v and 2v + 1), its
// scale in *d (NaN and all zero for a non-finite block, as quantize_i16) and, kSums, its halves'
// d * sum in xs[0], xs[1].
template <bool kSums>
inline __m512i block(const float* x, float range, float* d, float* xs) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    // v - v is 0 exactly for finite v, NaN for an infinity or a NaN.
    const __mmask16 f0 = _mm512_cmp_ps_mask(_mm512_sub_ps(v0, v0), _mm512_setzero_ps(), _CMP_EQ_OQ);
    const __mmask16 f1 = _mm512_cmp_ps_mask(_mm512_sub_ps(v1, v1), _mm512_setzero_ps(), _CMP_EQ_OQ);
    if ((f0 & f1) != 0xFFFF) {
        *d = std::numeric_limits<float>::quiet_NaN();
        if constexpr (kSums) xs[0] = xs[1] = *d;
        return _mm512_setzero_si512();
    }
    const float mx = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    *d = mx / range;
    const __m512 id = _mm512_set1_ps(mx > 0.0f ? range / mx : 0.0f);
    const __m256i q0 = _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(v0, id)));
    const __m256i q1 = _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(v1, id)));
    const __m512i q = join(q0, q1);
    if constexpr (kSums) {  // of the stored (saturated) values, as the reference takes them
        const __m512i pairs = _mm512_dpwssd_epi32(_mm512_setzero_si512(), q, _mm512_set1_epi16(1));
        xs[0] = *d * static_cast<float>(sum8(_mm512_castsi512_si256(pairs)));
        xs[1] = *d * static_cast<float>(sum8(_mm512_extracti64x4_epi64(pairs, 1)));
    }
    return q;
}

// Four blocks' pairs (b[j] lane L: pairs 4L .. 4L + 3 of block j) into c[k] lane L: pair 4L + k
// of blocks 0 .. 3.
inline void transpose4(const __m512i* b, __m512i* c) {
    const __m512i t0 = _mm512_unpacklo_epi32(b[0], b[1]), t1 = _mm512_unpackhi_epi32(b[0], b[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(b[2], b[3]), t3 = _mm512_unpackhi_epi32(b[2], b[3]);
    c[0] = _mm512_unpacklo_epi64(t0, t2);
    c[1] = _mm512_unpackhi_epi64(t0, t2);
    c[2] = _mm512_unpacklo_epi64(t1, t3);
    c[3] = _mm512_unpackhi_epi64(t1, t3);
}

template <int L>
inline __m512i lanes_of(__m512i a, __m512i b) {
    return _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(L, L, L, L));
}

// A chunk of 8 blocks: pair v of block j at int32 position 8 v + j. Output vector i holds pairs
// 2i and 2i + 1 = 4L + k0 and 4L + k0 + 1 with L = i / 2, k0 = 2 (i % 2).
template <int I>
inline __m512i chunk_vector(const __m512i* c, const __m512i* e) {
    constexpr int L = I / 2, k0 = 2 * (I % 2);
    return _mm512_mask_blend_epi32(0xF0F0, lanes_of<L>(c[k0], c[k0 + 1]), lanes_of<L>(e[k0], e[k0 + 1]));
}

template <bool kSums>
void quantize_lanes(const float* x, int64_t n, int range, int16_t* a, float* da, float* xs) {
    const BlockLanes bl(n);
    const auto r = static_cast<float>(range);
    __m512i b[8], c[4], e[4];
    for (int64_t b0 = 0; b0 < bl.full; b0 += BlockLanes::kChunk) {
        for (int j = 0; j < 8; ++j) b[j] = block<kSums>(x + 32 * (b0 + j), r, da + b0 + j, kSums ? xs + 2 * (b0 + j) : nullptr);
        transpose4(b, c);
        transpose4(b + 4, e);
        auto* out = reinterpret_cast<__m512i*>(a + 32 * b0);
        _mm512_storeu_si512(out + 0, chunk_vector<0>(c, e));
        _mm512_storeu_si512(out + 1, chunk_vector<1>(c, e));
        _mm512_storeu_si512(out + 2, chunk_vector<2>(c, e));
        _mm512_storeu_si512(out + 3, chunk_vector<3>(c, e));
        _mm512_storeu_si512(out + 4, chunk_vector<4>(c, e));
        _mm512_storeu_si512(out + 5, chunk_vector<5>(c, e));
        _mm512_storeu_si512(out + 6, chunk_vector<6>(c, e));
        _mm512_storeu_si512(out + 7, chunk_vector<7>(c, e));
    }
    if (bl.tail4()) {
        // Pair p of block l at int32 position 8 v + l % 4 + 4 (p % 2), v = p / 2: output vector i
        // holds pairs 4i .. 4i + 3 of blocks 0 .. 3, lane k being c[k]'s lane i.
        const int64_t b0 = bl.full;
        for (int j = 0; j < 4; ++j) b[j] = block<kSums>(x + 32 * (b0 + j), r, da + b0 + j, kSums ? xs + 2 * (b0 + j) : nullptr);
        transpose4(b, c);
        const __m512i e0 = _mm512_shuffle_i32x4(c[0], c[1], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512i e1 = _mm512_shuffle_i32x4(c[0], c[1], _MM_SHUFFLE(3, 2, 3, 2));
        const __m512i e2 = _mm512_shuffle_i32x4(c[2], c[3], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512i e3 = _mm512_shuffle_i32x4(c[2], c[3], _MM_SHUFFLE(3, 2, 3, 2));
        auto* out = reinterpret_cast<__m512i*>(a + 32 * b0);
        _mm512_storeu_si512(out + 0, _mm512_shuffle_i32x4(e0, e2, _MM_SHUFFLE(2, 0, 2, 0)));
        _mm512_storeu_si512(out + 1, _mm512_shuffle_i32x4(e0, e2, _MM_SHUFFLE(3, 1, 3, 1)));
        _mm512_storeu_si512(out + 2, _mm512_shuffle_i32x4(e1, e3, _MM_SHUFFLE(2, 0, 2, 0)));
        _mm512_storeu_si512(out + 3, _mm512_shuffle_i32x4(e1, e3, _MM_SHUFFLE(3, 1, 3, 1)));
    } else {
        for (int64_t j = bl.full; j < bl.nb; ++j) {  // natural order
            _mm512_storeu_si512(a + 32 * j, block<kSums>(x + 32 * j, r, da + j, kSums ? xs + 2 * j : nullptr));
        }
    }
}

}  // namespace

QuantizeLanesFn quantize_i16_lanes(bool half_sums) { return half_sums ? &quantize_lanes<true> : &quantize_lanes<false>; }

}  // namespace ds4::quant::avx512
