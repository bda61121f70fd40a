// The sampling RNG: xoshiro256** seeded through splitmix64 (Blackman & Vigna, "Scrambled linear
// pseudorandom number generators", ACM TOMS 2021; reference code at https://prng.di.unimi.it/).
// Chosen because it is fixed and portable: a given seed yields the same 64-bit stream on every
// compiler, libc and CPU (std::mt19937 would too, but std::*_distribution would not, so we never
// use those). uniform() turns the top 53 bits into a double in [0, 1).
#pragma once

#include <cstdint>

namespace ds4::sample {

// splitmix64 (Steele, Lea & Flood 2014): expands one 64-bit seed into well-mixed state words, so
// that nearby seeds (0, 1, 2, ...) give unrelated xoshiro states and the state is never all zero.
inline uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

class Rng {
public:
    explicit Rng(uint64_t seed = 0) { seed_with(seed); }

    void seed_with(uint64_t seed) {
        uint64_t x = seed;
        for (auto& w : s_) w = splitmix64(x);
    }

    // xoshiro256**: 256-bit state, period 2^256 - 1, passes BigCrush.
    uint64_t next() {
        const uint64_t result = rotl(s_[1] * 5, 7) * 9;
        const uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }

    // Uniform in [0, 1) with 53 random bits: exact in a double, never 1.0.
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

private:
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    uint64_t s_[4];
};

}  // namespace ds4::sample
