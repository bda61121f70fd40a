// The AVX2 attention kernels' templates (attn.h), shared by attn_avx2.cpp and by
// attn_avx512.cpp, whose zmm kernels fall back to them for the columns a zmm does not fill.
// Include only from files compiled with at least the AVX2 flags; everything is in an unnamed
// namespace (one copy per translation unit, compiled for its ISA).
//
// Fixed arithmetic per (head, key) score: two 8-lane FMA accumulators over 16-float steps (an
// 8-float remainder goes into the first), their sum reduced horizontally in one fixed tree,
// then any remaining < 8 elements added in order by scalar FMAs. Per output element of the V
// mix: one FMA chain over keys in ascending order starting from 0. Neither depends on how many
// heads or keys a template instance handles at once, so results do not depend on the call shape.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/attn.h"
#include "backend/cpu/x86_lanes.h"

namespace ds4::backend::cpu {
namespace {

// Keys per block of the V mix: a block of V rows (16 KiB for f32, head_dim 256) stays in L1
// while every output column block of every head sweeps over it; likewise the scores' K rows.
constexpr int64_t kMixKeys = 16;
constexpr int64_t kScoreKeys = 8;

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline float load1(const float* p) { return *p; }
inline float load1(const uint16_t* p) {
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(*p))));
}

inline float fma1(float a, float b, float c) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

// fn(the cache's rows from row `first`, typed as the cache holds them).
template <class F>
inline void with_rows(const void* base, KvType type, int64_t offset, F&& fn) {
    if (type == KvType::f32) {
        fn(static_cast<const float*>(base) + offset);
    } else {
        fn(static_cast<const uint16_t*>(base) + offset);
    }
}

// G heads x K keys of scores at once: each K row is loaded once for all G heads, and the
// G*K*2 independent FMA chains hide the FMA latency.
template <typename T, int G, int K>
inline void dots8(const float* q, const T* k, int64_t stride, int64_t hd, float* s, int64_t ns) {
    __m256 a0[G][K];
    __m256 a1[G][K];
    for (int g = 0; g < G; ++g) {
        for (int c = 0; c < K; ++c) a0[g][c] = a1[g][c] = _mm256_setzero_ps();
    }
    int64_t d = 0;
    for (; d + 16 <= hd; d += 16) {
#pragma GCC unroll 4
        for (int c = 0; c < K; ++c) {
            const __m256 k0 = load8(k + c * stride + d);
            const __m256 k1 = load8(k + c * stride + d + 8);
#pragma GCC unroll 8
            for (int g = 0; g < G; ++g) {
                a0[g][c] = _mm256_fmadd_ps(load8(q + g * hd + d), k0, a0[g][c]);
                a1[g][c] = _mm256_fmadd_ps(load8(q + g * hd + d + 8), k1, a1[g][c]);
            }
        }
    }
    if (d + 8 <= hd) {
        for (int c = 0; c < K; ++c) {
            const __m256 k0 = load8(k + c * stride + d);
            for (int g = 0; g < G; ++g) a0[g][c] = _mm256_fmadd_ps(load8(q + g * hd + d), k0, a0[g][c]);
        }
        d += 8;
    }
    for (int g = 0; g < G; ++g) {
        for (int c = 0; c < K; ++c) {
            float r = hsum8(_mm256_add_ps(a0[g][c], a1[g][c]));
            for (int64_t e = d; e < hd; ++e) r = fma1(q[g * hd + e], load1(k + c * stride + e), r);
            s[g * ns + c] = r;
        }
    }
}

// o[g][d0 .. d0 + 8*B) += sum over keys j0..j1 of p[g][j] * v_j for G heads: G*B accumulators
// held in registers across the keys; each V vector is loaded once for all G heads.
template <typename T, int G, int B>
inline void mix_block(const float* p, const T* v, int64_t stride, int64_t j0, int64_t j1,
                      int64_t d0, int64_t hd, float* o, int64_t ns, bool fresh) {
    __m256 acc[G][B];
    for (int g = 0; g < G; ++g) {
        for (int b = 0; b < B; ++b) {
            acc[g][b] = fresh ? _mm256_setzero_ps() : _mm256_loadu_ps(o + g * hd + d0 + 8 * b);
        }
    }
    for (int64_t j = j0; j < j1; ++j) {
        __m256 vv[B];
#pragma GCC unroll 8
        for (int b = 0; b < B; ++b) vv[b] = load8(v + j * stride + d0 + 8 * b);
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
            const __m256 pj = _mm256_broadcast_ss(p + g * ns + j);
#pragma GCC unroll 8
            for (int b = 0; b < B; ++b) acc[g][b] = _mm256_fmadd_ps(pj, vv[b], acc[g][b]);
        }
    }
    for (int g = 0; g < G; ++g) {
        for (int b = 0; b < B; ++b) _mm256_storeu_ps(o + g * hd + d0 + 8 * b, acc[g][b]);
    }
}

