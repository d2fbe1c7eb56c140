// A paired benchmark for shared or noisy machines: every kernel call is timed in thread CPU
// seconds and divided by the fp32 FMA peak measured right before and after it in the same
// process, so a round slowed by a neighbour shows as a low ratio instead of a wrong absolute
// figure. One thread (the calling one), MXFP8 and MXFP4 side by side, reduced shapes; best and
// median of N rounds. x86 with AVX2 + FMA or AVX-512 (the peak loop is vfmadd231ps of the
// build's vector width: zmm on AVX-512 builds, ymm otherwise).
//
//   build-perf/bench/mqalogits_paired [rounds] [shape filter]
//   MQALOGITS_BENCH_SCALES=row build-perf/bench/mqalogits_paired   # rows that fold (MXFP4)
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "inputs.hpp"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

namespace {

namespace ml = mqalogits;

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The fp32 FMA peak of the vectors the host path uses: zmm on AVX-512 builds, ymm on AVX2.
#if defined(__AVX512F__)
using peak_vec = __m512;
constexpr const char* peak_instruction = "vfmadd231ps zmm";
inline peak_vec peak_set(float v) {
  return _mm512_set1_ps(v);
}
inline peak_vec peak_fma(peak_vec x, peak_vec a, peak_vec b) {
  return _mm512_fmadd_ps(x, a, b);
}
inline float peak_first(peak_vec v) {
  return _mm512_cvtss_f32(v);
}
#else
using peak_vec = __m256;
constexpr const char* peak_instruction = "vfmadd231ps ymm";
inline peak_vec peak_set(float v) {
  return _mm256_set1_ps(v);
}
inline peak_vec peak_fma(peak_vec x, peak_vec a, peak_vec b) {
  return _mm256_fmadd_ps(x, a, b);
}
inline float peak_first(peak_vec v) {
  return _mm256_cvtss_f32(v);
}
#endif
constexpr int peak_lanes = sizeof(peak_vec) / sizeof(float);

// 12 independent FMA chains (FMA latency x 2 pipes needs at least 8), written out so that every
// chain stays in its own register.
constexpr int chains = 12;
__attribute__((noinline)) void fma_chains(peak_vec* acc, long steps) {
  const peak_vec a = peak_set(0.999f), b = peak_set(1e-7f);
  peak_vec x0 = acc[0], x1 = acc[1], x2 = acc[2], x3 = acc[3], x4 = acc[4], x5 = acc[5];
  peak_vec x6 = acc[6], x7 = acc[7], x8 = acc[8], x9 = acc[9], x10 = acc[10], x11 = acc[11];
  for (long i = 0; i < steps; ++i) {
    x0 = peak_fma(x0, a, b);
    x1 = peak_fma(x1, a, b);
    x2 = peak_fma(x2, a, b);
    x3 = peak_fma(x3, a, b);
    x4 = peak_fma(x4, a, b);
    x5 = peak_fma(x5, a, b);
    x6 = peak_fma(x6, a, b);
    x7 = peak_fma(x7, a, b);
    x8 = peak_fma(x8, a, b);
    x9 = peak_fma(x9, a, b);
    x10 = peak_fma(x10, a, b);
    x11 = peak_fma(x11, a, b);
    __asm__ volatile(""
                     : "+v"(x0), "+v"(x1), "+v"(x2), "+v"(x3), "+v"(x4), "+v"(x5), "+v"(x6),
                       "+v"(x7), "+v"(x8), "+v"(x9), "+v"(x10), "+v"(x11));
  }
  acc[0] = x0, acc[1] = x1, acc[2] = x2, acc[3] = x3, acc[4] = x4, acc[5] = x5;
  acc[6] = x6, acc[7] = x7, acc[8] = x8, acc[9] = x9, acc[10] = x10, acc[11] = x11;
}

double fma_peak_gflops() {
  peak_vec acc[chains];
  for (auto& a : acc) a = peak_set(1.0f);
  constexpr long steps = 2000000;
  const double t0 = cpu_seconds();
  fma_chains(acc, steps);
  const double t = cpu_seconds() - t0;
  if (peak_first(acc[0]) == 12345.0f) std::puts("");  // keeps the chains alive
  return 2.0 * peak_lanes * chains * static_cast<double>(steps) / t / 1e9;
}

struct kernel {
  std::string name;
  double flop;
  std::function<void()> run;
};

template <class F>
kernel dense(std::int64_t nq, std::int64_t n, std::int64_t h) {
  auto in = std::make_shared<bench::dense_inputs<F>>(nq, n, h);
  auto out = std::make_shared<ml::logits_buffer<ml::bf16>>(in->num_q, in->N);
  return {"dense " + std::to_string(nq) + "x" + std::to_string(n) + " H" + std::to_string(h),
          2.0 * static_cast<double>(h) * ml::head_dim * static_cast<double>(in->valid_pairs()),
          [in, out] {
            ml::fp8_fp4_mqa_logits(ml::backend::host{}, in->q.view(), in->kv.view(), in->wv(),
                                   std::span<const std::int32_t>(in->ks),
                                   std::span<const std::int32_t>(in->ke), in->N, out->view());
          }};
}

template <class F>
kernel paged(std::int64_t b, std::int64_t next_n, std::int64_t ctx) {
  auto in = std::make_shared<bench::paged_inputs<F>>(b, next_n, ctx, 64);
  using schedule_t = decltype(ml::get_paged_mqa_logits_metadata(in->lens_view(), in->page_kv, 1));
  auto schedule = std::make_shared<schedule_t>(
      ml::get_paged_mqa_logits_metadata(in->lens_view(), in->page_kv, 1));
  auto out = std::make_shared<ml::logits_buffer<ml::bf16>>(in->B * in->next_n, in->context);
  return {"paged " + std::to_string(b) + "x" + std::to_string(next_n) + "x" + std::to_string(ctx),
          2.0 * 64 * ml::head_dim * static_cast<double>(in->valid_pairs()), [in, out, schedule] {
            ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, in->q.view(), in->cache.view(),
                                         in->wv(), in->lens_view(), in->table_view(), *schedule,
                                         in->context, out->view());
          }};
}

