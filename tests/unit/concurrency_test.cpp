// Concurrency: many threads calling the kernels at once on shared read-only inputs (with their
// own executors, a pool they share, or none), and a paged-sparse metadata whose first call — the
// snapshot gather — happens on several threads at once: one gathers, the others wait and reuse,
// a thread whose cache lacks a page either fails cleanly or reuses a snapshot taken by another,
// and two formats racing for the first call leave exactly one winner. Meant to run under TSan
// too (MQALOGITS_SANITIZE=thread), which reports any data race these calls contain.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <latch>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/accuracy.hpp"
#include "support/kernel_check.hpp"

namespace ml = mqalogits;
using i32 = std::int32_t;
using i64 = std::int64_t;

namespace {

constexpr int num_threads = 8;

// Runs fn(i) on n threads released together; returns the messages of whatever they threw.
template <class Fn>
std::vector<std::string> run_together(int n, Fn fn) {
  std::latch start(n);
  std::mutex m;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      try {
        fn(i);
      } catch (const std::exception& e) {
        std::lock_guard lock(m);
        failures.push_back("thread " + std::to_string(i) + ": " + e.what());
      }
    });
  for (auto& t : threads) t.join();
  return failures;
}

template <class O>
std::string against(const ml::logits_buffer<O>& out, const ref::result& exact) {
  return accuracy::compare(
      out.rows(), out.cols(), [&](i64 r, i64 c) { return double(ml::to_float(out(r, c))); },
      [&](i64 r, i64 c) { return exact.at(r, c); }, [&](i64 r, i64 c) { return exact.mag(r, c); });
}

// Shared read-only inputs of all four kernels.
template <class F>
struct shared_inputs {
  std::mt19937_64 rng;
  i64 H = 8, num_q = 6, N = 400;
  ref::rand::owned_rows<F> q, kv;
  ref::rand::owned_matrix<ml::bf16> w;
  std::vector<i32> ks, ke;
  i64 B = 3, next_n = 2, pages = 20, max_blocks = 6;
  i32 page_kv = 64;
  ref::rand::owned_rows<F> pq;
  ref::rand::owned_matrix<float> pw;
  ref::rand::owned_paged_cache<F> cache;
  ref::rand::owned_matrix<i32> lens, table, idx, ptable;
  i64 rows = 4, cap = 16, blk = 16;
  std::vector<i32> plens;

  explicit shared_inputs(std::uint64_t seed) : rng(seed) {
    q = ref::rand::rows<F>(rng, num_q * H);
    kv = ref::rand::rows<F>(rng, N);
    w = ref::rand::weights<ml::bf16>(rng, num_q, H);
    for (i64 r = 0; r < num_q; ++r) {
      ks.push_back(static_cast<i32>(ref::rand::uniform(rng, 0, 50)));
      ke.push_back(static_cast<i32>(ref::rand::uniform(rng, ks.back() + 1, N)));
    }
    pq = ref::rand::rows<F>(rng, B * next_n * H);
    pw = ref::rand::weights<float>(rng, B * next_n, H);
    cache = ref::rand::paged_cache<F>(rng, pages, page_kv);
    lens = ref::rand::context_lens(rng, B, next_n, max_blocks * page_kv, 1);
    table = ref::rand::block_table(rng, lens, max_blocks, page_kv, pages);
    idx = ref::rand::sparse_indices(rng, rows, cap, max_blocks * page_kv / blk, {.pad = 0.1});
    std::vector<i64> keys;
    for (i64 r = 0; r < rows; ++r) {
      plens.push_back(static_cast<i32>(ref::rand::uniform(rng, page_kv, max_blocks * page_kv)));
      keys.push_back(plens.back());
    }
    ptable = ref::rand::block_table(rng, keys, max_blocks, page_kv, pages);
  }
  ml::paged_sparse_mqa_metadata make_paged_sparse_meta(
      ml::paged_sparse_protocol protocol = ml::paged_sparse_protocol::reread) const {
    std::vector<i32> l = plens;
    return ml::get_paged_sparse_mqa_logits_metadata(l, ptable.view(), page_kv, idx.view(), blk,
                                                    protocol);
  }
};

