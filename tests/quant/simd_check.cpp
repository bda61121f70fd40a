// Stand-alone checker for one ISA's kernel table against the scalar reference, without Python
// and without run-time dispatch.  tests/quant/test_simd_kernels.py builds it
//   * for x86 with the AVX2 files native and the AVX-512 and AVX-VNNI files compiled against
//     SIMDe's portable emulation of the intrinsics (tests/quant/simde_shim/immintrin.h), so their
//     kernels are checked for the values they compute even on a CPU without them (the emulation is
//     exact for the operations used: integer ops, conversions, IEEE add / mul; its fma may round
//     twice, which the bound absorbs), and
//   * for arm64 with aarch64-linux-gnu-g++, run under qemu-aarch64, for the NEON table.
// Per format it checks dequant (bit-identical to the reference), dot (within the bound of
// x86/simd.h), and, where the table has them, dot_rows for every row count 1..kDotRowsMax and
// decode_groups + gemm_groups for several weight-row x activation-row shapes, both bit for bit
// against the table's own dot (the emulated fma rounds the same way in all three, so bit-identity
// holds under SIMDe too). The int16 path of each format (int16_gemm.h: the ISA's table, NEON's on
// arm64) against its scalar reference, bit for bit: GEMM, rows kernels, packed GEMM and packed
// rows kernels (check_i16).
// Usage: simd_check avx2|avxvnni|avx512|neon [seed] (an arm64 build checks the NEON table, e.g. under
// qemu-aarch64).  Prints one line per failure; exit status 1 if any.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "quant/blocks.h"
#include "quant/int16_gemm.h"
#include "quant/isa_tables.h"
#include "quant/kernels.h"
#include "quant/packed.h"
#include "quant/types.h"

using namespace ds4::quant;

namespace {

struct Case {
    Type type;
    std::vector<int> f16_fields;  // byte offsets of the f16 scales in a block
    bool e8m0 = false;            // MXFP4: byte 0 an E8M0 exponent
    int nibble_d = -1;            // IQ1_M: the f16 d in the top nibbles of the four u16 at this offset
};

const Case kCases[] = {
    {Type::F32, {}},       {Type::F16, {}},      {Type::BF16, {}},     {Type::Q4_0, {0}},
    {Type::Q4_1, {0, 2}},  {Type::Q5_0, {0}},    {Type::Q5_1, {0, 2}}, {Type::Q8_0, {0}},
    {Type::Q2_K, {80, 82}}, {Type::Q3_K, {108}}, {Type::Q4_K, {0, 2}}, {Type::Q5_K, {0, 2}},
    {Type::Q6_K, {208}},    {Type::IQ4_XS, {0}},  {Type::IQ4_NL, {0}},  {Type::MXFP4, {}, true},
    {Type::IQ2_XXS, {0}},   {Type::IQ3_XXS, {0}}, {Type::IQ3_S, {0}},   {Type::IQ2_XS, {0}},
    {Type::IQ2_S, {0}},     {Type::IQ1_S, {0}},   {Type::IQ1_M, {}, false, 48}, {Type::TQ1_0, {52}},
    {Type::TQ2_0, {64}},
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
        for (size_t b = 0; b < bytes / ti.type_size; ++b) {
            for (int off : c.f16_fields) {
                const uint16_t h = f32_to_f16(sane());
                std::memcpy(&row[b * ti.type_size + off], &h, 2);
            }
            // scales 2^-8 .. 2^2, and now and then the subnormal ones (e < 2)
            if (c.nibble_d >= 0) {
                const uint16_t h = f32_to_f16(sane());
                for (int k = 0; k < 4; ++k) {
                    uint8_t& hi = row[b * ti.type_size + c.nibble_d + 2 * k + 1];
                    hi = static_cast<uint8_t>((hi & 0x0F) | ((h >> (4 * k)) & 0x0F) << 4);
                }
            }
            if (c.e8m0) row[b * ti.type_size] = static_cast<uint8_t>(rng() % 16 == 0 ? rng() % 2 : 120 + rng() % 11);
        }
    }
    return row;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// nx activation rows of n floats at stride ldx (> n: the padding must not matter), row r scaled by
// a very different magnitude from its neighbours.
std::vector<float> activation_rows(int nx, int64_t n, int64_t ldx, std::mt19937_64& rng) {
    static const float kScale[] = {1.0f, 3e4f, 2e-5f, 1e2f};
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(nx * ldx), std::nanf(""));
    for (int r = 0; r < nx; ++r)
        for (int64_t i = 0; i < n; ++i) x[r * ldx + i] = nd(rng) * kScale[r % 4];
    return x;
}

