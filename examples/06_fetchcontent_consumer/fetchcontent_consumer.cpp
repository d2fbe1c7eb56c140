// What an engine built with FetchContent calls: keys written into its paged cache in the
// vLLM / sglang layout (FP8 + one fp32 scale per token, 132 bytes), a decode step over it.
#include <cmath>
#include <cstdio>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace ml = mqalogits;

int main() {
  constexpr int H = 4, page_kv = 64, num_pages = 4, tokens = 100;
  using F = ml::fp8_per_token;

  // The engine's cache: num_pages x (page_kv x 128 code bytes | page_kv x 4 scale bytes).
  std::vector<std::uint8_t> cache(num_pages * ml::page_bytes<F>(page_kv));
  const ml::mutable_paged_cache<F> pages(cache.data(), num_pages, page_kv);

  // New keys arrive with a slot mapping (slot = page * page_kv + offset): pages 2 then 0.
  std::vector<float> k(tokens * 128);
  for (int i = 0; i < tokens * 128; ++i) k[i] = std::sin(0.01f * i);
  std::vector<std::int64_t> slots(tokens);
  const std::int32_t block_table[2] = {2, 0};
  for (int t = 0; t < tokens; ++t) slots[t] = block_table[t / page_kv] * page_kv + t % page_kv;
  ml::store_into_pages(ml::matrix_view<const float>(k.data(), tokens, 128),
                       std::span<const std::int64_t>(slots), pages);

  // One decode token: Q quantised per row, its scales folded into the weights (upstream's way).
  std::vector<float> q(H * 128);
  for (int i = 0; i < H * 128; ++i) q[i] = std::cos(0.03f * i);
  const auto qq = ml::quantize_rows<F>(std::span<const float>(q));
  std::vector<float> w = {1.0f, 0.5f, -0.25f, 0.125f};
  ml::fold_q_scales(ml::token_scales(qq), ml::matrix_view<float>(w.data(), 1, H));

  const std::int32_t lens[1] = {tokens};
  const ml::matrix_view<const std::int32_t> context_lens(lens, 1, 1), table(block_table, 1, 2);
  const auto schedule = ml::get_paged_mqa_logits_metadata(context_lens, page_kv, 1);
  ml::logits_buffer<float> out(1, tokens, 1024);
  ml::fp8_fp4_paged_mqa_logits(qq.unscaled_view(), pages.view(),
                               ml::matrix_view<const float>(w.data(), 1, H), context_lens, table,
                               schedule, tokens, out.view());

  float best = -INFINITY;
  int arg = -1;
  for (int t = 0; t < tokens; ++t)
    if (out(0, t) > best) best = out(0, t), arg = t;
  std::printf("fetchcontent consumer ok: %d logits, max %.4f at token %d\n", tokens, best, arg);
  return std::isfinite(best) ? 0 : 1;
}
