// Dense prefill from fp32 inputs: quantise Q and K (MXFP8 and MXFP4), compute the causal
// indexer logits, and compare them with the same logits computed from the unquantised inputs.
//
//   logit[q, t] = sum_h relu(dot(Q[q, h], K[t])) * w[q, h],   t in [0, prefix + q]
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <span>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace ml = mqalogits;

namespace {

constexpr std::int64_t num_q = 128, H = 32, prefix = 896, N = prefix + num_q;

template <class Format>
void run(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& w,
         const std::vector<std::int32_t>& ks, const std::vector<std::int32_t>& ke,
         ml::thread_pool& pool) {
  const auto t0 = std::chrono::steady_clock::now();
  // Q is [num_q * H] rows of 128 (row (q, h) = q * H + h), K is [N] rows.
  const auto qq = ml::quantize_rows<Format>(std::span<const float>(q));
  const auto kq = ml::quantize_rows<Format>(std::span<const float>(k));
  const auto t1 = std::chrono::steady_clock::now();
  ml::logits_buffer<float> out(num_q, N);
  ml::fp8_fp4_mqa_logits(qq.view(), kq.view(), ml::as_matrix_view(std::span(w), H), ks, ke, N,
                         out.view(), {.executor = pool});
  const auto t2 = std::chrono::steady_clock::now();

  // The same logits from the fp32 inputs (double sums), on every 16th query row.
  double worst = 0, scale = 0;
  std::int64_t masked = 0;
  for (std::int64_t r = 0; r < num_q; r += 16)
    for (std::int64_t t = 0; t < N; ++t) {
      if (t >= ke[r]) {
        masked += std::isinf(out(r, t)) && out(r, t) < 0;
        continue;
      }
      double exact = 0;
      for (std::int64_t h = 0; h < H; ++h) {
        double dot = 0;
        for (int i = 0; i < 128; ++i) dot += double(q[(r * H + h) * 128 + i]) * k[t * 128 + i];
        exact += (dot > 0 ? dot : 0) * w[r * H + h];
      }
      worst = std::max(worst, std::fabs(out(r, t) - exact));
      scale = std::max(scale, std::fabs(exact));
    }
  const auto ms = [](auto a, auto b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  std::printf(
      "%-6s quantise %6.2f ms  logits %7.2f ms  max |logit - fp32 logit| %.4f (of max %.2f)"
      "  future columns -inf: %lld\n",
      Format::name, ms(t0, t1), ms(t1, t2), worst, scale, static_cast<long long>(masked));
}

}  // namespace

int main() {
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> q(num_q * H * 128), k(N * 128), w(num_q * H);
  for (auto& x : q) x = normal(rng);
  for (auto& x : k) x = normal(rng);
  for (auto& x : w) x = 0.1f * normal(rng);
  // Causal prefill: query q (at position prefix + q) sees keys [0, prefix + q].
  std::vector<std::int32_t> ks(num_q, 0), ke(num_q);
  for (std::int64_t r = 0; r < num_q; ++r) ke[r] = static_cast<std::int32_t>(prefix + r + 1);

  std::printf("dense prefill: %lld queries x %lld heads against %lld keys\n",
              static_cast<long long>(num_q), static_cast<long long>(H), static_cast<long long>(N));
  ml::thread_pool pool;
  run<ml::mxfp8>(q, k, w, ks, ke, pool);
  run<ml::mxfp4>(q, k, w, ks, ke, pool);
  return 0;
}
