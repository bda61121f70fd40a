// Token sampling on one logits row: parameters, their validation, and the Sampler that owns the
// RNG, the penalty history and the scratch buffers. No Python here; see bindings/register_sample.
//
// Order of operations (llama.cpp's default chain, with bias first and temperature last):
//   1. logit bias        l[id] += bias           (each entry added; -inf bans the token)
//   2. penalties         over the last repeat_last_n accepted tokens, once per distinct token t
//                        with count c: repetition (CTRL, Keskar et al. 2019, as llama.cpp applies
//                        it): l > 0 ? l / repeat_penalty : l * repeat_penalty; then
//                        l -= c * frequency_penalty + presence_penalty (OpenAI's definition)
//   3. greedy            temperature == 0: argmax, ties -> lowest id; steps 4-8 are skipped
//   4. top-k             keep the k best (k = 0 or k >= candidates: off)
//   5. top-p             nucleus (Holtzman et al. 2020, "The curious case of neural text
//                        degeneration"): softmax (T = 1) over the survivors, keep the smallest
//                        best-first prefix whose mass >= top_p (the crossing token is kept)
//   6. min-p             (Nguyen et al. 2024, "Turning up the heat: min-p sampling"): keep tokens
//                        with p >= min_p * p_max, i.e. exp(l - l_max) >= min_p, p at T = 1
//   7. temperature       p_i = exp((l_i - l_max) / T) / Z over the survivors
//   8. draw              u ~ U[0,1) (53 bits); walk survivors in ascending id order and return the
//                        first id whose running mass (double) exceeds u * total
// The filters 4-6 see untempered logits, as in llama.cpp, so temperature only reshapes what they
// kept. -inf logits (after bias and penalties) are never candidates. NaN or +inf -> error.
//
// Ties: "best-first" is the strict total order (logit descending, id ascending). So top-k keeps
// the lowest ids among equal logits at the boundary, and top-p stops at the first token (in that
// order) where the mass reaches top_p, dropping later tokens of equal logit. min-p is a threshold,
// so equal logits are kept or dropped together.
//
// Precision: exponentials are float (std::exp(float) is 2-4x faster than double on a 262k row;
// with no filter, the backend's vectorised exp, within ~2 ulp of it), their sums and the running
// masses are double, the min-p test is double. probs() are floats;
// a kept token whose probability underflows to 0 reads as 0 there and is never drawn.
// Reproducibility: the RNG stream (rng.h) is identical everywhere; the chosen token is identical
// wherever std::exp rounds the same way.
// sample(l) is exactly sample_from(probs(l)) for the same RNG state: same floats, same walk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "sample/rng.h"

namespace ds4::sample {

struct SamplingParams {
    float temperature = 0.0f;  // 0 = greedy; otherwise finite and > 0
    int32_t top_k = 0;         // 0 = off
    float top_p = 1.0f;        // (0, 1]; 1 = off
    float min_p = 0.0f;        // [0, 1); 0 = off
    float repeat_penalty = 1.0f;  // > 0; 1 = off
    int32_t repeat_last_n = 64;   // >= 0; window of accepted tokens the penalties look at; 0 = off
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, added to its logit)
    uint64_t seed = 0;
    bool has_seed = false;  // false: seed from std::random_device

    // Greedy with nothing that modifies the logits first: the token is the argmax of the raw
    // row, so a caller may take it from a fused argmax instead of sampling a materialised row.
    bool plain_greedy() const {
        const bool penalties = repeat_last_n > 0 &&
                               (repeat_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f);
        return temperature == 0.0f && logit_bias.empty() && !penalties;
    }

    // Throws std::invalid_argument naming the bad field and value. n_vocab < 0 skips the
    // logit_bias id range check (for params not yet tied to a model).
    void validate(int32_t n_vocab = -1) const;
};

// A logits row as a sampling head shortlists it (backend.h's Shortlist): ids ascending with
// their logits; every other id's logit is below thr, and `more` gives any id's exactly.
struct ScreenedRow {
    const int32_t* ids = nullptr;
    const float* logits = nullptr;
    int64_t n = 0;
    float thr = 0.0f;
    std::function<void(const int32_t* ids, int64_t n, float* out)> more;
};

class Sampler {
public:
    Sampler(const SamplingParams& params, int32_t n_vocab);  // validates params

    // logits: (n_vocab,) float32, not modified. Does not record the token: call accept().
    int32_t sample(const float* logits, int32_t n_vocab);

    // The distribution sample() draws from: (n_vocab,) zero outside the kept set, renormalised
    // after temperature. One-hot at the argmax when temperature == 0. Consumes no randomness.
    std::vector<float> probs(const float* logits, int32_t n_vocab);
    void probs(const float* logits, int32_t n_vocab, float* out);  // out: (n_vocab,)

    // Draws from an arbitrary non-negative weight vector p (n_vocab,), normalised by its sum
    // (e.g. max(0, p - q) in Leviathan et al. 2023 rejection sampling). Same walk as sample().
    int32_t sample_from(const std::vector<float>& p);
    int32_t sample_from(const float* p, int32_t n);

