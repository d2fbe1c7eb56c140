// Benchmarks: the four kernels on the production shapes, MXFP8 and MXFP4, one thread
// and all threads; the Eigen decode-then-GEMM baseline on the same inputs; the scalar reference
// on a reduced shape. The peak micro-benchmarks live in peak.cpp. Every benchmark reports
// FLOP/s (2 * H * 128 per valid (query, key) pair) and bytes/s (Q, K, weights read + logits
// written), timed as wall-clock time per call.
//
//   build-perf/bench/mqalogits_bench --benchmark_repetitions=3
//   bench/make_results.py results.json   # the RESULTS.md table
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>

#include <mqalogits/mqalogits.hpp>

#include "eigen_baseline.hpp"
#include "inputs.hpp"
#include "reference/reference.hpp"

namespace {

namespace ml = mqalogits;
using bench::shared;

const int all_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

ml::thread_pool& pool(int threads) {
  static ml::thread_pool one(1);
  static ml::thread_pool all(all_threads);
  return threads == 1 ? one : all;
}

void set_counters(benchmark::State& st, std::int64_t pairs, std::int64_t heads,
                  std::int64_t bytes) {
  using C = benchmark::Counter;
  st.counters["FLOP/s"] =
      C(2.0 * static_cast<double>(heads) * ml::head_dim * static_cast<double>(pairs),
        C::kIsIterationInvariantRate);
  st.counters["bytes/s"] = C(static_cast<double>(bytes), C::kIsIterationInvariantRate);
  st.counters["threads"] = C(pool(static_cast<int>(st.range(0))).concurrency());
}

// ---- the shapes ----

template <class F>
const bench::dense_inputs<F>& dense_in(std::int64_t H) {
  return shared<bench::dense_inputs<F>>(std::string("dense") + F::name + std::to_string(H),
                                        std::int64_t{1024}, std::int64_t{8192}, H);
}
template <class F>
const bench::paged_inputs<F>& paged_in(std::int64_t next_n, std::int64_t ctx) {
  return shared<bench::paged_inputs<F>>(
      std::string("paged") + F::name + std::to_string(next_n) + "_" + std::to_string(ctx),
      std::int64_t{64}, next_n, ctx, std::int64_t{64});
}
template <class F>
const bench::sparse_inputs<F>& sparse_in() {
  return shared<bench::sparse_inputs<F>>(std::string("sparse") + F::name, std::int64_t{256},
                                         std::int64_t{128}, std::int64_t{16}, std::int64_t{32768},
                                         std::int64_t{64});
}

// ---- the library ----

template <class F>
void lib_dense(benchmark::State& st, std::int64_t H) {
  const auto& in = dense_in<F>(H);
  ml::logits_buffer<ml::bf16> out(in.num_q, in.N);
  const ml::options opt{.executor = pool(static_cast<int>(st.range(0)))};
  for (auto _ : st) {
    ml::fp8_fp4_mqa_logits(ml::backend::host{}, in.q.view(), in.kv.view(), in.wv(),
                           std::span<const std::int32_t>(in.ks),
                           std::span<const std::int32_t>(in.ke), in.N, out.view(), opt);
    benchmark::ClobberMemory();
  }
  set_counters(st, in.valid_pairs(), in.H, in.bytes());
}

template <class F>
void lib_paged(benchmark::State& st, std::int64_t next_n, std::int64_t ctx) {
  const auto& in = paged_in<F>(next_n, ctx);
  const int threads = static_cast<int>(st.range(0));
  const auto schedule =
      ml::get_paged_mqa_logits_metadata(in.lens_view(), in.page_kv, pool(threads).concurrency());
  ml::logits_buffer<ml::bf16> out(in.B * in.next_n, in.context);
  const ml::options opt{.executor = pool(threads)};
  for (auto _ : st) {
    ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, in.q.view(), in.cache.view(), in.wv(),
                                 in.lens_view(), in.table_view(), schedule, in.context, out.view(),
                                 opt);
    benchmark::ClobberMemory();
  }
  set_counters(st, in.valid_pairs(), in.H, in.bytes());
}

template <class F>
void lib_sparse(benchmark::State& st) {
  const auto& in = sparse_in<F>();
  const auto meta = ml::get_sparse_mqa_logits_metadata(in.ks, in.ke, in.N, in.idx_view(), in.blk);
  ml::logits_buffer<ml::bf16> out(in.rows_n, in.cap * in.blk);
  const ml::options opt{.executor = pool(static_cast<int>(st.range(0)))};
  for (auto _ : st) {
    ml::fp8_fp4_sparse_mqa_logits(ml::backend::host{}, in.q.view(), in.kv.view(), in.wv(), meta,
                                  out.view(), opt);
    benchmark::ClobberMemory();
  }
  set_counters(st, in.valid_pairs(), in.H, in.bytes());
}