// The outputs of one call of each kernel.
struct outputs {
  ml::logits_buffer<ml::bf16> dense, sparse;
  ml::logits_buffer<float> paged, paged_sparse;
};

}  // namespace

TEMPLATE_TEST_CASE("concurrency: threads call all four kernels at once on shared inputs",
                   "[concurrency]", ml::mxfp8, ml::mxfp4) {
  using F = TestType;
  const shared_inputs<F> in(91);
  const auto schedule = ml::get_paged_mqa_logits_metadata(in.lens.view(), in.page_kv, 4);
  REQUIRE(in.rows <= in.num_q);
  // Sparse and paged-sparse metadata over the first `rows` queries of the dense inputs.
  std::vector<i32> ks(in.ks.begin(), in.ks.begin() + in.rows),
      ke(in.ke.begin(), in.ke.begin() + in.rows);
  const auto smeta = ml::get_sparse_mqa_logits_metadata(ks, ke, in.N, in.idx.view(), in.blk);
  const auto pmeta = in.make_paged_sparse_meta();
  const shared_inputs<F>& s = in;

  // Q and weights of the first `rows` queries, as their own views.
  shared_inputs<F> sub(91);
  sub.q.n = in.rows * in.H;
  sub.w.rows = in.rows;
  // Serial results, checked once against the reference.
  auto run = [&](const ml::options& opt) {
    outputs o{ml::logits_buffer<ml::bf16>(s.num_q, s.N),
              ml::logits_buffer<ml::bf16>(s.rows, s.cap * s.blk),
              ml::logits_buffer<float>(s.B * s.next_n, s.max_blocks * s.page_kv),
              ml::logits_buffer<float>(s.rows, s.cap * s.blk)};
    ml::fp8_fp4_mqa_logits(s.q.view(), s.kv.view(), s.w.view(), std::span<const i32>(s.ks),
                           std::span<const i32>(s.ke), s.N, o.dense.view(), opt);
    ml::fp8_fp4_paged_mqa_logits(s.pq.view(), s.cache.view(), s.pw.view(), s.lens.view(),
                                 s.table.view(), schedule, s.max_blocks * s.page_kv, o.paged.view(),
                                 opt);
    ml::fp8_fp4_sparse_mqa_logits(sub.q.view(), s.kv.view(), sub.w.view(), smeta, o.sparse.view(),
                                  opt);
    ml::fp8_fp4_paged_sparse_mqa_logits(sub.q.view(), s.cache.view(), sub.w.view(), pmeta,
                                        o.paged_sparse.view(), opt);
    return o;
  };
  const outputs expected = run(ml::options{});
  CHECK(against(expected.dense,
                ref::dense(s.q.view(), s.kv.view(), s.w.view(), std::span<const i32>(s.ks),
                           std::span<const i32>(s.ke), s.N)) == "");
  CHECK(against(expected.paged, ref::paged(s.pq.view(), s.cache.view(), s.pw.view(), s.lens.view(),
                                           s.table.view(), s.max_blocks * s.page_kv)) == "");
  CHECK(against(expected.sparse,
                ref::sparse(sub.q.view(), s.kv.view(), sub.w.view(), std::span<const i32>(ks),
                            std::span<const i32>(ke), s.N, s.idx.view(), s.blk)) == "");
  CHECK(against(expected.paged_sparse, ref::paged_sparse(sub.q.view(), s.cache.view(), sub.w.view(),
                                                         std::span<const i32>(s.plens),
                                                         s.ptable.view(), s.idx.view(), s.blk)) ==
        "");

  // Every thread: 3 rounds of all four kernels, with no executor, a pool shared by all threads
  // (its parallel_for calls are serialised) or a pool of its own.
  ml::thread_pool shared_pool(3);
  std::atomic<int> mismatches{0}, calls{0};
  const auto failures = run_together(num_threads, [&](int t) {
    ml::thread_pool own(2);
    for (int round = 0; round < 3; ++round) {
      ml::options opt;
      switch ((t + round) % 3) {
        case 1:
          opt.executor = shared_pool;
          break;
        case 2:
          opt.executor = own;
          break;
        default:
          break;
      }
      const outputs got = run(opt);
      calls += 4;
      mismatches += !check::bitwise_equal(got.dense, expected.dense) +
                    !check::bitwise_equal(got.paged, expected.paged) +
                    !check::bitwise_equal(got.sparse, expected.sparse) +
                    !check::bitwise_equal(got.paged_sparse, expected.paged_sparse);
    }
  });
  INFO((failures.empty() ? std::string() : failures.front()));
  CHECK(failures.empty());
  CHECK(calls == num_threads * 3 * 4);
  CHECK(mismatches == 0);
}

