// The screened greedy head: the argmax of x · Wᵀ over a large vocabulary (Gemma's 262k x 640
// Q8_0 head is ~60 % of a verify pass) without computing every exact logit.
//
// A screen scores every weight row with int8 activations (vpdpbusd: twice the multiply-adds per
// instruction of the int16 path's vpdpwssd). For weight row w and activation row x, with a the
// int16-path quantisation (int16_gemm.h) the exact head uses and s the int8 one the screen uses,
//     |exact(w, x) - screen(w, x)| <= ||w|| (||x - a|| + ||x - s||) + rounding
// by Cauchy-Schwarz, where rounding <= (float steps) 2^-24 sum |w_e| |a_e| <= eps_n ||w|| (||x|| + ...).
// Every row whose screen score plus its bound reaches the best screen score minus that row's
// bound can be the argmax; only those (a handful on real activations) are computed exactly, by
// the int16 path's own kernels, and the argmax is taken over them (lowest id on ties). A row
// left out has an exact logit strictly below some candidate's, so the result is bit for bit the
// unscreened head's, on every input.
//
// Served: Q8_0 rows packed in the block-lane order (packed.h) whose last chunk has 0 or 4 blocks,
// on AVX-512 CPUs with VNNI and VBMI (vpermb regroups a block-lane chunk into 4-byte lanes of one
// block). The scalar functions are the reference the kernel is tested against.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/types.h"

namespace ds4::quant::screen {

// An activation row quantised for the screen: n int8 in the screen order (below), per block the
// scale (max |x| / 127) and -128 times the block's sum of quants (the kernels feed the weights
// to vpdpbusd as unsigned, q + 128, and start each block's sum there).
// Screen order, per chunk of 8 blocks: 8 vectors of 32 bytes, byte 4 j + s of vector u being
// element 4 u + s of block j; a last chunk of 4 blocks: 4 vectors, byte 4 j + s (j < 4) element
// 8 u + s of block j and byte 16 + 4 j + s element 8 u + 4 + s.
struct Row {
    int8_t* q;      // n
    float* d;       // n / 32
    int32_t* neg;   // n / 32
};

// Whether the screen serves rows of n elements of `type`, packed or not, on this CPU and ISA.
bool available(Type type, bool packed, int64_t n);
// x (n floats, finite) quantised for the screen; returns ||x - dequantised||.
double quantize(const float* x, int64_t n, const Row& out);
// y[r * ldy + o] for weight rows o < nw (packed Q8_0, row_bytes apart) and activation rows
// r < nx <= kRowsMax (rows of n, n / 32 and n / 32 entries). 8: two weight rows' sums of 8
// activation rows and their float accumulators take 24 of the 32 registers.
constexpr int kRowsMax = 8;
using ScoresFn = void (*)(const uint8_t* rows, size_t row_bytes, int64_t nw, int64_t n, const int8_t* q,
                          const float* d, const int32_t* neg, int nx, float* y, int64_t ldy);
// The kernel of this CPU (nullptr where available() is false for every format) and the reference.
ScoresFn scores();
void scores_ref(const uint8_t* rows, size_t row_bytes, int64_t nw, int64_t n, const int8_t* q, const float* d,
                const int32_t* neg, int nx, float* y, int64_t ldy);
// norms[o] >= the Euclidean norm of dequantised packed Q8_0 row o < nw (a few ulps above): the
// kernel where scores() has one, else the reference.
void row_norms(const uint8_t* rows, size_t row_bytes, int64_t nw, int64_t n, float* norms);
void row_norms_ref(const uint8_t* rows, size_t row_bytes, int64_t nw, int64_t n, float* norms);
// A row's norm from its sum over blocks of scale^2 x (sum of squared quants), rounded up.
float norm_above(double sum_of_squares);
// Over m screen scores y of weight rows with norms `norm`, against an activation row whose bound
// per unit of norm is b: *lo becomes the largest of *lo and fma(-norm[i], b, y[i]) (a NaN never
// counts), then the rows whose upper bound up = fma(norm[i], b, y[i]) is not below the larger of
// *lo - margin and floor (a NaN is) are listed: idx[k] = i ascending, up[k] = its bound; returns
// their count (idx, up: m entries). margin 0: the rows that can be the argmax; > 0: those that
// can come within it; floor: a cut known otherwise (-inf: none).
using FilterFn = int64_t (*)(const float* y, const float* norm, int64_t m, float b, float margin, float floor,
                             float* lo, int32_t* idx, float* up);
// The kernel where scores() has one, else the reference.
FilterFn filter();
int64_t filter_ref(const float* y, const float* norm, int64_t m, float b, float margin, float floor, float* lo,
                   int32_t* idx, float* up);

// The relative rounding allowance of the exact head and the screen over rows of n elements,
// in units of ||w|| ||x||.
double rounding(int64_t n);

namespace avx512vbmi {
void scores(const uint8_t* rows, size_t row_bytes, int64_t nw, int64_t n, const int8_t* q, const float* d,
            const int32_t* neg, int nx, float* y, int64_t ldy);
void row_norms(const uint8_t* rows, size_t row_bytes, int64_t nw, int64_t n, float* norms);
int64_t filter(const float* y, const float* norm, int64_t m, float b, float margin, float floor, float* lo, int32_t* idx,
               float* up);
}  // namespace avx512vbmi

}  // namespace ds4::quant::screen
