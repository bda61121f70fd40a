// Run-time dispatch of the quant kernels, the Q8_0 quantiser and the half / bfloat16
// conversions.
//
// Dispatch: at first use we detect the ISAs this CPU can run (cpuid + xgetbv on x86, so an OS
// that does not save AVX / AVX-512 state disables them), pick the best one, or the one named
// by DS4_SIMD, and resolve for every ISA and type the kernel each member falls back to
// (avx512 -> avx2 -> scalar, neon -> scalar). After that, kernels() is two array lookups.
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "quant/blocks.h"
#include "quant/isa_tables.h"
#include "quant/kernels.h"

#if defined(DS4_X86)
#include <cpuid.h>
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ds4 reads GGUF blocks as little-endian and needs a little-endian host"
#endif

namespace ds4::quant {

namespace {

constexpr size_t kNumIsa = 5;
constexpr size_t kMaxTypeId = 64;

#if defined(DS4_X86)
struct X86Features {
    bool avx2 = false;    // AVX2 + FMA + F16C + BMI2: what x86/float_avx2.cpp is compiled with
    bool avx512 = false;  // F + BW + VL + DQ + VNNI + BF16: what x86/float_avx512.cpp is compiled with
    bool avx512vbmi = false;  // avx512 + VBMI: what the *_avx512vbmi.cpp kernels add
    bool avxvnni = false;     // avx2 + AVX-VNNI: what the *_avxvnni.cpp kernels add
    bool intel = false;       // CPUID's vendor is GenuineIntel
};

X86Features detect_x86() {
    X86Features f;
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return f;
    f.intel = b == 0x756E6547u && d == 0x49656E69u && c == 0x6C65746Eu;  // "Genu" "ineI" "ntel"
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    const bool osxsave = c & (1u << 27), avx = c & (1u << 28);
    const bool fma = c & (1u << 12), f16c = c & (1u << 29);
    if (!osxsave || !avx) return f;
    uint32_t xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    const bool os_avx = (xcr0_lo & 0x6u) == 0x6u;          // XMM and YMM state
    const bool os_avx512 = (xcr0_lo & 0xE6u) == 0xE6u;     // + opmask, ZMM_Hi256, Hi16_ZMM
    if (__get_cpuid_max(0, nullptr) < 7) return f;
    __cpuid_count(7, 0, a, b, c, d);
    const bool avx2 = b & (1u << 5), bmi2 = b & (1u << 8);
    const bool avx512f = b & (1u << 16), avx512dq = b & (1u << 17);
    const bool avx512bw = b & (1u << 30), avx512vl = b & (1u << 31);
    const bool avx512vnni = c & (1u << 11), avx512vbmi = c & (1u << 1);
    const unsigned max_sub = a;
    bool avx512bf16 = false, avxvnni = false;
    if (max_sub >= 1) {
        __cpuid_count(7, 1, a, b, c, d);
        avxvnni = a & (1u << 4);
        avx512bf16 = a & (1u << 5);
    }
    f.avx2 = os_avx && avx2 && fma && f16c && bmi2;
    f.avx512 = f.avx2 && os_avx512 && avx512f && avx512dq && avx512bw && avx512vl && avx512vnni &&
               avx512bf16;
    f.avx512vbmi = f.avx512 && avx512vbmi;
    f.avxvnni = f.avx2 && avxvnni;
    return f;
}
#endif

using TableFn = const Kernels& (*)(Type);

TableFn table_of(Isa isa) {
    switch (isa) {
        case Isa::scalar: return &ref_kernels;
#if defined(DS4_X86)
        case Isa::avx2: return &avx2_kernels;
        case Isa::avxvnni: return &avx2_kernels;  // the float path has no kernels of its own there
        case Isa::avx512: return &avx512_kernels;
#endif
#if defined(DS4_ARM64)
        case Isa::neon: return &neon_kernels;
#endif
        default: return nullptr;
    }
}

struct Dispatch {
    std::vector<Isa> available;                                 // lowest first
    bool vbmi = false;                                          // the CPU has AVX-512 VBMI (and avx512)
    bool intel = false;                                         // an Intel CPU
    std::array<std::array<Kernels, kMaxTypeId>, kNumIsa> exact{};     // one ISA, no fallback
    std::array<std::array<Kernels, kMaxTypeId>, kNumIsa> resolved{};  // with fallback
    std::atomic<int> active{0};

