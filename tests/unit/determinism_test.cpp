// Results are identical across runs and across thread counts, end to end: for every kernel and
// every format (MXFP8, MXFP4 and FP8 per-token), 20 runs whose pool sizes cycle through 1..N
// threads (N = max(8, hardware threads)) and whose paged schedules have 1..9 workers, each
// compared bit for bit with a serial first run. Paged sparse alternates fresh metadata (first-call
// gather) with the first run's metadata (reuse). The NeuronCore model (trn2, trn3) gets the same
// check with 6 runs on smaller shapes (it runs on the calling thread: the executor must not
// matter).
// (host_determinism_test.cpp covers the host driver's executor orders and widths in depth.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <mqalogits/neuron.hpp>

#include "support/kernel_check.hpp"

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"

namespace ml = mqalogits;
using i32 = std::int32_t;
using i64 = std::int64_t;

namespace {

constexpr int runs = 20, model_runs = 6;
constexpr i64 H = 16;

int max_threads() {
  return std::max(8, static_cast<int>(std::thread::hardware_concurrency()));
}

// The byte source for a format: MX formats are generated as themselves; FP8 per-token rows take
// MXFP8 codes (same 128 data bytes, same 132-byte cache token) with fp32 scales written over the
// 4 scale bytes, and Q has no scales at all (upstream folds them into the weights).
template <class F>
using source_format = std::conditional_t<std::is_same_v<F, ml::fp8_per_token>, ml::mxfp8, F>;
template <class F>
constexpr bool per_token = std::is_same_v<F, ml::fp8_per_token>;

template <class F>
struct inputs {
  using S = source_format<F>;
  std::mt19937_64 rng;
  // dense and sparse
  i64 num_q = 7, N = 600;
  ref::rand::owned_rows<S> q, kv;
  std::vector<float> kv_scales;
  ref::rand::owned_matrix<float> w;
  std::vector<i32> ks, ke;
  // paged
  i64 B = 3, next_n = 2, page_kv = 64, pages = 24, max_blocks = 8;
  ref::rand::owned_rows<S> pq;
  ref::rand::owned_matrix<ml::bf16> pw;
  ref::rand::owned_paged_cache<S> cache;
  ref::rand::owned_matrix<i32> lens, table;
  // sparse and paged sparse
  i64 rows = 5, cap = 24, blk = 16;
  ref::rand::owned_rows<S> sq;
  ref::rand::owned_matrix<float> sw;
  ref::rand::owned_matrix<i32> idx, ptable;
  std::vector<i32> sks, ske, plens;

  // small: a quarter of the work, for the (slow, single-threaded) NeuronCore model.
  inputs(std::uint64_t seed, bool small) : rng(seed) {
    if (small) {
      num_q = 3;
      N = 160;
      B = 2;
      pages = 8;
      max_blocks = 3;
      rows = 3;
      cap = 8;
    }
    q = ref::rand::rows<S>(rng, num_q * H);
    kv = ref::rand::rows<S>(rng, N);
    w = ref::rand::weights<float>(rng, num_q, H);
    for (i64 r = 0; r < num_q; ++r) {
      ks.push_back(static_cast<i32>(ref::rand::uniform(rng, -5, 100)));
      ke.push_back(static_cast<i32>(ref::rand::uniform(rng, ks.back(), N + 10)));
    }
    pq = ref::rand::rows<S>(rng, B * next_n * H);
    pw = ref::rand::weights<ml::bf16>(rng, B * next_n, H);
    cache = ref::rand::paged_cache<S>(rng, pages, static_cast<i32>(page_kv));
    lens = ref::rand::context_lens(rng, B, next_n, max_blocks * page_kv, 1);
    table = ref::rand::block_table(rng, lens, max_blocks, static_cast<i32>(page_kv), pages);
    sq = ref::rand::rows<S>(rng, rows * H);
    sw = ref::rand::weights<float>(rng, rows, H);
    idx = ref::rand::sparse_indices(rng, rows, cap, N / blk);
    sks.assign(static_cast<std::size_t>(rows), 0);
    ske.assign(static_cast<std::size_t>(rows), static_cast<i32>(N));
    std::vector<i64> keys;
    for (i64 r = 0; r < rows; ++r) {
      // At least half of the positions the indices can select (N / blk blocks), so every row
      // has valid columns whatever the random draw.
      plens.push_back(static_cast<i32>(ref::rand::uniform(rng, N / 2, max_blocks * page_kv)));
      keys.push_back(max_blocks * page_kv);
    }
    ptable = ref::rand::block_table(rng, keys, max_blocks, static_cast<i32>(page_kv), pages);
    if constexpr (per_token<F>) {
      std::uniform_real_distribution<float> scale(0.01f, 4.0f);
      kv_scales.resize(static_cast<std::size_t>(N));
      for (auto& s : kv_scales) s = scale(rng);
      for (i64 p = 0; p < pages; ++p)
        for (i64 s = 0; s < page_kv; ++s) {
          const float v = scale(rng);
          std::memcpy(cache.scale(p, s), &v, sizeof v);
        }
    }
  }

