// The fused top-k (ml::topk) against what engines do today: the fp32 logits kernel alone, and
// the logits followed by a separate selection of each row (std::nth_element + std::sort of the
// row's valid columns, the obvious two-pass engine code). k = 512 and 2048; DeepSeek-V3.2
// shapes (H = 64): decode 1 x 131072, decode 64 x 32768 (page 64), prefill 1024 x 8192; MXFP8
// and MXFP4; 1 and 2 threads. Each case reports peak_RSS_MB, the process's peak resident set:
// run every case in its own process (bench/run_topk.sh) so the figure is that case's own.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "inputs.hpp"

namespace {

namespace ml = mqalogits;
using bench::shared;

ml::thread_pool& pool(int threads) {
  static ml::thread_pool one(1), two(2);
  return threads == 1 ? one : two;
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

void set_counters(benchmark::State& st, std::int64_t pairs) {
  using C = benchmark::Counter;
  st.counters["FLOP/s"] =
      C(2.0 * 64 * ml::head_dim * static_cast<double>(pairs), C::kIsIterationInvariantRate);
  st.counters["peak_RSS_MB"] = C(peak_rss_mb());
}

// The engine's second pass: per row, the k best of its valid columns [begin, end) by value
// (NaN-free here), ties to the lower column, in descending order. Rows in parallel.
void select_rows(const std::vector<float>& logits, std::int64_t rows, std::int64_t cols,
                 std::span<const std::int32_t> begin, std::span<const std::int32_t> end,
                 std::int64_t k, std::vector<std::int32_t>& indices, ml::thread_pool& p) {
  auto row = [&](std::int64_t r) {
    thread_local std::vector<std::int32_t> order;
    const float* v = logits.data() + r * cols;
    const std::int32_t b = begin[static_cast<std::size_t>(r)], e = end[static_cast<std::size_t>(r)];
    order.resize(static_cast<std::size_t>(e - b));
    std::iota(order.begin(), order.end(), b);
    auto better = [v](std::int32_t x, std::int32_t y) {
      return v[x] > v[y] || (v[x] == v[y] && x < y);
    };
    const auto m = std::min<std::int64_t>(k, e - b);
    if (m < e - b) std::nth_element(order.begin(), order.begin() + m, order.end(), better);
    std::sort(order.begin(), order.begin() + m, better);
    std::int32_t* out = indices.data() + r * k;
    std::copy(order.begin(), order.begin() + m, out);
    std::fill(out + m, out + k, -1);
  };
  p.parallel_for(rows, row);
}

enum class mode { fused, logits, two_pass };

// ---- decode: B requests x 1 token over a `context`-token paged context ----

template <class F>
void decode(benchmark::State& st, mode m, std::int64_t B, std::int64_t context) {
  const auto& in = shared<bench::paged_inputs<F>>(
      std::string("topk_paged") + F::name + std::to_string(B) + "_" + std::to_string(context), B,
      std::int64_t{1}, context, std::int64_t{64});
  const int threads = static_cast<int>(st.range(1));
  const std::int64_t k = st.range(0), rows = in.B * in.next_n;
  const auto schedule =
      ml::get_paged_mqa_logits_metadata(in.lens_view(), in.page_kv, pool(threads).concurrency());
  const ml::options opt{.executor = pool(threads), .clean_logits = false};
  std::vector<std::int32_t> indices(static_cast<std::size_t>(rows * k));
  std::vector<float> values(indices.size());
  std::vector<float> logits;
  if (m != mode::fused) logits.resize(static_cast<std::size_t>(rows * in.context));
  const std::vector<std::int32_t> begin(static_cast<std::size_t>(rows), 0);
  for (auto _ : st) {
    if (m == mode::fused) {
      ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, in.q.view(), in.cache.view(), in.wv(),
                                   in.lens_view(), in.table_view(), schedule, in.context,
                                   ml::topk(ml::matrix_view<std::int32_t>(indices.data(), rows, k),
                                            ml::matrix_view<float>(values.data(), rows, k)),
                                   opt);
    } else {
      ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, in.q.view(), in.cache.view(), in.wv(),
                                   in.lens_view(), in.table_view(), schedule, in.context,
                                   ml::matrix_view<float>(logits.data(), rows, in.context), opt);
      if (m == mode::two_pass)
        select_rows(logits, rows, in.context, begin, in.lens, k, indices, pool(threads));
    }
    benchmark::ClobberMemory();
  }
  set_counters(st, in.valid_pairs());
}

