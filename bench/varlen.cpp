// Varlen paged decode (upstream's `indices`): 64 requests x 3 query rows each, every request
// with its own 8192-token context on 64-token pages, H = 64. The same rows three ways:
//   varlen  - indices group each request's rows, which share every decoded key tile;
//   rows    - no indices, every row its own request (its keys decoded once per row);
//   next_n  - the same requests as [64, 3] context lengths (next_n = 3), for comparison.
// Each reports FLOP/s (2 * H * 128 per valid (row, key) pair) and keys/s (keys decoded: one per
// request and position when shared, one per row and position when not).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "inputs.hpp"

namespace {

namespace ml = mqalogits;
using bench::shared;

constexpr std::int64_t requests = 64, rows_per_request = 3, context = 8192, heads = 64;
constexpr std::int32_t page_kv = 64;

ml::thread_pool& pool(int threads) {
  static ml::thread_pool one(1);
  static ml::thread_pool all(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  return threads == 1 ? one : all;
}

// The rows of request b see context - 2, context - 1 and context tokens (a draft's positions).
template <class F>
struct varlen_inputs {
  static constexpr std::int64_t rows = requests * rows_per_request, blocks = context / page_kv;
  bench::paged_cache<F> cache{requests * blocks, page_kv, 31};
  bench::rows<F> q{rows * heads, 32};
  std::vector<ml::bf16> w = bench::weights(rows * heads, 33);
  std::vector<std::int32_t> lens, indices, row_table, request_table;
  varlen_inputs() {
    request_table = bench::permutation(requests * blocks, 34);
    for (std::int64_t b = 0; b < requests; ++b)
      for (std::int64_t j = 0; j < rows_per_request; ++j) {
        lens.push_back(static_cast<std::int32_t>(context - rows_per_request + 1 + j));
        indices.push_back(static_cast<std::int32_t>(b));
        row_table.insert(row_table.end(), request_table.begin() + b * blocks,
                         request_table.begin() + (b + 1) * blocks);
      }
  }
  ml::matrix_view<const ml::bf16> wv() const { return {w.data(), rows, heads, heads}; }
  std::int64_t valid_pairs() const {
    std::int64_t s = 0;
    for (auto l : lens) s += l;
    return s;
  }
};

enum class mode { varlen, rows, next_n };

template <class F>
void run(benchmark::State& st, mode m) {
  const auto& in = shared<varlen_inputs<F>>(std::string("varlen") + F::name);
  using V = varlen_inputs<F>;
  const int threads = static_cast<int>(st.range(0));
  const int workers = pool(threads).concurrency();
  const ml::matrix_view<const std::int32_t> lens_rows(in.lens.data(), V::rows, 1, 1);
  const ml::matrix_view<const std::int32_t> lens_nn(in.lens.data(), requests, rows_per_request,
                                                    rows_per_request);
  const ml::matrix_view<const std::int32_t> table_rows(in.row_table.data(), V::rows, V::blocks,
                                                       V::blocks);
  const ml::matrix_view<const std::int32_t> table_nn(in.request_table.data(), requests, V::blocks,
                                                     V::blocks);
  const std::span<const std::int32_t> indices(in.indices);
  const auto schedule =
      m == mode::varlen ? ml::get_paged_mqa_logits_metadata(lens_rows, page_kv, workers, indices)
      : m == mode::rows ? ml::get_paged_mqa_logits_metadata(lens_rows, page_kv, workers)
                        : ml::get_paged_mqa_logits_metadata(lens_nn, page_kv, workers);
  ml::logits_buffer<ml::bf16> out(V::rows, context);
  const ml::options opt{.executor = pool(threads)};
  for (auto _ : st) {
    if (m == mode::varlen)
      ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, in.q.view(), in.cache.view(), in.wv(),
                                   lens_rows, table_rows, schedule, context, out.view(), indices,
                                   opt);
    else if (m == mode::rows)
      ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, in.q.view(), in.cache.view(), in.wv(),
                                   lens_rows, table_rows, schedule, context, out.view(), opt);
    else
      ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, in.q.view(), in.cache.view(), in.wv(),
                                   lens_nn, table_nn, schedule, context, out.view(), opt);
    benchmark::ClobberMemory();
  }
  using C = benchmark::Counter;
  st.counters["FLOP/s"] = C(2.0 * heads * ml::head_dim * static_cast<double>(in.valid_pairs()),
                            C::kIsIterationInvariantRate);
  const double keys = m == mode::rows ? static_cast<double>(in.valid_pairs())
                                      : static_cast<double>(requests * context);
  st.counters["keys/s"] = C(keys, C::kIsIterationInvariantRate);
}

template <class F>
void register_format() {
  const std::string f = F::name;
  const struct {
    const char* name;
    mode m;
  } modes[] = {{"varlen", mode::varlen}, {"rows", mode::rows}, {"next_n", mode::next_n}};
  for (const auto& [name, m] : modes) {
    auto* b = benchmark::RegisterBenchmark(
        (std::string("paged_varlen/") + name + "/64x3x8192_H64/" + f).c_str(),
        [m = m](benchmark::State& st) { run<F>(st, m); });
    b->Arg(1)->Arg(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    b->ArgName("threads")->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);
  }
}

const int registered = [] {
  register_format<ml::mxfp8>();
  register_format<ml::mxfp4>();
  return 0;
}();

}  // namespace