template <class F>
void lib_paged_sparse(benchmark::State& st) {
  const auto& in = sparse_in<F>();
  const auto meta =
      ml::get_paged_sparse_mqa_logits_metadata(in.lens, in.table_view(), 64, in.idx_view(), in.blk);
  ml::logits_buffer<ml::bf16> out(in.rows_n, in.cap * in.blk);
  const ml::options opt{.executor = pool(static_cast<int>(st.range(0)))};
  // The first call gathers the selection into the metadata (the snapshot); timed calls reuse it.
  ml::fp8_fp4_paged_sparse_mqa_logits(ml::backend::host{}, in.q.view(), in.cache.view(), in.wv(),
                                      meta, out.view(), opt);
  for (auto _ : st) {
    ml::fp8_fp4_paged_sparse_mqa_logits(ml::backend::host{}, in.q.view(), in.cache.view(), in.wv(),
                                        meta, out.view(), opt);
    benchmark::ClobberMemory();
  }
  set_counters(st, in.valid_pairs(), in.H, in.bytes());
}

// ---- the Eigen baseline ----

template <class F>
void eigen_dense(benchmark::State& st, std::int64_t H) {
  const auto& in = dense_in<F>(H);
  ml::logits_buffer<ml::bf16> out(in.num_q, in.N);
  for (auto _ : st) {
    bench::eigen_dense(in, out.view(), pool(static_cast<int>(st.range(0))));
    benchmark::ClobberMemory();
  }
  set_counters(st, in.valid_pairs(), in.H, in.bytes());
}

template <class F>
void eigen_paged(benchmark::State& st, std::int64_t next_n, std::int64_t ctx) {
  const auto& in = paged_in<F>(next_n, ctx);
  ml::logits_buffer<ml::bf16> out(in.B * in.next_n, in.context);
  for (auto _ : st) {
    bench::eigen_paged(in, out.view(), pool(static_cast<int>(st.range(0))));
    benchmark::ClobberMemory();
  }
  set_counters(st, in.valid_pairs(), in.H, in.bytes());
}

template <class F>
void eigen_sparse(benchmark::State& st, bool paged) {
  const auto& in = sparse_in<F>();
  ml::logits_buffer<ml::bf16> out(in.rows_n, in.cap * in.blk);
  for (auto _ : st) {
    bench::eigen_sparse(in, paged, out.view(), pool(static_cast<int>(st.range(0))));
    benchmark::ClobberMemory();
  }
  set_counters(st, in.valid_pairs(), in.H, in.bytes());
}

// ---- the scalar reference (ref::, double precision), on a reduced dense shape ----

template <class F>
void reference_dense(benchmark::State& st) {
  const bench::dense_inputs<F> in(4, 1024, 64);
  std::int64_t pairs = 0;
  for (auto _ : st) {
    const auto r =
        ref::dense(in.q.view(), in.kv.view(), in.wv(), std::span<const std::int32_t>(in.ks),
                   std::span<const std::int32_t>(in.ke), in.N);
    benchmark::DoNotOptimize(r.value.data());
    pairs = in.valid_pairs();
  }
  set_counters(st, pairs, in.H, in.bytes());
}

// ---- registration: impl/shape/format/threads:n ----

template <class Fn>
void add(const std::string& name, Fn fn, bool all_thread_counts = true) {
  auto* b = benchmark::RegisterBenchmark(name.c_str(), fn);
  b->Arg(1);
  if (all_thread_counts && all_threads > 1) b->Arg(all_threads);
  // Wall-clock time per call; CPU time of the whole process (all pool threads), so FLOP per
  // CPU-second shows parallel efficiency even when other processes share the cores.
  b->ArgName("threads")->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);
}

template <class F>
void register_format() {
  const std::string f = F::name;
  for (std::int64_t H : {64, 32}) {
    const std::string shape = "dense_1024x8192_H" + std::to_string(H) + "/" + f;
    add("mqalogits/" + shape, [H](benchmark::State& st) { lib_dense<F>(st, H); });
    add("eigen/" + shape, [H](benchmark::State& st) { eigen_dense<F>(st, H); });
  }
  for (std::int64_t ctx : {8192, 32768})
    for (std::int64_t next_n : {1, 2}) {
      const std::string shape =
          "paged_64x" + std::to_string(next_n) + "x" + std::to_string(ctx) + "_H64/" + f;
      add("mqalogits/" + shape,
          [next_n, ctx](benchmark::State& st) { lib_paged<F>(st, next_n, ctx); });
      add("eigen/" + shape,
          [next_n, ctx](benchmark::State& st) { eigen_paged<F>(st, next_n, ctx); });
    }
  const std::string sparse = "sparse_256x2048_cap128_B16_H64/" + f;
  add("mqalogits/" + sparse, [](benchmark::State& st) { lib_sparse<F>(st); });
  add("eigen/" + sparse, [](benchmark::State& st) { eigen_sparse<F>(st, false); });
  const std::string psparse = "paged_sparse_256x2048_cap128_B16_H64/" + f;
  add("mqalogits/" + psparse, [](benchmark::State& st) { lib_paged_sparse<F>(st); });
  add("eigen/" + psparse, [](benchmark::State& st) { eigen_sparse<F>(st, true); });
  add(
      "reference/dense_4x1024_H64/" + f, [](benchmark::State& st) { reference_dense<F>(st); },
      false);
}

const int registered = [] {
  // Which host path the library runs in this binary, and which input scales: make_results.py
  // picks the peaks to compare with from it.
  benchmark::AddCustomContext("mqalogits_isa", ml::host_isa_name());
  benchmark::AddCustomContext("mqalogits_scales", bench::row_scales() ? "row" : "block");
  register_format<ml::mxfp8>();
  register_format<ml::mxfp4>();
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