// ---- prefill: 1024 causal queries over an 8192-token context ----

template <class F>
void prefill(benchmark::State& st, mode m) {
  const auto& in =
      shared<bench::dense_inputs<F>>(std::string("topk_dense") + F::name, std::int64_t{1024},
                                     std::int64_t{8192}, std::int64_t{64});
  const int threads = static_cast<int>(st.range(1));
  const std::int64_t k = st.range(0), rows = in.num_q;
  const ml::options opt{.executor = pool(threads), .clean_logits = false};
  std::vector<std::int32_t> indices(static_cast<std::size_t>(rows * k));
  std::vector<float> values(indices.size());
  std::vector<float> logits;
  if (m != mode::fused) logits.resize(static_cast<std::size_t>(rows * in.N));
  const std::span<const std::int32_t> ks(in.ks), ke(in.ke);
  for (auto _ : st) {
    if (m == mode::fused) {
      ml::fp8_fp4_mqa_logits(ml::backend::host{}, in.q.view(), in.kv.view(), in.wv(), ks, ke, in.N,
                             ml::topk(ml::matrix_view<std::int32_t>(indices.data(), rows, k),
                                      ml::matrix_view<float>(values.data(), rows, k)),
                             opt);
    } else {
      ml::fp8_fp4_mqa_logits(ml::backend::host{}, in.q.view(), in.kv.view(), in.wv(), ks, ke, in.N,
                             ml::matrix_view<float>(logits.data(), rows, in.N), opt);
      if (m == mode::two_pass) select_rows(logits, rows, in.N, ks, ke, k, indices, pool(threads));
    }
    benchmark::ClobberMemory();
  }
  set_counters(st, in.valid_pairs());
}

// ---- registration: topk/<mode>/<shape>/<format>/k:<k>/threads:<n> ----

template <class Fn>
void add(const std::string& name, Fn fn, bool per_k) {
  auto* b = benchmark::RegisterBenchmark(name.c_str(), fn);
  for (std::int64_t k : {512, 2048}) {
    for (std::int64_t t : {1, 2}) b->Args({k, t});
    if (!per_k) break;  // the logits alone do not depend on k
  }
  b->ArgNames({"k", "threads"})->UseRealTime()->MeasureProcessCPUTime();
  b->Unit(benchmark::kMillisecond);
}

template <class F>
void register_format() {
  const std::string f = F::name;
  const struct {
    const char* name;
    mode m;
  } modes[] = {{"fused", mode::fused}, {"logits", mode::logits}, {"two_pass", mode::two_pass}};
  for (const auto& [name, m] : modes) {
    const bool per_k = m != mode::logits;
    const std::string p = std::string("topk/") + name + "/";
    add(
        p + "decode_1x131072/" + f, [m = m](benchmark::State& st) { decode<F>(st, m, 1, 131072); },
        per_k);
    add(
        p + "decode_64x32768_page64/" + f,
        [m = m](benchmark::State& st) { decode<F>(st, m, 64, 32768); }, per_k);
    add(
        p + "prefill_1024x8192/" + f, [m = m](benchmark::State& st) { prefill<F>(st, m); }, per_k);
  }
}

const int registered = [] {
  register_format<ml::mxfp8>();
  register_format<ml::mxfp4>();
  return 0;
}();

}  // namespace
