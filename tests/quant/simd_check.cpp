// Stand-alone checker for one ISA's kernel table against the scalar reference, without Python
// and without run-time dispatch.  tests/quant/test_simd_kernels.py builds it
//   * for x86 with the AVX2 files native and the AVX-512 files compiled against SIMDe's portable
//     emulation of the intrinsics (tests/quant/simde_shim/immintrin.h), so the AVX-512 kernels
//     are checked for the values they compute even on a CPU without AVX-512 (the emulation is
//     exact for the operations used: integer ops, conversions, IEEE add / mul; its fma may round
//     twice, which the bound absorbs), and
//   * for arm64 with aarch64-linux-gnu-g++, run under qemu-aarch64, for the NEON table.
// Usage: simd_check avx2|avx512|neon [seed] (an arm64 build checks the NEON table, e.g. under
// qemu-aarch64).  Prints one line per failure; exit status 1 if any.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant/blocks.h"
#include "quant/isa_tables.h"
#include "quant/kernels.h"
#include "quant/types.h"

using namespace ds4::quant;

namespace {

struct Case {
    Type type;
    std::vector<int> f16_fields;  // byte offsets of the f16 scales in a block
};

const Case kCases[] = {
    {Type::F32, {}},       {Type::F16, {}},      {Type::BF16, {}},     {Type::Q4_0, {0}},
    {Type::Q4_1, {0, 2}},  {Type::Q5_0, {0}},    {Type::Q5_1, {0, 2}}, {Type::Q8_0, {0}},
    {Type::Q2_K, {80, 82}}, {Type::Q3_K, {108}}, {Type::Q4_K, {0, 2}}, {Type::Q5_K, {0, 2}},
    {Type::Q6_K, {208}},
};

uint16_t bf16_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return static_cast<uint16_t>(u >> 16);
}

// Random row: random bytes, then every scale field (or every element of a float format) set to a
// sane value of random sign and magnitude 2^-8 .. 2^2.
std::vector<uint8_t> random_row(const Case& c, const TypeInfo& ti, int64_t n, std::mt19937_64& rng) {
    const size_t bytes = row_bytes(ti, n);
    std::vector<uint8_t> row(bytes);
    for (auto& b : row) b = static_cast<uint8_t>(rng());
    std::uniform_real_distribution<float> mag(-8.0f, 2.0f);
    auto sane = [&]() { return std::exp2(mag(rng)) * ((rng() & 1) ? -1.0f : 1.0f); };
    if (c.type == Type::F32) {
        for (int64_t i = 0; i < n; ++i) {
            const float f = sane();
            std::memcpy(&row[4 * i], &f, 4);
        }
    } else if (c.type == Type::F16 || c.type == Type::BF16) {
        for (int64_t i = 0; i < n; ++i) {
            const uint16_t h = c.type == Type::F16 ? f32_to_f16(sane()) : bf16_of(sane());
            std::memcpy(&row[2 * i], &h, 2);
        }
    } else {
        for (size_t b = 0; b < bytes / ti.type_size; ++b)
            for (int off : c.f16_fields) {
                const uint16_t h = f32_to_f16(sane());
                std::memcpy(&row[b * ti.type_size + off], &h, 2);
            }
    }
    return row;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: simd_check avx2|avx512|neon [seed]\n");
        return 2;
    }
    const std::string isa = argv[1];
#if defined(DS4_ARM64)
    const Kernels& (*table)(Type) = &neon_kernels;
#else
    const Kernels& (*table)(Type) = isa == "avx512" ? &avx512_kernels : &avx2_kernels;
