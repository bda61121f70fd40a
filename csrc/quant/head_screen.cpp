// The screened greedy head (head_screen.h): availability, the activation quantiser and the
// scalar reference of the screen kernel and of the row norms.

#include "quant/head_screen.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "quant/block_lanes.h"
#include "quant/kernels.h"

namespace ds4::quant::screen {

namespace {

constexpr int kBlock = 34;  // bytes of a Q8_0 block: f16 scale + 32 quants

// Where the packed row (packed.h) keeps element k of block b, and block b's scale.
size_t packed_quant(const BlockLanes& bl, int64_t b, int k) {
    if (b < bl.full) {
        const int64_t c0 = b / BlockLanes::kChunk * BlockLanes::kChunk;
        return static_cast<size_t>(kBlock * c0 + 16 + 16 * (k / 2) + 2 * (b - c0) + k % 2);
    }
    const int p = k / 2, v = p / 2, l = static_cast<int>(b - bl.full) + 4 * (p % 2);
    return static_cast<size_t>(kBlock * bl.full + 8 + 16 * v + 2 * l + k % 2);
}
size_t packed_scale(const BlockLanes& bl, int64_t b) {
    const int64_t c0 = b < bl.full ? b / BlockLanes::kChunk * BlockLanes::kChunk : bl.full;
    return static_cast<size_t>(kBlock * c0 + 2 * (b - c0));
}
// Where the screen order (head_screen.h) keeps element k of block b.
int64_t screen_pos(const BlockLanes& bl, int64_t b, int k) {
    if (b < bl.full) {
        const int64_t c0 = b / BlockLanes::kChunk * BlockLanes::kChunk;
        return 32 * c0 + 32 * (k / 4) + 4 * (b - c0) + k % 4;
    }
    return 32 * bl.full + 32 * (k / 8) + 16 * (k % 8 / 4) + 4 * (b - bl.full) + k % 4;
}
float f16_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return f16_to_f32(h);
}

}  // namespace

bool available(Type type, bool packed, int64_t n) {
    if (type != Type::Q8_0 || !packed || n <= 0 || n % 32 != 0) return false;
    const BlockLanes bl(n);
    return (bl.tail == 0 || bl.tail4()) && scores() != nullptr;
}

ScoresFn scores() {
#if defined(DS4_X86)
    if (active_avx512_vbmi()) return &avx512vbmi::scores;
#endif
    return nullptr;
}

double quantize(const float* x, int64_t n, const Row& out) {
    const BlockLanes bl(n);
    double err = 0.0;
    for (int64_t b = 0; b < bl.nb; ++b) {
        const float* xb = x + 32 * b;
        float amax = 0.0f;
        for (int k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(xb[k]));
        const float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int k = 0; k < 32; ++k) {
            const auto q = static_cast<int8_t>(std::clamp(std::nearbyint(xb[k] * id), -127.0f, 127.0f));
            out.q[screen_pos(bl, b, k)] = q;
            sum += q;
            const double e = static_cast<double>(xb[k]) - static_cast<double>(q) * d;
            err += e * e;
        }
        out.d[b] = d;
        out.neg[b] = -128 * sum;
    }
    return std::sqrt(err);
}

void scores_ref(const uint8_t* rows, size_t row_bytes, int64_t nw, int64_t n, const int8_t* q, const float* d,
                const int32_t* neg, int nx, float* y, int64_t ldy) {
    const BlockLanes bl(n);
    for (int64_t o = 0; o < nw; ++o) {
        const uint8_t* w = rows + static_cast<size_t>(o) * row_bytes;
        for (int r = 0; r < nx; ++r) {
            double acc = 0.0;
            for (int64_t b = 0; b < bl.nb; ++b) {
                // the kernel's sum: unsigned weights q + 128, from -128 times the quants' sum
                int32_t s = neg[r * bl.nb + b];
                for (int k = 0; k < 32; ++k) {
                    const int wq = static_cast<int8_t>(w[packed_quant(bl, b, k)]) + 128;
                    s += wq * q[r * n + screen_pos(bl, b, k)];
                }
                acc += static_cast<double>(f16_at(w + packed_scale(bl, b))) * d[r * bl.nb + b] * s;
            }
            y[r * ldy + o] = static_cast<float>(acc);
        }
    }
}

float norm_above(double sum_of_squares) {
    // a non-finite scale gives an infinite norm: the row is always a candidate
    const double norm = std::sqrt(sum_of_squares);
    return std::isfinite(norm)
               ? std::nextafter(static_cast<float>(norm) * (1.0f + 0x1p-20f), std::numeric_limits<float>::infinity())
               : std::numeric_limits<float>::infinity();
}

void row_norms(const uint8_t* rows, size_t row_bytes, int64_t nw, int64_t n, float* norms) {
#if defined(DS4_X86)
    if (active_avx512_vbmi()) return avx512vbmi::row_norms(rows, row_bytes, nw, n, norms);
#endif
    row_norms_ref(rows, row_bytes, nw, n, norms);
}

void row_norms_ref(const uint8_t* rows, size_t row_bytes, int64_t nw, int64_t n, float* norms) {
    const BlockLanes bl(n);
    for (int64_t o = 0; o < nw; ++o) {
        const uint8_t* w = rows + static_cast<size_t>(o) * row_bytes;
        double ss = 0.0;
        for (int64_t b = 0; b < bl.nb; ++b) {
            int32_t qq = 0;
            for (int k = 0; k < 32; ++k) {
                const int v = static_cast<int8_t>(w[packed_quant(bl, b, k)]);
                qq += v * v;
            }
            const double s = f16_at(w + packed_scale(bl, b));
            ss += s * s * qq;
        }
        norms[o] = norm_above(ss);
    }
}

FilterFn filter() {
#if defined(DS4_X86)
    if (active_avx512_vbmi()) return &avx512vbmi::filter;
#endif
    return &filter_ref;
}

int64_t filter_ref(const float* y, const float* norm, int64_t m, float b, float margin, float floor, float* lo,
                   int32_t* idx, float* up) {
    float l = *lo;
    for (int64_t i = 0; i < m; ++i) l = std::max(l, std::fma(-norm[i], b, y[i]));  // NaN never wins
    *lo = l;
    const float t = std::max(l - margin, floor);
    int64_t c = 0;
    for (int64_t i = 0; i < m; ++i) {
        const float u = std::fma(norm[i], b, y[i]);
        if (!(u < t)) {  // NaN stays a candidate
            idx[c] = static_cast<int32_t>(i);
            up[c++] = u;
        }
    }
    return c;
}

double rounding(int64_t n) { return static_cast<double>(n / 32 + 16) * 0x1p-21; }

}  // namespace ds4::quant::screen