// Columns e0..hd - 1 of G heads one at a time, over keys j0..j1 (the columns no vector fills).
template <typename T, int G>
inline void mix_cols(const float* p, const T* v, int64_t stride, int64_t j0, int64_t j1, int64_t e0, int64_t hd,
                     float* o, int64_t ns, bool fresh) {
    for (int g = 0; g < G; ++g) {
        for (int64_t e = e0; e < hd; ++e) {
            float a = fresh ? 0.0f : o[g * hd + e];
            for (int64_t j = j0; j < j1; ++j) a = fma1(p[g * ns + j], load1(v + j * stride + e), a);
            o[g * hd + e] = a;
        }
    }
}

// Keys j0..j1 of G heads: B = 8 / G column blocks of 8 per pass keeps 8 accumulators; leftover
// columns go 8 at a time, then (head_dim % 8) scalar columns. Every element is one FMA chain
// over ascending keys, continued from o unless `fresh`.
template <typename T, int G>
void mix_keys(const float* p, const T* v, int64_t stride, int64_t j0, int64_t j1, int64_t hd, float* o, int64_t ns,
              bool fresh) {
    constexpr int B = 8 / G;
    const int64_t hd8 = hd / 8 * 8;
    int64_t d = 0;
    for (; d + 8 * B <= hd8; d += 8 * B) mix_block<T, G, B>(p, v, stride, j0, j1, d, hd, o, ns, fresh);
    for (; d < hd8; d += 8) mix_block<T, G, 1>(p, v, stride, j0, j1, d, hd, o, ns, fresh);
    mix_cols<T, G>(p, v, stride, j0, j1, hd8, hd, o, ns, fresh);
}

// The drivers both x86 ISAs share, over an ISA's kernels Ops: Ops::dots<T, G, K> (scores of G
// heads x K keys), Ops::keys(G) (the K of G heads: enough FMA chains to hide their latency) and
// Ops::mix<T, G> (keys j0..j1 of G heads). Key blocks outer, heads in groups of 4, 2, 1 inner: a
// block's K or V rows stay in L1 while every head of the call (a KV group's heads, or a run of
// rows' heads, cpu_backend.cpp) sweeps over them.
template <class Ops, typename T, int G>
void scores_heads(const float* q, const T* k, int64_t stride, int64_t n_keys, int64_t hd, float* s, int64_t ns) {
    constexpr int K = Ops::keys(G);
    int64_t j = 0;
    for (; j + K <= n_keys; j += K) Ops::template dots<T, G, K>(q, k + j * stride, stride, hd, s + j, ns);
    for (; j < n_keys; ++j) Ops::template dots<T, G, 1>(q, k + j * stride, stride, hd, s + j, ns);
}

template <class Ops, typename T>
void scores_t(const float* q, int g, const T* k, int64_t stride, int64_t n_keys, int64_t hd, float* s, int64_t ns) {
    for (int64_t j = 0; j < n_keys; j += kScoreKeys) {
        const int64_t m = n_keys - j < kScoreKeys ? n_keys - j : kScoreKeys;
        const T* kj = k + j * stride;
        int h = 0;
        for (; h + 4 <= g; h += 4) scores_heads<Ops, T, 4>(q + h * hd, kj, stride, m, hd, s + h * ns + j, ns);
        for (; h + 2 <= g; h += 2) scores_heads<Ops, T, 2>(q + h * hd, kj, stride, m, hd, s + h * ns + j, ns);
        for (; h < g; ++h) scores_heads<Ops, T, 1>(q + h * hd, kj, stride, m, hd, s + h * ns + j, ns);
    }
}

template <class Ops, typename T>
void mix_t(const float* p, int g, const T* v, int64_t stride, int64_t n_keys, int64_t hd, float* o, int64_t ns) {
    for (int64_t j0 = 0; j0 < n_keys; j0 += kMixKeys) {
        const int64_t j1 = j0 + kMixKeys < n_keys ? j0 + kMixKeys : n_keys;
        const bool fresh = j0 == 0;
        int h = 0;
        for (; h + 4 <= g; h += 4) Ops::template mix<T, 4>(p + h * ns, v, stride, j0, j1, hd, o + h * hd, ns, fresh);
        for (; h + 2 <= g; h += 2) Ops::template mix<T, 2>(p + h * ns, v, stride, j0, j1, hd, o + h * hd, ns, fresh);
        for (; h < g; ++h) Ops::template mix<T, 1>(p + h * ns, v, stride, j0, j1, hd, o + h * hd, ns, fresh);
    }
}

// The kernel table of an ISA's Ops, over f32 or f16 caches.
template <class Ops>
AttnKernels kernels_of() {
    return {[](const float* q, int g, const void* k, KvType type, int64_t stride, int64_t first, int64_t last,
               int64_t hd, float* s, int64_t ns) {
                with_rows(k, type, first * stride,
                          [&](auto rows) { scores_t<Ops>(q, g, rows, stride, last - first + 1, hd, s, ns); });
            },
            [](const float* p, int g, const void* v, KvType type, int64_t stride, int64_t first, int64_t last,
               int64_t hd, float* o, int64_t ns) {
                with_rows(v, type, first * stride,
                          [&](auto rows) { mix_t<Ops>(p, g, rows, stride, last - first + 1, hd, o, ns); });
            }};
}

}  // namespace
}  // namespace ds4::backend::cpu
