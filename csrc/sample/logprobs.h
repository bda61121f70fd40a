// Token log-probabilities (OpenAI's logprobs / top_logprobs) under a raw logits row: the
// log-softmax at temperature 1 of the model's own logits, before logit bias, penalties, the
// filters and temperature (vLLM's default "raw" convention, and what OpenAI reports), so a
// token's figure does not depend on how it was sampled.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace ds4::sample {

constexpr int kMaxTopLogprobs = 20;  // OpenAI's bound on top_logprobs

// One generated token: its id and log-probability, and the top_n most likely ids of the row it
// was drawn from, logprob descending (ties: lower id first).
struct TokenLogprob {
    int32_t id = -1;
    float logprob = 0.0f;
    std::vector<std::pair<int32_t, float>> top;
};

class LogprobScorer {
public:
    // top_n in [0, kMaxTopLogprobs]; throws std::invalid_argument otherwise.
    explicit LogprobScorer(int top_n);

    // row: (n,) float32 logits, not modified; id in [0, n). Throws std::invalid_argument for a
    // NaN or +inf logit, or a row where every logit is -inf.
    TokenLogprob score(const float* row, int32_t n, int32_t id);

private:
    int top_n_;
    std::vector<float> exp_;  // (n,) scratch: e^(l - max)
};

}  // namespace ds4::sample