    // Screened sampling, for temperature > 0 except top-p without top-k (screens()): the token
    // drawn from a row a head shortlisted (ScreenedRow), computing only the logits that matter.
    // With top-k or min-p: exactly sample()'s token from the full row, where the shortlist holds
    // every id the filters can keep (k ids at or above thr; thr below min-p's cut), else from the
    // row fetched whole. Without filters: a draw from sample()'s distribution (steps 1, 2, 7, 8)
    // that needs the exact logits of only the ids within margin() of the adjusted row's largest,
    // l_max. With m = margin(), the ids at or above t = l_max - m are the shortlist S; the M
    // others (all below t) are drawn by rejection: each round draws u ~ U[0, W + M e^((t - l_max) / T)) (W: S's weights); below
    // W it walks S in ascending id order as sample() does; above, it takes a uniform id outside S
    // and keeps it with probability e^((l - t) / T) < 1, else the next round. m = T (ln n_vocab
    // - 2) bounds the other ids' expected rounds by e^2; on a flat row, where more than 256 ids
    // reach l_max - m, t rises to the 256th largest logit (the rounds then at most n_vocab / 256).
    // After kRounds rounds it draws as sample() from the whole row.
    // The draw depends only on the exact logits, whichever way they come (the same tokens from
    // a full row and from any shortlist of it).
    bool screens() const;
    float margin() const;
    // The margin to shortlist a head row with: margin() (at least 25 with top-k; min-p's cut
    // with min-p alone), more where the bias or the penalties may lower the largest logit (a row
    // they lower further is fetched whole).
    float head_margin() const;
    // How many of its largest values the row needs (Backend::matmul_shortlist's keep, which lets
    // the head's floor rise to that many ids' lower bounds): top-k's k; without filters
    // kScreened, plus the ids the bias and the penalties may move, since t never falls below the
    // kScreened-th largest adjusted logit, and a head that shortlisted down to a floor above t
    // would have the row fetched whole; 0 (every id within the margin) with min-p alone.
    int32_t head_keep() const;
    int32_t sample_screened(const float* logits, int32_t n);
    int32_t sample_screened(const ScreenedRow& row);

    void accept(int32_t token);  // records the token for the penalties
    void reset();                // forgets history; reseeds (params.seed, or a fresh random one)
    void set_seed(uint64_t seed);

    double uniform() { return rng_.uniform(); }  // for callers (e.g. rejection tests) sharing the stream
    uint64_t next_u64() { return rng_.next(); }
    uint64_t seed() const { return seed_; }  // the seed in use, also when drawn at random
    const SamplingParams& params() const { return params_; }
    int32_t n_vocab() const { return n_vocab_; }
    std::vector<int32_t> history() const;  // the penalty window, oldest first

private:
    struct Cand {
        float logit;
        int32_t id;
    };

    // Steps 1-2: returns the row to read (the caller's, or work_ when something was modified).
    const float* adjusted_row(const float* logits, int32_t n);
    int32_t argmax(const float* row) const;
    // The largest of a row; throws for NaN, +inf, or every logit -inf.
    float checked_max(const float* row, int32_t n) const;
    // Steps 4-7: leaves the survivors in cand_ (ascending id) and their float probabilities in
    // prob_ (same order). Returns the greedy token instead when temperature == 0 (-1 otherwise).
    int32_t filter(const float* logits, int32_t n);
    void top_k(int32_t k);
    void top_p(double p);
    void min_p(double p);
    void check_n(int32_t n) const;
    // Whether steps 1-2 change anything now (2 alone: penalises); whether a filter (4-6) is on.
    bool adjusts() const;
    bool penalises() const;
    // fn(id, count) once per distinct token of the penalty window.
    template <typename Fn>
    void each_penalised(Fn&& fn);
    bool filtered() const;
    // Step 2 on one logit of a token the window holds `count` times.
    float penalised(float l, int32_t count) const;
    // The rounds of screened sampling over S = short_ (ascending ids, adjusted logits) with its
    // largest lmax and t = lmax - margin(); value(id) the adjusted logit of an id outside S.
    // Returns -1 after the last round.
    int32_t draw_screened(float lmax, float t, const std::function<float(int32_t)>& value);
    // t for S: lmax - margin(), or the kScreened-th largest logit where that is higher (short_:
    // the ids at or above lmax - margin(), in any order after).
    static constexpr size_t kScreened = 256;
    static constexpr int kRounds = 4096;
    float screen_floor(float lmax);

    SamplingParams params_;
    int32_t n_vocab_;
    uint64_t seed_ = 0;
    Rng rng_;
    bool sorted_by_id_ = true;  // cand_ order after the filters; false = rank or unspecified
    bool dense_ = false;        // no filter applied: prob_ holds every id's probability, cand_ unused

    // Penalty window: a ring of the last repeat_last_n accepted ids plus per-id counts.
    std::vector<int32_t> ring_;
    size_t ring_head_ = 0, ring_size_ = 0;
    std::vector<int32_t> counts_;  // (n_vocab,) occurrences inside the window

    // Scratch, sized once and reused so steady-state calls do not allocate.
    std::vector<float> work_;    // (n_vocab,) the adjusted row when bias/penalties apply
    std::vector<Cand> cand_;     // candidates, capacity n_vocab
    std::vector<float> prob_;    // probabilities of cand_, capacity n_vocab
    std::vector<double> weight_; // unnormalised exp((l - l_max) / T) of cand_
    std::vector<Cand> short_;    // screened sampling: the shortlist S, ascending ids
    std::vector<Cand> listed_;   // a shortlisted row with the adjusted ids merged in
    std::vector<int32_t> fetch_; // ids to fetch
    std::vector<float> fetched_;
    std::vector<Cand> raw_;      // listed_ before steps 1-2 (a filtered draw)
    std::vector<float> sparse_;  // (n_vocab,) the listed logits, -inf elsewhere
};

}  // namespace ds4::sample