TEMPLATE_TEST_CASE("concurrency: first paged-sparse call on one metadata from many threads",
                   "[concurrency][paged_sparse]", ml::mxfp8, ml::mxfp4) {
  using F = TestType;
  const shared_inputs<F> in(17);
  shared_inputs<F> sub(17);
  sub.q.n = in.rows * in.H;
  sub.w.rows = in.rows;
  const auto cols = in.cap * in.blk;

  // The expected bits, from a metadata used by one thread only.
  const auto solo = in.make_paged_sparse_meta(ml::paged_sparse_protocol::snapshot);
  ml::logits_buffer<ml::bf16> expected(in.rows, cols);
  ml::fp8_fp4_paged_sparse_mqa_logits(sub.q.view(), in.cache.view(), sub.w.view(), solo,
                                      expected.view());
  REQUIRE(against(expected, ref::paged_sparse(sub.q.view(), in.cache.view(), sub.w.view(),
                                              std::span<const i32>(in.plens), in.ptable.view(),
                                              in.idx.view(), in.blk)) == "");

  for (int trial = 0; trial < 20; ++trial) {
    const auto meta = in.make_paged_sparse_meta(ml::paged_sparse_protocol::snapshot);
    REQUIRE_FALSE(meta.has_snapshot());
    std::vector<ml::logits_buffer<ml::bf16>> outs;
    for (int t = 0; t < num_threads; ++t) outs.emplace_back(in.rows, cols);
    const auto failures = run_together(num_threads, [&](int t) {
      ml::thread_pool pool(t % 2 + 1);
      ml::fp8_fp4_paged_sparse_mqa_logits(sub.q.view(), in.cache.view(), sub.w.view(), meta,
                                          outs[t].view(), {.executor = pool});
    });
    INFO("trial " << trial << (failures.empty() ? std::string() : ": " + failures.front()));
    REQUIRE(failures.empty());
    CHECK(meta.has_snapshot());
    CHECK(meta.snapshot_bytes() == solo.snapshot_bytes());
    for (int t = 0; t < num_threads; ++t) {
      INFO("thread " << t);
      CHECK(check::bitwise_equal(outs[t], expected));
    }
  }
}

