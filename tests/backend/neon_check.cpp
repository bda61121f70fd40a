// The NEON row ops and attention kernels of the CPU backend (vmath_neon.cpp, attn_neon.cpp)
// against float64 references and the scalar kernels, built for arm64 and run under qemu-aarch64 by
// tests/backend/test_neon_backend.py (the x86 variants are checked through Python in
// test_vmath.py and the model oracles). Checks: softmax, gated activations and tempered
// exponentials within the x86 tests' tolerances of float64; argmax and its finiteness flag equal
// to the scalar kernel's; each element's bits independent of where it sits in a row (vector body
// or padded tail); the f16 conversion equal to the scalar one, bit for bit; attention scores and the V mix within a rounding bound of float64, and a head's
// results identical whether computed alone or with the others of its group.
// Usage: neon_check [seed]. Prints one line per failure; exit status 1 if any.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/attn.h"
#include "backend/cpu/vmath.h"

using namespace ds4;
using namespace ds4::backend;
using namespace ds4::backend::cpu;

namespace {

int failures = 0, checks = 0;

void expect(bool ok, const char* what, double got, double want) {
    ++checks;
    if (!ok) {
        ++failures;
        if (failures < 20) std::printf("FAIL %s: %.9g vs %.9g\n", what, got, want);
    }
}
bool close(double got, double want, double rtol, double atol) { return std::fabs(got - want) <= atol + rtol * std::fabs(want); }

void check_softmax(const VecMath& vm, std::mt19937_64& rng) {
    std::normal_distribution<float> nd(0.0f, 8.0f);
    for (float cap : {0.0f, 50.0f}) {
        for (int n : {1, 2, 3, 4, 5, 7, 9, 19, 64, 257, 1000}) {
            std::vector<float> x(n), s(n);
            for (float& v : x) v = nd(rng);
            s = x;
            float mx, total;
            vm.softmax_part(s.data(), n, 0.125f, cap, &mx, &total);
            std::vector<double> v(n);
            double m = -INFINITY, sum = 0;
            for (int j = 0; j < n; ++j) {
                v[j] = double(x[j]) * 0.125;
                if (cap > 0) v[j] = std::tanh(v[j] / cap) * cap;
                m = std::fmax(m, v[j]);
            }
            for (int j = 0; j < n; ++j) sum += std::exp(v[j] - m);
            expect(close(mx, m, 1e-6, 0), "softmax max", mx, m);
            expect(close(total, sum, 2e-6, 0), "softmax sum", total, sum);
            for (int j = 0; j < n; ++j) expect(close(s[j] / total, std::exp(v[j] - m) / sum, 2e-6, 1e-12), "softmax p", s[j], 0);
        }
    }
}

double ref_act(double g, Act act) {
    if (act == Act::silu) return g / (1 + std::exp(-g));
    if (act == Act::sigmoid) return 1 / (1 + std::exp(-g));
    return 0.5 * g * (1 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
}

void check_glu(const VecMath& vm, std::mt19937_64& rng) {
    std::normal_distribution<float> nd(0.0f, 4.0f);
    std::vector<float> g(1004), u(g.size()), y(g.size()), y2(g.size());
    for (size_t i = 0; i < g.size(); ++i) g[i] = nd(rng), u[i] = nd(rng) / 4;
    const float edge[] = {0.0f, -0.0f, 1e-30f, -100.0f, 100.0f, 9.5f, -9.5f};
    std::memcpy(g.data() + 997, edge, sizeof edge);
    float umax = 0;
    for (float v : u) umax = std::fmax(umax, std::fabs(v));
    for (Act act : {Act::silu, Act::gelu_tanh, Act::sigmoid}) {
        const int64_t n = static_cast<int64_t>(g.size());
        vm.glu(g.data(), u.data(), n, act, y.data());
        for (int64_t i = 0; i < n; ++i) {
            const double want = ref_act(g[i], act) * u[i];
            expect(close(y[i], want, 1e-5, 1e-6 * umax), "glu", y[i], want);
        }
        for (int64_t off : {1, 2, 3, 5}) {  // the same element in the body or in a tail: the same bits
            for (int64_t len : {1, 3, 6, 13}) {
                vm.glu(g.data() + off, u.data() + off, len, act, y2.data());
                for (int64_t i = 0; i < len; ++i) {
                    ++checks;
                    if (std::memcmp(&y2[i], &y[off + i], sizeof(float)) != 0) {
                        ++failures;
                        std::printf("FAIL glu invariance off %lld len %lld\n", static_cast<long long>(off), static_cast<long long>(len));
                    }
                }
            }
        }
    }
}

void check_argmax_exp(const VecMath& vm, const VecMath& ref, std::mt19937_64& rng) {
    std::normal_distribution<float> nd(0.0f, 3.0f);
    for (int n : {1, 2, 3, 4, 5, 8, 11, 100, 1001}) {
        for (int trial = 0; trial < 4; ++trial) {
            std::vector<float> v(n);
            for (float& x : v) x = nd(rng);
            if (trial == 1) v[n / 2] = v[n - 1] = 50.0f;  // a tie: the first wins
            if (trial == 2) v[n - 1] = INFINITY;
            if (trial == 3) v[0] = NAN;
            float m1, m2;
            bool f1, f2;
            const int64_t i1 = vm.argmax(v.data(), n, &m1, &f1), i2 = ref.argmax(v.data(), n, &m2, &f2);
            expect(f1 == f2, "argmax finite", f1, f2);
            if (f2) expect(i1 == i2 && m1 == m2, "argmax", double(i1), double(i2));
            if (trial != 0) continue;
            for (float t : {0.7f, 1.0f, 1e-3f}) {
                float mx = v[0];
                for (float x : v) mx = std::fmax(mx, x);
                std::vector<float> e(n);
                vm.exp_scaled(v.data(), n, mx, t, e.data());
                for (int j = 0; j < n; ++j) {
                    const double want = std::exp((double(v[j]) - mx) / t);
                    expect(close(e[j], want, 4e-6, 1e-44), "exp_scaled", e[j], want);
                }
            }
        }
    }
}

// The f16 conversion: the scalar conversion's bits (round to nearest even, ties, overflow,
// subnormals, NaN payloads) in the vector body and the padded tail.
void check_to_f16(const VecMath& vm, const VecMath& ref, std::mt19937_64& rng) {
    std::vector<float> x = {0.0f, -0.0f, 1.0f, 1.00048828125f, -1.00048828125f, 65504.0f, 65519.99f, 65520.0f, 1e6f,
                            INFINITY, -INFINITY, 6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f, 4.4703484e-08f,
                            1e-45f, NAN};
    for (uint32_t bits : {0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x7FBFFFFFu, 0x7FFFE000u}) {
        float f;
        std::memcpy(&f, &bits, sizeof f);
        x.push_back(f);
    }
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> ex(-30, 18);
    for (int i = 0; i < 1000; ++i) x.push_back(std::ldexp(nd(rng), ex(rng)));
    for (size_t start : {size_t{0}, size_t{1}, size_t{5}}) {
        const int64_t n = static_cast<int64_t>(x.size() - start);
        std::vector<uint16_t> got(n), want(n);
        vm.to_f16(x.data() + start, n, got.data());
        ref.to_f16(x.data() + start, n, want.data());
        for (int64_t i = 0; i < n; ++i) expect(got[i] == want[i], "to_f16", got[i], want[i]);
    }
}

// Scores and mix of g heads sharing a KV head against float64 and against each head alone.
void check_attention(const AttnKernels& k, std::mt19937_64& rng) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const double u = std::ldexp(1.0, -24);
    for (int64_t hd : {4, 7, 16, 64, 100, 256}) {
        for (int g : {1, 2, 3, 4, 8}) {
            for (KvType type : {KvType::f32, KvType::f16}) {
                const int64_t keys = 37, stride = hd + 3, ns = keys + 2;
                std::vector<float> q(g * hd), kf(keys * stride), s(g * ns), s1(ns), p(g * ns), o(g * hd), o1(hd);
                std::vector<uint16_t> kh(keys * stride);
                for (float& x : q) x = nd(rng);
                for (size_t i = 0; i < kf.size(); ++i) {
                    kh[i] = quant::f32_to_f16(nd(rng));
                    kf[i] = quant::f16_to_f32(kh[i]);  // the same values in both types
                }
                const void* kv = type == KvType::f32 ? static_cast<const void*>(kf.data()) : kh.data();
                k.scores(q.data(), g, kv, type, stride, 2, keys - 1, hd, s.data(), ns);
                for (int h = 0; h < g; ++h) {
                    k.scores(q.data() + h * hd, 1, kv, type, stride, 2, keys - 1, hd, s1.data(), ns);
                    for (int64_t j = 2; j < keys; ++j) {
                        double want = 0, mag = 0;
                        for (int64_t d = 0; d < hd; ++d) {
                            want += double(q[h * hd + d]) * kf[j * stride + d];
                            mag += std::fabs(double(q[h * hd + d]) * kf[j * stride + d]);
                        }
                        const double got = s[h * ns + (j - 2)];
                        expect(std::fabs(got - want) <= (hd + 4) * u * mag, "scores", got, want);
                        expect(got == s1[j - 2], "scores alone", got, s1[j - 2]);
                    }
                }
                for (float& x : p) x = std::fabs(nd(rng));
                k.mix(p.data(), g, kv, type, stride, 2, keys - 1, hd, o.data(), ns);
                for (int h = 0; h < g; ++h) {
                    k.mix(p.data() + h * ns, 1, kv, type, stride, 2, keys - 1, hd, o1.data(), ns);
                    for (int64_t d = 0; d < hd; ++d) {
                        double want = 0, mag = 0;
                        for (int64_t j = 2; j < keys; ++j) {
                            want += double(p[h * ns + (j - 2)]) * kf[j * stride + d];
                            mag += std::fabs(double(p[h * ns + (j - 2)]) * kf[j * stride + d]);
                        }
                        const double got = o[h * hd + d];
                        expect(std::fabs(got - want) <= (keys + 2) * u * mag, "mix", got, want);
                        expect(got == o1[d], "mix alone", got, o1[d]);
                    }
                }
            }
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::mt19937_64 rng(argc > 1 ? std::stoull(argv[1]) : 1234);
    quant::set_isa(quant::Isa::neon);
    const VecMath& vm = vec_math(quant::Isa::neon);
    if (&vm == &vec_math_scalar() || &attn_kernels() == &attn_kernels_scalar()) {
        std::printf("FAIL: the NEON kernels are not dispatched\n");
        return 1;
    }
    check_softmax(vm, rng);
    check_glu(vm, rng);
    check_argmax_exp(vm, vec_math_scalar(), rng);
    check_to_f16(vm, vec_math_scalar(), rng);
    check_attention(attn_kernels(), rng);
    std::printf("neon backend: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
