// Acceptance rules for a drafted token at temperature > 0 (Leviathan et al. 2023, "Fast
// inference from transformers via speculative decoding"; vLLM's rejection sampler): accept a
// token d drawn from the proposer's q with probability min(1, p(d) / q(d)); on rejection draw
// the recovered token from norm(max(0, p - q)). Every emitted token is then distributed exactly
// as p, the target's sampling distribution. A deterministic proposer's q is one-hot at d: accept
// with probability p(d), recover from p without d.
#pragma once

#include <cstdint>

namespace ds4::speculative {

// Whether to accept d, for a uniform draw u in [0, 1); q == nullptr: one-hot at d.
bool accept_exact(const float* p, const float* q, int32_t d, double u);
// out[n] = max(0, p - q) (q == nullptr: p with out[d] = 0; out may be p), the weights to recover from; false
// if they are all zero (p == q: then accept_exact accepts every d with q(d) > 0).
bool residual(const float* p, const float* q, int32_t d, int32_t n, float* out);

}  // namespace ds4::speculative
