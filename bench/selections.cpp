// What each selection output costs against the same kernel writing its logits, in one run:
// DeepSeek-V4.1's shapes (32 heads), MXFP8. Per shape the variants are called in turn, round after
// round (so a slow round hits them alike); each variant's median time, its ratio to the logits
// call's median, and its GFLOP/s against the threads' fp32 FMA peak measured in the same run.
//
//   cmake --build build --target mqalogits_selections
//   build/bench/mqalogits_selections [rounds = 7] [threads = all] [shape filter]
//
// Shapes: the candidate source (dense causal prefill 64 queries x 64K entries; paged decode 4
// requests x next_n 2 at 64K, and 1 request x next_n 2 at 1M entries) with fp32 logits, its
// top-512, its 2048 candidate blocks of 8, and both from one pass; the consumers (sparse and
// paged-sparse over 2048 blocks of 8 = 16,384 columns, 8 rows) with logits, top-512 columns,
// positions, slots.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "fma_peak.hpp"
#include "inputs.hpp"

#if defined(__x86_64__)

namespace {

namespace ml = mqalogits;
using F = ml::mxfp8;
constexpr std::int64_t H = 32, top_k = 512, blocks_n = 2048, block = 8;

struct variant {
  std::string name;
  std::function<void(const ml::options&)> run;
};
struct shape {
  std::string name;
  double flop = 0;
  std::vector<variant> variants;  // the first writes the logits: the baseline
};

// The output buffers of a shape's rows.
struct outputs {
  std::vector<float> logits;
  std::vector<std::int32_t> topk, blocks;
  outputs(std::int64_t rows, std::int64_t cols)
      : logits(static_cast<std::size_t>(rows * cols)),
        topk(static_cast<std::size_t>(rows * top_k)),
        blocks(static_cast<std::size_t>(rows * blocks_n)) {}
};

template <class Call>
std::vector<variant> source_variants(std::int64_t rows, std::int64_t cols, Call call) {
  auto o = std::make_shared<outputs>(rows, cols);
  auto topk = [o, rows] {
    return ml::topk(ml::matrix_view<std::int32_t>(o->topk.data(), rows, top_k));
  };
  auto blocks = [o, rows] {
    return ml::candidate_blocks(ml::matrix_view<std::int32_t>(o->blocks.data(), rows, blocks_n),
                                block);
  };
  return {
      {"logits fp32",
       [=](const ml::options& opt) {
         call(ml::matrix_view<float>(o->logits.data(), rows, cols), opt);
       }},
      {"top-512", [=](const ml::options& opt) { call(topk(), opt); }},
      {"2048 blocks of 8", [=](const ml::options& opt) { call(blocks(), opt); }},
      {"top-512 + blocks",
       [=](const ml::options& opt) { call(ml::topk_and_candidates(topk(), blocks()), opt); }},
  };
}

shape dense_source(std::int64_t nq, std::int64_t n) {
  auto in = std::make_shared<bench::dense_inputs<F>>(nq, n, H);
  shape s{"dense source " + std::to_string(nq) + "x" + std::to_string(n),
          2.0 * H * ml::head_dim * static_cast<double>(in->valid_pairs()),
          {}};
  s.variants = source_variants(nq, n, [in](auto out, const ml::options& opt) {
    ml::fp8_fp4_mqa_logits(in->q.view(), in->kv.view(), in->wv(),
                           std::span<const std::int32_t>(in->ks),
                           std::span<const std::int32_t>(in->ke), 0, out, opt);
  });
  return s;
}

shape paged_source(std::int64_t requests, std::int64_t context) {
  auto in = std::make_shared<bench::paged_inputs<F>>(requests, 2, context, H);
  auto schedule = std::make_shared<ml::paged_mqa_schedule>(ml::get_paged_mqa_logits_metadata(
      in->lens_view(), in->page_kv, static_cast<int>(std::thread::hardware_concurrency())));
  const std::int64_t rows = requests * 2;
  shape s{"paged source " + std::to_string(requests) + "x2x" + std::to_string(context),
          2.0 * H * ml::head_dim * static_cast<double>(in->valid_pairs()),
          {}};
  s.variants = source_variants(rows, context, [in, schedule](auto out, const ml::options& opt) {
    ml::fp8_fp4_paged_mqa_logits(in->q.view(), in->cache.view(), in->wv(), in->lens_view(),
                                 in->table_view(), *schedule, in->context, out, opt);
  });
  return s;
}

shape consumers(std::int64_t rows) {
  auto in = std::make_shared<bench::sparse_inputs<F>>(rows, blocks_n, block, 65536, H);
  auto meta = std::make_shared<ml::sparse_mqa_metadata>(ml::get_sparse_mqa_logits_metadata(
      in->ks, std::span<const std::int32_t>(in->ke), in->N, in->idx_view(), block));
  auto pmeta =
      std::make_shared<ml::paged_sparse_mqa_metadata>(ml::get_paged_sparse_mqa_logits_metadata(
          in->lens, in->table_view(), 64, in->idx_view(), block));
  constexpr std::int64_t cols = blocks_n * block;
  auto o = std::make_shared<outputs>(rows, cols);
  auto idx = [o, rows] { return ml::matrix_view<std::int32_t>(o->topk.data(), rows, top_k); };
  auto logits = [o, rows] { return ml::matrix_view<float>(o->logits.data(), rows, cols); };
  auto sparse = [in, meta](auto out, const ml::options& opt) {
    ml::fp8_fp4_sparse_mqa_logits(in->q.view(), in->kv.view(), in->wv(), *meta, out, opt);
  };
  auto paged = [in, pmeta](auto out, const ml::options& opt) {
    ml::fp8_fp4_paged_sparse_mqa_logits(in->q.view(), in->cache.view(), in->wv(), *pmeta, out, opt);
  };
  return {
      "consumers " + std::to_string(rows) + "x" + std::to_string(cols),
      2.0 * H * ml::head_dim * static_cast<double>(rows * cols),
      {
          {"sparse logits fp32", [=](const ml::options& opt) { sparse(logits(), opt); }},
          {"sparse top-512 columns", [=](const ml::options& opt) { sparse(ml::topk(idx()), opt); }},
          {"sparse top-512 positions",
           [=](const ml::options& opt) { sparse(ml::topk(idx(), ml::topk_index::position), opt); }},
          {"paged-sparse logits fp32", [=](const ml::options& opt) { paged(logits(), opt); }},
          {"paged-sparse top-512 positions",
           [=](const ml::options& opt) { paged(ml::topk(idx(), ml::topk_index::position), opt); }},
          {"paged-sparse top-512 slots",
           [=](const ml::options& opt) { paged(ml::topk(idx(), ml::topk_index::slot), opt); }},
      }};
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  const int threads = argc > 2 ? std::max(1, std::atoi(argv[2]))
                               : static_cast<int>(std::thread::hardware_concurrency());
  const std::string filter = argc > 3 ? argv[3] : "";
  ml::thread_pool pool(threads);
  const ml::options opt{.executor = pool};
  // The threads' peak: one thread's, times the threads (each on its own core).
  const double peak = bench::fma_peak_gflops() * threads;
  std::printf("host path %s, %d threads, fp32 FMA peak %.0f GFLOP/s (%s x %d), %d rounds\n",
              ml::host_isa_name(), threads, peak, bench::peak_instruction(), threads, rounds);
  std::vector<std::function<shape()>> shapes = {
      [] { return dense_source(64, 65536); },
      [] { return paged_source(4, 65536); },
      [] { return paged_source(1, 1 << 20); },
      [] { return consumers(8); },
  };
  for (const auto& make : shapes) {
    shape s = make();
    if (!filter.empty() && s.name.find(filter) == std::string::npos) continue;
    std::vector<std::vector<double>> t(s.variants.size());
    for (auto& v : s.variants) v.run(opt);  // warm: scratch, pages, caches
    for (int r = 0; r < rounds; ++r)
      for (std::size_t v = 0; v < s.variants.size(); ++v) {
        const double t0 = bench::wall_seconds();
        s.variants[v].run(opt);
        t[v].push_back(bench::wall_seconds() - t0);
      }
    auto median = [](std::vector<double> x) {
      std::sort(x.begin(), x.end());
      return x[x.size() / 2];
    };
    std::printf("%s (%.2f GFLOP a call)\n", s.name.c_str(), s.flop * 1e-9);
    double base = 0;
    for (std::size_t v = 0; v < s.variants.size(); ++v) {
      const double m = median(t[v]);
      // The consumers' shape holds two kernels, each with its logits call first.
      if (v == 0 || s.variants[v].name.find("logits") != std::string::npos) base = m;
      std::printf("  %-32s %9.3f ms  %6.3fx its logits call  %7.1f GFLOP/s  %5.1f%% of peak\n",
                  s.variants[v].name.c_str(), m * 1e3, m / base, s.flop / m * 1e-9,
                  100.0 * s.flop / m * 1e-9 / peak);
    }
  }
  return 0;
}

#else
int main() {
  std::puts("mqalogits_selections: x86-64 only (its peak loop is x86 FMA)");
  return 0;
}
#endif
