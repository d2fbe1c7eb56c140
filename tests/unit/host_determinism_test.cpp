// Results of the host backend are bitwise identical for every thread count (1..4 pool threads,
// the serial executor, an engine-style pool that runs tasks in reverse), for every schedule
// width of the paged metadata, and across repeated runs of the same call — for all four kernels,
// every format, bf16 and fp32 logits.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"
#include "support/kernel_check.hpp"

namespace {

namespace ml = mqalogits;

// An executor that runs tasks last to first: the opposite order of the serial one.
struct reverse_executor {
  void parallel_for(std::int64_t n, ml::task_ref task) const {
    for (std::int64_t i = n - 1; i >= 0; --i) task(i);
  }
  int concurrency() const { return 3; }
};

// Runs `call(out, options, workers)` with every executor and compares bitwise to the first.
template <class O, class Call>
void check_all_executors(const std::string& what, std::int64_t rows, std::int64_t cols, Call call) {
  ml::logits_buffer<O> first(rows, cols);
  call(first, ml::options{}, 1);
  std::int64_t finite = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) finite += std::isfinite(ml::to_float(first(r, c)));
  INFO(what);
  REQUIRE(finite > 0);
  for (int threads = 1; threads <= 4; ++threads) {
    ml::thread_pool pool(threads);
    for (int repeat = 0; repeat < 2; ++repeat) {
      ml::logits_buffer<O> out(rows, cols);
      call(out, ml::options{.executor = pool}, threads + repeat);
      INFO(what << ": " << threads << " pool threads, repeat " << repeat);
      CHECK(check::bitwise_equal(first, out));
    }
  }
  reverse_executor rev;
  ml::logits_buffer<O> out(rows, cols);
  call(out, ml::options{.executor = rev}, 7);
  INFO(what << ": reverse-order executor, 7 schedule workers");
  CHECK(check::bitwise_equal(first, out));
}

template <class Combo>
void run_all_kernels() {
  using F = typename Combo::format;
  using O = typename Combo::out;
  using W = typename Combo::weight;
  const std::string name = std::string(F::name) + ", " + check::out_name<O>();
  std::mt19937_64 rng(2024);
  const std::int64_t H = 64;

  {  // dense, causal-ish ranges, 3 row blocks and several key chunks
    const std::int64_t num_q = 21, N = 1300;
    auto q = ref::rand::rows<F>(rng, num_q * H);
    auto kv = ref::rand::rows<F>(rng, N);
    auto w = ref::rand::weights<W>(rng, num_q, H);
    std::vector<std::int32_t> ks(num_q), ke(num_q);
    for (std::int64_t r = 0; r < num_q; ++r) {
      ks[r] = static_cast<std::int32_t>(ref::rand::uniform(rng, 0, 200));
      ke[r] = static_cast<std::int32_t>(ref::rand::uniform(rng, ks[r], N));
    }
    check_all_executors<O>("dense " + name, num_q, N, [&](auto& out, ml::options opt, int) {
      ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), std::span<const std::int32_t>(ks),
                             std::span<const std::int32_t>(ke), N, out.view(), opt);
    });
  }
  {  // paged decode, next_n = 2, schedules of 1..8 workers
    const std::int64_t B = 5, next_n = 2, page_kv = 64, pages = 80, max_blocks = 20;
    auto q = ref::rand::rows<F>(rng, B * next_n * H);
    auto w = ref::rand::weights<W>(rng, B * next_n, H);
    auto cache = ref::rand::paged_cache<F>(rng, pages, page_kv);
    auto lens = ref::rand::context_lens(rng, B, next_n, max_blocks * page_kv, 1);
    auto table = ref::rand::block_table(rng, lens, max_blocks, page_kv, pages);
    const std::int64_t cols = max_blocks * page_kv;
    check_all_executors<O>(
        "paged " + name, B * next_n, cols, [&](auto& out, ml::options opt, int workers) {
          const auto sched = ml::get_paged_mqa_logits_metadata(
              lens.view(), static_cast<std::int32_t>(page_kv), workers);
          ml::fp8_fp4_paged_mqa_logits(q.view(), cache.view(), w.view(), lens.view(), table.view(),
                                       sched, cols, out.view(), opt);
        });
  }
  {  // sparse and paged sparse
    const std::int64_t rows = 9, cap = 40, blk = 16, N = 2048;
    auto q = ref::rand::rows<F>(rng, rows * H);
    auto w = ref::rand::weights<W>(rng, rows, H);
    auto kv = ref::rand::rows<F>(rng, N);
    std::vector<std::int32_t> ks(rows, 0), ke(rows, static_cast<std::int32_t>(N));
    auto idx = ref::rand::sparse_indices(rng, rows, cap, N / blk);
    const auto meta = ml::get_sparse_mqa_logits_metadata(ks, ke, N, idx.view(), blk);
    check_all_executors<O>("sparse " + name, rows, cap * blk, [&](auto& out, ml::options opt, int) {
      ml::fp8_fp4_sparse_mqa_logits(q.view(), kv.view(), w.view(), meta, out.view(), opt);
    });

    const std::int64_t pages = 40, max_blocks = 32;
    auto cache = ref::rand::paged_cache<F>(rng, pages, 64);
    std::vector<std::int32_t> lens(rows, static_cast<std::int32_t>(max_blocks * 64));
    std::vector<std::int64_t> keys(rows, max_blocks * 64);
    auto table = ref::rand::block_table(rng, keys, max_blocks, 64, pages);
    const auto pmeta =
        ml::get_paged_sparse_mqa_logits_metadata(lens, table.view(), 64, idx.view(), blk);
    check_all_executors<O>("paged sparse " + name, rows, cap * blk,
                           [&](auto& out, ml::options opt, int) {
                             ml::fp8_fp4_paged_sparse_mqa_logits(q.view(), cache.view(), w.view(),
                                                                 pmeta, out.view(), opt);
                           });
  }
}

}  // namespace

// One combination per format, both logit types among them. A thread count decides which worker
// scores which rows and keys, never the arithmetic of a logit, so the weight types add nothing
// here (the kernel tests run every combination); under emulation and the sanitizers all eight
// made this the slowest test of the suite.
using determinism_combos = std::tuple<check::combo<ml::mxfp8, ml::bf16, ml::bf16>,
                                      check::combo<ml::mxfp4, float, ml::bf16>,
                                      check::combo<ml::fp8_per_token, float, float>>;

TEMPLATE_LIST_TEST_CASE("host backend: bitwise identical for every thread count",
                        "[host][determinism]", determinism_combos) {
  run_all_kernels<TestType>();
}
