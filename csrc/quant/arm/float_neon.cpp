// AArch64 Advanced SIMD (NEON) dot kernels: F32, F16, BF16, Q4_0, Q8_0, Q4_K.  Other types fall back
// to the scalar reference.  4 float lanes.
//
// Numerical contract: the same as the x86 kernels (x86/simd.h).  Weights are formed exactly as
// the reference forms them (Q4_0 / Q8_0: d * q, an exact product; Q4_K: fma(d sc, q, -dmin m),
// d sc q being exact, so one rounding, as the reference's (d sc) q - dmin m); block partial sums
// are split over two chains so that each of the 2 x 4 lane positions sees at most n / 8 terms,
// and each product passes through h <= n / 8 + 16 roundings, hence
//     |dot_neon - Σ w_i x_i| <= γ_h Σ |w_i x_i|,   u = 2^-24.
// tests/quant/test_simd_kernels.py checks this bound on arm64 builds, and on x86 hosts runs
// tests/quant/simd_check.cpp cross-compiled for arm64 under qemu-aarch64 (user mode) when
// aarch64-linux-gnu-g++ and qemu-user are installed.
#include <arm_neon.h>

#include <cstddef>
#include <cstring>

#include "quant/blocks.h"
#include "quant/isa_tables.h"

namespace ds4::quant {
namespace neon {
namespace {

inline float load_f16(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);  // exact
}

// Loads through byte vectors: no alignment assumption beyond 1.
inline float32x4_t load4_f32(const uint8_t* p) { return vreinterpretq_f32_u8(vld1q_u8(p)); }

inline void widen_u8(uint8x16_t v, float32x4_t out[4]) {
    const uint16x8_t lo = vmovl_u8(vget_low_u8(v)), hi = vmovl_high_u8(v);
    out[0] = vcvtq_f32_u32(vmovl_u16(vget_low_u16(lo)));
    out[1] = vcvtq_f32_u32(vmovl_high_u16(lo));
    out[2] = vcvtq_f32_u32(vmovl_u16(vget_low_u16(hi)));
    out[3] = vcvtq_f32_u32(vmovl_high_u16(hi));
}

inline void widen_s8(int8x16_t v, float32x4_t out[4]) {
    const int16x8_t lo = vmovl_s8(vget_low_s8(v)), hi = vmovl_high_s8(v);
    out[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
    out[1] = vcvtq_f32_s32(vmovl_high_s16(lo));
    out[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
    out[3] = vcvtq_f32_s32(vmovl_high_s16(hi));
}

// Σ_j q_j x_j over 32 quants (two int8x16 vectors) in two 4-step chains, then their sum.
inline float32x4_t block_sum32(int8x16_t q0, int8x16_t q1, const float* x) {
    float32x4_t a[4], b[4];
    widen_s8(q0, a);
    widen_s8(q1, b);
    float32x4_t s0 = vmulq_f32(a[0], vld1q_f32(x));
    float32x4_t s1 = vmulq_f32(a[1], vld1q_f32(x + 4));
    s0 = vfmaq_f32(s0, a[2], vld1q_f32(x + 8));
    s1 = vfmaq_f32(s1, a[3], vld1q_f32(x + 12));
    s0 = vfmaq_f32(s0, b[0], vld1q_f32(x + 16));
    s1 = vfmaq_f32(s1, b[1], vld1q_f32(x + 20));
    s0 = vfmaq_f32(s0, b[2], vld1q_f32(x + 24));
    s1 = vfmaq_f32(s1, b[3], vld1q_f32(x + 28));
    return vaddq_f32(s0, s1);
}

inline float hsum(float32x4_t a, float32x4_t b) { return vaddvq_f32(vaddq_f32(a, b)); }

// Σ over blocks i < nb of block(i) (a 4-lane partial sum, already scaled), alternating between two
// named accumulators so both stay in registers.
template <class F>
inline float fold_pairs(int64_t nb, F&& block) {
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        a0 = vaddq_f32(a0, block(i));
        a1 = vaddq_f32(a1, block(i + 1));
    }
    if (i < nb) a0 = vaddq_f32(a0, block(i));
    return hsum(a0, a1);
}

// Float formats: 4 accumulators x 4 lanes over 16 elements; the tail through a zero-padded copy.
// R activation rows (x rows ldx apart, y[r * ldy]) against one weight row, each 16 weights loaded
// once for all of them; every row takes the same operations as R = 1 (dot), so the floats agree.
template <int Bytes, float32x4_t (*Load4)(const uint8_t*), int R>
void dot_float_rows(const void* w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy) {
    const auto* p = static_cast<const uint8_t*>(w);
    float32x4_t acc[R][4];
    for (int r = 0; r < R; ++r)
        for (int k = 0; k < 4; ++k) acc[r][k] = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        float32x4_t wv[4];
        for (int k = 0; k < 4; ++k) wv[k] = Load4(p + (i + 4 * k) * Bytes);
        for (int r = 0; r < R; ++r)
            for (int k = 0; k < 4; ++k) acc[r][k] = vfmaq_f32(acc[r][k], wv[k], vld1q_f32(x + r * ldx + i + 4 * k));
    }
    for (; i < n; i += 4) {  // tail (< 16) into acc[r][0]
        const int64_t m = n - i < 4 ? n - i : 4;
        uint8_t wb[4 * Bytes + 8] = {};  // + 8: Load4 of F16 / BF16 reads 8 bytes
        std::memcpy(wb, p + i * Bytes, static_cast<size_t>(m) * Bytes);
        const float32x4_t wv = Load4(wb);
        for (int r = 0; r < R; ++r) {
            float xb[4] = {};
            std::memcpy(xb, x + r * ldx + i, static_cast<size_t>(m) * sizeof(float));
            acc[r][0] = vfmaq_f32(acc[r][0], wv, vld1q_f32(xb));
        }
    }
    for (int r = 0; r < R; ++r) y[r * ldy] = hsum(vaddq_f32(acc[r][0], acc[r][1]), vaddq_f32(acc[r][2], acc[r][3]));
}

template <int Bytes, float32x4_t (*Load4)(const uint8_t*)>
float dot_float_format(const void* w, const float* x, int64_t n) {
    float y;
    dot_float_rows<Bytes, Load4, 1>(w, x, 0, n, &y, 0);
    return y;
}

template <int Bytes, float32x4_t (*Load4)(const uint8_t*)>
void dot_rows_float_format(const void* w, const float* x, int64_t ldx, int nx, int64_t n, float* y, int64_t ldy) {
    static_assert(kDotRowsMax == 4, "one case per row count");
    switch (nx) {
        case 1: return dot_float_rows<Bytes, Load4, 1>(w, x, ldx, n, y, ldy);
        case 2: return dot_float_rows<Bytes, Load4, 2>(w, x, ldx, n, y, ldy);
        case 3: return dot_float_rows<Bytes, Load4, 3>(w, x, ldx, n, y, ldy);
        default: return dot_float_rows<Bytes, Load4, 4>(w, x, ldx, n, y, ldy);
    }
}

inline float32x4_t load4_f16(const uint8_t* p) {
    return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p)));
}

