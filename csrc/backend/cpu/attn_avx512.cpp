// AVX-512 attention kernels (attn.h): the AVX2 kernels' arithmetic (attn_x86.h) in zmm registers,
// half the instructions per multiply-add, the same floats bit for bit. Compiled with the AVX-512
// flags; called when quant::active_isa() is avx512.
//
// A score's zmm accumulator holds the AVX2 kernel's two: lanes 0..7 its first (elements d..d+7 of
// each 16-float step, and an 8-float remainder, added under a mask), lanes 8..15 its second;
// their sum is the AVX2 kernel's, reduced by the same tree. A V-mix element is one FMA chain over
// ascending keys whatever the vector width; the columns a zmm does not fill take the AVX2 code.
// GCC 12 warns on its own _mm512_undefined_* inside the cast / extract intrinsics (GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "backend/cpu/attn_x86.h"

namespace ds4::backend::cpu {

namespace {

inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// G heads x K keys (8 to 16 independent FMA chains): each K row is loaded once for the G heads,
// each query vector once for the K keys (4 heads x 4 keys: 8 loads per 16 FMAs, so that the FMAs,
// not the loads, bound it; Zen 5: 73 GMAC/s per core against 38 at 4 x 2 with folded loads).
template <typename T, int G, int K>
inline void dots16(const float* q, const T* k, int64_t stride, int64_t hd, float* s, int64_t ns) {
    __m512 a[G][K];
    for (int g = 0; g < G; ++g) {
        for (int c = 0; c < K; ++c) a[g][c] = _mm512_setzero_ps();
    }
    int64_t d = 0;
    for (; d + 16 <= hd; d += 16) {
        __m512 kv[K];
#pragma GCC unroll 8
        for (int c = 0; c < K; ++c) kv[c] = load16(k + c * stride + d);
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
            __m512 qv = load16(q + g * hd + d);
#if defined(__AVX512F__)  // (not under the tests' SIMDe emulation)
            asm("" : "+v"(qv));  // one load per query vector, not one folded into each FMA
#endif
#pragma GCC unroll 8
            for (int c = 0; c < K; ++c) a[g][c] = _mm512_fmadd_ps(qv, kv[c], a[g][c]);
        }
    }
    if (d + 8 <= hd) {  // into the first accumulator's lanes only (the upper lanes' sums are dropped)
        for (int c = 0; c < K; ++c) {
            const __m512 kv = _mm512_castps256_ps512(load8(k + c * stride + d));
            for (int g = 0; g < G; ++g) {
                const __m512 qv = _mm512_castps256_ps512(load8(q + g * hd + d));
                a[g][c] = _mm512_mask_blend_ps(0x00FF, a[g][c], _mm512_fmadd_ps(qv, kv, a[g][c]));
            }
        }
        d += 8;
    }
    for (int g = 0; g < G; ++g) {
        for (int c = 0; c < K; ++c) {
            const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a[g][c]), 1));
            float r = hsum8(_mm256_add_ps(_mm512_castps512_ps256(a[g][c]), hi));
            for (int64_t e = d; e < hd; ++e) r = fma1(q[g * hd + e], load1(k + c * stride + e), r);
            s[g * ns + c] = r;
        }
    }
}

// mix_block (attn_x86.h) over column blocks of 16.
template <typename T, int G, int B>
inline void mix_block16(const float* p, const T* v, int64_t stride, int64_t j0, int64_t j1, int64_t d0, int64_t hd,
                        float* o, int64_t ns, bool fresh) {
    __m512 acc[G][B];
    for (int g = 0; g < G; ++g) {
        for (int b = 0; b < B; ++b) acc[g][b] = fresh ? _mm512_setzero_ps() : _mm512_loadu_ps(o + g * hd + d0 + 16 * b);
    }
    for (int64_t j = j0; j < j1; ++j) {
        __m512 vv[B];
#pragma GCC unroll 8
        for (int b = 0; b < B; ++b) vv[b] = load16(v + j * stride + d0 + 16 * b);
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
            const __m512 pj = _mm512_set1_ps(p[g * ns + j]);
#pragma GCC unroll 8
            for (int b = 0; b < B; ++b) acc[g][b] = _mm512_fmadd_ps(pj, vv[b], acc[g][b]);
        }
    }
    for (int g = 0; g < G; ++g) {
        for (int b = 0; b < B; ++b) _mm512_storeu_ps(o + g * hd + d0 + 16 * b, acc[g][b]);
    }
}

// mix_keys (attn_x86.h) over column blocks of 16, the 8 and the single columns past them as there.
template <typename T, int G>
void mix16_keys(const float* p, const T* v, int64_t stride, int64_t j0, int64_t j1, int64_t hd, float* o, int64_t ns,
                bool fresh) {
    constexpr int B = 8 / G;
    const int64_t hd16 = hd / 16 * 16;
    int64_t d = 0;
    for (; d + 16 * B <= hd16; d += 16 * B) mix_block16<T, G, B>(p, v, stride, j0, j1, d, hd, o, ns, fresh);
    for (; d < hd16; d += 16) mix_block16<T, G, 1>(p, v, stride, j0, j1, d, hd, o, ns, fresh);
    if (d + 8 <= hd) {
        mix_block<T, G, 1>(p, v, stride, j0, j1, d, hd, o, ns, fresh);
        d += 8;
    }
    mix_cols<T, G>(p, v, stride, j0, j1, d, hd, o, ns, fresh);
}

// 4 heads x 4 keys, 2 x 8, 1 x 8: 8 to 16 accumulators.
struct Avx512 {
    static constexpr int keys(int g) { return g == 4 ? 4 : 8; }
    template <typename T, int G, int K>
    static void dots(const float* q, const T* k, int64_t stride, int64_t hd, float* s, int64_t ns) {
        dots16<T, G, K>(q, k, stride, hd, s, ns);
    }
    template <typename T, int G>
    static void mix(const float* p, const T* v, int64_t stride, int64_t j0, int64_t j1, int64_t hd, float* o,
                    int64_t ns, bool fresh) {
        mix16_keys<T, G>(p, v, stride, j0, j1, hd, o, ns, fresh);
    }
};

}  // namespace

const AttnKernels& attn_kernels_avx512() {
    static const AttnKernels k = kernels_of<Avx512>();
    return k;
}

}  // namespace ds4::backend::cpu
