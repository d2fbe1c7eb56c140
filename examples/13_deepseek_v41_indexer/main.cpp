// DeepSeek-V4.1's two-level index selection, end to end, as engines run it:
//   1. Q and K rotated by the Walsh-Hadamard transform and quantised in one pass (FP8 codes, Q's
//      scale folded into the weights with 128^-0.5 * H^-0.5; K with one fp32 scale per entry);
//   2. the candidate-source layer scores every position ONCE and writes both its own top-512 and
//      the 2048 candidate blocks of 8 positions it publishes (ml::topk_and_candidates);
//   3. the consumer layers reuse ONE sparse metadata over those blocks and take their top-512
//      as request-local positions (prefill, sparse kernel) or cache slots (decode, paged-sparse).
// Prefill: T new queries at the end of one request's context (causal, dense kernel). Decode: 4
// requests, next_n = 2, on a paged cache of 64-entry pages. Prints the time of each stage and
// checks every consumer selection lies inside its row's candidate blocks.
// Usage: example_13_deepseek_v41_indexer [context = 65536] [num_queries = 4] [threads = all]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <span>
#include <thread>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace ml = mqalogits;
using clock_type = std::chrono::steady_clock;
using F = ml::fp8_per_token;

namespace {

constexpr std::int64_t H = 32, D = 128, top_k = 512, blocks_n = 2048, block = 8, layers = 4;
constexpr std::int32_t page_kv = 64;

double ms_since(clock_type::time_point& t) {
  const auto now = clock_type::now();
  const double ms = std::chrono::duration<double, std::milli>(now - t).count();
  t = now;
  return ms;
}

// One layer's Q and weights, rotated, quantised and folded (V4: softmax_scale = 128^-0.5, the
// head factor H^-0.5).
struct layer_q {
  std::vector<std::uint8_t> codes;
  std::vector<float> weights;
  ml::rows_view<F> view(std::int64_t rows) const {
    return {codes.data(), static_cast<const float*>(nullptr), rows};
  }
};
layer_q make_q(std::mt19937& rng, std::int64_t rows) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<ml::bf16> q(static_cast<std::size_t>(rows * H * D));
  std::vector<float> w(static_cast<std::size_t>(rows * H));
  for (auto& x : q) x = ml::bf16::from_float(normal(rng));
  for (auto& x : w) x = normal(rng);
  layer_q out{std::vector<std::uint8_t>(q.size()), std::vector<float>(w.size())};
  ml::q_fold_scaling scaling = ml::vllm_v4_q_scaling();
  scaling.rotation = ml::row_rotation::hadamard;
  ml::quantize_q_fold_weights(ml::matrix_view<const ml::bf16>(q.data(), rows * H, D),
                              ml::matrix_view<const float>(w.data(), rows, H), out.codes.data(), 0,
                              ml::matrix_view<float>(out.weights.data(), rows, H),
                              1.0f / std::sqrt(float(D)), 1.0f / std::sqrt(float(H)), scaling);
  return out;
}

