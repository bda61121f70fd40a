// The fused greedy head by screening (quant/head_screen.h): int8 screen scores of every
// vocabulary row with an error bound, the int16 path's exact logits for the few rows the bound
// cannot rule out, and their argmax: bit for bit the unscreened head's, in about half its
// multiply-add time (the head is ~60 % of a Gemma verify pass).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/thread_pool.h"

namespace ds4::backend::cpu {

class ScreenedHead {
public:
    // Whether argmax() serves a head of weight w over n activation rows (packed Q8_0 on a CPU
    // with the screen kernel, at least two rows: one row is bound by the weight stream either way).
    static bool serves(const Weight& w, int64_t n);

    // idx[r] = the argmax (lowest id on ties) of the int16 path's logits of x row r: a, da, xs
    // are the rows quantised as that path does (int16_gemm.h). x must be finite. A row whose
    // candidates overflow the buffers gets idx[r] = -1: the caller computes it unscreened.
    // Throws std::domain_error if a candidate's logit is NaN or +inf.
    void argmax(ThreadPool& pool, const Weight& w, const float* x, int64_t n, const int16_t* a, const float* da,
                const float* xs, int32_t* idx);

    // Drops what was kept for weight rows at `packed` (their norms).
    void forget(const void* packed) { norms_.erase(packed); }

private:
    struct Candidate {
        int32_t id;
        float upper;  // screen score + bound
    };
    static constexpr int64_t kUnit = 240;        // weight rows per work unit
    static constexpr int64_t kCapacity = 2048;   // candidates kept per (thread, activation row)

    const std::vector<float>& norms(ThreadPool& pool, const Weight& w);

    std::unordered_map<const void*, std::vector<float>> norms_;  // per packed weight: row norms
    std::vector<int8_t> q_;                 // the screen's activations
    std::vector<float> d_, scores_, bound_, lo_;
    std::vector<int32_t> neg_;
    std::vector<int32_t> idx_;              // [thread][kUnit]: a unit's rows the filter keeps
    std::vector<float> up_;                 // [thread][kUnit]: their upper bounds
    std::vector<Candidate> cand_;           // [thread][row][kCapacity]
    std::vector<int64_t> count_;            // [thread][row]; -1: overflowed
};

}  // namespace ds4::backend::cpu
