// Steady-state decode must not allocate: a warm call of each kernel, on a pool of 2 threads,
// performs no heap allocation. And a cold call whose n-th allocation fails, for every n, either
// succeeds or throws std::bad_alloc with its output as it was. Global operator new is replaced
// (for the whole test binary) by one that counts while `counting` is set, and throws at the
// allocation numbered `fail_at`.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <latch>
#include <new>
#include <thread>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"
#include "support/kernel_check.hpp"

// Sanitizer runtimes define operator new themselves (TSan's cannot be replaced at all), so the
// counting allocator and this test exist only in plain builds, which the Quick start runs.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define MQALOGITS_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define MQALOGITS_TEST_SANITIZED 1
#endif
#if !defined(MQALOGITS_TEST_SANITIZED)

// GCC sees the replaced operator delete (free) inlined next to the replaced operator new
// (malloc) and reports a mismatch that is not one: both are replaced, as a pair.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
std::atomic<long> fail_at{-1};         // while counting: the allocation numbered so (from 0) throws
std::atomic<long> allocated_bytes{0};  // while counting: the bytes asked for

void* counted(std::size_t n, std::size_t align = alignof(std::max_align_t)) {
  if (counting.load(std::memory_order_relaxed)) {
    allocated_bytes.fetch_add(static_cast<long>(n));
    if (allocations.fetch_add(1) == fail_at.load()) throw std::bad_alloc();
  }
  const std::size_t size = (n + align - 1) / align * align;
  void* p = align <= alignof(std::max_align_t) ? std::malloc(n ? n : 1)
                                               : std::aligned_alloc(align, size ? size : align);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) {
  return counted(n);
}
void* operator new[](std::size_t n) {
  return counted(n);
}
void* operator new(std::size_t n, std::align_val_t a) {
  return counted(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return counted(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}

namespace {

namespace ml = mqalogits;
namespace rnd = ref::rand;
using i32 = std::int32_t;
using i64 = std::int64_t;

// Runs `call(options)` once on each thread of `pool` with a serial executor (the latch makes
// both threads take one task each), so every thread's scratch has seen the call's sizes; then
// twice on the pool; then counts the allocations of one more pooled call.
template <class Call>
long warm_allocations(ml::thread_pool& pool, Call call) {
  std::latch both(2);
  auto warm = [&](i64) {
    both.arrive_and_wait();
    call(ml::options{});
  };
  pool.parallel_for(2, warm);
  call(ml::options{.executor = pool});
  call(ml::options{.executor = pool});
  allocations = 0;
  counting = true;
  call(ml::options{.executor = pool});
  counting = false;
  return allocations.load();
}

// The bytes of the buffers a call writes (logits, or top-k indices and values).
struct outputs {
  std::vector<std::vector<unsigned char>*> buffers;
  void fill() {
    for (auto* b : buffers) std::memset(b->data(), 0xA5, b->size());
  }
  bool untouched() const {
    for (auto* b : buffers)
      for (unsigned char c : *b)
        if (c != 0xA5) return false;
    return true;
  }
};

// Runs `call(pool)` cold (on a fresh thread, whose scratch is empty, with a fresh pool of 2)
// with allocation n failing, for n = 0, 1, ... until a call succeeds: each failed call must
// throw std::bad_alloc and leave every output byte as it was; the call that succeeds must
// write what an undisturbed call writes. Returns how many allocations the cold call makes.
long check_failing_allocations(outputs& out, const std::function<void(ml::thread_pool&)>& call) {
  std::vector<std::vector<unsigned char>> expected;
  {
    ml::thread_pool pool(2);
    std::thread([&] { call(pool); }).join();
    for (auto* b : out.buffers) expected.push_back(*b);
  }
  for (long n = 0;; ++n) {
    INFO("allocation " << n << " fails");
    ml::thread_pool pool(2);
    out.fill();
    bool threw = false, other = false;
    std::thread([&] {
      allocations = 0;
      fail_at = n;
      counting = true;
      try {
        call(pool);
      } catch (const std::bad_alloc&) {
        threw = true;
      } catch (...) {
        other = true;
      }
      counting = false;
      fail_at = -1;
    }).join();
    CHECK(!other);
    if (threw) {
      CHECK(out.untouched());
      if (!out.untouched()) return n;
      continue;
    }
    for (std::size_t i = 0; i < out.buffers.size(); ++i) CHECK(*out.buffers[i] == expected[i]);
    CHECK(n > 0);  // a cold call allocates: the loop tried it
    return n;
  }
}

template <class T>
std::vector<unsigned char>& bytes_of(std::vector<unsigned char>& storage, std::int64_t n) {
  storage.assign(static_cast<std::size_t>(n) * sizeof(T), 0);
  return storage;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("allocations: a failed allocation never leaves the output touched",
                        "[allocation][bad_alloc]", check::all_formats) {
  using F = TestType;
  rnd::engine rng(7);
  const i64 H = 32, num_q = 20, N = 1500, k = 40;
  const auto q = rnd::rows<F>(rng, num_q * H);
  const auto kv = rnd::rows<F>(rng, N);
  const auto w = rnd::weights<float>(rng, num_q, H);
  const std::vector<i32> ks(num_q, 0), ke(num_q, static_cast<i32>(N));
  const i64 B = 4, next_n = 2, pages = 40, max_blocks = 12;
  const i32 page_kv = 64;
  const auto pq = rnd::rows<F>(rng, B * next_n * H);
  const auto pw = rnd::weights<float>(rng, B * next_n, H);
  const auto cache = rnd::paged_cache<F>(rng, pages, page_kv);
  const auto lens = rnd::context_lens(rng, B, next_n, max_blocks * page_kv, 1);
  const auto table = rnd::block_table(rng, lens, max_blocks, page_kv, pages);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 2);
  const i64 cap = 48, blk = 16, paged_cols = max_blocks * page_kv;
  const auto idx = rnd::sparse_indices(rng, num_q, cap, N / blk, {.pad = 0.1});
  const auto smeta = ml::get_sparse_mqa_logits_metadata(ks, ke, N, idx.view(), blk);
  std::vector<i64> keys(static_cast<std::size_t>(num_q), paged_cols);
  const auto ptable = rnd::block_table(rng, keys, max_blocks, page_kv, pages);
  const std::vector<i32> plens(static_cast<std::size_t>(num_q), static_cast<i32>(paged_cols));
  const auto pidx = rnd::sparse_indices(rng, num_q, cap, paged_cols / blk, {.pad = 0.1});
  const auto pmeta =
      ml::get_paged_sparse_mqa_logits_metadata(plens, ptable.view(), page_kv, pidx.view(), blk);

  // Each kernel's call, into logits (rows x cols fp32) or a top-k of k (indices and values).
  std::vector<unsigned char> logits_bytes, index_bytes, value_bytes;
  const auto logits = [&](i64 rows, i64 cols) {
    return ml::matrix_view<float>(
        reinterpret_cast<float*>(bytes_of<float>(logits_bytes, rows * cols).data()), rows, cols);
  };
  const auto topk = [&](i64 rows) {
    return std::pair(
        ml::matrix_view<i32>(reinterpret_cast<i32*>(bytes_of<i32>(index_bytes, rows * k).data()),
                             rows, k),
        ml::matrix_view<float>(
            reinterpret_cast<float*>(bytes_of<float>(value_bytes, rows * k).data()), rows, k));
  };
  outputs logits_out{{&logits_bytes}}, topk_out{{&index_bytes, &value_bytes}};
  long cold = 0;

  SECTION("dense") {
    const auto out = logits(num_q, N);
    cold = check_failing_allocations(logits_out, [&](ml::thread_pool& pool) {
      ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), ks, ke, 0, out, {.executor = pool});
    });
  }
  SECTION("dense top-k") {
    const auto sel = topk(num_q);
    cold = check_failing_allocations(topk_out, [&](ml::thread_pool& pool) {
      ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), ks, ke, 0,
                             ml::topk(sel.first, sel.second), {.executor = pool});
    });
  }
  SECTION("paged") {
    const auto out = logits(B * next_n, paged_cols);
    cold = check_failing_allocations(logits_out, [&](ml::thread_pool& pool) {
      ml::fp8_fp4_paged_mqa_logits(pq.view(), cache.view(), pw.view(), lens.view(), table.view(),
                                   schedule, paged_cols, out, {.executor = pool});
    });
  }
  SECTION("paged top-k slots") {
    const auto sel = topk(B * next_n);
    cold = check_failing_allocations(topk_out, [&](ml::thread_pool& pool) {
      ml::fp8_fp4_paged_mqa_logits(
          pq.view(), cache.view(), pw.view(), lens.view(), table.view(), schedule, paged_cols,
          ml::topk(sel.first, sel.second, ml::topk_index::slot), {.executor = pool});
    });
  }
  SECTION("sparse") {
    const auto out = logits(num_q, cap * blk);
    cold = check_failing_allocations(logits_out, [&](ml::thread_pool& pool) {
      ml::fp8_fp4_sparse_mqa_logits(q.view(), kv.view(), w.view(), smeta, out, {.executor = pool});
    });
  }
  SECTION("sparse top-k") {
    const auto sel = topk(num_q);
    cold = check_failing_allocations(topk_out, [&](ml::thread_pool& pool) {
      ml::fp8_fp4_sparse_mqa_logits(q.view(), kv.view(), w.view(), smeta,
                                    ml::topk(sel.first, sel.second), {.executor = pool});
    });
  }
  SECTION("paged sparse, reread") {
    const auto out = logits(num_q, cap * blk);
    cold = check_failing_allocations(logits_out, [&](ml::thread_pool& pool) {
      ml::fp8_fp4_paged_sparse_mqa_logits(q.view(), cache.view(), w.view(), pmeta, out,
                                          {.executor = pool});
    });
  }
  SECTION("paged sparse, snapshot (taken by the call), top-k") {
    const auto sel = topk(num_q);
    cold = check_failing_allocations(topk_out, [&](ml::thread_pool& pool) {
      // A fresh metadata each time, so each call takes the snapshot (before any output write).
      counting = false;
      const auto meta = ml::get_paged_sparse_mqa_logits_metadata(
          plens, ptable.view(), page_kv, pidx.view(), blk, ml::paged_sparse_protocol::snapshot);
      allocations = 0;
      counting = fail_at.load() >= 0;
      ml::fp8_fp4_paged_sparse_mqa_logits(q.view(), cache.view(), w.view(), meta,
                                          ml::topk(sel.first, sel.second), {.executor = pool});
    });
  }
  INFO(cold << " allocations in the cold call");
  CHECK(cold > 0);
}