#endif
    std::mt19937_64 rng(argc > 2 ? std::stoull(argv[2]) : 1234);
    const double u = std::ldexp(1.0, -24);
    int failures = 0, checks = 0;
    double worst = 0;  // largest |simd - ref| / bound seen
    for (const Case& c : kCases) {
        const TypeInfo& ti = *type_info(static_cast<uint32_t>(c.type));
        const Kernels& simd = table(c.type);
        const Kernels& ref = ref_kernels(c.type);
        if (!simd.dot && !simd.dequant) continue;
        const int64_t bs = ti.block_size == 1 ? 1 : ti.block_size;
        for (int64_t nblk : {1, 2, 3, 7, 16, 19, 64}) {
            for (int64_t extra : {0, 5, 13}) {
                const int64_t n = bs == 1 ? 32 * nblk + extra : nblk * bs;
                if (bs != 1 && extra) continue;
                for (int trial = 0; trial < 4; ++trial) {
                    const auto row = random_row(c, ti, n, rng);
                    std::vector<float> x(n), wref(n), wsimd(n);
                    std::normal_distribution<float> nd(0.0f, 1.0f);
                    for (auto& v : x) v = nd(rng) * (trial == 3 ? 1e3f : 1.0f);
                    ref.dequant(row.data(), wref.data(), n);
                    if (simd.dequant) {
                        ++checks;
                        simd.dequant(row.data(), wsimd.data(), n);
                        if (std::memcmp(wref.data(), wsimd.data(), n * sizeof(float)) != 0) {
                            ++failures;
                            std::printf("FAIL dequant %s n=%lld\n", ti.name, static_cast<long long>(n));
                        }
                    }
                    if (!simd.dot) continue;
                    double abs_sum = 0;
                    for (int64_t i = 0; i < n; ++i) abs_sum += std::fabs(double(wref[i]) * double(x[i]));
                    const float r = ref.dot(row.data(), x.data(), n);
                    const float s = simd.dot(row.data(), x.data(), n);
                    const double h = double(n) / 8 + 16;  // simd_x86.h
                    const double bound = h * u / (1 - h * u) * abs_sum + u * std::fabs(r) + 1e-30;
                    ++checks;
                    worst = std::fmax(worst, std::fabs(double(s) - double(r)) / bound);
                    if (!(std::fabs(double(s) - double(r)) <= bound)) {
                        ++failures;
                        std::printf("FAIL dot %s n=%lld ref=%.9g simd=%.9g bound=%.3g\n", ti.name,
                                    static_cast<long long>(n), r, s, bound);
                    }
                    // dot_rows and decode_groups + gemm_groups reproduce dot bit for bit, for every
                    // activation row of a call (row 0 is x; the others are x scaled and shifted)
                    std::vector<float> xs(kDotRowsMax * n), want(kDotRowsMax), got(kDotRowsMax);
                    for (int k = 0; k < kDotRowsMax; ++k) {
                        for (int64_t i = 0; i < n; ++i) xs[k * n + i] = x[(i + 3 * k) % n] * (k == 2 ? 1e-3f : 1.0f);
                        want[k] = simd.dot(row.data(), xs.data() + k * n, n);
                    }
                    auto same = [&](const char* what, int nx) {
                        ++checks;
                        if (std::memcmp(want.data(), got.data(), nx * sizeof(float)) == 0) return;
                        ++failures;
                        std::printf("FAIL %s %s n=%lld nx=%d\n", what, ti.name, static_cast<long long>(n), nx);
                    };
                    for (int nx = 1; simd.dot_rows && nx <= kDotRowsMax; ++nx) {
                        simd.dot_rows(row.data(), xs.data(), n, nx, n, got.data(), 1);
                        same("dot_rows", nx);
                    }
                    if (simd.decode_groups && simd.gemm_groups && n % simd.group_len == 0) {
                        std::vector<float> dec(n), sc(n / simd.group_len);
                        simd.decode_groups(row.data(), n, dec.data(), sc.data());
                        simd.gemm_groups(dec.data(), sc.data(), 1, xs.data(), n, kDotRowsMax, n, simd.group_len,
                                         got.data(), 1);
                        same("gemm_groups", kDotRowsMax);
                    }
                }
            }
        }
    }
    std::printf("%s: %d checks, %d failures, worst error / bound = %.3g\n", isa.c_str(), checks, failures, worst);
    return failures ? 1 : 0;
}
