// The AVX-512 row ops (vmath_avx512.cpp) against the AVX2 ones (vmath_avx2.cpp): the same floats
// bit for bit, for rows of every length around the 8- and 16-lane steps, with and without a NaN
// or an infinity. Built by tests/backend/test_x86_avx512.py, the AVX-512 file natively where the
// CPU has it, otherwise against SIMDe (tests/quant/simde_shim).
// Usage: x86_vmath_check [seed]. Prints one line per failure; exit status 1 if any.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/vmath.h"

using namespace ds4::backend;
using namespace ds4::backend::cpu;

namespace {

bool same(const std::vector<float>& a, const std::vector<float>& b) {
    return std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
bool same(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

int main(int argc, char** argv) {
    std::mt19937_64 rng(argc > 1 ? std::stoull(argv[1]) : 1234);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const VecMath &a = vec_math_avx2(), &b = vec_math_avx512();
    int checks = 0, failures = 0;
    const auto check = [&](bool ok, const char* what, int64_t n, int variant) {
        ++checks;
        if (!ok && ++failures < 20) std::printf("FAIL %s n %ld variant %d\n", what, static_cast<long>(n), variant);
    };
    for (int64_t n : {1, 5, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 100, 1000}) {
        std::vector<float> x(n), u(n);
        for (float& v : x) v = 8.0f * nd(rng);
        for (float& v : u) v = nd(rng);
        for (int variant = 0; variant < 4; ++variant) {  // plain, NaN first, NaN last, +inf inside
            std::vector<float> v = x;
            if (variant == 1) v[0] = NAN;
            if (variant == 2) v[n - 1] = NAN;
            if (variant == 3) v[n / 2] = INFINITY;
            for (float cap : {0.0f, 30.0f}) {
                std::vector<float> s1 = v, s2 = v;
                float m1, m2, t1, t2;
                a.softmax_part(s1.data(), n, 0.25f, cap, &m1, &t1);
                b.softmax_part(s2.data(), n, 0.25f, cap, &m2, &t2);
                check(same(s1, s2) && same(m1, m2) && same(t1, t2), cap > 0 ? "softmax capped" : "softmax", n, variant);
            }
            for (Act act : {Act::silu, Act::gelu_tanh, Act::sigmoid}) {
                std::vector<float> y1(n), y2(n);
                a.glu(v.data(), u.data(), n, act, y1.data());
                b.glu(v.data(), u.data(), n, act, y2.data());
                check(same(y1, y2), "glu", n, variant);
            }
            float m1, m2;
            bool f1, f2;
            const int64_t i1 = a.argmax(v.data(), n, &m1, &f1), i2 = b.argmax(v.data(), n, &m2, &f2);
            check(f1 == f2 && same(m1, m2) && (!f1 || i1 == i2), "argmax", n, variant);
            std::vector<float> far(n), e1(n), e2(n);
            for (int64_t i = 0; i < n; ++i) far[i] = x[i] - 60.0f * static_cast<float>(i % 3);  // lanes below exp's clamp
            float mx = far[0];
            for (float f : far) mx = f > mx ? f : mx;
            for (float t : {0.7f, 1.0f}) {
                a.exp_scaled(far.data(), n, mx, t, e1.data());
                b.exp_scaled(far.data(), n, mx, t, e2.data());
                check(same(e1, e2), "exp_scaled", n, variant);
            }
        }
    }
    std::printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