template <class F>
kernel sparse() {
  auto in = std::make_shared<bench::sparse_inputs<F>>(64, 128, 16, 32768, 64);
  using meta_t =
      decltype(ml::get_sparse_mqa_logits_metadata(in->ks, in->ke, in->N, in->idx_view(), in->blk));
  auto meta = std::make_shared<meta_t>(
      ml::get_sparse_mqa_logits_metadata(in->ks, in->ke, in->N, in->idx_view(), in->blk));
  auto out = std::make_shared<ml::logits_buffer<ml::bf16>>(in->rows_n, in->cap * in->blk);
  return {"sparse 64x128x16", 2.0 * 64 * ml::head_dim * static_cast<double>(in->valid_pairs()),
          [in, out, meta] {
            ml::fp8_fp4_sparse_mqa_logits(ml::backend::host{}, in->q.view(), in->kv.view(),
                                          in->wv(), *meta, out->view());
          }};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 9;
  const std::string only = argc > 2 ? argv[2] : "";
  std::printf("host path %s, input scales %s, one thread, %d rounds, peak = %s chains\n",
              ml::host_isa_name(), bench::row_scales() ? "row" : "block", rounds, peak_instruction);
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
        return std::pair{sparse<ml::mxfp8>(), sparse<ml::mxfp4>()};
      }};
  for (auto& make : shapes) {
    auto [k8, k4] = make();
    if (!only.empty() && k8.name.find(only) == std::string::npos) continue;
    k8.run();  // warm: workspaces, pages
    k4.run();
    std::vector<double> r8, r4;
    double top = 0;
    for (int r = 0; r < rounds; ++r) {
      const double p0 = fma_peak_gflops();
      double t = cpu_seconds();
      k8.run();
      const double t8 = cpu_seconds() - t;
      const double p1 = fma_peak_gflops();
      t = cpu_seconds();
      k4.run();
      const double t4 = cpu_seconds() - t;
      const double p2 = fma_peak_gflops();
      top = std::max({top, p0, p1, p2});
      r8.push_back(k8.flop / t8 / 1e9 / ((p0 + p1) / 2));
      r4.push_back(k4.flop / t4 / 1e9 / ((p1 + p2) / 2));
    }
    std::printf(
        "%-20s MXFP8 best %3.0f%% median %3.0f%% of fp32 FMA peak | MXFP4 best %3.0f%% median "
        "%3.0f%% | MXFP4/MXFP8 best %.2fx median %.2fx (peak %.0f GFLOP/s)\n",
        k8.name.c_str(), 100 * *std::max_element(r8.begin(), r8.end()), 100 * median(r8),
        100 * *std::max_element(r4.begin(), r4.end()), 100 * median(r4),
        *std::max_element(r4.begin(), r4.end()) / *std::max_element(r8.begin(), r8.end()),
        median(r4) / median(r8), top);
  }
}
#else
int main() {
  std::puts("mqalogits_paired: needs an x86 build with AVX2 and FMA");
}
#endif