// BF16: the top half of a float32, widened by a 16-bit shift (exact).
inline float32x4_t load4_bf16(const uint8_t* p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vreinterpret_u16_u8(vld1_u8(p)), 16));
}

}  // namespace

float dot_f32(const void* w, const float* x, int64_t n) { return dot_float_format<4, load4_f32>(w, x, n); }
float dot_f16(const void* w, const float* x, int64_t n) { return dot_float_format<2, load4_f16>(w, x, n); }
float dot_bf16(const void* w, const float* x, int64_t n) { return dot_float_format<2, load4_bf16>(w, x, n); }
void dot_rows_f32(const void* w, const float* x, int64_t ldx, int nx, int64_t n, float* y, int64_t ldy) {
    dot_rows_float_format<4, load4_f32>(w, x, ldx, nx, n, y, ldy);
}
void dot_rows_f16(const void* w, const float* x, int64_t ldx, int nx, int64_t n, float* y, int64_t ldy) {
    dot_rows_float_format<2, load4_f16>(w, x, ldx, nx, n, y, ldy);
}
void dot_rows_bf16(const void* w, const float* x, int64_t ldx, int nx, int64_t n, float* y, int64_t ldy) {
    dot_rows_float_format<2, load4_bf16>(w, x, ldx, nx, n, y, ldy);
}

