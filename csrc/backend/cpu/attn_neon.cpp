// NEON attention kernels (see attn.h): the shape of attn_avx2.cpp on 4-lane registers.
//
// Fixed arithmetic per (head, key) score: four 4-lane FMA accumulators over 16-float steps (a
// remaining 4-float step goes into the first), summed as (a0 + a1) + (a2 + a3) and reduced by
// faddp, then any remaining < 4 elements added in order. Per output element of the V mix: one FMA
// chain over keys in ascending order from 0. Neither depends on how many heads or keys an
// instance handles at once, so results do not depend on the call shape.
#include <arm_neon.h>

#include <cmath>
#include <cstdint>

#include "backend/cpu/attn.h"
#include "quant/kernels.h"

namespace ds4::backend::cpu {

namespace {

constexpr int64_t kMixKeys = 16;  // keys per block of the V mix (attn_avx2.cpp)

inline float32x4_t load4(const float* p) { return vld1q_f32(p); }
inline float32x4_t load4(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
inline float load1(const float* p) { return *p; }
inline float load1(const uint16_t* p) { return quant::f16_to_f32(*p); }

// G heads x K keys of scores at once: each K row is loaded once for all G heads.
template <typename T, int G, int K>
inline void dots(const float* q, const T* k, int64_t stride, int64_t hd, float* s, int64_t ns) {
    float32x4_t a[G][K][4];
    for (int g = 0; g < G; ++g)
        for (int c = 0; c < K; ++c)
            for (int l = 0; l < 4; ++l) a[g][c][l] = vdupq_n_f32(0.0f);
    int64_t d = 0;
    for (; d + 16 <= hd; d += 16) {
        for (int c = 0; c < K; ++c) {
            float32x4_t kv[4];
            for (int l = 0; l < 4; ++l) kv[l] = load4(k + c * stride + d + 4 * l);
            for (int g = 0; g < G; ++g)
                for (int l = 0; l < 4; ++l) a[g][c][l] = vfmaq_f32(a[g][c][l], vld1q_f32(q + g * hd + d + 4 * l), kv[l]);
        }
    }
    for (; d + 4 <= hd; d += 4) {
        for (int c = 0; c < K; ++c) {
            const float32x4_t kv = load4(k + c * stride + d);
            for (int g = 0; g < G; ++g) a[g][c][0] = vfmaq_f32(a[g][c][0], vld1q_f32(q + g * hd + d), kv);
        }
    }
    for (int g = 0; g < G; ++g) {
        for (int c = 0; c < K; ++c) {
            float r = vaddvq_f32(vaddq_f32(vaddq_f32(a[g][c][0], a[g][c][1]), vaddq_f32(a[g][c][2], a[g][c][3])));
            for (int64_t e = d; e < hd; ++e) r += q[g * hd + e] * load1(k + c * stride + e);
            s[g * ns + c] = r;
        }
    }
}

template <typename T, int G, int K>
void scores_g(const float* q, const T* k, int64_t stride, int64_t n_keys, int64_t hd, float* s, int64_t ns) {
    int64_t j = 0;
    for (; j + K <= n_keys; j += K) dots<T, G, K>(q, k + j * stride, stride, hd, s + j, ns);
    for (; j < n_keys; ++j) dots<T, G, 1>(q, k + j * stride, stride, hd, s + j, ns);
}

template <typename T>
void scores_t(const float* q, int g, const T* k, int64_t stride, int64_t n_keys, int64_t hd, float* s, int64_t ns) {
    int h = 0;
    for (; h + 2 <= g; h += 2) scores_g<T, 2, 2>(q + h * hd, k, stride, n_keys, hd, s + h * ns, ns);
    for (; h < g; ++h) scores_g<T, 1, 4>(q + h * hd, k, stride, n_keys, hd, s + h * ns, ns);
}

void scores_neon(const float* q, int g, const void* k, KvType type, int64_t stride, int64_t first, int64_t last,
                 int64_t hd, float* s, int64_t ns) {
    const int64_t n_keys = last - first + 1;
    if (type == KvType::f32) {
        scores_t(q, g, static_cast<const float*>(k) + first * stride, stride, n_keys, hd, s, ns);
    } else {
        scores_t(q, g, static_cast<const uint16_t*>(k) + first * stride, stride, n_keys, hd, s, ns);
    }
}

// o[g][d0 .. d0 + 4 B) += sum over keys j0..j1 of p[g][j] * v_j for G heads, G * B accumulators
// in registers across the keys; each V vector is loaded once for all G heads.
template <typename T, int G, int B>
inline void mix_block(const float* p, const T* v, int64_t stride, int64_t j0, int64_t j1, int64_t d0, int64_t hd,
                      float* o, int64_t ns, bool fresh) {
    float32x4_t acc[G][B];
    for (int g = 0; g < G; ++g)
        for (int b = 0; b < B; ++b) acc[g][b] = fresh ? vdupq_n_f32(0.0f) : vld1q_f32(o + g * hd + d0 + 4 * b);
    for (int64_t j = j0; j < j1; ++j) {
        float32x4_t vv[B];
        for (int b = 0; b < B; ++b) vv[b] = load4(v + j * stride + d0 + 4 * b);
        for (int g = 0; g < G; ++g) {
            const float32x4_t pj = vdupq_n_f32(p[g * ns + j]);
            for (int b = 0; b < B; ++b) acc[g][b] = vfmaq_f32(acc[g][b], pj, vv[b]);
        }
    }
    for (int g = 0; g < G; ++g)
        for (int b = 0; b < B; ++b) vst1q_f32(o + g * hd + d0 + 4 * b, acc[g][b]);
}

// B = 16 / G column blocks of 4 per pass (16 accumulators); leftover columns 4 at a time, then
// (head_dim % 4) scalar columns, each one fma chain over ascending keys.
template <typename T, int G>
void mix_g(const float* p, const T* v, int64_t stride, int64_t n_keys, int64_t hd, float* o, int64_t ns) {
    constexpr int B = 16 / G;
    const int64_t hd4 = hd / 4 * 4;
    for (int64_t j0 = 0; j0 < n_keys; j0 += kMixKeys) {
        const int64_t j1 = j0 + kMixKeys < n_keys ? j0 + kMixKeys : n_keys;
        const bool fresh = j0 == 0;
        int64_t d = 0;
        for (; d + 4 * B <= hd4; d += 4 * B) mix_block<T, G, B>(p, v, stride, j0, j1, d, hd, o, ns, fresh);
        for (; d < hd4; d += 4) mix_block<T, G, 1>(p, v, stride, j0, j1, d, hd, o, ns, fresh);
        for (int g = 0; g < G; ++g) {
            for (int64_t e = hd4; e < hd; ++e) {
                float a = fresh ? 0.0f : o[g * hd + e];
                for (int64_t j = j0; j < j1; ++j) a = std::fma(p[g * ns + j], load1(v + j * stride + e), a);
                o[g * hd + e] = a;
            }
        }
    }
}

template <typename T>
void mix_t(const float* p, int g, const T* v, int64_t stride, int64_t n_keys, int64_t hd, float* o, int64_t ns) {
    int h = 0;
    for (; h + 4 <= g; h += 4) mix_g<T, 4>(p + h * ns, v, stride, n_keys, hd, o + h * hd, ns);
    for (; h + 2 <= g; h += 2) mix_g<T, 2>(p + h * ns, v, stride, n_keys, hd, o + h * hd, ns);
    for (; h < g; ++h) mix_g<T, 1>(p + h * ns, v, stride, n_keys, hd, o + h * hd, ns);
}

void mix_neon(const float* p, int g, const void* v, KvType type, int64_t stride, int64_t first, int64_t last,
              int64_t hd, float* o, int64_t ns) {
    const int64_t n_keys = last - first + 1;
    if (type == KvType::f32) {
        mix_t(p, g, static_cast<const float*>(v) + first * stride, stride, n_keys, hd, o, ns);
    } else {
        mix_t(p, g, static_cast<const uint16_t*>(v) + first * stride, stride, n_keys, hd, o, ns);
    }
}

}  // namespace

const AttnKernels& attn_kernels_neon() {
    static const AttnKernels k{scores_neon, mix_neon};
    return k;
}

}  // namespace ds4::backend::cpu
