// A paired benchmark for shared or noisy machines: every kernel call is timed and divided by
// the fp32 FMA peak measured right before and after it in the same process, so a round slowed
// by a neighbour shows as a low ratio instead of a wrong absolute figure. MXFP8 and MXFP4 side
// by side, reduced shapes; best and median of N rounds. x86-64 on an AVX2 or AVX-512 path (the
// peak loop is vfmadd231ps of the path's vector width: zmm on the AVX-512 paths, ymm on AVX2).
// Built twice: mqalogits_paired with runtime dispatch (for the baseline CPU, as shipped) and
// mqalogits_paired_native header-only with -march=native, to measure what dispatch costs.
//
//   build/bench/mqalogits_paired [rounds] [shape filter] [threads]
//   MQALOGITS_BENCH_SCALES=row build/bench/mqalogits_paired   # rows that fold (MXFP4)
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "fma_peak.hpp"
#include "inputs.hpp"

#if defined(__x86_64__)

namespace {

namespace ml = mqalogits;
using bench::cpu_seconds;
using bench::fma_peak_gflops;
using bench::peak_instruction;
using bench::wall_seconds;

// The label a format's figures are printed under.
template <class F>
const char* label() {
  return std::is_same_v<F, ml::mxfp8> ? "MXFP8" : std::is_same_v<F, ml::mxfp4> ? "MXFP4" : "FP8tok";
}

struct kernel {
  std::string name;
  const char* format;
  double flop;
  std::function<void(const ml::options&)> run;
};

// The shape filter (the second argument). A shape it leaves out is named only: its inputs (a
// scattered cache maps 4 GiB) are not made.
std::string shape_filter;
bool left_out(const std::string& name) {
  return !shape_filter.empty() && name.find(shape_filter) == std::string::npos;
}
// The kernel of a shape left out: its name alone.
template <class F>
kernel named_only(const std::string& name) {
  return {name, label<F>(), 0, nullptr};
}

template <class F>
kernel dense(std::int64_t nq, std::int64_t n, std::int64_t h) {
  const std::string name =
      "dense " + std::to_string(nq) + "x" + std::to_string(n) + " H" + std::to_string(h);
  if (left_out(name)) return named_only<F>(name);
  auto in = std::make_shared<bench::dense_inputs<F>>(nq, n, h);
  auto out = std::make_shared<ml::logits_buffer<ml::bf16>>(in->num_q, in->N);
  return {name, label<F>(),
          2.0 * static_cast<double>(h) * ml::head_dim * static_cast<double>(in->valid_pairs()),
          [in, out](const ml::options& opt) {
            ml::fp8_fp4_mqa_logits(ml::backend::host{}, in->q.view(), in->kv.view(), in->wv(),
                                   std::span<const std::int32_t>(in->ks),
                                   std::span<const std::int32_t>(in->ke), in->N, out->view(), opt);
          }};
}

// Paged decode (page 64) into bf16 logits, or, with topk > 0, into the best topk slots of each
// row (the fused top-k, as an engine's decode step uses it). H heads; `scattered`: the pages lie
// at random over a 4 GiB cache without huge pages (bench::paged_cache), as in a serving engine.
template <class F>
kernel paged(std::int64_t b, std::int64_t next_n, std::int64_t ctx, std::int64_t topk = 0,
             std::int64_t h = 64, bool scattered = false) {
  const std::string name = "paged " + std::to_string(b) + "x" + std::to_string(next_n) + "x" +
                           std::to_string(ctx) + (topk ? " top" + std::to_string(topk) : "") +
                           (h != 64 ? " H" + std::to_string(h) : "") +
                           (scattered ? " scattered" : "");
  if (left_out(name)) return named_only<F>(name);
  auto in = std::make_shared<bench::paged_inputs<F>>(b, next_n, ctx, h,
                                                     scattered ? std::size_t{4} << 30 : 0);
  using schedule_t = decltype(ml::get_paged_mqa_logits_metadata(in->lens_view(), in->page_kv, 1));
  auto schedule = std::make_shared<schedule_t>(
      ml::get_paged_mqa_logits_metadata(in->lens_view(), in->page_kv, 1));
  const std::int64_t rows = in->B * in->next_n;
  auto out = std::make_shared<ml::logits_buffer<ml::bf16>>(topk ? 1 : rows, in->context);
  auto idx = std::make_shared<std::vector<std::int32_t>>(static_cast<std::size_t>(rows * topk));
  return {name, label<F>(),
          2.0 * static_cast<double>(h) * ml::head_dim * static_cast<double>(in->valid_pairs()),
          [in, out, idx, schedule, rows, topk](const ml::options& opt) {
            if (topk)
              ml::fp8_fp4_paged_mqa_logits(
                  ml::backend::host{}, in->q.view(), in->cache.view(), in->wv(), in->lens_view(),
                  in->table_view(), *schedule, in->context,
                  ml::topk(ml::matrix_view<std::int32_t>(idx->data(), rows, topk)), opt);
            else
              ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, in->q.view(), in->cache.view(),
                                           in->wv(), in->lens_view(), in->table_view(), *schedule,
                                           in->context, out->view(), opt);
          }};
}

