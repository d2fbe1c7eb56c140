// The score micro-kernel of the host backend: for n decoded keys, the weighted relu head sum
//   out[t] = sum_h relu(dot(q[h], k[t])) * w[h]
// with fp32 products and sums in a fixed order (h ascending), so a result never depends on
// which thread or work item computed it.
#pragma once

#include <cstdint>

#include "../../config.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// relu that keeps NaN (relu(NaN) is NaN).
inline float relu(float s) { return s < 0.0f ? 0.0f : s; }

// q: [H, 128] fp32, w: [H], k: [n, 128] fp32, out: [n].
inline void score_keys_portable(const float* q, const float* w, std::int64_t heads,
                                const float* k, std::int64_t n, float* out) {
  for (std::int64_t t = 0; t < n; ++t) {
    const float* kt = k + t * head_dim;
    float acc = 0.0f;
    for (std::int64_t h = 0; h < heads; ++h) {
      const float* qh = q + h * head_dim;
      float s = 0.0f;
      for (int i = 0; i < head_dim; ++i) s += qh[i] * kt[i];
      acc += relu(s) * w[h];
    }
    out[t] = acc;
  }
}

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
