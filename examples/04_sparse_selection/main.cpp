// Sparse selection over a token-major KV: each query names the blocks of B = 16 keys it wants
// (e.g. chosen by an earlier, coarser pass), padded with -1. Column b * B + o of a row is token
// idx[q][b] * B + ks[q] % B + o, so the logits of the selected blocks come out side by side.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <span>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace ml = mqalogits;

int main() {
  using F = ml::mxfp4;
  constexpr std::int64_t num_q = 4, H = 32, N = 4096, B = 16, cap = 8;
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> q(num_q * H * 128), k(N * 128), w(num_q * H);
  for (auto& x : q) x = normal(rng);
  for (auto& x : k) x = normal(rng);
  for (auto& x : w) x = 0.1f * normal(rng);
  const auto qq = ml::quantize_rows<F>(std::span<const float>(q));
  const auto kq = ml::quantize_rows<F>(std::span<const float>(k));
  const ml::matrix_view<const float> weights(w.data(), num_q, H);

  // Query r sees keys [ks, ke) and selects up to cap blocks of that range; -1 pads.
  const std::vector<std::int32_t> ks = {0, 0, 1000, 3000}, ke = {4096, 2000, 1500, 3040};
  std::vector<std::int32_t> idx(num_q * cap, -1);
  for (std::int64_t r = 0; r < num_q; ++r) {
    const std::int64_t blocks = (ke[r] - ks[r] + B - 1) / B;
    for (std::int64_t b = 0; b < cap && b < blocks; ++b)
      idx[r * cap + b] = static_cast<std::int32_t>((ks[r] / B) + (b * 7) % blocks);
  }
  const auto meta = ml::get_sparse_mqa_logits_metadata(
      ks, ke, N, ml::matrix_view<const std::int32_t>(idx.data(), num_q, cap), B);
  ml::logits_buffer<float> sparse(num_q, cap * B);
  ml::fp8_fp4_sparse_mqa_logits(qq.view(), kq.view(), weights, meta, sparse.view());

  // The same keys through the dense kernel (full width: column = token) agree exactly.
  ml::logits_buffer<float> dense(num_q, N);
  ml::fp8_fp4_mqa_logits(qq.view(), kq.view(), weights, ks, ke, 0, dense.view());
  std::printf("sparse selection: %lld queries, cap %lld blocks of %lld keys (%lld columns)\n",
              static_cast<long long>(num_q), static_cast<long long>(cap), static_cast<long long>(B),
              static_cast<long long>(cap * B));
  for (std::int64_t r = 0; r < num_q; ++r) {
    std::int64_t valid = 0, same = 0;
    for (std::int64_t c = 0; c < cap * B; ++c) {
      if (sparse(r, c) == -INFINITY) continue;
      ++valid;
      const std::int64_t token = std::int64_t{idx[r * cap + c / B]} * B + ks[r] % B + c % B;
      same += sparse(r, c) == dense(r, token);
    }
    std::printf("  query %lld: keys [%4d, %4d), blocks", static_cast<long long>(r), ks[r], ke[r]);
    for (std::int64_t b = 0; b < cap; ++b) std::printf(" %3d", idx[r * cap + b]);
    std::printf("  -> %3lld valid columns, %3lld equal to the dense logit\n",
                static_cast<long long>(valid), static_cast<long long>(same));
  }
  return 0;
}