TEMPLATE_LIST_TEST_CASE("allocations: a warm call of each kernel allocates nothing (pool of 2)",
                        "[allocation]", check::all_formats) {
  using F = TestType;
  rnd::engine rng(5);
  ml::thread_pool pool(2);
  const i64 H = 64, num_q = 20, N = 3000;
  const auto q = rnd::rows<F>(rng, num_q * H);
  const auto kv = rnd::rows<F>(rng, N);
  const auto w = rnd::weights<float>(rng, num_q, H);
  std::vector<i32> ks(num_q, 0), ke(num_q, static_cast<i32>(N));
  ml::logits_buffer<float> out(num_q, N);
  CHECK(warm_allocations(pool, [&](const ml::options& opt) {
          ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), std::span<const i32>(ks),
                                 std::span<const i32>(ke), 0, out.view(), opt);
        }) == 0);

  const i64 B = 8, next_n = 2, pages = 64, max_blocks = 16;
  const i32 page_kv = 64;
  const auto pq = rnd::rows<F>(rng, B * next_n * H);
  const auto pw = rnd::weights<float>(rng, B * next_n, H);
  const auto cache = rnd::paged_cache<F>(rng, pages, page_kv);
  const auto lens = rnd::context_lens(rng, B, next_n, max_blocks * page_kv, 1);
  const auto table = rnd::block_table(rng, lens, max_blocks, page_kv, pages);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 2);
  ml::logits_buffer<float> paged(B * next_n, max_blocks * page_kv);
  CHECK(warm_allocations(pool, [&](const ml::options& opt) {
          ml::fp8_fp4_paged_mqa_logits(pq.view(), cache.view(), pw.view(), lens.view(),
                                       table.view(), schedule, max_blocks * page_kv, paged.view(),
                                       opt);
        }) == 0);
  // Upstream's array form: the schedule it stands for is rebuilt on every call, into storage the
  // calling thread keeps.
  std::vector<i32> array(static_cast<std::size_t>(ml::paged_mqa_schedule_array_rows(2) * 2));
  const ml::matrix_view<i32> array_view(array.data(), ml::paged_mqa_schedule_array_rows(2), 2, 2);
  ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 2, array_view);
  CHECK(warm_allocations(pool, [&](const ml::options& opt) {
          ml::fp8_fp4_paged_mqa_logits(pq.view(), cache.view(), pw.view(), lens.view(),
                                       table.view(), ml::matrix_view<const i32>(array_view),
                                       max_blocks * page_kv, paged.view(), opt);
        }) == 0);

  const i64 cap = 64, blk = 16;
  const auto idx = rnd::sparse_indices(rng, num_q, cap, N / blk, {.pad = 0.1});
  const auto smeta = ml::get_sparse_mqa_logits_metadata(ks, ke, N, idx.view(), blk);
  ml::logits_buffer<ml::bf16> sparse(num_q, cap * blk);
  CHECK(warm_allocations(pool, [&](const ml::options& opt) {
          ml::fp8_fp4_sparse_mqa_logits(q.view(), kv.view(), w.view(), smeta, sparse.view(), opt);
        }) == 0);

  std::vector<i64> keys(static_cast<std::size_t>(num_q), max_blocks * page_kv);
  const auto ptable = rnd::block_table(rng, keys, max_blocks, page_kv, pages);
  std::vector<i32> plens(static_cast<std::size_t>(num_q), static_cast<i32>(max_blocks * page_kv));
  const auto pidx = rnd::sparse_indices(rng, num_q, cap, max_blocks * page_kv / blk, {.pad = 0.1});
  const auto pmeta =
      ml::get_paged_sparse_mqa_logits_metadata(plens, ptable.view(), page_kv, pidx.view(), blk);
  ml::logits_buffer<float> paged_sparse(num_q, cap * blk);
  CHECK(warm_allocations(pool, [&](const ml::options& opt) {
          ml::fp8_fp4_paged_sparse_mqa_logits(q.view(), cache.view(), w.view(), pmeta,
                                              paged_sparse.view(), opt);
        }) == 0);
  const auto snapshot_meta = ml::get_paged_sparse_mqa_logits_metadata(
      plens, ptable.view(), page_kv, pidx.view(), blk, ml::paged_sparse_protocol::snapshot);
  CHECK(warm_allocations(pool, [&](const ml::options& opt) {  // snapshot taken while warming
          ml::fp8_fp4_paged_sparse_mqa_logits(q.view(), cache.view(), w.view(), snapshot_meta,
                                              paged_sparse.view(), opt);
        }) == 0);
}

