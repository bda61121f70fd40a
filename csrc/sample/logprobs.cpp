// Log-softmax of a logits row for one token and the row's best ids; see logprobs.h.
#include "sample/logprobs.h"

#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>

#include "backend/cpu/vmath.h"

namespace ds4::sample {

LogprobScorer::LogprobScorer(int top_n) : top_n_(top_n) {
    if (top_n < 0 || top_n > kMaxTopLogprobs) {
        throw std::invalid_argument("top_logprobs must be in [0, " + std::to_string(kMaxTopLogprobs) + "], got " +
                                    std::to_string(top_n));
    }
}

TokenLogprob LogprobScorer::score(const float* row, int32_t n, int32_t id) {
    if (id < 0 || id >= n) throw std::invalid_argument("logprobs: token " + std::to_string(id) + " is outside the row");
    const backend::cpu::VecMath& vm = backend::cpu::vec_math();
    float lmax = 0.0f;
    bool finite = true;
    vm.argmax(row, n, &lmax, &finite);
    if (!finite) throw std::invalid_argument("logprobs: the logits row holds NaN or +inf");
    if (lmax == -std::numeric_limits<float>::infinity()) throw std::invalid_argument("logprobs: every logit is -inf");
    // log Z = max + log(sum e^(l - max)): max-subtracted, so no term overflows and the sum is >= 1
    // (the max's own term); summed in double over four lanes, so 262k terms lose nothing a float
    // logprob can show.
    exp_.resize(static_cast<size_t>(n));
    vm.exp_scaled(row, n, lmax, 1.0f, exp_.data());
    double z[4] = {};
    int32_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; ++j) z[j] += exp_[static_cast<size_t>(i + j)];
    for (; i < n; ++i) z[0] += exp_[static_cast<size_t>(i)];
    const double shift = static_cast<double>(lmax) + std::log((z[0] + z[1]) + (z[2] + z[3]));
    const auto logprob = [&](int32_t t) { return static_cast<float>(static_cast<double>(row[t]) - shift); };

    TokenLogprob out;
    out.id = id;
    out.logprob = logprob(id);
    if (top_n_ == 0) return out;
    // The best top_n ids by (logit descending, id ascending), kept sorted as the row is scanned
    // in id order: an id enters after every kept one of equal logit.
    std::vector<std::pair<int32_t, float>>& top = out.top;
    top.reserve(static_cast<size_t>(top_n_) + 1);
    for (int32_t t = 0; t < n; ++t) {
        const float v = row[t];
        if (static_cast<int>(top.size()) == top_n_ && !(v > top.back().second)) continue;
        size_t at = top.size();
        while (at > 0 && top[at - 1].second < v) --at;
        top.insert(top.begin() + static_cast<std::ptrdiff_t>(at), {t, v});
        if (static_cast<int>(top.size()) > top_n_) top.pop_back();
    }
    for (auto& [t, v] : top) v = logprob(t);
    return out;
}

}  // namespace ds4::sample
