// The AVX-512 attention kernels (attn_avx512.cpp) against the AVX2 ones (attn_avx2.cpp): the same
// floats bit for bit, for head dims with 16-, 8- and <8-element remainders, every head-group
// shape and key count, f32 and f16 caches. Built by tests/backend/test_x86_avx512.py, the
// AVX-512 file natively where the CPU has it, otherwise against SIMDe (tests/quant/simde_shim).
// Usage: x86_attn_check [seed]. Prints one line per failure; exit status 1 if any.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attn.h"

using namespace ds4::backend;
using namespace ds4::backend::cpu;

int main(int argc, char** argv) {
    std::mt19937_64 rng(argc > 1 ? std::stoull(argv[1]) : 1234);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> bits(0, 0xFFFF);
    const AttnKernels &a = attn_kernels_avx2(), &b = attn_kernels_avx512();
    int checks = 0, failures = 0;
    for (int64_t hd : {256, 64, 80, 72, 76, 20, 7}) {
        for (int g : {1, 2, 3, 4, 7}) {
            for (KvType type : {KvType::f32, KvType::f16}) {
                const int64_t n_keys = 37, stride = hd + 5, ns = n_keys + 3;
                std::vector<float> q(g * hd), p(g * ns), kf(n_keys * stride);
                std::vector<uint16_t> kh(n_keys * stride);
                for (float& x : q) x = nd(rng);
                for (float& x : p) x = std::abs(nd(rng));
                for (float& x : kf) x = nd(rng);
                for (uint16_t& h : kh) h = static_cast<uint16_t>(bits(rng) & 0xBBFF);  // finite halves, |h| < 1
                const void* k = type == KvType::f32 ? static_cast<const void*>(kf.data()) : kh.data();
                for (int64_t first : {0, 3}) {
                    const int64_t last = n_keys - 1 - first;
                    std::vector<float> s1(g * ns), s2(g * ns), o1(g * hd), o2(g * hd);
                    a.scores(q.data(), g, k, type, stride, first, last, hd, s1.data(), ns);
                    b.scores(q.data(), g, k, type, stride, first, last, hd, s2.data(), ns);
                    a.mix(p.data(), g, k, type, stride, first, last, hd, o1.data(), ns);
                    b.mix(p.data(), g, k, type, stride, first, last, hd, o2.data(), ns);
                    ++checks;
                    const bool ok = std::memcmp(s1.data(), s2.data(), s1.size() * sizeof(float)) == 0 &&
                                    std::memcmp(o1.data(), o2.data(), o1.size() * sizeof(float)) == 0;
                    if (!ok && ++failures < 20) {
                        std::printf("FAIL hd %ld heads %d %s keys %ld..%ld\n", static_cast<long>(hd), g,
                                    type == KvType::f32 ? "f32" : "f16", static_cast<long>(first), static_cast<long>(last));
                    }
                }
            }
        }
    }
    std::printf("x86 attention: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