    bool has(Isa isa) const { return std::find(available.begin(), available.end(), isa) != available.end(); }
};

std::string available_list(const std::vector<Isa>& isas) {
    std::string s;
    for (Isa i : isas) s += (s.empty() ? "" : ", ") + std::string(isa_name(i));
    return s;
}

Dispatch* make_dispatch() {
    auto* d = new Dispatch;
    d->available.push_back(Isa::scalar);
#if defined(DS4_X86)
    const X86Features f = detect_x86();
    if (f.avx2) d->available.push_back(Isa::avx2);
    if (f.avxvnni) d->available.push_back(Isa::avxvnni);
    if (f.avx512) d->available.push_back(Isa::avx512);
    d->vbmi = f.avx512vbmi;
    d->intel = f.intel;
#endif
#if defined(DS4_ARM64)
    d->available.push_back(Isa::neon);  // Advanced SIMD is mandatory on AArch64
#endif
    for (Isa isa : d->available) {
        const TableFn fn = table_of(isa);
        for (size_t t = 0; t < kMaxTypeId; ++t) d->exact[static_cast<size_t>(isa)][t] = fn(static_cast<Type>(t));
    }
    // Fallback chains, best first; every ISA above scalar implies the ones below it in its chain
    // (every AVX-512 CPU we accept also passed the AVX2 check).
    for (Isa isa : d->available) {
        std::vector<Isa> chain{isa};
        if (isa == Isa::avx512 || isa == Isa::avxvnni) chain.push_back(Isa::avx2);
        if (isa != Isa::scalar) chain.push_back(Isa::scalar);
        for (size_t t = 0; t < kMaxTypeId; ++t) {
            Kernels k;
            for (Isa c : chain) {
                const Kernels& e = d->exact[static_cast<size_t>(c)][t];
                if (!k.dequant) k.dequant = e.dequant;
                if (!k.dot && e.dot) {  // the accelerations come with the dot they must match
                    k.dot = e.dot;
                    k.dot_rows = e.dot_rows;
                    if (e.decode_groups && e.gemm_groups && e.group_len > 0) {
                        k.decode_groups = e.decode_groups;
                        k.gemm_groups = e.gemm_groups;
                        k.group_len = e.group_len;
                    }
                }
            }
            d->resolved[static_cast<size_t>(isa)][t] = k;
        }
    }
    Isa active = d->available.back();
    if (const char* env = std::getenv("DS4_SIMD"); env && *env) {
        Isa forced;
        try {
            forced = parse_isa(env);
        } catch (const std::invalid_argument&) {
            delete d;
            throw std::invalid_argument(std::string("DS4_SIMD='") + env +
                                        "' is not an ISA name (scalar, avx2, avxvnni, avx512, neon)");
        }
        if (!d->has(forced)) {
            const std::string list = available_list(d->available);
            delete d;
            throw std::invalid_argument(std::string("DS4_SIMD='") + env +
                                        "' is not available on this CPU / build (available: " + list + ")");
        }
        active = forced;
    }
    d->active.store(static_cast<int>(active));
    return d;
}

// Built once, on first use, and never freed (kernel pointers must outlive every caller). If
// DS4_SIMD is invalid the constructor throws and the next call tries (and throws) again.
Dispatch& dispatch() {
    static Dispatch* d = make_dispatch();
    return *d;
}

const Kernels kNone{};

void require_available(const Dispatch& d, Isa isa) {
    if (!d.has(isa)) {
        throw std::invalid_argument(std::string("SIMD ISA '") + isa_name(isa) +
                                    "' is not available on this CPU / build (available: " +
                                    available_list(d.available) + ")");
    }
}

}  // namespace

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::scalar: return "scalar";
        case Isa::avx2: return "avx2";
        case Isa::avx512: return "avx512";
        case Isa::neon: return "neon";
        case Isa::avxvnni: return "avxvnni";
    }
    return "unknown";
}

Isa parse_isa(const std::string& name) {
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avxvnni, Isa::avx512, Isa::neon}) {
        if (name == isa_name(isa)) return isa;
    }
    throw std::invalid_argument("unknown SIMD ISA '" + name + "' (expected scalar, avx2, avxvnni, avx512 or neon)");
}

std::vector<Isa> available_isas() { return dispatch().available; }

