// Scalar reference kernels: the float formats, the legacy 32-element block formats, and the
// table mapping every supported type to its reference kernels. See kernels_ref.h for how the
// row kernels are built and for the error bound of dot.
#include "quant/kernels_ref.h"

#include <array>

#include "quant/isa_tables.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace ds4::quant {
namespace ref {

// ---- float formats: one element per "block" -------------------------------------------------

template <class Elem, float (*Convert)(Elem)>
void dequant_elems(const void* src, float* dst, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n; ++i) {
        Elem e;
        std::memcpy(&e, p + i * sizeof(Elem), sizeof(Elem));
        dst[i] = Convert(e);
    }
}

template <class Elem, float (*Convert)(Elem)>
float dot_elems(const void* w, const float* x, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(w);
    double acc = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        Elem e;
        std::memcpy(&e, p + i * sizeof(Elem), sizeof(Elem));
        acc += static_cast<double>(Convert(e)) * static_cast<double>(x[i]);
    }
    return static_cast<float>(acc);
}

float f32_identity(float f) { return f; }
float f16_convert(uint16_t h) { return f16_to_f32(h); }
float bf16_convert(uint16_t h) { return bf16_to_f32(h); }

// ---- legacy formats: 32 elements, low nibbles are elements 0..15, high nibbles 16..31 ---------

void decode_q4_0(const block_q4_0& b, float* y) {
    const float d = fp16(b.d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
        y[j] = d * static_cast<float>((b.qs[j] & 0x0F) - 8);
        y[j + QK4_0 / 2] = d * static_cast<float>((b.qs[j] >> 4) - 8);
    }
}

void decode_q4_1(const block_q4_1& b, float* y) {
    const float d = fp16(b.d), m = fp16(b.m);
    for (int j = 0; j < QK4_1 / 2; ++j) {
        y[j] = d * static_cast<float>(b.qs[j] & 0x0F) + m;
        y[j + QK4_1 / 2] = d * static_cast<float>(b.qs[j] >> 4) + m;
    }
}

// Q5: bit j of qh is the fifth bit of element j.
void decode_q5_0(const block_q5_0& b, float* y) {
    const float d = fp16(b.d);
    const uint32_t qh = load_u32_le(b.qh);
    for (int j = 0; j < QK5_0 / 2; ++j) {
        const int hi0 = static_cast<int>((qh >> j) & 1u) << 4;
        const int hi1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
        y[j] = d * static_cast<float>(((b.qs[j] & 0x0F) | hi0) - 16);
        y[j + QK5_0 / 2] = d * static_cast<float>(((b.qs[j] >> 4) | hi1) - 16);
    }
}

void decode_q5_1(const block_q5_1& b, float* y) {
    const float d = fp16(b.d), m = fp16(b.m);
    const uint32_t qh = load_u32_le(b.qh);
    for (int j = 0; j < QK5_1 / 2; ++j) {
        const int hi0 = static_cast<int>((qh >> j) & 1u) << 4;
        const int hi1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
        y[j] = d * static_cast<float>((b.qs[j] & 0x0F) | hi0) + m;
        y[j + QK5_1 / 2] = d * static_cast<float>((b.qs[j] >> 4) | hi1) + m;
    }
}

void decode_q8_0(const block_q8_0& b, float* y) {
    const float d = fp16(b.d);
    for (int j = 0; j < QK8_0; ++j) y[j] = d * static_cast<float>(b.qs[j]);
}

}  // namespace ref

// ---- the reference table ---------------------------------------------------------------------

namespace {

constexpr size_t kMaxTypeId = 64;

std::array<Kernels, kMaxTypeId> make_ref_table() {
    using namespace ref;
    std::array<Kernels, kMaxTypeId> t{};
    auto set = [&t](Type type, Kernels k) { t[static_cast<size_t>(type)] = k; };
    set(Type::F32, {&dequant_elems<float, f32_identity>, &dot_elems<float, f32_identity>});
    set(Type::F16, {&dequant_elems<uint16_t, f16_convert>, &dot_elems<uint16_t, f16_convert>});
    set(Type::BF16, {&dequant_elems<uint16_t, bf16_convert>, &dot_elems<uint16_t, bf16_convert>});
    set(Type::Q4_0, block_kernels<block_q4_0, QK4_0, decode_q4_0>());
    set(Type::Q4_1, block_kernels<block_q4_1, QK4_1, decode_q4_1>());
    set(Type::Q5_0, block_kernels<block_q5_0, QK5_0, decode_q5_0>());
    set(Type::Q5_1, block_kernels<block_q5_1, QK5_1, decode_q5_1>());
    set(Type::Q8_0, block_kernels<block_q8_0, QK8_0, decode_q8_0>());
    set(Type::Q2_K, block_kernels<block_q2_K, QK_K, decode_q2_K>());
    set(Type::Q3_K, block_kernels<block_q3_K, QK_K, decode_q3_K>());
    set(Type::Q4_K, block_kernels<block_q4_K, QK_K, decode_q4_K>());
    set(Type::Q5_K, block_kernels<block_q5_K, QK_K, decode_q5_K>());
    set(Type::Q6_K, block_kernels<block_q6_K, QK_K, decode_q6_K>());
    set(Type::IQ2_XXS, block_kernels<block_iq2_xxs, QK_K, decode_iq2_xxs>());
    set(Type::IQ2_XS, block_kernels<block_iq2_xs, QK_K, decode_iq2_xs>());
    set(Type::IQ2_S, block_kernels<block_iq2_s, QK_K, decode_iq2_s>());
    set(Type::IQ1_S, block_kernels<block_iq1_s, QK_K, decode_iq1_s>());
    set(Type::IQ1_M, block_kernels<block_iq1_m, QK_K, decode_iq1_m>());
    set(Type::TQ1_0, block_kernels<block_tq1_0, QK_K, decode_tq1_0>());
    set(Type::TQ2_0, block_kernels<block_tq2_0, QK_K, decode_tq2_0>());
    set(Type::IQ3_XXS, block_kernels<block_iq3_xxs, QK_K, decode_iq3_xxs>());
    set(Type::IQ3_S, block_kernels<block_iq3_s, QK_K, decode_iq3_s>());
    set(Type::IQ4_NL, block_kernels<block_iq4_nl, QK4_NL, decode_iq4_nl>());
    set(Type::IQ4_XS, block_kernels<block_iq4_xs, QK_K, decode_iq4_xs>());
    set(Type::MXFP4, block_kernels<block_mxfp4, QK_MXFP4, decode_mxfp4>());
    return t;
}

}  // namespace

const Kernels& ref_kernels(Type type) {
    static const std::array<Kernels, kMaxTypeId> table = make_ref_table();
    static const Kernels none;
    const auto id = static_cast<size_t>(type);
    return id < table.size() ? table[id] : none;
}

}  // namespace ds4::quant
