// The x86 row ops' element arithmetic (vmath.h), written once for any vector width: V is a
// width's operations (Ymm in vmath_avx2.cpp, Zmm in vmath_avx512.cpp), each one instruction, so
// that every width runs the same instruction sequence per element and gives the same floats.
// Include only from files compiled with at least the AVX2 flags; everything is in an unnamed
// namespace (one copy per translation unit, compiled for its ISA).
#pragma once

#include <immintrin.h>

#include "backend/backend.h"
#include "backend/cpu/x86_lanes.h"

namespace ds4::backend::cpu {
namespace {

// e^x: x = k ln2 + r with |r| <= ln2 / 2 (ln2 split in two so k ln2 is exact enough), e^r by
// its degree-6 Taylor-like minimax polynomial, then 2^k through the exponent bits. x is clamped
// to [-87.3, 88.3] so 2^k stays a normal float (e^x below the clamp is < 2^-125, which callers
// either mask or add to 1).
template <class V>
inline typename V::F exp_v(typename V::F x) {
    using F = typename V::F;
    x = V::min(V::max(x, V::set1(-87.3f)), V::set1(88.3f));
    const F k = V::round(V::mul(x, V::set1(1.44269504088896341f)));
    F r = V::fnmadd(k, V::set1(0.693359375f), x);
    r = V::fnmadd(k, V::set1(-2.12194440e-4f), r);
    F p = V::set1(1.9875691500e-4f);
    p = V::fmadd(p, r, V::set1(1.3981999507e-3f));
    p = V::fmadd(p, r, V::set1(8.3334519073e-3f));
    p = V::fmadd(p, r, V::set1(4.1665795894e-2f));
    p = V::fmadd(p, r, V::set1(1.6666665459e-1f));
    p = V::fmadd(p, r, V::set1(5.0000001201e-1f));
    p = V::fmadd(p, V::mul(r, r), V::add(r, V::set1(1.0f)));
    return V::mul(p, V::pow2(k));
}

// tanh: for |x| < 0.625 the odd polynomial x + x^3 P(x^2) (relative accuracy near 0, where
// 1 - 2 / (e^2x + 1) would cancel); above, 1 - 2 / (e^2x + 1) with |x| clamped to 9, where tanh
// rounds to +-1 in float.
template <class V>
inline typename V::F tanh_v(typename V::F x) {
    using F = typename V::F;
    const F z = V::mul(x, x);
    F p = V::set1(-5.70498872745e-3f);
    p = V::fmadd(p, z, V::set1(2.06390887954e-2f));
    p = V::fmadd(p, z, V::set1(-5.37397155531e-2f));
    p = V::fmadd(p, z, V::set1(1.33314422036e-1f));
    p = V::fmadd(p, z, V::set1(-3.33332819422e-1f));
    const F small = V::fmadd(V::mul(p, z), x, x);
    const F xc = V::min(V::max(x, V::set1(-9.0f)), V::set1(9.0f));
    const F e = exp_v<V>(V::add(xc, xc));
    const F one = V::set1(1.0f);
    const F large = V::sub(one, V::div(V::set1(2.0f), V::add(e, one)));
    return V::select_below(V::abs(x), V::set1(0.625f), small, large);
}

// act(g) * u of a gated activation (SiLU, sigmoid, GELU with the tanh approximation).
template <class V>
inline typename V::F gated_v(typename V::F g, typename V::F u, Act act) {
    using F = typename V::F;
    const F one = V::set1(1.0f);
    if (act == Act::silu) return V::mul(V::div(g, V::add(one, exp_v<V>(V::sub(V::set1(0.0f), g)))), u);
    if (act == Act::sigmoid) return V::div(u, V::add(one, exp_v<V>(V::sub(V::set1(0.0f), g))));
    const F inner = V::mul(V::set1(0.7978845608028654f), V::fmadd(V::mul(V::mul(V::set1(0.044715f), g), g), g, g));
    return V::mul(V::mul(V::mul(V::set1(0.5f), g), V::add(one, tanh_v<V>(inner))), u);
}

}  // namespace
}  // namespace ds4::backend::cpu
