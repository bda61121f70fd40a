// See verify.h.
#include "speculative/verify.h"

namespace ds4::speculative {

bool accept_exact(const float* p, const float* q, int32_t d, double u) {
    const double pd = p[d], qd = q ? q[d] : 1.0;
    if (qd <= 0.0) return false;  // q never drafts d: a draft of it cannot be one of q's samples
    return u * qd < pd;           // u < p / q, without the division
}

bool residual(const float* p, const float* q, int32_t d, int32_t n, float* out) {
    bool any = false;
    for (int32_t i = 0; i < n; ++i) {
        const float r = q ? p[i] - q[i] : (i == d ? 0.0f : p[i]);
        out[i] = r > 0.0f ? r : 0.0f;
        any = any || out[i] > 0.0f;
    }
    return any;
}

}  // namespace ds4::speculative