TEST_CASE("allocations: a warm fused top-k call allocates nothing (pool of 2)",
          "[allocation][topk]") {
  using F = ml::mxfp8;
  rnd::engine rng(6);
  ml::thread_pool pool(2);
  const i64 H = 8, num_q = 20, N = 6000, k = 512;
  const auto q = rnd::rows<F>(rng, num_q * H);
  const auto kv = rnd::rows<F>(rng, N);
  const auto w = rnd::weights<float>(rng, num_q, H);
  std::vector<i32> ks(num_q, 0), ke(num_q, static_cast<i32>(N));
  std::vector<i32> idx(static_cast<std::size_t>(num_q * k));
  std::vector<float> val(idx.size());
  CHECK(warm_allocations(pool, [&](const ml::options& opt) {
          ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), std::span<const i32>(ks),
                                 std::span<const i32>(ke), 0,
                                 ml::topk(ml::matrix_view<i32>(idx.data(), num_q, k),
                                          ml::matrix_view<float>(val.data(), num_q, k)),
                                 opt);
        }) == 0);

  const i64 B = 2, max_blocks = 80, pages = 200;
  const i32 page_kv = 64;
  const auto cache = rnd::paged_cache<F>(rng, pages, page_kv);
  const auto lens = rnd::context_lens(rng, B, 1, 5000, 4000);
  const auto table = rnd::block_table(rng, lens, max_blocks, page_kv, pages);
  const auto pq = rnd::rows<F>(rng, B * H);
  const auto pw = rnd::weights<float>(rng, B, H);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 2);
  CHECK(warm_allocations(pool, [&](const ml::options& opt) {
          ml::fp8_fp4_paged_mqa_logits(
              pq.view(), cache.view(), pw.view(), lens.view(), table.view(), schedule,
              max_blocks * page_kv,
              ml::topk(ml::matrix_view<i32>(idx.data(), B, k),
                       ml::matrix_view<float>(val.data(), B, k), ml::topk_index::slot),
              opt);
        }) == 0);
}

