// One DeepSeek-V3.2 indexer decode step with the fused top-k, end to end:
//   1. the new token of every request is quantised straight into its paged-cache slot
//      (FP8 + one fp32 scale per token, the 132-byte rows vLLM and sglang keep);
//   2. Q is quantised to FP8 with per-(token, head) scales folded into the indexer weights;
//   3. fp8_fp4_paged_mqa_logits writes, per request, the cache slots of its top-2048 keys
//      (ml::topk with topk_index::slot: what the engines' topk_transform produces), without
//      materialising the [requests, context] logits;
//   4. the same step the two-pass way (fp32 logits, then a stable sort of each row) checks it.
// Prints one request's first selected slots and whether every request matches.
// Usage: example_11_topk_decode_step [threads = 2]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace ml = mqalogits;

int main(int argc, char** argv) {
  using F = ml::fp8_per_token;
  constexpr std::int32_t page_kv = 64;
  constexpr std::int64_t B = 4, H = 64, D = 128, top_k = 2048, max_blocks = 512;
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  if (threads < 1) {
    std::fprintf(stderr, "usage: %s [threads >= 1]\n", argv[0]);
    return 2;
  }
  // Tokens already in each request's cache before this step (one is shorter than top_k).
  const std::int64_t before[B] = {9000, 30000, 1500, 17000};

  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // The engine's page allocator: pages handed out in a shuffled order; slots of a block-table
  // row past the context hold garbage (they are never read).
  const std::int64_t num_pages = B * max_blocks;
  std::vector<std::int32_t> free_pages(static_cast<std::size_t>(num_pages));
  std::iota(free_pages.begin(), free_pages.end(), 0);
  std::shuffle(free_pages.begin(), free_pages.end(), rng);
  std::vector<std::int32_t> table(B * max_blocks, 0x7FFFFFFF);
  std::vector<std::uint8_t> cache_bytes(num_pages * ml::page_bytes<F>(page_kv));
  const ml::mutable_paged_cache<F> cache(cache_bytes.data(), num_pages, page_kv);
  std::int64_t next_free = 0;
  auto slot_of = [&](std::int64_t b, std::int64_t pos) {
    std::int32_t& page = table[b * max_blocks + pos / page_kv];
    if (pos % page_kv == 0) page = free_pages[next_free++];  // a new page for this request
    return std::int64_t{page} * page_kv + pos % page_kv;
  };
  // Earlier steps: the existing contexts (random keys, quantised into the cache).
  for (std::int64_t b = 0; b < B; ++b) {
    std::vector<float> k(before[b] * D);
    for (auto& x : k) x = normal(rng);
    std::vector<std::int64_t> slots(before[b]);
    for (std::int64_t t = 0; t < before[b]; ++t) slots[t] = slot_of(b, t);
    ml::store_into_pages(ml::matrix_view<const float>(k.data(), before[b], D),
                         std::span<const std::int64_t>(slots), cache);
  }

  // ---- the decode step ----
  // 1. This step's key of every request goes to the slot after its context.
  std::vector<float> k_new(B * D);
  for (auto& x : k_new) x = normal(rng);
  std::vector<std::int64_t> slot_mapping(B);
  std::vector<std::int32_t> lens(B);
  for (std::int64_t b = 0; b < B; ++b) {
    slot_mapping[b] = slot_of(b, before[b]);
    lens[b] = static_cast<std::int32_t>(before[b] + 1);
  }
  ml::store_into_pages(ml::matrix_view<const float>(k_new.data(), B, D),
                       std::span<const std::int64_t>(slot_mapping), cache);

  // 2. Q [B, H, D] to FP8; its per-(token, head) scales, softmax_scale and H^-1/2 go into w.
  std::vector<float> q(B * H * D), w(B * H);
  for (auto& x : q) x = normal(rng);
  for (auto& x : w) x = normal(rng) / std::sqrt(float(D)) / std::sqrt(float(H));
  const auto qq = ml::quantize_rows<F>(std::span<const float>(q));
  ml::fold_q_scales(ml::token_scales(qq), ml::matrix_view<float>(w.data(), B, H));

  // 3. The fused top-k with slot translation.
  const ml::matrix_view<const std::int32_t> context_lens(lens.data(), B, 1);
  const ml::matrix_view<const std::int32_t> block_table(table.data(), B, max_blocks);
  const ml::matrix_view<const float> weights(w.data(), B, H);
  ml::thread_pool pool(threads);
  const auto schedule = ml::get_paged_mqa_logits_metadata(context_lens, page_kv, threads);
  const std::int64_t max_context_len = *std::max_element(lens.begin(), lens.end());
  std::vector<std::int32_t> slots(B * top_k);
  std::vector<float> scores(B * top_k);
  ml::fp8_fp4_paged_mqa_logits(
      qq.unscaled_view(), cache.view(), weights, context_lens, block_table, schedule,
      max_context_len,
      ml::topk(ml::matrix_view<std::int32_t>(slots.data(), B, top_k),
               ml::matrix_view<float>(scores.data(), B, top_k), ml::topk_index::slot),
      {.executor = pool});

  // 4. Two passes: [B, max_context_len] fp32 logits, then each row's valid range stable-sorted.
  std::vector<float> logits(B * max_context_len);
  ml::fp8_fp4_paged_mqa_logits(qq.unscaled_view(), cache.view(), weights, context_lens, block_table,
                               schedule, max_context_len,
                               ml::matrix_view<float>(logits.data(), B, max_context_len),
                               {.executor = pool, .clean_logits = false});
  std::int64_t mismatches = 0;
  for (std::int64_t b = 0; b < B; ++b) {
    const float* row = logits.data() + b * max_context_len;
    std::vector<std::int32_t> order(lens[b]);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t x, std::int32_t y) {
      return std::isnan(row[x]) ? !std::isnan(row[y]) : row[x] > row[y];
    });
    for (std::int64_t i = 0; i < top_k; ++i) {
      const std::int64_t pos = i < lens[b] ? order[i] : -1;
      const std::int64_t want =
          pos < 0 ? -1
                  : std::int64_t{table[b * max_blocks + pos / page_kv]} * page_kv + pos % page_kv;
      mismatches += slots[b * top_k + i] != want;
    }
  }

  const std::int64_t shown = 1;
  std::printf(
      "DeepSeek-V3.2 decode step: %lld requests, %lld heads, page_kv %d, top-%lld, %d threads\n",
      static_cast<long long>(B), static_cast<long long>(H), page_kv, static_cast<long long>(top_k),
      threads);
  std::printf("  request %lld (context %d): best slots", static_cast<long long>(shown),
              lens[shown]);
  for (std::int64_t i = 0; i < 8; ++i)
    std::printf(" %d (%.3f)", slots[shown * top_k + i], scores[shown * top_k + i]);
  std::printf(" ...\n");
  const std::int64_t padded = std::count(slots.begin() + 2 * top_k, slots.begin() + 3 * top_k, -1);
  std::printf("  request 2 (context %d): %lld of %lld entries are -1 padding\n", lens[2],
              static_cast<long long>(padded), static_cast<long long>(top_k));
  std::printf("  fused top-k vs two-pass (logits + stable sort): %s (%lld mismatches)\n",
              mismatches ? "DIFFERENT" : "identical", static_cast<long long>(mismatches));
  return mismatches ? 1 : 0;
}
