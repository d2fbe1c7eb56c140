// The program every consumer project builds: quantise a few fp32 rows, call the dense kernel
// through the default backend, check one logit by hand, print the backend it was built for.
#include <cmath>
#include <cstdio>
#include <type_traits>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace ml = mqalogits;

#if defined(MQALOGITS_BACKEND_NEURON)
static constexpr const char* backend_name = "neuron";
static_assert(!std::is_same_v<ml::default_backend, ml::backend::host>);
#else
static constexpr const char* backend_name = "host";
static_assert(std::is_same_v<ml::default_backend, ml::backend::host>);
#endif

int main() {
  constexpr int H = 2, N = 3;
  std::vector<float> q(H * 128), k(N * 128);
  for (int i = 0; i < H * 128; ++i) q[i] = (i % 7) * 0.25f - 0.5f;
  for (int i = 0; i < N * 128; ++i) k[i] = (i % 5) * 0.5f - 1.0f;
  const auto qq = ml::quantize_rows<ml::mxfp8>(std::span<const float>(q));
  const auto kq = ml::quantize_rows<ml::mxfp8>(std::span<const float>(k));
  const float w[H] = {1.0f, -0.5f};
  const std::int32_t ks[1] = {0}, ke[1] = {N};
  ml::logits_buffer<float> out(1, N);
  ml::fp8_fp4_mqa_logits(qq.view(), kq.view(), ml::matrix_view<const float>(w, 1, H), ks, ke, N,
                         out.view());
  // These inputs are exact in e4m3 with a scale of 1/4 or 1/2, so the logits are exact.
  for (int t = 0; t < N; ++t) {
    double expected = 0;
    for (int h = 0; h < H; ++h) {
      double dot = 0;
      for (int i = 0; i < 128; ++i) dot += double(q[h * 128 + i]) * k[t * 128 + i];
      expected += (dot > 0 ? dot : 0) * w[h];
    }
    if (std::fabs(out(0, t) - expected) > 1e-6 * (1 + std::fabs(expected))) {
      std::printf("mqalogits consumer FAILED: logit[%d] = %g, expected %g\n", t, out(0, t),
                  expected);
      return 1;
    }
  }
  std::printf("mqalogits consumer ok: backend=%s version=%d.%d.%d host path %s (%s)\n",
              backend_name, ml::version_major, ml::version_minor, ml::version_patch,
              ml::host_isa_name(),
              ml::host_runtime_dispatch ? "path chosen at run time" : "fixed at compile time");
  return 0;
}