// The README's memory statements, measured: what a kernel's first call on a new thread
// allocates (its per-thread scratch), and what the top-k selection adds on top of it.
TEST_CASE("allocations: a first call's scratch and the top-k candidates, measured",
          "[allocation][topk][memory]") {
  using F = ml::mxfp8;
  rnd::engine rng(7);
  const i64 H = 64, num_q = 8, N = 20000, k = 2048;
  const auto q = rnd::rows<F>(rng, num_q * H);
  const auto kv = rnd::rows<F>(rng, N);
  const auto w = rnd::weights<float>(rng, num_q, H);
  std::vector<i32> ks(num_q, 0), ke(num_q, static_cast<i32>(N));
  ml::logits_buffer<float> out(num_q, N);
  std::vector<i32> idx(static_cast<std::size_t>(num_q * k));
  std::vector<float> val(idx.size());
  auto logits = [&] {
    ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), std::span<const i32>(ks),
                           std::span<const i32>(ke), 0, out.view());
  };
  auto topk = [&] {
    ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), std::span<const i32>(ks),
                           std::span<const i32>(ke), 0,
                           ml::topk(ml::matrix_view<i32>(idx.data(), num_q, k),
                                    ml::matrix_view<float>(val.data(), num_q, k)));
  };
  // Counts the allocations and bytes of `call` on `fn`'s thread between the counters' resets.
  struct measured {
    long count = 0, bytes = 0;
  };
  auto measure = [&](auto&& call) {
    allocations = 0;
    allocated_bytes = 0;
    counting = true;
    call();
    counting = false;
    return measured{allocations.load(), allocated_bytes.load()};
  };
  measured first, warm, first_topk, warm_topk;
  std::thread([&] {
    first = measure(logits);
    warm = measure(logits);
    first_topk = measure(topk);  // the logits' scratch is warm: this is the selection's own
    warm_topk = measure(topk);
  }).join();
  WARN("dense logits, first call on a thread: " << first.count << " allocations, " << first.bytes
                                                << " bytes");
  WARN("top-k k = 2048 over 8 rows (serial, 4 tasks), first call: "
       << first_topk.count << " allocations, " << first_topk.bytes << " bytes");
  CHECK(warm.count == 0);
  CHECK(warm_topk.count == 0);
  // The README: a first call makes a few tens of allocations (the work list, one workspace per
  // running task) of at most a few hundred kilobytes per running task.
  CHECK(first.count > 0);
  CHECK(first.count <= 32);
  CHECK(first.bytes <= 1'000'000);
  // The README's top-k bound: per task, about (72 x rows + 32) x k bytes (rows open at once: 8
  // here), tasks = min(work items, 4 x concurrency()) = 4 serially, plus a merge buffer of
  // 8 x min(tasks x 2.5k, columns) bytes; at least the candidate buffers, 32 x rows x k bytes
  // per task.
  const long tasks = 4, rows = 8;
  CHECK(first_topk.bytes >= tasks * 32 * rows * k);
  CHECK(first_topk.bytes <=
        tasks * (72 * rows + 32) * k + 8 * std::min<long>(tasks * 5 * k / 2, N) + 64 * 1024);
}

#endif  // !MQALOGITS_TEST_SANITIZED
