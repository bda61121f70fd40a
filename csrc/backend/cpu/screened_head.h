// The head by screening (quant/head_screen.h): int8 screen scores of every vocabulary row with
// an error bound, the int16 path's exact logits for the few rows the bound cannot rule out.
// argmax(): their argmax, bit for bit the unscreened head's, in about half its multiply-add time
// (the head is ~60 % of a Gemma verify pass). shortlist(): every row that can come within a
// margin of the largest logit, for a sampler (backend.h's Shortlist).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/aligned.h"
#include "backend/cpu/thread_pool.h"

namespace ds4::backend::cpu {

class ScreenedHead {
public:
    // Whether argmax() and shortlist() serve a head of weight w over n activation rows (packed
    // Q8_0 on a CPU with the screen kernel, at least two rows: one row is bound by the weight
    // stream either way, and measured slower screened).
    static bool serves(const Weight& w, int64_t n);
    // The same for any number of rows (matmul_ids: more of a shortlisted row).
    static bool shortlists(const Weight& w);

    // idx[r] = the argmax (lowest id on ties) of the int16 path's logits of x row r: a, da, xs
    // are the rows quantised as that path does (int16_gemm.h). x must be finite. A row whose
    // candidates overflow the buffers gets idx[r] = -1: the caller computes it unscreened.
    // Throws std::domain_error if a candidate's logit is NaN or +inf.
    void argmax(ThreadPool& pool, const Weight& w, const float* x, int64_t n, const int16_t* a, const float* da,
                const float* xs, int32_t* idx);

    // out(r) for each activation row r (inputs as argmax's): the ids whose exact logit can reach
    // the row's largest minus margin[r] and, with keep (null: none) and keep[r] > 0, its keep[r]-th
    // largest, ascending, with their exact logits, and thr above every other id's; out[r].ok
    // false where the candidates overflow the buffers.
    void shortlist(ThreadPool& pool, const Weight& w, const float* x, int64_t n, const int16_t* a, const float* da,
                   const float* xs, const float* margin, const int32_t* keep, const Backend::ShortlistOf& out);

    // Drops what was kept for weight rows at `packed` (their norms).
    void forget(const void* packed) { norms_.erase(packed); }
    // Computes what the first screened pass over w would (its row norms).
    void prepare(ThreadPool& pool, const Weight& w) { norms(pool, w); }

private:
    struct Candidate {
        int32_t id;
        float upper;  // screen score + bound
        float lower;  // screen score - bound
    };
    static constexpr int64_t kUnit = 240;        // weight rows per work unit
    static constexpr size_t kAhead = 4;         // candidate weight rows prefetched ahead
    static constexpr int64_t kCapacity = 2048;   // candidates kept per (thread, activation row)

    const std::vector<float>& norms(ThreadPool& pool, const Weight& w);
    // Scores every weight row against every activation row and keeps, per (thread, row), those
    // whose upper bound reaches the running floor lo minus margin[r] (null: 0), raised to the
    // keep[r]-th largest lower bound as the candidates grow (each time they doubled) and at
    // capacity, else at capacity to the median upper bound. Returns each row's final floor in
    // floor_ (-inf: its candidates overflowed).
    void screen(ThreadPool& pool, const Weight& w, const float* x, int64_t n, const int16_t* a, const float* da,
                const float* margin, const int32_t* keep);
    // A top-k's floor (k <= c): k of the c candidates reach their k-th largest lower bound, so
    // nothing below it is among the k largest; at least `floor`.
    static float kth_floor(Candidate* cs, int64_t c, int64_t k, float floor);
    // fn(candidate) for each candidate of row r whose upper bound reaches t (or is NaN).
    template <typename Fn>
    void each_candidate(int64_t r, int threads, float t, Fn&& fn) const;

    std::unordered_map<const void*, std::vector<float>> norms_;  // per packed weight: row norms
    AlignedVector<int8_t> q_;               // the screen's activations
    std::vector<float> d_, scores_, bound_, lo_, floor_;
    std::vector<std::vector<Candidate>> order_;  // [thread]: a shortlisted row's candidates, by bound
    std::vector<std::vector<float>> heap_;      // [thread]: its keep largest logits so far
    std::vector<std::vector<std::pair<int32_t, float>>> listed_;  // [thread]: its (id, logit), sorted by id
    std::vector<float> raised_;             // [thread][row]: a shortlist's floor raised at capacity
    std::vector<int64_t> next_raise_;       // [thread][row]: the candidate count that raises it next
    std::vector<int32_t> neg_;
    std::vector<int32_t> idx_;              // [thread][kUnit]: a unit's rows the filter keeps
    std::vector<float> up_;                 // [thread][kUnit]: their upper bounds
    std::vector<Candidate> cand_;           // [thread][row][kCapacity]
    std::vector<int64_t> count_;            // [thread][row]; -1: overflowed
};

}  // namespace ds4::backend::cpu