// Whether every selected position of each row lies in one of the row's candidate blocks.
bool inside_candidates(const std::vector<std::int32_t>& picked,
                       const std::vector<std::int32_t>& blk, std::int64_t rows) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::set<std::int32_t> ids(blk.begin() + r * blocks_n, blk.begin() + (r + 1) * blocks_n);
    for (std::int64_t i = 0; i < top_k; ++i) {
      const std::int32_t p = picked[static_cast<std::size_t>(r * top_k + i)];
      if (p >= 0 && !ids.count(p / block)) return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t N = argc > 1 ? std::atoll(argv[1]) : 65536;  // index entries in the context
  const std::int64_t T = argc > 2 ? std::atoll(argv[2]) : 4;      // new queries (prefill)
  const int threads =
      argc > 3 ? std::atoi(argv[3]) : static_cast<int>(std::thread::hardware_concurrency());
  if (N < 2 || T < 1 || T > N || threads < 1) {
    std::fprintf(stderr, "usage: %s [context >= 2] [num_queries in [1, context]] [threads]\n",
                 argv[0]);
    return 2;
  }
  std::mt19937 rng(41);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  ml::thread_pool pool(threads);
  const ml::options opt{.executor = pool};

  // ---- 1. K: rotated and quantised once (token-major for prefill) ----
  std::vector<ml::bf16> k(static_cast<std::size_t>(N * D));
  for (auto& x : k) x = ml::bf16::from_float(normal(rng));
  auto t = clock_type::now();
  const auto kv = ml::quantize_rows<F>(ml::matrix_view<const ml::bf16>(k.data(), N, D), {},
                                       ml::row_rotation::hadamard);
  const double ms_k = ms_since(t);

  // ---- 2. Prefill: the candidate source, one pass for both selections ----
  std::vector<std::int32_t> ks(static_cast<std::size_t>(T), 0), ke(static_cast<std::size_t>(T));
  for (std::int64_t i = 0; i < T; ++i)
    ke[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(N - T + i + 1);
  const layer_q source = make_q(rng, T);
  std::vector<std::int32_t> source_topk(static_cast<std::size_t>(T * top_k));
  std::vector<std::int32_t> candidates(static_cast<std::size_t>(T * blocks_n));
  t = clock_type::now();
  ml::fp8_fp4_mqa_logits(
      source.view(T * H), kv.view(), ml::matrix_view<const float>(source.weights.data(), T, H), ks,
      ke, 0,
      ml::topk_and_candidates(
          ml::topk(ml::matrix_view<std::int32_t>(source_topk.data(), T, top_k)).with_short_rows(),
          ml::candidate_blocks(ml::matrix_view<std::int32_t>(candidates.data(), T, blocks_n),
                               block)),
      opt);
  const double ms_source = ms_since(t);

  // ---- 3. Prefill consumers: one metadata, reused by every layer. ks = 0 here, so the
  // request-local block ids are the token-major KV's block ids (with ks > 0, block-aligned, add
  // ks / 8). ----
  t = clock_type::now();
  const auto meta = ml::get_sparse_mqa_logits_metadata(
      ks, std::span<const std::int32_t>(ke), N,
      ml::matrix_view<const std::int32_t>(candidates.data(), T, blocks_n), block);
  std::vector<std::int32_t> positions(static_cast<std::size_t>(T * top_k));
  bool prefill_ok = true;
  double ms_consumers = 0;
  for (std::int64_t l = 0; l < layers; ++l) {
    const layer_q q = make_q(rng, T);
    t = clock_type::now();
    ml::fp8_fp4_sparse_mqa_logits(
        q.view(T * H), kv.view(), ml::matrix_view<const float>(q.weights.data(), T, H), meta,
        ml::topk(ml::matrix_view<std::int32_t>(positions.data(), T, top_k),
                 ml::topk_index::position),
        opt);
    ms_consumers += ms_since(t);
    prefill_ok = prefill_ok && inside_candidates(positions, candidates, T);
  }

  // ---- 4. Decode: 4 requests, next_n = 2, a paged cache ----
  constexpr std::int64_t requests = 4, next_n = 2, rows = requests * next_n;
  const std::int64_t max_blocks = (N + page_kv - 1) / page_kv, pages = requests * max_blocks;
  std::vector<std::uint8_t> cache_bytes(
      static_cast<std::size_t>(pages * ml::page_bytes<F>(page_kv)));
  const ml::mutable_paged_cache<F> cache(cache_bytes.data(), pages, page_kv);
  // Request b's pages: a shuffled slice of the cache; row (b, j) sees N - next_n + j + 1 entries.
  std::vector<std::int32_t> order(static_cast<std::size_t>(pages));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int32_t>(i);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::int32_t> table(static_cast<std::size_t>(requests * max_blocks));
  std::copy(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(table.size()),
            table.begin());
  std::vector<std::int32_t> lens(static_cast<std::size_t>(rows)),
      slot_of(static_cast<std::size_t>(N));
  for (std::int64_t r = 0; r < rows; ++r)
    lens[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(N - next_n + r % next_n + 1);
  for (std::int64_t b = 0; b < requests; ++b) {
    for (std::int64_t p = 0; p < N; ++p)
      slot_of[static_cast<std::size_t>(p)] =
          table[static_cast<std::size_t>(b * max_blocks + p / page_kv)] * page_kv + p % page_kv;
    ml::store_into_pages(ml::matrix_view<const ml::bf16>(k.data(), N, D),
                         std::span<const std::int32_t>(slot_of), cache, {},
                         ml::row_rotation::hadamard);
  }
  const ml::matrix_view<const std::int32_t> lens_view(lens.data(), requests, next_n);
  const ml::matrix_view<const std::int32_t> table_view(table.data(), requests, max_blocks);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens_view, page_kv, threads);
  const layer_q dsource = make_q(rng, rows);
  std::vector<std::int32_t> slots(static_cast<std::size_t>(rows * top_k));
  std::vector<std::int32_t> dcandidates(static_cast<std::size_t>(rows * blocks_n));
  t = clock_type::now();
  ml::fp8_fp4_paged_mqa_logits(
      dsource.view(rows * H), cache.view(),
      ml::matrix_view<const float>(dsource.weights.data(), rows, H), lens_view, table_view,
      schedule, max_blocks * page_kv,
      ml::topk_and_candidates(
          ml::topk(ml::matrix_view<std::int32_t>(slots.data(), rows, top_k), ml::topk_index::slot),
          ml::candidate_blocks(ml::matrix_view<std::int32_t>(dcandidates.data(), rows, blocks_n),
                               block)),
      opt);
  const double ms_dsource = ms_since(t);
  // One block-table row per query row, for the paged-sparse metadata.
  std::vector<std::int32_t> row_table(static_cast<std::size_t>(rows * max_blocks));
  for (std::int64_t r = 0; r < rows; ++r)
    std::copy_n(table.begin() + (r / next_n) * max_blocks, max_blocks,
                row_table.begin() + r * max_blocks);
  const auto dmeta = ml::get_paged_sparse_mqa_logits_metadata(
      lens, ml::matrix_view<const std::int32_t>(row_table.data(), rows, max_blocks), page_kv,
      ml::matrix_view<const std::int32_t>(dcandidates.data(), rows, blocks_n), block);
  std::vector<std::int32_t> dpositions(static_cast<std::size_t>(rows * top_k));
  double ms_dconsumers = 0;
  bool decode_ok = true;
  for (std::int64_t l = 0; l < layers; ++l) {
    const layer_q q = make_q(rng, rows);
    t = clock_type::now();
    ml::fp8_fp4_paged_sparse_mqa_logits(
        q.view(rows * H), cache.view(), ml::matrix_view<const float>(q.weights.data(), rows, H),
        dmeta,
        ml::topk(ml::matrix_view<std::int32_t>(dpositions.data(), rows, top_k),
                 ml::topk_index::position),
        opt);
    ms_dconsumers += ms_since(t);
    decode_ok = decode_ok && inside_candidates(dpositions, dcandidates, rows);
  }

  std::printf(
      "DeepSeek-V4.1 indexer: %lld entries, %lld heads x %lld, top-%lld, %lld candidate "
      "blocks of %lld, %d threads\n",
      static_cast<long long>(N), static_cast<long long>(H), static_cast<long long>(D),
      static_cast<long long>(top_k), static_cast<long long>(blocks_n),
      static_cast<long long>(block), threads);
  std::printf("  K rotated + quantised (fp8 + fp32 scale)      %9.2f ms\n", ms_k);
  std::printf("  prefill source: %lld queries, top-k + blocks  %9.2f ms (one pass)\n",
              static_cast<long long>(T), ms_source);
  std::printf(
      "  prefill consumers: %lld layers, positions     %9.2f ms  selections inside the "
      "blocks: %s\n",
      static_cast<long long>(layers), ms_consumers, prefill_ok ? "yes" : "NO");
  std::printf("  decode source: %lld rows, slots + blocks       %9.2f ms (one pass)\n",
              static_cast<long long>(rows), ms_dsource);
  std::printf(
      "  decode consumers: %lld layers, positions      %9.2f ms  selections inside the "
      "blocks: %s\n",
      static_cast<long long>(layers), ms_dconsumers, decode_ok ? "yes" : "NO");
  return prefill_ok && decode_ok ? 0 : 1;
}