  ml::rows_view<F> rows_of(const ref::rand::owned_rows<S>& r) const {
    if constexpr (per_token<F>)
      return ml::rows_view<F>(r.data.data(), nullptr, r.n);
    else
      return r.view();
  }
  ml::rows_view<F> kv_view() const {
    if constexpr (per_token<F>)
      return ml::rows_view<F>(kv.data.data(), kv_scales.data(), N);
    else
      return kv.view();
  }
  ml::paged_cache_view<F> cache_view() const {
    return ml::paged_cache_view<F>(cache.bytes.data(), pages, static_cast<i32>(page_kv),
                                   cache.page_stride);
  }
};

// Counts finite outputs, so a test that compares -inf with -inf fails loudly.
template <class O>
i64 finite_count(const ml::logits_buffer<O>& a) {
  i64 n = 0;
  for (i64 r = 0; r < a.rows(); ++r)
    for (i64 c = 0; c < a.cols(); ++c) n += std::isfinite(ml::to_float(a(r, c)));
  return n;
}

// run(out, options, run index) for the serial first run and `count` more with pools of 1..N.
template <class O, class Run>
void check_runs(int count, const std::string& what, i64 rows, i64 cols, Run run) {
  ml::logits_buffer<O> first(rows, cols);
  run(first, ml::options{}, 0);
  INFO(what);
  REQUIRE(finite_count(first) > 0);
  const int n = max_threads();
  for (int k = 1; k <= count; ++k) {
    const int threads = 1 + (k - 1) % n;
    ml::thread_pool pool(threads);
    ml::logits_buffer<O> out(rows, cols);
    run(out, ml::options{.executor = pool}, k);
    INFO(what << ": run " << k << " with " << threads << " pool threads");
    CHECK(check::bitwise_equal(first, out));
  }
}

template <class Backend, class F>
void all_kernels(const std::string& backend_name, bool small = false) {
  const inputs<F> in(0x5eed + std::is_same_v<F, ml::mxfp4> * 7 + per_token<F> * 11, small);
  const std::string name = backend_name + " " + F::name;
  // The model runs on the calling thread, so its pool sizes cannot matter: 6 runs still cycle
  // through its schedules' worker counts and the paged-sparse protocols.
  const int count = small ? model_runs : runs;

  for (const bool full_width : {false, true}) {
    const i64 seqlen = full_width ? 0 : in.N - 50;
    const i64 cols = full_width ? in.N : seqlen;
    check_runs<ml::bf16>(count, name + (full_width ? " dense full width" : " dense"), in.num_q,
                         cols, [&](auto& out, ml::options opt, int) {
                           opt.truncate_long_contexts = true;  // rows past N and past seqlen
                           ml::fp8_fp4_mqa_logits(Backend{}, in.rows_of(in.q), in.kv_view(),
                                                  in.w.view(), std::span<const i32>(in.ks),
                                                  std::span<const i32>(in.ke), seqlen, out.view(),
                                                  opt);
                         });
  }

  const i64 pcols = in.max_blocks * in.page_kv;
  check_runs<float>(count, name + " paged", in.B * in.next_n, pcols,
                    [&](auto& out, const ml::options& opt, int k) {
                      const auto schedule = ml::get_paged_mqa_logits_metadata(
                          in.lens.view(), static_cast<i32>(in.page_kv), 1 + k % 9);
                      ml::fp8_fp4_paged_mqa_logits(Backend{}, in.rows_of(in.pq), in.cache_view(),
                                                   in.pw.view(), in.lens.view(), in.table.view(),
                                                   schedule, pcols, out.view(), opt);
                    });

  const auto smeta =
      ml::get_sparse_mqa_logits_metadata(in.sks, in.ske, in.N, in.idx.view(), in.blk);
  check_runs<ml::bf16>(count, name + " sparse", in.rows, in.cap * in.blk,
                       [&](auto& out, const ml::options& opt, int) {
                         ml::fp8_fp4_sparse_mqa_logits(Backend{}, in.rows_of(in.sq), in.kv_view(),
                                                       in.sw.view(), smeta, out.view(), opt);
                       });

  const auto make_meta = [&](ml::paged_sparse_protocol protocol) {
    return ml::get_paged_sparse_mqa_logits_metadata(
        in.plens, in.ptable.view(), static_cast<i32>(in.page_kv), in.idx.view(), in.blk, protocol);
  };
  const auto shared_snapshot = make_meta(ml::paged_sparse_protocol::snapshot);
  const auto shared_reread = make_meta(ml::paged_sparse_protocol::reread);
  check_runs<float>(
      count, name + " paged sparse", in.rows, in.cap * in.blk,
      [&](auto& out, const ml::options& opt, int k) {
        // Runs cycle through: a fresh snapshot, the first snapshot reused, and
        // one reread metadata: every protocol gives the same bits.
        const auto fresh = make_meta(ml::paged_sparse_protocol::snapshot);
        const auto& meta = k % 3 == 0 ? fresh : k % 3 == 1 ? shared_snapshot : shared_reread;
        ml::fp8_fp4_paged_sparse_mqa_logits(Backend{}, in.rows_of(in.sq), in.cache_view(),
                                            in.sw.view(), meta, out.view(), opt);
      });
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("determinism: host, every kernel, 20 runs over 1..N threads",
                        "[determinism]", check::all_formats) {
  all_kernels<ml::backend::host, TestType>("host");
}

#if !defined(MQALOGITS_TEST_HOST_COMBOS_ONLY)  // (support/kernel_check.hpp says when)
TEMPLATE_LIST_TEST_CASE("determinism: NeuronCore model, every kernel, 6 runs",
                        "[determinism][neuron]", check::all_formats) {
  all_kernels<ml::backend::neuron<ml::backend::trn2>, TestType>("neuron trn2", true);
  all_kernels<ml::backend::neuron<ml::backend::trn3>, TestType>("neuron trn3", true);
}
#endif