template <class F>
kernel sparse() {
  const std::string name = "sparse 64x128x16";
  if (left_out(name)) return named_only<F>(name);
  auto in = std::make_shared<bench::sparse_inputs<F>>(64, 128, 16, 32768, 64);
  using meta_t =
      decltype(ml::get_sparse_mqa_logits_metadata(in->ks, in->ke, in->N, in->idx_view(), in->blk));
  auto meta = std::make_shared<meta_t>(
      ml::get_sparse_mqa_logits_metadata(in->ks, in->ke, in->N, in->idx_view(), in->blk));
  auto out = std::make_shared<ml::logits_buffer<ml::bf16>>(in->rows_n, in->cap * in->blk);
  return {name, label<F>(), 2.0 * 64 * ml::head_dim * static_cast<double>(in->valid_pairs()),
          [in, out, meta](const ml::options& opt) {
            ml::fp8_fp4_sparse_mqa_logits(ml::backend::host{}, in->q.view(), in->kv.view(),
                                          in->wv(), *meta, out->view(), opt);
          }};
}

// DeepSeek-V3.2's indexer decode step as vLLM calls it: 64 heads, page 64, fp32 weights and fp32
// logits (upstream's fp8_paged_mqa_logits), pages scattered over a 4 GiB cache without huge
// pages. bench/python_decode.py times the same call through the Python module.
template <class F>
kernel deepseek_decode(std::int64_t b, std::int64_t next_n, std::int64_t ctx) {
  const std::string name = "deepseek decode " + std::to_string(b) + "x" + std::to_string(next_n) +
                           "x" + std::to_string(ctx) + " fp32";
  if (left_out(name)) return named_only<F>(name);
  auto in = std::make_shared<bench::paged_inputs<F>>(b, next_n, ctx, 64, std::size_t{4} << 30);
  using schedule_t = decltype(ml::get_paged_mqa_logits_metadata(in->lens_view(), in->page_kv, 1));
  auto schedule = std::make_shared<schedule_t>(
      ml::get_paged_mqa_logits_metadata(in->lens_view(), in->page_kv, 1));
  const std::int64_t rows = in->B * in->next_n;
  auto w = std::make_shared<std::vector<float>>();
  for (const ml::bf16 x : in->w) w->push_back(ml::to_float(x));
  auto out = std::make_shared<ml::logits_buffer<float>>(rows, in->context);
  return {name, label<F>(), 2.0 * 64 * ml::head_dim * static_cast<double>(in->valid_pairs()),
          [in, w, out, schedule, rows](const ml::options& opt) {
            // FP8 per-token Q carries no scales (engines fold them into the weights).
            const ml::rows_view<F> q(
                in->q.data.data(),
                std::is_same_v<F, ml::fp8_per_token> ? nullptr : in->q.scales.data(), in->q.n);
            ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, q, in->cache.view(),
                                         ml::matrix_view<const float>(w->data(), rows, 64, 64),
                                         in->lens_view(), in->table_view(), *schedule, in->context,
                                         out->view(), opt);
          }};
}

