// See draw.h.
#include "speculative/draw.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ds4::speculative {

void DraftDraw::sample(const sample::SamplingParams& params, int32_t n_vocab, int32_t n_target) {
    if (!(params.temperature > 0.0f)) {  // greedy verification: greedy drafts
        sampler_.reset();
        return;
    }
    sample::SamplingParams sp = params;
    // q may be any distribution the drafts are really drawn from; the penalties would need
    // the target's history, so q goes without them.
    sp.repeat_last_n = 0;
    if (sp.has_seed) sp.seed ^= 0xD1B54A32D192ED03ull;  // its own stream, reproducible with the target's seed
    sp.logit_bias.erase(std::remove_if(sp.logit_bias.begin(), sp.logit_bias.end(),
                                       [&](const auto& b) { return b.first >= n_vocab; }),
                        sp.logit_bias.end());
    sampler_ = std::make_unique<sample::Sampler>(sp, n_vocab);
    n_target_ = n_target;
}

int32_t DraftDraw::pick(float* row, int32_t n, int32_t vocab, Draft* draft) {
    // Ids past the tokenizer's vocabulary (padding rows of an embedding) are never drafted.
    std::fill(row + std::min(n, vocab), row + n, -std::numeric_limits<float>::infinity());
    if (!sampler_) {
        const float* best = std::max_element(row, row + n);
        if (confidence_ > 0.0f) {
            double z = 0.0;
            for (int32_t i = 0; i < n; ++i) z += std::exp(static_cast<double>(row[i] - *best));
            if (1.0 / z < confidence_) return -1;
        }
        return static_cast<int32_t>(best - row);
    }
    q_.resize(static_cast<size_t>(n));
    sampler_->probs(row, n, q_.data());
    if (*std::max_element(q_.begin(), q_.end()) < confidence_) return -1;
    const int32_t d = sampler_->sample_from(q_.data(), n);
    const size_t at = draft->q.size();
    draft->q.resize(at + static_cast<size_t>(n_target_), 0.0f);
    std::copy(q_.begin(), q_.begin() + std::min(n, n_target_), draft->q.begin() + static_cast<std::ptrdiff_t>(at));
    return d;
}

}  // namespace ds4::speculative
