// The fused top-k (ml::topk) against what engines do today: the fp32 logits kernel alone, and
// the logits followed by a separate selection of each row (std::nth_element + std::sort of the
// row's valid columns, the obvious two-pass engine code). k = 512 and 2048; DeepSeek-V3.2
// shapes (H = 64): decode 1 x 131072, decode 64 x 32768 (page 64), prefill 1024 x 8192; MXFP8
// and MXFP4; 1 and 2 threads. Each case reports peak_RSS_MB, the process's peak resident set:
// run every case in its own process (bench/run_topk.sh) so the figure is that case's own.
// topk/paired/... runs the calls back to back in each iteration and reports their time ratios,
// the figures to trust on a shared machine (bench/topk_results.py tabulates both).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
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

enum class mode { fused, logits, two_pass, paired };

// One shape's three calls, run(m, threads) for m in fused / logits / two_pass.
using runner = std::function<void(mode, int)>;

double seconds_of(const runner& run, mode m, int threads) {
  const auto t0 = std::chrono::steady_clock::now();
  run(m, threads);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// mode::paired: every iteration runs the logits kernel, the fused top-k and the two-pass engine
// code on one thread, then the fused top-k on two, back to back in the same process, so a
// neighbour that slows the machine slows all four alike; the counters are their ratios. The
// 2-thread pool's worker has slept through the three 1-thread calls, so its speedup includes
// the worker's wake-up (bench pool/wake_after_idle: up to hundreds of us on a virtual machine),
// which the topk/fused/.../threads:2 runs, back to back, mostly do not.
void measure(benchmark::State& st, mode m, const runner& run, std::int64_t pairs) {
  const int threads = static_cast<int>(st.range(1));
  double t[4] = {};
  for (auto _ : st) {
    if (m == mode::paired) {
      t[0] += seconds_of(run, mode::logits, 1);
      t[1] += seconds_of(run, mode::fused, 1);
      t[2] += seconds_of(run, mode::two_pass, 1);
      t[3] += seconds_of(run, mode::fused, 2);
    } else {
      run(m, threads);
    }
    benchmark::ClobberMemory();
  }
  if (m != mode::paired) {
    set_counters(st, pairs);
  } else {
    st.counters["peak_RSS_MB"] = peak_rss_mb();
    st.counters["fused_over_logits"] = t[1] / t[0];
    st.counters["two_pass_over_logits"] = t[2] / t[0];
    st.counters["fused_2_threads_speedup"] = t[1] / t[3];
  }
}

ml::matrix_view<std::int32_t> index_view(std::vector<std::int32_t>& v, std::int64_t rows,
                                         std::int64_t k) {
  return {v.data(), rows, k};
}

// ---- decode: B requests x 1 token over a `context`-token paged context ----

template <class F>
void decode(benchmark::State& st, mode m, std::int64_t B, std::int64_t context) {
  const auto& in = shared<bench::paged_inputs<F>>(
      std::string("topk_paged") + F::name + std::to_string(B) + "_" + std::to_string(context), B,
      std::int64_t{1}, context, std::int64_t{64});
  const std::int64_t k = st.range(0), rows = in.B * in.next_n;
  const ml::paged_mqa_schedule schedules[2] = {
      ml::get_paged_mqa_logits_metadata(in.lens_view(), in.page_kv, pool(1).concurrency()),
      ml::get_paged_mqa_logits_metadata(in.lens_view(), in.page_kv, pool(2).concurrency())};
  std::vector<std::int32_t> indices(static_cast<std::size_t>(rows * k));
  std::vector<float> values(indices.size());
  std::vector<float> logits;
  if (m != mode::fused) logits.resize(static_cast<std::size_t>(rows * in.context));
  const std::vector<std::int32_t> begin(static_cast<std::size_t>(rows), 0);
  const runner run = [&](mode call, int threads) {
    const ml::options opt{.executor = pool(threads), .clean_logits = false};
    const auto& schedule = schedules[threads - 1];
    if (call == mode::fused) {
      ml::fp8_fp4_paged_mqa_logits(
          ml::backend::host{}, in.q.view(), in.cache.view(), in.wv(), in.lens_view(),
          in.table_view(), schedule, in.context,
          ml::topk(index_view(indices, rows, k), ml::matrix_view<float>(values.data(), rows, k)),
          opt);
      return;
    }
    ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, in.q.view(), in.cache.view(), in.wv(),
                                 in.lens_view(), in.table_view(), schedule, in.context,
                                 ml::matrix_view<float>(logits.data(), rows, in.context), opt);
    if (call == mode::two_pass)
      select_rows(logits, rows, in.context, begin, in.lens, k, indices, pool(threads));
  };
  measure(st, m, run, in.valid_pairs());
}

// ---- prefill: 1024 causal queries over an 8192-token context ----

template <class F>
void prefill(benchmark::State& st, mode m) {
  const auto& in =
      shared<bench::dense_inputs<F>>(std::string("topk_dense") + F::name, std::int64_t{1024},
                                     std::int64_t{8192}, std::int64_t{64});
  const std::int64_t k = st.range(0), rows = in.num_q;
  std::vector<std::int32_t> indices(static_cast<std::size_t>(rows * k));
  std::vector<float> values(indices.size());
  std::vector<float> logits;
  if (m != mode::fused) logits.resize(static_cast<std::size_t>(rows * in.N));
  const std::span<const std::int32_t> ks(in.ks), ke(in.ke);
  const runner run = [&](mode call, int threads) {
    const ml::options opt{.executor = pool(threads), .clean_logits = false};
    if (call == mode::fused) {
      ml::fp8_fp4_mqa_logits(
          ml::backend::host{}, in.q.view(), in.kv.view(), in.wv(), ks, ke, in.N,
          ml::topk(index_view(indices, rows, k), ml::matrix_view<float>(values.data(), rows, k)),
          opt);
      return;
    }
    ml::fp8_fp4_mqa_logits(ml::backend::host{}, in.q.view(), in.kv.view(), in.wv(), ks, ke, in.N,
                           ml::matrix_view<float>(logits.data(), rows, in.N), opt);
    if (call == mode::two_pass) select_rows(logits, rows, in.N, ks, ke, k, indices, pool(threads));
  };
  measure(st, m, run, in.valid_pairs());
}

// ---- registration: topk/<mode>/<shape>/<format>/k:<k>/threads:<n> ----

template <class Fn>
void add(const std::string& name, Fn fn, mode m) {
  auto* b = benchmark::RegisterBenchmark(name.c_str(), fn);
  for (std::int64_t k : {512, 2048}) {
    for (std::int64_t t : {1, 2})
      if (m != mode::paired || t == 1) b->Args({k, t});  // paired runs both thread counts itself
    if (m == mode::logits) break;                        // the logits alone do not depend on k
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
  } modes[] = {{"fused", mode::fused},
               {"logits", mode::logits},
               {"two_pass", mode::two_pass},
               {"paired", mode::paired}};
  for (const auto& [name, m] : modes) {
    const std::string p = std::string("topk/") + name + "/";
    add(
        p + "decode_1x131072/" + f, [m = m](benchmark::State& st) { decode<F>(st, m, 1, 131072); },
        m);
    add(
        p + "decode_64x32768_page64/" + f,
        [m = m](benchmark::State& st) { decode<F>(st, m, 64, 32768); }, m);
    add(
        p + "prefill_1024x8192/" + f, [m = m](benchmark::State& st) { prefill<F>(st, m); }, m);
  }
}

const int registered = [] {
  register_format<ml::mxfp8>();
  register_format<ml::mxfp4>();
  return 0;
}();

}  // namespace