TEST_CASE("concurrency: racing first calls where some threads' cache lacks a page",
          "[concurrency][paged_sparse]") {
  // Even threads pass the full cache; odd threads pass a view of its first pages only, so the
  // gather fails on them. Whoever gathers first decides: an odd thread that comes after a
  // successful gather reuses it (the cache is not read again), one that comes first fails with an
  // error and leaves the metadata for the next thread. Even threads always succeed.
  using F = ml::mxfp8;
  const shared_inputs<F> in(23);
  shared_inputs<F> sub(23);
  sub.q.n = in.rows * in.H;
  sub.w.rows = in.rows;
  const auto cols = in.cap * in.blk;
  auto short_cache = in.cache.view();
  short_cache.num_pages = 1;
  const auto solo = in.make_paged_sparse_meta();
  ml::logits_buffer<float> expected(in.rows, cols);
  ml::fp8_fp4_paged_sparse_mqa_logits(sub.q.view(), in.cache.view(), sub.w.view(), solo,
                                      expected.view());
  {  // the short cache really lacks a page the gather reads
    const auto probe = in.make_paged_sparse_meta(ml::paged_sparse_protocol::snapshot);
    ml::logits_buffer<float> out(in.rows, cols);
    REQUIRE_THROWS_AS(ml::fp8_fp4_paged_sparse_mqa_logits(sub.q.view(), short_cache, sub.w.view(),
                                                          probe, out.view()),
                      ml::error);
  }
  int odd_ok = 0, odd_failed = 0;
  for (int trial = 0; trial < 20; ++trial) {
    const auto meta = in.make_paged_sparse_meta(ml::paged_sparse_protocol::snapshot);
    std::vector<ml::logits_buffer<float>> outs;
    for (int t = 0; t < num_threads; ++t) outs.emplace_back(in.rows, cols);
    std::vector<int> ok(num_threads, 0);
    const auto failures = run_together(num_threads, [&](int t) {
      ml::fp8_fp4_paged_sparse_mqa_logits(sub.q.view(), t % 2 ? short_cache : in.cache.view(),
                                          sub.w.view(), meta, outs[t].view());
      ok[t] = 1;
    });
    for (const auto& f : failures) {
      INFO(f);
      CHECK(f.find("is not a page") != std::string::npos);
    }
    for (int t = 0; t < num_threads; ++t) {
      INFO("trial " << trial << ", thread " << t);
      if (t % 2 == 0) CHECK(ok[t] == 1);
      if (ok[t]) CHECK(check::bitwise_equal(outs[t], expected));
      if (t % 2) (ok[t] ? odd_ok : odd_failed)++;
    }
    CHECK(meta.has_snapshot());
  }
  // Both outcomes are legal; the count says which happened (diagnostics only).
  INFO("odd threads: " << odd_ok << " reused a snapshot, " << odd_failed << " failed");
  CHECK(odd_ok + odd_failed == 20 * num_threads / 2);
}

TEST_CASE("concurrency: two formats race for one metadata's first call, one wins",
          "[concurrency][paged_sparse]") {
  const shared_inputs<ml::mxfp8> in8(31);
  const shared_inputs<ml::mxfp4> in4(31);  // as many pages as in8: in8's table fits its cache
  REQUIRE(in4.pages == in8.pages);
  shared_inputs<ml::mxfp8> sub8(31);
  shared_inputs<ml::mxfp4> sub4(31);
  sub8.q.n = sub4.q.n = in8.rows * in8.H;
  sub8.w.rows = sub4.w.rows = in8.rows;
  const auto cols = in8.cap * in8.blk;
  for (int trial = 0; trial < 20; ++trial) {
    const auto meta = in8.make_paged_sparse_meta(ml::paged_sparse_protocol::snapshot);
    std::vector<ml::logits_buffer<ml::bf16>> outs;
    for (int t = 0; t < num_threads; ++t) outs.emplace_back(in8.rows, cols);
    std::vector<int> ok(num_threads, 0);
    const auto failures = run_together(num_threads, [&](int t) {
      if (t % 2)
        ml::fp8_fp4_paged_sparse_mqa_logits(sub4.q.view(), in4.cache.view(), sub4.w.view(), meta,
                                            outs[t].view());
      else
        ml::fp8_fp4_paged_sparse_mqa_logits(sub8.q.view(), in8.cache.view(), sub8.w.view(), meta,
                                            outs[t].view());
      ok[t] = 1;
    });
    int ok8 = 0, ok4 = 0;
    for (int t = 0; t < num_threads; ++t) (t % 2 ? ok4 : ok8) += ok[t];
    INFO("trial " << trial << ": MXFP8 calls ok " << ok8 << ", MXFP4 calls ok " << ok4);
    CHECK(((ok8 == num_threads / 2 && ok4 == 0) || (ok4 == num_threads / 2 && ok8 == 0)));
    for (const auto& f : failures) {
      INFO(f);
      CHECK(f.find("snapshot") != std::string::npos);
    }
  }
}

