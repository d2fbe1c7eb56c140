// Paged sparse across the indexer layers of one decode step. Engines make the metadata once
// per step and call the kernel once per layer, each layer with its own cache of the same
// geometry: the default (reread) protocol scores whatever cache each call passes. The snapshot
// protocol (DeepGEMM-Ascend's first/reuse) gathers the selected keys on the first call and keeps
// scoring them, so the second layer below gets the first layer's logits with it.
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
  constexpr std::int64_t num_q = 2, H = 16, num_pages = 8, max_blocks = 4, B = 16, cap = 8;
  constexpr int layers = 2;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);

  // One paged cache per layer, same geometry, different keys.
  std::vector<std::vector<std::uint8_t>> caches;
  std::vector<std::int64_t> slots(num_pages * page_kv);
  for (std::int64_t s = 0; s < num_pages * page_kv; ++s) slots[s] = s;
  for (int l = 0; l < layers; ++l) {
    auto& bytes = caches.emplace_back(num_pages * ml::page_bytes<F>(page_kv));
    std::vector<float> k(num_pages * page_kv * 128);
    for (auto& x : k) x = normal(rng);
    ml::store_into_pages(ml::matrix_view<const float>(k.data(), num_pages * page_kv, 128),
                         std::span<const std::int64_t>(slots),
                         ml::mutable_paged_cache<F>(bytes.data(), num_pages, page_kv));
  }
  const auto cache = [&](int l) {
    return ml::paged_cache_view<F>(caches[l].data(), num_pages, page_kv);
  };

  // The decode step: lengths, block table, the selected blocks of 16 positions, Q and weights.
  const std::vector<std::int32_t> lens = {200, 256};
  const std::vector<std::int32_t> table = {5, 2, 7, 0, /**/ 1, 3, 4, 6};
  std::vector<std::int32_t> idx(num_q * cap, -1);
  for (std::int64_t i = 0; i < cap; ++i) idx[i] = static_cast<std::int32_t>(i * 3 % 13);
  for (std::int64_t i = 0; i < cap; i += 2) idx[cap + i] = static_cast<std::int32_t>(15 - i);
  const ml::matrix_view<const std::int32_t> table_view(table.data(), num_q, max_blocks);
  const ml::matrix_view<const std::int32_t> idx_view(idx.data(), num_q, cap);
  std::vector<float> q(num_q * H * 128), w(num_q * H);
  for (auto& x : q) x = normal(rng);
  for (auto& x : w) x = 0.1f * normal(rng);
  const auto qq = ml::quantize_rows<F>(std::span<const float>(q));
  const ml::matrix_view<const float> weights(w.data(), num_q, H);

  const auto run = [&](const ml::paged_sparse_mqa_metadata& meta, int layer) {
    ml::logits_buffer<float> out(num_q, cap * B);
    ml::fp8_fp4_paged_sparse_mqa_logits(qq.view(), cache(layer), weights, meta, out.view());
    return checksum(out);
  };
  std::printf("paged sparse: %lld queries, cap %lld blocks of %lld, page_kv %d, %d layers\n",
              static_cast<long long>(num_q), static_cast<long long>(cap), static_cast<long long>(B),
              page_kv, layers);
  // Each layer on its own, with a fresh metadata object: the answers to expect.
  double own[layers];
  for (int l = 0; l < layers; ++l)
    own[l] =
        run(ml::get_paged_sparse_mqa_logits_metadata(lens, table_view, page_kv, idx_view, B), l);
  for (const auto protocol :
       {ml::paged_sparse_protocol::reread, ml::paged_sparse_protocol::snapshot}) {
    const bool snapshot = protocol == ml::paged_sparse_protocol::snapshot;
    const auto meta =
        ml::get_paged_sparse_mqa_logits_metadata(lens, table_view, page_kv, idx_view, B, protocol);
    for (int l = 0; l < layers; ++l) {
      const double got = run(meta, l);
      std::printf("  %-8s layer %d: checksum %10.4f (layer's own %10.4f) %s, snapshot %zu bytes\n",
                  snapshot ? "snapshot" : "reread", l, got, own[l],
                  got == own[l] ? "same" : "differs", meta.snapshot_bytes());
      if (!snapshot && got != own[l]) return 1;  // reread must score each layer's own cache
    }
  }
  return 0;
}