Isa active_isa() { return static_cast<Isa>(dispatch().active.load()); }

bool active_avx512_vbmi() {
    Dispatch& d = dispatch();
    return d.vbmi && d.active.load() == static_cast<int>(Isa::avx512);
}

bool intel_cpu() { return dispatch().intel; }

void set_isa(Isa isa) {
    Dispatch& d = dispatch();
    require_available(d, isa);
    d.active.store(static_cast<int>(isa));
}

const Kernels& kernels(Type type) {
    Dispatch& d = dispatch();
    const auto t = static_cast<size_t>(type);
    if (t >= kMaxTypeId) return kNone;
    return d.resolved[static_cast<size_t>(d.active.load())][t];
}

const Kernels& kernels(Type type, Isa isa) {
    Dispatch& d = dispatch();
    require_available(d, isa);
    const auto t = static_cast<size_t>(type);
    if (t >= kMaxTypeId) return kNone;
    return d.resolved[static_cast<size_t>(isa)][t];
}

const Kernels& kernels_for(Type type, Isa isa) {
    Dispatch& d = dispatch();
    const auto t = static_cast<size_t>(type);
    if (t >= kMaxTypeId || !d.has(isa)) return kNone;
    return d.exact[static_cast<size_t>(isa)][t];
}

bool is_supported(Type type) {
    const Kernels& k = ref_kernels(type);
    return k.dequant != nullptr && k.dot != nullptr;
}

// ---- Q8_0 quantiser ---------------------------------------------------------------------------

// As ggml's quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d) computed as x * (1 / d)
// (round half away from zero), d stored as f16. The multiply by the reciprocal, not a
// division, is what makes the bytes equal ggml's and gguf.quants'.
void quantize_row_q8_0(const float* x, void* y, int64_t n) {
    auto* out = static_cast<uint8_t*>(y);
    for (int64_t i = 0; i < n / QK8_0; ++i) {
        const float* xb = x + i * QK8_0;
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; ++j) amax = std::max(amax, std::fabs(xb[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        block_q8_0 b;
        b.d = f32_to_f16(d);
        for (int j = 0; j < QK8_0; ++j) b.qs[j] = static_cast<int8_t>(std::roundf(xb[j] * id));
        std::memcpy(out + i * sizeof(block_q8_0), &b, sizeof b);
    }
}

// ---- half / bfloat16 --------------------------------------------------------------------------

static float bits_to_f32(uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

float f16_to_f32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;
    if (exp == 0x1F) return bits_to_f32(sign | 0x7F800000u | (mant << 13));  // inf / NaN
    if (exp != 0) return bits_to_f32(sign | ((exp + 112) << 23) | (mant << 13));
    if (mant == 0) return bits_to_f32(sign);
    // Subnormal half: normalise into a float exponent.
    uint32_t e = 113;
    while (!(mant & 0x400u)) {
        mant <<= 1;
        --e;
    }
    return bits_to_f32(sign | (e << 23) | ((mant & 0x3FFu) << 13));
}

uint16_t f32_to_f16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, sizeof x);
    const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    x &= 0x7FFFFFFFu;
    if (x >= 0x7F800000u) {  // inf, or NaN kept quiet with its top payload bits
        return static_cast<uint16_t>(sign | 0x7C00u | (x > 0x7F800000u ? 0x200u | ((x >> 13) & 0x3FFu) : 0u));
    }
    if (x >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 2^16: overflow
    if (x < 0x38800000u) {  // below 2^-14: half subnormal (or zero), in units of 2^-24
        if (x <= 0x33000000u) return sign;  // <= 2^-25 rounds (to even) to zero
        const uint32_t e = x >> 23;
        const uint32_t m = (x & 0x7FFFFFu) | 0x800000u;
        const uint32_t shift = 126 - e;  // value = m * 2^(e - 150) = (m >> shift) * 2^-24
        uint32_t h = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u))) ++h;
        return static_cast<uint16_t>(sign | h);
    }
    // Normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even; a carry
    // out of the mantissa correctly bumps the exponent (up to inf).
    uint32_t h = ((x >> 23) - 112) << 10 | ((x >> 13) & 0x3FFu);
    const uint32_t rem = x & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
}

float bf16_to_f32(uint16_t h) { return bits_to_f32(static_cast<uint32_t>(h) << 16); }

}  // namespace ds4::quant