TEST_CASE("concurrency: one thread_pool driven by several callers at once", "[concurrency][pool]") {
  // Every task of every caller runs exactly once; a task's exception reaches its own caller only,
  // and the pool keeps working afterwards.
  ml::thread_pool pool(4);
  constexpr int callers = 6;
  constexpr i64 n = 2000;
  std::vector<std::vector<std::atomic<int>>> runs_of(callers);
  for (auto& v : runs_of) v = std::vector<std::atomic<int>>(n);
  std::vector<int> threw(callers, 0);
  const auto failures = run_together(callers, [&](int c) {
    auto task = [&, c](i64 i) {
      runs_of[c][i].fetch_add(1, std::memory_order_relaxed);
      if (c == 0 && i == n / 2) throw std::runtime_error("task 1000 of caller 0");
    };
    try {
      pool.parallel_for(n, task);
    } catch (const std::runtime_error&) {
      threw[c] = 1;
    }
  });
  CHECK(failures.empty());
  CHECK(threw[0] == 1);
  for (int c = 0; c < callers; ++c) {
    INFO("caller " << c);
    if (c) CHECK(threw[c] == 0);
    i64 once = 0, more = 0;
    for (i64 i = 0; i < n; ++i) {
      once += runs_of[c][i] == 1;
      more += runs_of[c][i] > 1;
    }
    CHECK(more == 0);
    if (c) CHECK(once == n);  // caller 0 stopped early: some of its tasks never ran
  }
  std::atomic<i64> sum{0};
  auto add = [&](i64 i) { sum += i; };
  pool.parallel_for(n, add);
  CHECK(sum == n * (n - 1) / 2);
}

TEST_CASE("concurrency: a pool whose workers spin between calls", "[concurrency][pool]") {
  // Calls back to back (workers still spinning), after pauses longer and shorter than the spin,
  // a failing task, several callers; then the destructor ends the spins.
  for (const auto spin : {std::chrono::microseconds(1), std::chrono::microseconds(200'000)}) {
    INFO("spin " << spin.count() << " us");
    ml::thread_pool pool(3, spin);
    for (int call = 0; call < 60; ++call) {
      if (call % 20 == 19) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      const i64 n = 1 + call * 7;
      std::vector<std::atomic<int>> runs(static_cast<std::size_t>(n));
      auto task = [&](i64 i) { runs[static_cast<std::size_t>(i)].fetch_add(1); };
      pool.parallel_for(n, task);
      i64 once = 0;
      for (auto& r : runs) once += r.load() == 1;
      REQUIRE(once == n);
    }
    // Slow tasks on the workers: the caller, done first, polls (or sleeps) until they finish,
    // and their plain writes are visible when parallel_for returns.
    for (int call = 0; call < 4; ++call) {
      std::vector<i64> written(8, 0);
      auto slow = [&](i64 i) {
        if (i % 3 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1 + call));
        written[static_cast<std::size_t>(i)] = i + 1;
      };
      pool.parallel_for(8, slow);
      for (i64 i = 0; i < 8; ++i) REQUIRE(written[static_cast<std::size_t>(i)] == i + 1);
    }
    auto fail = [](i64 i) {
      if (i == 5) throw std::runtime_error("task 5");
    };
    CHECK_THROWS_AS(pool.parallel_for(50, fail), std::runtime_error);
    std::atomic<i64> sum{0};
    const auto failures = run_together(4, [&](int) {
      auto add = [&](i64 i) { sum += i; };
      pool.parallel_for(100, add);
    });
    CHECK(failures.empty());
    CHECK(sum == 4 * 4950);
  }
}