// dot_rows for every row count against dot, bit for bit.
int check_dot_rows(const Kernels& k, const char* name, const uint8_t* row, int64_t n, std::mt19937_64& rng,
                   int& checks) {
    int failures = 0;
    const int64_t ldx = n + 7, ldy = 3;
    const auto x = activation_rows(kDotRowsMax, n, ldx, rng);
    for (int nx = 1; nx <= kDotRowsMax; ++nx) {
        std::vector<float> y(static_cast<size_t>(nx * ldy), -1.0f);
        k.dot_rows(row, x.data(), ldx, nx, n, y.data(), ldy);
        for (int r = 0; r < nx; ++r) {
            ++checks;
            const float d = k.dot(row, x.data() + r * ldx, n);
            if (!same_bits(y[r * ldy], d)) {
                ++failures;
                std::printf("FAIL dot_rows %s n=%lld nx=%d row %d: rows=%.9g dot=%.9g\n", name,
                            static_cast<long long>(n), nx, r, y[r * ldy], d);
            }
        }
    }
    return failures;
}

// decode_groups of nw weight rows, then gemm_groups against nx activation rows, against dot, bit
// for bit.
int check_gemm(const Case& c, const TypeInfo& ti, const Kernels& k, int64_t n, int nw, int nx, std::mt19937_64& rng,
               int& checks) {
    int failures = 0;
    const size_t rb = row_bytes(ti, n);
    const int64_t ng = n / k.group_len, ldx = n + 5, ldy = nw + 3;
    std::vector<uint8_t> w;
    for (int o = 0; o < nw; ++o) {
        const auto row = random_row(c, ti, n, rng);
        w.insert(w.end(), row.begin(), row.end());
    }
    const auto x = activation_rows(nx, n, ldx, rng);
    std::vector<float> u(static_cast<size_t>(nw * n)), sc(static_cast<size_t>(nw * ng));
    for (int o = 0; o < nw; ++o) k.decode_groups(w.data() + o * rb, n, u.data() + o * n, sc.data() + o * ng);
    std::vector<float> y(static_cast<size_t>(nx * ldy), -1.0f);
    k.gemm_groups(u.data(), sc.data(), nw, x.data(), ldx, nx, n, k.group_len, y.data(), ldy);
    for (int r = 0; r < nx; ++r)
        for (int o = 0; o < nw; ++o) {
            ++checks;
            const float d = k.dot(w.data() + o * rb, x.data() + r * ldx, n);
            if (!same_bits(y[r * ldy + o], d)) {
                ++failures;
                std::printf("FAIL gemm %s n=%lld %dx%d (w %d, x %d): gemm=%.9g dot=%.9g\n", ti.name,
                            static_cast<long long>(n), nw, nx, o, r, y[r * ldy + o], d);
            }
        }
    return failures;
}

