// One DeepSeek-V3.2 lightning-indexer prefill step, end to end, the way upstream runs it:
//   1. quantise Q (bf16 [T, 64, 128]) to FP8 with one scale per (token, head) and fold those
//      scales into the indexer weights (with softmax_scale and H^-1/2), as vLLM / sglang do;
//   2. quantise K (bf16 [N, 128]) to FP8 with one fp32 scale per token (the 132-byte cache row);
//   3. fp8_fp4_mqa_logits with fp32 logits, 1024-byte rows and clean_logits = false;
//   4. top-2048 key indices per query over its causal range, -1 padded.
// Prints a summary and the time of each stage. Usage: example_07_deepseek_v32_indexer_step
// [num_queries = 64] [context = 8192] [threads = all]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace ml = mqalogits;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::int64_t H = 64, D = 128, top_k = 2048;

double ms_since(clock_type::time_point& t) {
  const auto now = clock_type::now();
  const double ms = std::chrono::duration<double, std::milli>(now - t).count();
  t = now;
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t T = argc > 1 ? std::atoll(argv[1]) : 64;    // new query tokens
  const std::int64_t N = argc > 2 ? std::atoll(argv[2]) : 8192;  // keys (context incl. the new)
  const int threads =
      argc > 3 ? std::atoi(argv[3]) : static_cast<int>(std::thread::hardware_concurrency());
  if (T < 1 || N < T || threads < 1) {
    std::fprintf(stderr, "usage: %s [num_queries >= 1] [context >= num_queries] [threads]\n",
                 argv[0]);
    return 2;
  }
  using F = ml::fp8_per_token;

  // Model outputs (synthetic): bf16 Q and K, fp32 weights from the indexer's projection.
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<ml::bf16> q(T * H * D), k(N * D);
  std::vector<float> w(T * H);
  for (auto& x : q) x = ml::bf16::from_float(normal(rng));
  for (auto& x : k) x = ml::bf16::from_float(normal(rng));
  for (auto& x : w) x = normal(rng);
  ml::thread_pool pool(threads);

  auto t = clock_type::now();
  // 1. Q: row (t, h) gets its own fp32 scale; upstream keeps Q unscaled and folds the scale,
  // softmax_scale = D^-1/2 and H^-1/2 into the weights.
  const auto qq = ml::quantize_rows<F>(std::span<const ml::bf16>(q));
  const float factor = 1.0f / std::sqrt(float(D)) / std::sqrt(float(H));
  for (auto& x : w) x *= factor;
  ml::fold_q_scales(ml::token_scales(qq), ml::matrix_view<float>(w.data(), T, H));
  const double ms_q = ms_since(t);

  // 2. K: one fp32 scale per token.
  const auto kq = ml::quantize_rows<F>(std::span<const ml::bf16>(k));
  const double ms_k = ms_since(t);

  // 3. Logits: query i sits at position N - T + i and sees keys [0, N - T + i].
  std::vector<std::int32_t> ks(T, 0), ke(T);
  for (std::int64_t i = 0; i < T; ++i) ke[i] = static_cast<std::int32_t>(N - T + i + 1);
  ml::logits_buffer<float> logits(T, N, 1024);
  ml::fp8_fp4_mqa_logits(qq.unscaled_view(), kq.view(),
                         ml::matrix_view<const float>(w.data(), T, H), ks, ke, N, logits.view(),
                         {.executor = pool, .clean_logits = false});
  const double ms_logits = ms_since(t);

  // 4. Top-k per row over its valid columns only (clean_logits = false leaves the rest unset).
  std::vector<std::int32_t> topk(T * top_k, -1);
  auto select_row = [&](std::int64_t i) {
    const std::int64_t n = ke[i] - ks[i];
    std::int32_t* dst = topk.data() + i * top_k;
    if (n <= top_k) {
      std::iota(dst, dst + n, ks[i]);
      return;
    }
    std::vector<std::int32_t> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), ks[i]);
    const float* row = logits.view().row(i);
    std::nth_element(order.begin(), order.begin() + top_k, order.end(),
                     [&](std::int32_t a, std::int32_t b) {
                       return row[a] > row[b] || (row[a] == row[b] && a < b);
                     });
    std::sort(order.begin(), order.begin() + top_k);
    std::copy(order.begin(), order.begin() + top_k, dst);
  };
  pool.parallel_for(T, select_row);  // the library's pool runs the engine's own work too
  const double ms_topk = ms_since(t);

  std::int64_t selected = 0, full_rows = 0;
  double kept = 0;
  for (std::int64_t i = 0; i < T; ++i) {
    const std::int32_t* sel = topk.data() + i * top_k;
    const std::int64_t n = std::count_if(sel, sel + top_k, [](std::int32_t x) { return x >= 0; });
    selected += n;
    full_rows += n == top_k;
    for (std::int64_t j = 0; j < n; ++j) kept += logits(i, sel[j]);
  }
  const double flop = 2.0 * D * H * (double(T) * (N - T) + double(T) * (T + 1) / 2);
  std::printf(
      "DeepSeek-V3.2 indexer step: %lld queries x %lld heads, context %lld, top-%lld, %d threads\n",
      static_cast<long long>(T), static_cast<long long>(H), static_cast<long long>(N),
      static_cast<long long>(top_k), threads);
  std::printf("  quantise Q + fold scales          %9.2f ms\n", ms_q);
  std::printf("  quantise K (fp8 + fp32 scale)     %9.2f ms\n", ms_k);
  std::printf(
      "  logits, fp32, rows 1024 B apart   %9.2f ms  %7.1f GFLOP/s"
      " (upstream's padded layout; flops of the causal part)\n",
      ms_logits, flop / ms_logits * 1e-6);
  std::printf("  top-%-4lld per row                 %9.2f ms\n", static_cast<long long>(top_k),
              ms_topk);
  std::printf("  selected %lld indices (%lld rows full), mean selected logit %.4f\n",
              static_cast<long long>(selected), static_cast<long long>(full_rows),
              selected ? kept / double(selected) : 0.0);
  return 0;
}
