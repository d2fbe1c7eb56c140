// Paged sparse with the first/reuse protocol: the first call with a metadata object gathers the
// selected keys out of the paged cache into the metadata (a snapshot); later calls with new Q and
// weights reuse it without touching the cache. When the cache contents change, make new metadata.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <span>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace ml = mqalogits;

namespace {

double checksum(const ml::logits_buffer<float>& out) {
  double s = 0;
  for (std::int64_t r = 0; r < out.rows(); ++r)
    for (std::int64_t c = 0; c < out.cols(); ++c)
      if (out(r, c) != -INFINITY) s += out(r, c);
  return s;
}

}  // namespace

int main() {
  using F = ml::mxfp8;
  constexpr std::int32_t page_kv = 64;
  constexpr std::int64_t num_q = 2, H = 16, num_pages = 8, max_blocks = 4, B = 16;
  constexpr std::int64_t cap = 2 * (page_kv / B);  // a multiple of page_kv / B
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);

  std::vector<std::uint8_t> cache(num_pages * ml::page_bytes<F>(page_kv));
  const ml::mutable_paged_cache<F> pages(cache.data(), num_pages, page_kv);
  std::vector<float> k(num_pages * page_kv * 128);
  for (auto& x : k) x = normal(rng);
  std::vector<std::int64_t> slots(num_pages * page_kv);
  for (std::int64_t s = 0; s < num_pages * page_kv; ++s) slots[s] = s;
  ml::store_into_pages(ml::matrix_view<const float>(k.data(), num_pages * page_kv, 128),
                       std::span<const std::int64_t>(slots), pages);

  const std::vector<std::int32_t> lens = {200, 256};
  const std::vector<std::int32_t> table = {5, 2, 7, 0, /**/ 1, 3, 4, 6};
  std::vector<std::int32_t> idx(num_q * cap, -1);  // blocks of 16 positions in each context
  for (std::int64_t i = 0; i < cap; ++i) idx[i] = static_cast<std::int32_t>(i * 3 % 13);
  for (std::int64_t i = 0; i < cap; i += 2) idx[cap + i] = static_cast<std::int32_t>(15 - i);
  auto meta = ml::get_paged_sparse_mqa_logits_metadata(
      lens, ml::matrix_view<const std::int32_t>(table.data(), num_q, max_blocks), page_kv,
      ml::matrix_view<const std::int32_t>(idx.data(), num_q, cap), B);

  auto step = [&](const char* what) {
    std::vector<float> q(num_q * H * 128), w(num_q * H);
    for (auto& x : q) x = normal(rng);
    for (auto& x : w) x = 0.1f * normal(rng);
    const auto qq = ml::quantize_rows<F>(std::span<const float>(q));
    ml::logits_buffer<float> out(num_q, cap * B);
    ml::fp8_fp4_paged_sparse_mqa_logits(qq.view(), pages.view(),
                                        ml::matrix_view<const float>(w.data(), num_q, H), meta,
                                        out.view());
    std::printf("  %-44s snapshot %6zu bytes, checksum %10.4f\n", what, meta.snapshot_bytes(),
                checksum(out));
  };
  std::printf("paged sparse: %lld queries, cap %lld blocks of %lld, page_kv %d\n",
              static_cast<long long>(num_q), static_cast<long long>(cap), static_cast<long long>(B),
              page_kv);
  std::printf("  before the first call: snapshot %zu bytes\n", meta.snapshot_bytes());
  step("first call (gathers the selected keys)");
  step("reuse with new Q and weights");
  // New keys in page 5: the snapshot still holds the old ones, so regenerate the metadata.
  ml::store_into_pages(ml::matrix_view<const float>(k.data() + 7 * 128, 1, 128),
                       std::span<const std::int64_t>(slots.data() + 5 * page_kv, 1), pages);
  meta = ml::get_paged_sparse_mqa_logits_metadata(
      lens, ml::matrix_view<const std::int32_t>(table.data(), num_q, max_blocks), page_kv,
      ml::matrix_view<const std::int32_t>(idx.data(), num_q, cap), B);
  step("cache changed: new metadata, first call again");
  return 0;
}