// The int16 path of `type` on `isa` against the scalar reference, bit for bit: the GEMM over
// decoded rows; the fused rows kernels (one weight row, and two at a time where the ISA has them)
// for every activation row count up to rows_max and a rest, over GGUF rows and, for the formats
// with a packed layout, packed rows (and the GEMM over decoded packed rows); 7 weight rows
// (pairs and a last one alone).
int check_i16(const Case& c, const TypeInfo& ti, Isa isa, std::mt19937_64& rng, int& checks) {
    const I16Kernels& ik = i16_kernels(c.type, isa);
    const I16Kernels& ref = i16_kernels(c.type, Isa::scalar);
    if (!ik.gemm) return 0;
    int failures = 0;
    const int nw = 7;
    const int64_t step = ti.block_size;
    for (int64_t nblk : {1, 3, 4, 8, 12, 13, 18, 20, 23, 35}) {
        const int64_t n = nblk * step;
        if (n % (kSpan * ik.group_spans) != 0) continue;
        const size_t rb = row_bytes(ti, n);
        std::vector<uint8_t> w;
        for (int o = 0; o < nw; ++o) {
            const auto row = random_row(c, ti, n, rng);
            w.insert(w.end(), row.begin(), row.end());
        }
        const int nx = ik.rows_max + 1;
        const auto x = activation_rows(nx, n, n, rng);
        const int64_t groups = ik.groups(n), halves = n / kHalf;
        std::vector<int16_t> a(static_cast<size_t>(nx * act_stride(n)));
        std::vector<float> da(static_cast<size_t>(nx * groups)), xs(static_cast<size_t>(nx * halves));
        for (int r = 0; r < nx; ++r) ik.quantize_row(x.data() + r * n, n, a.data() + r * act_stride(n), da.data() + r * groups, xs.data() + r * halves);
        const auto gemm = [&](const I16Kernels& k, const uint8_t* rows, bool packed) {
            std::vector<int16_t> q(static_cast<size_t>(nw * n));
            std::vector<float> sw(static_cast<size_t>(nw * groups)), mw(static_cast<size_t>(nw * halves));
            k.decode_rows(rows, rb, packed, nw, n, q.data(), sw.data(), mw.data());
            std::vector<float> y(static_cast<size_t>(nx * nw));
            k.gemm_rows(q.data(), sw.data(), mw.data(), nw, a.data(), da.data(), xs.data(), nx, n, y.data(), nw);
            return y;
        };
        const auto compare = [&](const char* what, const std::vector<float>& got, const std::vector<float>& want, int rows) {
            for (int i = 0; i < rows * nw; ++i) {
                ++checks;
                if (!same_bits(got[i], want[i])) {
                    ++failures;
                    std::printf("FAIL i16 %s %s n=%lld row %d col %d: %.9g != %.9g\n", what, ti.name, static_cast<long long>(n),
                                i / nw, i % nw, got[i], want[i]);
                    return;
                }
            }
        };
        const std::vector<float> want = gemm(ref, w.data(), false);
        compare("gemm", gemm(ik, w.data(), false), want, nx);
        // the rows kernels as the backend runs them: chunks of rows_max, two weight rows at a time
        const auto rows = [&](const char* what, bool packed, const uint8_t* data) {
            const RowsPackedFn one = ik.rows_of(packed);
            for (int m = 1; m <= nx; ++m) {
                const RowsPacked2Fn pair = ik.pairs_of(packed, m);
                std::vector<float> y(static_cast<size_t>(m * nw), -1.0f);
                for (int r = 0; r < m; r += ik.rows_max) {
                    const int k = std::min(ik.rows_max, m - r);
                    for (int o = 0; o < nw;) {
                        const bool two = pair && o + 1 < nw;
                        const uint8_t* row = data + o * rb;
                        float* yo = y.data() + r * nw + o;
                        const int16_t* ar = a.data() + r * act_stride(n);
                        if (two) {
                            pair(row, rb, n, ar, da.data() + r * groups, xs.data() + r * halves, k, yo, nw);
                        } else {
                            one(row, n, ar, da.data() + r * groups, xs.data() + r * halves, k, yo, nw);
                        }
                        o += two ? 2 : 1;
                    }
                }
                compare(what, y, want, m);
            }
        };
        if (ik.rows) rows("rows", false, w.data());
        if (!ik.rows_packed) continue;
        std::vector<uint8_t> packed(w.size());
        pack_rows(c.type, w.data(), n, nw, packed.data());
        compare("packed gemm", gemm(ik, packed.data(), true), want, nx);
        rows("rows_packed", true, packed.data());
    }
    return failures;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: simd_check avx2|avxvnni|avx512|neon [seed]\n");
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
        // the int16 path whatever the float path has (NEON's float path is the reference for most formats)
#if defined(DS4_ARM64)
        failures += check_i16(c, ti, Isa::neon, rng, checks);
#else
        failures += check_i16(c, ti, isa == "avx512" ? Isa::avx512 : isa == "avxvnni" ? Isa::avxvnni : Isa::avx2, rng, checks);
#endif
        if (!simd.dot && !simd.dequant) continue;
        const int64_t bs = ti.block_size == 1 ? 1 : ti.block_size;
        for (int64_t nblk : {0, 1, 2, 3, 7, 16, 19, 64}) {
            for (int64_t extra : {0, 5, 13}) {  // float formats: a partial last group, or only that
                const int64_t n = bs == 1 ? 32 * nblk + extra : nblk * bs;
                if (n == 0 || (bs != 1 && extra)) continue;
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
                    const double h = double(n) / 8 + 16;  // x86/simd.h
                    const double bound = h * u / (1 - h * u) * abs_sum + u * std::fabs(r) + 1e-30;
                    ++checks;
                    worst = std::fmax(worst, std::fabs(double(s) - double(r)) / bound);
                    if (!(std::fabs(double(s) - double(r)) <= bound)) {
                        ++failures;
                        std::printf("FAIL dot %s n=%lld ref=%.9g simd=%.9g bound=%.3g\n", ti.name,
                                    static_cast<long long>(n), r, s, bound);
                    }
                    if (simd.dot_rows) failures += check_dot_rows(simd, ti.name, row.data(), n, rng, checks);
                }
            }
        }
        if (simd.dot && simd.decode_groups && simd.gemm_groups && simd.group_len > 0) {
            const std::pair<int, int> shapes[] = {{1, 1}, {5, 3}, {13, 17}, {4, 4}, {2, 9}};  // (weight, activation) rows
            for (int64_t nblk : {1, 3})
                for (const auto& [nw, nx] : shapes) failures += check_gemm(c, ti, simd, nblk * bs, nw, nx, rng, checks);
        }
    }
    std::printf("%s: %d checks, %d failures, worst error / bound = %.3g\n", isa.c_str(), checks, failures, worst);
    return failures ? 1 : 0;
}
