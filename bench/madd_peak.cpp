// The peak rate of the int16 multiply-add instruction of the AVX-512 kernels (vpdpwssd, zmm) and
// of AVX-VNNI's (vpdpwssd, ymm) on one core: 12 independent accumulators (more than latency x
// throughput on current cores) over 4 source vectors, as the kernels' tiles read a few weight and
// activation vectors into many sums (each accumulator with its own source vector read 16 % lower
// on an Intel Xeon: 178 against 212 GMAC/s), operands in registers. bench/quant_rows.py compiles it once per
// instruction the CPU has, with its flags and -DOP=2 (ymm) or 3 (zmm), and reads the one number it
// prints: GMAC/s (a MAC = one int16 x int16 product added).
#include <immintrin.h>

#include <chrono>
#include <cstdio>

#if OP == 3
using V = __m512i;
constexpr int kMacs = 32;
inline V splat(int k) { return _mm512_set1_epi16(static_cast<short>(k + 3)); }
inline V step(V a, V b, V c) { return _mm512_dpwssd_epi32(a, b, c); }
#else
using V = __m256i;
constexpr int kMacs = 16;
inline V splat(int k) { return _mm256_set1_epi16(static_cast<short>(k + 3)); }
inline V step(V a, V b, V c) { return _mm256_dpwssd_avx_epi32(a, b, c); }
#endif

int main() {
    constexpr long kIters = 20000000;
    constexpr int kAcc = 12;
    constexpr int kSrc = 4;
    V acc[kAcc], b[kSrc];
    for (int k = 0; k < kAcc; ++k) acc[k] = splat(k);
    for (int k = 0; k < kSrc; ++k) b[k] = splat(k + 1);
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < kIters; ++i) {
#pragma GCC unroll 12
        for (int k = 0; k < kAcc; ++k) acc[k] = step(acc[k], b[k % kSrc], b[(k / kSrc + 1) % kSrc]);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The accumulators stay live in registers (an "m" constraint on the array would keep them in
    // memory, and the loop would time store forwarding instead of the instruction).
    for (int k = 0; k < kAcc; ++k) asm volatile("" : : "v"(acc[k]));
    std::printf("%.1f\n", double(kIters) * kAcc * kMacs / s / 1e9);
}