// Q8_0: Σ_b d_b Σ_j q_j x_j, two accumulators on alternate blocks (the scale is a separate
// multiply: one more rounding per block than a fused scale-and-add, still within the bound).
float dot_q8_0(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    auto block = [&](int64_t i) {
        const uint8_t* b = p + i * sizeof(block_q8_0);
        const uint8_t* qs = b + offsetof(block_q8_0, qs);
        const int8x16_t q0 = vreinterpretq_s8_u8(vld1q_u8(qs)), q1 = vreinterpretq_s8_u8(vld1q_u8(qs + 16));
        return vmulq_n_f32(block_sum32(q0, q1, x + i * QK8_0), load_f16(b));
    };
    return fold_pairs(n / QK8_0, block);
}

// Q4_0: elements 0..15 are the low nibbles, 16..31 the high nibbles; value q - 8.
float dot_q4_0(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    const uint8x16_t lo4 = vdupq_n_u8(0x0F);
    const int8x16_t eight = vdupq_n_s8(8);
    auto block = [&](int64_t i) {
        const uint8_t* b = p + i * sizeof(block_q4_0);
        const uint8x16_t qs = vld1q_u8(b + offsetof(block_q4_0, qs));
        const int8x16_t q0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(qs, lo4)), eight);
        const int8x16_t q1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(qs, 4)), eight);
        return vmulq_n_f32(block_sum32(q0, q1, x + i * QK4_0), load_f16(b));
    };
    return fold_pairs(n / QK4_0, block);
}

// Q4_K: 8 sub-blocks of 32 with 6-bit scale and min (k4_scales in blocks.h); qs[32j + l]
// holds element 64j + l (low nibble) and 64j + 32 + l (high nibble).
float dot_q4_K(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    const uint8x16_t lo4 = vdupq_n_u8(0x0F);
    float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    for (int64_t i = 0; i < n / QK_K; ++i, p += sizeof(block_q4_K), x += QK_K) {
        const float d = load_f16(p + offsetof(block_q4_K, d)), dmin = load_f16(p + offsetof(block_q4_K, dmin));
        float d1[8], negm1[8];
        k4_scales(p + offsetof(block_q4_K, scales), d, dmin, d1, negm1);
        const uint8_t* qs = p + offsetof(block_q4_K, qs);
        for (int j = 0; j < 4; ++j) {
            for (int half = 0; half < 2; ++half) {  // bytes l = 16 half .. 16 half + 15
                const uint8x16_t b = vld1q_u8(qs + 32 * j + 16 * half);
                float32x4_t lo[4], hi[4];
                widen_u8(vandq_u8(b, lo4), lo);
                widen_u8(vshrq_n_u8(b, 4), hi);
                const float32x4_t dl = vdupq_n_f32(d1[2 * j]), ml = vdupq_n_f32(negm1[2 * j]);
                const float32x4_t dh = vdupq_n_f32(d1[2 * j + 1]), mh = vdupq_n_f32(negm1[2 * j + 1]);
                const float* xl = x + 64 * j + 16 * half;
                for (int k = 0; k < 4; ++k) {
                    acc[k] = vfmaq_f32(acc[k], vfmaq_f32(ml, dl, lo[k]), vld1q_f32(xl + 4 * k));
                    acc[k] = vfmaq_f32(acc[k], vfmaq_f32(mh, dh, hi[k]), vld1q_f32(xl + 32 + 4 * k));
                }
            }
        }
    }
    return hsum(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3]));
}

}  // namespace neon

const Kernels& neon_kernels(Type type) {
    static const Kernels none;
    static const Kernels f32{nullptr, &neon::dot_f32, &neon::dot_rows_f32}, f16{nullptr, &neon::dot_f16, &neon::dot_rows_f16},
        bf16{nullptr, &neon::dot_bf16, &neon::dot_rows_bf16},
        q4_0{nullptr, &neon::dot_q4_0}, q8_0{nullptr, &neon::dot_q8_0}, q4_K{nullptr, &neon::dot_q4_K};
    switch (type) {
        case Type::F32: return f32;
        case Type::F16: return f16;
        case Type::BF16: return bf16;
        case Type::Q4_0: return q4_0;
        case Type::Q8_0: return q8_0;
        case Type::Q4_K: return q4_K;
        default: return none;
    }
}

}  // namespace ds4::quant