// The sparse shape's selection read through a block table over the same KV's pages.
template <class F>
kernel paged_sparse() {
  const std::string name = "paged sparse 64x128x16";
  if (left_out(name)) return named_only<F>(name);
  auto in = std::make_shared<bench::sparse_inputs<F>>(64, 128, 16, 32768, 64);
  using meta_t = decltype(ml::get_paged_sparse_mqa_logits_metadata(in->lens, in->table_view(), 64,
                                                                   in->idx_view(), in->blk));
  auto meta = std::make_shared<meta_t>(ml::get_paged_sparse_mqa_logits_metadata(
      in->lens, in->table_view(), 64, in->idx_view(), in->blk));
  auto out = std::make_shared<ml::logits_buffer<ml::bf16>>(in->rows_n, in->cap * in->blk);
  return {name, label<F>(), 2.0 * 64 * ml::head_dim * static_cast<double>(in->valid_pairs()),
          [in, out, meta](const ml::options& opt) {
            ml::fp8_fp4_paged_sparse_mqa_logits(ml::backend::host{}, in->q.view(), in->cache.view(),
                                                in->wv(), *meta, out->view(), opt);
          }};
}

// The one-thread FMA peak. With more threads, timed on each thread of the pool at once (in its
// own CPU seconds) and averaged: so the peak is what one thread reaches while the others run too,
// and the pool's workers are awake when the call's timing starts. Timed on the calling thread
// alone, the peak left the second vCPU of a 2-vCPU guest idle for ~10 ms before each batch of
// calls, and the host then took milliseconds to run it again: short two-thread calls read
// slower than one thread (paged 1 x 1 x 1024 at 0.7-0.9x).
double peak_gflops(ml::thread_pool& pool, int threads) {
  if (threads == 1) return fma_peak_gflops();
  std::vector<double> each(static_cast<std::size_t>(threads));
  auto time_one = [&](std::int64_t t) { each[static_cast<std::size_t>(t)] = fma_peak_gflops(); };
  pool.parallel_for(threads, time_one);
  double sum = 0;
  for (const double p : each) sum += p;
  return sum / threads;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

// [rounds] [shape filter] [threads] [spin]: with one thread the call runs on the calling thread
// and is timed in its CPU seconds; with more, on a pool of that many, timed on the wall clock
// against that many times the one-thread peak. spin: microseconds the pool's workers poll for
// the next call before they sleep (thread_pool's spin; 0, the default, sleeps at once).
int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 9;
  shape_filter = argc > 2 ? argv[2] : "";
  const int threads = argc > 3 ? std::max(1, std::atoi(argv[3])) : 1;
  const int spin = argc > 4 ? std::max(0, std::atoi(argv[4])) : 0;
  if (std::string(ml::host_isa_name()).rfind("avx", 0) != 0) {
    std::printf("mqalogits_paired: the host path is %s; the peak loops need AVX2 + FMA\n",
                ml::host_isa_name());
    return 0;
  }
  std::printf(
      "host path %s, input scales %s, %d thread%s (spin %d us), %d rounds, peak = %s chains\n",
      ml::host_isa_name(), bench::row_scales() ? "row" : "block", threads, threads > 1 ? "s" : "",
      spin, rounds, peak_instruction());
  ml::thread_pool pool(threads, std::chrono::microseconds{spin});
  ml::options opt;
  if (threads > 1) opt.executor = pool;
  const auto seconds = threads > 1 ? &wall_seconds : &cpu_seconds;
  std::vector<std::function<std::pair<kernel, kernel>()>> shapes = {
      [] {
        return std::pair{dense<ml::mxfp8>(32, 8192, 64), dense<ml::mxfp4>(32, 8192, 64)};
      },
      [] {
        return std::pair{dense<ml::mxfp8>(64, 8192, 32), dense<ml::mxfp4>(64, 8192, 32)};
      },
      [] {
        return std::pair{paged<ml::mxfp8>(8, 1, 8192), paged<ml::mxfp4>(8, 1, 8192)};
      },
      [] {
        return std::pair{paged<ml::mxfp8>(8, 2, 8192), paged<ml::mxfp4>(8, 2, 8192)};
      },
      [] {
        return std::pair{paged<ml::mxfp8>(8, 1, 8192, 2048), paged<ml::mxfp4>(8, 1, 8192, 2048)};
      },
      [] {
        return std::pair{paged<ml::mxfp8>(1, 1, 1024), paged<ml::mxfp4>(1, 1, 1024)};
      },
      [] {
        return std::pair{sparse<ml::mxfp8>(), sparse<ml::mxfp4>()};
      },
      [] {
        return std::pair{paged_sparse<ml::mxfp8>(), paged_sparse<ml::mxfp4>()};
      },
      // Decode as engines serve it: many requests, pages scattered over a large cache.
      [] {
        return std::pair{paged<ml::mxfp8>(64, 1, 8192, 0, 64, true),
                         paged<ml::mxfp4>(64, 1, 8192, 0, 64, true)};
      },
      [] {
        return std::pair{paged<ml::mxfp8>(64, 2, 8192, 0, 64, true),
                         paged<ml::mxfp4>(64, 2, 8192, 0, 64, true)};
      },
      [] {
        return std::pair{paged<ml::mxfp8>(64, 1, 8192, 0, 32, true),
                         paged<ml::mxfp4>(64, 1, 8192, 0, 32, true)};
      },
      [] {
        return std::pair{paged<ml::mxfp8>(1, 1, 32768, 0, 64, true),
                         paged<ml::mxfp4>(1, 1, 32768, 0, 64, true)};
      },
      [] {
        return std::pair{deepseek_decode<ml::fp8_per_token>(8, 1, 16384),
                         deepseek_decode<ml::mxfp4>(8, 1, 16384)};
      },
      // The vLLM / sglang cache: FP8 with one fp32 scale per token (132 bytes), against MXFP4.
      [] {
        return std::pair{paged<ml::fp8_per_token>(64, 1, 8192, 0, 64, true),
                         paged<ml::mxfp4>(64, 1, 8192, 0, 64, true)};
      },
      [] {
        return std::pair{paged<ml::fp8_per_token>(64, 1, 8192, 0, 32, true),
                         paged<ml::mxfp4>(64, 1, 8192, 0, 32, true)};
      }};
  for (auto& make : shapes) {
    auto [k8, k4] = make();
    if (left_out(k8.name)) continue;
    // Short calls are repeated so that each timing spans at least ~2 ms.
    k8.run(opt);  // warm: workspaces, pages
    k4.run(opt);
    const auto reps = [&](const kernel& k) {
      const double t0 = seconds();
      k.run(opt);
      return std::max(1, static_cast<int>(2e-3 / std::max(1e-7, seconds() - t0)));
    };
    const int n8 = reps(k8), n4 = reps(k4);
    std::vector<double> r8, r4, g8, g4;  // % of the peak, GFLOP/s
    double top = 0;
    for (int r = 0; r < rounds; ++r) {
      const double p0 = peak_gflops(pool, threads);
      double t = seconds();
      for (int i = 0; i < n8; ++i) k8.run(opt);
      const double t8 = (seconds() - t) / n8;
      const double p1 = peak_gflops(pool, threads);
      t = seconds();
      for (int i = 0; i < n4; ++i) k4.run(opt);
      const double t4 = (seconds() - t) / n4;
      const double p2 = peak_gflops(pool, threads);
      top = std::max({top, p0, p1, p2});
      r8.push_back(k8.flop / t8 / 1e9 / (threads * (p0 + p1) / 2));
      r4.push_back(k4.flop / t4 / 1e9 / (threads * (p1 + p2) / 2));
      g8.push_back(k8.flop / t8 / 1e9);
      g4.push_back(k4.flop / t4 / 1e9);
    }
    std::printf(
        "%-34s %s best %5.1f%% median %5.1f%% of fp32 FMA peak | %s best %5.1f%% median "
        "%5.1f%% | %s/%s best %.2fx median %.2fx (peak %.0f GFLOP/s per thread) | medians "
        "%.1f / %.1f GFLOP/s\n",
        (k8.name + (k8.format == std::string("MXFP8") ? "" : " " + std::string(k8.format))).c_str(),
        k8.format, 100 * *std::max_element(r8.begin(), r8.end()), 100 * median(r8), k4.format,
        100 * *std::max_element(r4.begin(), r4.end()), 100 * median(r4), k4.format, k8.format,
        *std::max_element(r4.begin(), r4.end()) / *std::max_element(r8.begin(), r8.end()),
        median(r4) / median(r8), top, median(g8), median(g4));
  }
}
#else
int main() {
  std::puts("mqalogits_paired: needs an x86-64 build (its peak loops are AVX2 and AVX-512)");
}
#endif
