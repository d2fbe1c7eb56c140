// Paged decode with next_n = 2 (speculative / MTP decoding): B requests, each with its own
// context in a paged KV cache and two query tokens that share its block-table row; the second
// token sees one more key than the first. Keys are written into the pages through a slot mapping.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <span>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace ml = mqalogits;

int main() {
  using F = ml::mxfp8;
  constexpr std::int32_t page_kv = 64;
  constexpr std::int64_t B = 4, next_n = 2, H = 64, num_pages = 64, max_blocks = 16;
  const std::int64_t context[B] = {100, 700, 1, 1000};  // keys per request, incl. the new tokens

  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);

  // The engine's page allocator: each request gets whole pages in a shuffled order.
  std::vector<std::int32_t> free_pages(num_pages);
  for (std::int32_t p = 0; p < num_pages; ++p) free_pages[p] = p;
  std::shuffle(free_pages.begin(), free_pages.end(), rng);
  std::vector<std::int32_t> table(B * max_blocks, -1);  // slots past a context are never read
  std::vector<std::uint8_t> cache(num_pages * ml::page_bytes<F>(page_kv));
  const ml::mutable_paged_cache<F> pages(cache.data(), num_pages, page_kv);
  for (std::int64_t b = 0, next_free = 0; b < B; ++b) {
    std::vector<float> k(context[b] * 128);
    for (auto& x : k) x = normal(rng);
    std::vector<std::int64_t> slots(context[b]);
    for (std::int64_t t = 0; t < context[b]; ++t) {
      if (t % page_kv == 0) table[b * max_blocks + t / page_kv] = free_pages[next_free++];
      slots[t] = std::int64_t{table[b * max_blocks + t / page_kv]} * page_kv + t % page_kv;
    }
    ml::store_into_pages(ml::matrix_view<const float>(k.data(), context[b], 128),
                         std::span<const std::int64_t>(slots), pages);
  }

  // Q [B, next_n, H] rows and weights [B * next_n, H]; token j of request b sees
  // context[b] - next_n + 1 + j keys.
  std::vector<float> q(B * next_n * H * 128), w(B * next_n * H);
  for (auto& x : q) x = normal(rng);
  for (auto& x : w) x = 0.1f * normal(rng);
  const auto qq = ml::quantize_rows<F>(std::span<const float>(q));
  std::vector<std::int32_t> lens(B * next_n);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = 0; j < next_n; ++j)
      lens[b * next_n + j] =
          static_cast<std::int32_t>(std::max<std::int64_t>(context[b] - next_n + 1 + j, 0));
  const ml::matrix_view<const std::int32_t> context_lens(lens.data(), B, next_n);
  const ml::matrix_view<const std::int32_t> block_table(table.data(), B, max_blocks);

  // The schedule depends only on the lengths: make it once per decode step, reuse it per layer.
  ml::thread_pool pool(2);
  const auto schedule =
      ml::get_paged_mqa_logits_metadata(context_lens, page_kv, pool.concurrency());
  const std::int64_t max_context_len = *std::max_element(context, context + B);
  ml::logits_buffer<ml::bf16> out(B * next_n, max_context_len);
  ml::fp8_fp4_paged_mqa_logits(
      qq.view(), pages.view(), ml::matrix_view<const float>(w.data(), B * next_n, H), context_lens,
      block_table, schedule, max_context_len, out.view(), {.executor = pool});

  std::printf("paged decode: B = %lld requests x next_n = %lld tokens, %lld heads, page_kv %d\n",
              static_cast<long long>(B), static_cast<long long>(next_n), static_cast<long long>(H),
              page_kv);
  for (std::int64_t r = 0; r < B * next_n; ++r) {
    std::int64_t valid = 0, best = -1;
    for (std::int64_t c = 0; c < max_context_len; ++c) {
      const float v = ml::to_float(out(r, c));
      if (v == -INFINITY) continue;
      ++valid;
      if (best < 0 || v > ml::to_float(out(r, best))) best = c;
    }
    std::printf("  request %lld token %lld: context_len %5d, valid logits %5lld, best key %5lld\n",
                static_cast<long long>(r / next_n), static_cast<long long>(r % next_n), lens[r],
                static_cast<long long>(valid), static_cast<long long>(best));
  }
  return 0;
}
