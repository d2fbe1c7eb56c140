// Careless and hostile callers: an output that overlaps an input, moved-from metadata, thread
// pool lifetime, broken executors, helpers given extreme sizes, misaligned typed buffers,
// oversized snapshots and worker counts, denormal modes and the byte-order guard. Each case is
// either a named mqalogits::error before anything is written, or a documented behaviour checked
// exactly.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"
#include "support/error_of.hpp"
#include "support/kernel_check.hpp"
#include "support/kernel_inputs.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;

namespace {

using check::expect_error;

// ---- fixtures: one small valid call of each kernel ------------------------------------------

struct dense_case : check::row_call_inputs<ml::mxfp8, float> {
  static constexpr std::int64_t num_q = 2, H = 4, N = 40, cols = 32;
  std::vector<std::int32_t> ks{0, 3}, ke{32, 30};  // every token has a column

  dense_case() : row_call_inputs(1301, num_q, H, N) {}

  void run(ml::matrix_view<const float> wv, std::span<const std::int32_t> s,
           std::span<const std::int32_t> e, ml::matrix_view<float> out,
           const ml::options& opt = {}) {
    ml::fp8_fp4_mqa_logits(ml::backend::host{}, q.view(), kv.view(), wv, s, e, cols, out, opt);
  }
  void run(ml::matrix_view<float> out, const ml::options& opt = {}) {
    run(w.view(), ks, ke, out, opt);
  }
};

struct paged_case : check::paged_call_inputs<ml::mxfp8, float> {
  static constexpr std::int64_t B = 2, next_n = 1, H = 2, pages = 4, max_blocks = 3, cols = 96;
  static constexpr std::int32_t page_kv = 32;
  rnd::owned_matrix<std::int32_t> lens = rnd::context_lens(rng, B, next_n, 90, 40);
  ml::paged_mqa_schedule schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 2);

  paged_case() : paged_call_inputs(1303, pages, page_kv, B * next_n, H) {}
};

struct sparse_case : check::row_call_inputs<ml::mxfp8, float> {
  static constexpr std::int64_t rows = 2, H = 2, N = 64, cap = 4, B = 8;
  std::vector<std::int32_t> ks{0, 5}, ke{64, 50};
  rnd::owned_matrix<std::int32_t> idx = rnd::sparse_indices(rng, rows, cap, N / B);

  sparse_case() : row_call_inputs(1305, rows, H, N) {}
  ml::sparse_mqa_metadata meta() {
    return ml::get_sparse_mqa_logits_metadata(ks, ke, N, idx.view(), B);
  }
};

struct paged_sparse_case : check::paged_call_inputs<ml::mxfp8, float> {
  static constexpr std::int64_t rows = 2, H = 2, cap = 8, B = 16, pages = 3, max_blocks = 2;
  static constexpr std::int32_t page_kv = 64;
  std::vector<std::int32_t> lens{70, 128};
  rnd::owned_matrix<std::int32_t> table = rnd::block_table(
      rng, std::vector<std::int64_t>{70, 128}, max_blocks, page_kv, pages, /*garbage=*/false);
  rnd::owned_matrix<std::int32_t> idx = rnd::sparse_indices(rng, rows, cap, 8);

  paged_sparse_case() : paged_call_inputs(1307, pages, page_kv, rows, H) {}
  ml::paged_sparse_mqa_metadata meta() {
    return ml::get_paged_sparse_mqa_logits_metadata(lens, table.view(), page_kv, idx.view(), B);
  }
};

// Float storage that hosts an input and the logits in one allocation, so they can overlap.
struct shared_floats {
  std::vector<float> v;
  explicit shared_floats(std::size_t n) : v(n, 0.0f) {}
  float* at(std::size_t i) { return v.data() + i; }
};

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

// ---- 1. the output overlapping an input ---------------------------------------------------

TEST_CASE("hostile, overlap: dense logits over weights, ks, ke or q are rejected, untouched",
          "[hostile][overlap]") {
  dense_case c;
  const std::int64_t out_elems = c.num_q * c.cols;
  SECTION("weights") {
    shared_floats s(static_cast<std::size_t>(out_elems + 64));
    std::memcpy(s.at(0), c.w.data.data(), c.w.data.size() * sizeof(float));
    const ml::matrix_view<const float> w(s.at(0), c.num_q, c.H);
    const ml::matrix_view<float> out(s.at(c.H), c.num_q, c.cols);  // starts in weights row 1
    const std::vector<float> before = s.v;
    expect_error([&] { c.run(w, c.ks, c.ke, out); }, {"fp8_fp4_mqa_logits", "overlap", "weights"});
    CHECK(bits_equal(s.v, before));
  }
  SECTION("ks / ke") {
    std::vector<std::int32_t> buf(static_cast<std::size_t>(out_elems + 8), 0);
    buf[0] = 0, buf[1] = 3, buf[2] = 40, buf[3] = 30;
    const std::span<const std::int32_t> ks(buf.data(), 2), ke(buf.data() + 2, 2);
    // Logits that start on ke[1] (an int32 and a float are both 4 bytes, 4-aligned).
    const ml::matrix_view<float> out(reinterpret_cast<float*>(buf.data() + 3), c.num_q, c.cols);
    expect_error([&] { c.run(c.w.view(), ks, ke, out); }, {"overlap", "cu_seq_len_k_end"});
    CHECK(buf[3] == 30);
  }
  SECTION("q data") {
    shared_floats s(static_cast<std::size_t>(out_elems + c.num_q * c.H * 32));
    std::memcpy(s.at(0), c.q.data.data(), c.q.data.size());
    ml::rows_view<ml::mxfp8> q = c.q.view();
    q.data = reinterpret_cast<const std::uint8_t*>(s.at(0));
    const ml::matrix_view<float> out(s.at(10), c.num_q, c.cols);
    expect_error(
        [&] {
          ml::fp8_fp4_mqa_logits(ml::backend::host{}, q, c.kv.view(), c.w.view(),
                                 std::span<const std::int32_t>(c.ks),
                                 std::span<const std::int32_t>(c.ke), c.cols, out);
        },
        {"overlap", "q"});
  }
}

TEST_CASE("hostile, overlap: adjacent output and input are accepted and compute the same logits",
          "[hostile][overlap]") {
  dense_case c;
  std::vector<float> alone(static_cast<std::size_t>(c.num_q * c.cols), 1.0f);
  c.run(ml::matrix_view<float>(alone.data(), c.num_q, c.cols));
  // Weights, then the logits right after them in the same allocation: no byte shared.
  shared_floats s(static_cast<std::size_t>(c.num_q * c.H + c.num_q * c.cols));
  std::memcpy(s.at(0), c.w.data.data(), c.w.data.size() * sizeof(float));
  const ml::matrix_view<const float> w(s.at(0), c.num_q, c.H);
  c.run(w, c.ks, c.ke, ml::matrix_view<float>(s.at(c.num_q * c.H), c.num_q, c.cols));
  CHECK(std::memcmp(s.at(c.num_q * c.H), alone.data(), alone.size() * sizeof(float)) == 0);
}

TEST_CASE("hostile, overlap: paged logits over the block table are rejected (was a SIGSEGV)",
          "[hostile][overlap]") {
  paged_case c;
  // 1 x 1024 fp32 logits of which the block table is a part, as in the crash report.
  std::vector<float> storage(2048, 0.0f);
  auto* table_mem = reinterpret_cast<std::int32_t*>(storage.data() + 100);
  for (std::int64_t b = 0; b < c.B; ++b)
    for (std::int64_t s = 0; s < c.max_blocks; ++s)
      table_mem[b * c.max_blocks + s] = static_cast<std::int32_t>((b + s) % c.pages);
  const ml::matrix_view<const std::int32_t> table(table_mem, c.B, c.max_blocks);
  const ml::matrix_view<float> out(storage.data(), c.B * c.next_n, c.cols, 1024);
  const std::vector<float> before = storage;
  for (bool clean : {false, true}) {
    INFO("clean_logits " << clean);
    expect_error(
        [&] {
          ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, c.q.view(), c.cache.view(), c.w.view(),
                                       c.lens.view(), table, c.schedule, c.cols, out,
                                       {.clean_logits = clean});
        },
        {"fp8_fp4_paged_mqa_logits", "overlap", "block_table"});
    CHECK(bits_equal(storage, before));
  }
}

TEST_CASE("hostile, overlap: sparse logits over kv scales, paged-sparse logits over the cache",
          "[hostile][overlap]") {
  SECTION("sparse") {
    sparse_case c;
    const auto meta = c.meta();
    shared_floats s(static_cast<std::size_t>(c.rows * c.cap * c.B + c.N));
    std::memcpy(s.at(0), c.kv.scales.data(), c.kv.scales.size());
    ml::rows_view<ml::mxfp8> kv = c.kv.view();
    kv.scales = reinterpret_cast<const std::uint8_t*>(s.at(0));
    const ml::matrix_view<float> out(s.at(c.N - 1), c.rows, c.cap * c.B);
    expect_error(
        [&] {
          ml::fp8_fp4_sparse_mqa_logits(ml::backend::host{}, c.q.view(), kv, c.w.view(), meta, out);
        },
        {"fp8_fp4_sparse_mqa_logits", "overlap", "kv scales"});
  }
  SECTION("paged sparse") {
    paged_sparse_case c;
    const auto meta = c.meta();
    const std::size_t cache_floats = c.cache.bytes.size() / sizeof(float);
    shared_floats s(cache_floats + static_cast<std::size_t>(c.rows * c.cap * c.B));
    std::memcpy(s.at(0), c.cache.bytes.data(), c.cache.bytes.size());
    const ml::paged_cache_view<ml::mxfp8> cache(s.at(0), c.pages, c.page_kv);
    const ml::matrix_view<float> out(s.at(cache_floats - 1), c.rows, c.cap * c.B);
    expect_error(
        [&] {
          ml::fp8_fp4_paged_sparse_mqa_logits(ml::backend::host{}, c.q.view(), cache, c.w.view(),
                                              meta, out);
        },
        {"fp8_fp4_paged_sparse_mqa_logits", "overlap", "cache"});
    CHECK(!meta.has_snapshot());  // rejected before the gather
  }
}

// ---- 2. moved-from metadata -----------------------------------------------------------------

TEST_CASE("hostile, moved-from: every metadata type is rejected after a move, the target works",
          "[hostile][moved]") {
  SECTION("sparse_mqa_metadata") {
    sparse_case c;
    ml::logits_buffer<float> out(c.rows, c.cap * c.B);
    check::fill_sentinel(out);
    auto m = c.meta();
    const auto m2 = std::move(m);
    expect_error(
        [&] {
          ml::fp8_fp4_sparse_mqa_logits(ml::backend::host{}, c.q.view(), c.kv.view(), c.w.view(), m,
                                        out.view());
        },
        {"fp8_fp4_sparse_mqa_logits", "get_sparse_mqa_logits_metadata"});
    CHECK(check::untouched(out));
    ml::sparse_mqa_metadata m3;
    m3 = std::move(const_cast<ml::sparse_mqa_metadata&>(m2));
    CHECK(m2.num_rows() == 0);
    ml::fp8_fp4_sparse_mqa_logits(ml::backend::host{}, c.q.view(), c.kv.view(), c.w.view(), m3,
                                  out.view());
    CHECK(!check::untouched(out));
  }
  SECTION("paged_mqa_schedule") {
    paged_case c;
    auto table = rnd::block_table(c.rng, c.lens, c.max_blocks, c.page_kv, c.pages);
    ml::logits_buffer<float> out(c.B * c.next_n, c.cols);
    check::fill_sentinel(out);
    auto s2 = std::move(c.schedule);
    CHECK(c.schedule.next_n() == 0);
    CHECK(c.schedule.context_lens().empty());
    expect_error(
        [&] {
          ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, c.q.view(), c.cache.view(), c.w.view(),
                                       c.lens.view(), table.view(), c.schedule, c.cols, out.view());
        },
        {"fp8_fp4_paged_mqa_logits", "schedule"});
    CHECK(check::untouched(out));
    ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, c.q.view(), c.cache.view(), c.w.view(),
                                 c.lens.view(), table.view(), s2, c.cols, out.view());
    CHECK(!check::untouched(out));
  }
  SECTION("paged_sparse_mqa_metadata") {
    paged_sparse_case c;
    ml::logits_buffer<float> out(c.rows, c.cap * c.B);
    check::fill_sentinel(out);
    auto m = c.meta();
    auto m2 = std::move(m);
    CHECK(m.capacity() == 0);
    expect_error(
        [&] {
          ml::fp8_fp4_paged_sparse_mqa_logits(ml::backend::host{}, c.q.view(), c.cache.view(),
                                              c.w.view(), m, out.view());
        },
        {"fp8_fp4_paged_sparse_mqa_logits", "get_paged_sparse_mqa_logits_metadata"});
    CHECK(check::untouched(out));
    ml::fp8_fp4_paged_sparse_mqa_logits(ml::backend::host{}, c.q.view(), c.cache.view(), c.w.view(),
                                        m2, out.view());
    CHECK(!check::untouched(out));
  }
}

// ---- 3. thread_pool lifetime --------------------------------------------------------------

TEST_CASE("hostile, pool: a thread count below 1 is rejected", "[hostile][pool]") {
  expect_error([] { ml::thread_pool p(-5); }, {"thread_pool", "threads", "-5"});
  expect_error([] { ml::thread_pool p(0); }, {"thread_pool", "threads", "0"});
  CHECK(ml::thread_pool::default_threads() >= 1);
  expect_error([] { ml::thread_pool p(2, std::chrono::microseconds(-1)); },
               {"thread_pool", "spin", "-1"});
}

TEST_CASE("hostile, pool: a worker that fails to start: the constructor throws, joins the rest",
          "[hostile][pool]") {
  struct reset_hook {
    ~reset_hook() { ml::detail::thread_pool_fail_start_at.store(-1); }
  } reset;
  for (int fail_at : {1, 2, 5}) {
    INFO("worker " << fail_at << " fails to start");
    ml::detail::thread_pool_fail_start_at.store(fail_at);
    // Returns (a constructor that left started workers waiting never did), with the error the
    // system gave; the workers already started are joined, else std::thread's destructor would
    // terminate the process.
    CHECK_THROWS_AS(ml::thread_pool(8), std::system_error);
  }
  ml::detail::thread_pool_fail_start_at.store(-1);
  ml::thread_pool ok(8);
  std::atomic<int> ran{0};
  auto task = [&](std::int64_t) { ran.fetch_add(1); };
  ok.parallel_for(100, task);
  CHECK(ran.load() == 100);
}

TEST_CASE("hostile, pool: a task calling parallel_for on its own pool runs it inline",
          "[hostile][pool]") {
  ml::thread_pool pool(4);
  std::atomic<int> inner_runs{0};
  std::atomic<bool> other_thread{false};
  auto outer = [&](std::int64_t) {
    const auto me = std::this_thread::get_id();
    auto inner = [&](std::int64_t) {
      if (std::this_thread::get_id() != me) other_thread.store(true);
      inner_runs.fetch_add(1);
    };
    pool.parallel_for(5, inner);  // deadlocked on the pool's call lock before
  };
  pool.parallel_for(16, outer);
  CHECK(inner_runs.load() == 80);
  CHECK(!other_thread.load());  // inline: on the thread that ran the outer task

  // A kernel inside a kernel's task, both on the pool.
  dense_case c;
  std::vector<float> expected(static_cast<std::size_t>(c.num_q * c.cols));
  c.run(ml::matrix_view<float>(expected.data(), c.num_q, c.cols));
  std::vector<std::vector<float>> outs(6, std::vector<float>(expected.size()));
  auto kernel_task = [&](std::int64_t i) {
    c.run(ml::matrix_view<float>(outs[static_cast<std::size_t>(i)].data(), c.num_q, c.cols),
          {.executor = pool});
  };
  pool.parallel_for(6, kernel_task);
  for (const auto& o : outs) CHECK(bits_equal(o, expected));
}

TEST_CASE("hostile, pool: the destructor waits for a parallel_for in progress on another thread",
          "[hostile][pool]") {
  auto pool = std::make_unique<ml::thread_pool>(2);
  constexpr int n = 16;
  std::atomic<int> done{0};
  std::atomic<bool> caller_busy{false};
  std::thread::id caller_id;
  std::atomic<bool> id_set{false};
  // The worker's tasks are quick; the calling thread's are slow, so the pool's own worker has
  // finished (and can be joined) while the caller is still inside its task.
  auto task = [&](std::int64_t) {
    while (!id_set.load()) std::this_thread::yield();
    if (std::this_thread::get_id() == caller_id) {
      caller_busy.store(true);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // leaves the caller a task
    }
    done.fetch_add(1);
  };
  std::thread caller([&] {
    caller_id = std::this_thread::get_id();
    id_set.store(true);
    pool->parallel_for(n, task);
  });
  while (!caller_busy.load()) std::this_thread::yield();
  pool.reset();  // was freed under the caller (heap-use-after-free)
  CHECK(done.load() == n);
  caller.join();
}

// ---- 4. the executor contract -------------------------------------------------------------

namespace {

// Executors that break the contract in one way each.
enum class fault { none, skip_last, out_of_range, repeat_instead_of_skip };

struct faulty_executor {
  fault how = fault::none;
  void parallel_for(std::int64_t n, ml::task_ref task) const {
    for (std::int64_t i = 0; i < n; ++i) {
      if (how == fault::skip_last && i == n - 1) continue;
      if (how == fault::repeat_instead_of_skip && i == n - 1) {
        task(0);  // index 0 twice, index n - 1 never (n >= 2: the count alone would be right)
        if (n >= 2) continue;
      }
      task(i);
    }
    if (how == fault::out_of_range) task(n);
  }
  int concurrency() const { return 1; }
};

}  // namespace

TEST_CASE("hostile, executor: a broken executor is a named error, never a wild write",
          "[hostile][executor]") {
  dense_case c;
  std::vector<float> good(static_cast<std::size_t>(c.num_q * c.cols));
  faulty_executor ok{fault::none};
  c.run(ml::matrix_view<float>(good.data(), c.num_q, c.cols), {.executor = ok});
  std::vector<float> serial(good.size());
  c.run(ml::matrix_view<float>(serial.data(), c.num_q, c.cols));
  CHECK(bits_equal(good, serial));

  for (fault f : {fault::skip_last, fault::out_of_range, fault::repeat_instead_of_skip}) {
    INFO("fault " << static_cast<int>(f));
    faulty_executor bad{f};
    // Exact size: ASan sees any write past the logits.
    std::vector<float> out(good.size(), 7.0f);
    for (bool clean : {true, false})
      expect_error(
          [&] {
            c.run(ml::matrix_view<float>(out.data(), c.num_q, c.cols),
                  {.executor = bad, .clean_logits = clean});
          },
          {"executor", "parallel_for"});
  }
  SECTION("the message says what went wrong") {
    faulty_executor oob{fault::out_of_range};
    std::vector<float> out(good.size());
    expect_error(
        [&] { c.run(ml::matrix_view<float>(out.data(), c.num_q, c.cols), {.executor = oob}); },
        {"outside [0, "});
    faulty_executor skip{fault::skip_last};
    expect_error(
        [&] { c.run(ml::matrix_view<float>(out.data(), c.num_q, c.cols), {.executor = skip}); },
        {"completed tasks", "exactly once"});
  }
}

TEST_CASE("hostile, executor: checked_parallel_for counts exactly, allocates nothing per index",
          "[hostile][executor]") {
  faulty_executor ok{fault::none};
  const ml::executor_ref ref(ok);
  std::vector<int> hits(1000, 0);
  auto task = [&](std::int64_t i) { ++hits[static_cast<std::size_t>(i)]; };
  ml::detail::checked_parallel_for(ref, 1000, task);
  for (int h : hits) CHECK(h == 1);
  ml::detail::checked_parallel_for(ref, 0, task);  // nothing to run, nothing to check
  ml::detail::checked_parallel_for(ref, -3, task);
  faulty_executor repeat{fault::repeat_instead_of_skip};
  CHECK_THROWS_AS(ml::detail::checked_parallel_for(ml::executor_ref(repeat), 1000, task),
                  ml::error);
}

// ---- 6. helpers get the kernels' checks ---------------------------------------------------

TEST_CASE("hostile, helpers: store_into_pages rejects overflowing strides and slots",
          "[hostile][helpers]") {
  using F = ml::mxfp8;
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(ml::page_bytes<F>(64)) * 2, 0);
  std::vector<float> k(2 * 128, 1.0f);
  const ml::matrix_view<const float> kv(k.data(), 2, 128);
  std::vector<std::int64_t> slots{0, 65};
  const std::vector<std::uint8_t> before = bytes;
  SECTION("page stride near INT64_MAX") {
    const ml::mutable_paged_cache<F> cache(bytes.data(), 2, 64, INT64_MAX - 100);
    expect_error([&] { ml::store_into_pages(kv, std::span(slots), cache); },
                 {"store_into_pages", "overflows"});
  }
  SECTION("INT64_MAX / 32 pages") {
    const ml::mutable_paged_cache<F> cache(bytes.data(), INT64_MAX / 32, 64);
    expect_error([&] { ml::store_into_pages(kv, std::span(slots), cache); },
                 {"store_into_pages", "overflows"});
  }
  SECTION("a negative row stride of quantised rows") {
    std::vector<std::uint8_t> data(256), scales(8);
    const ml::rows_view<F> rows(data.data() + 128, scales.data(), 2, -128);
    const ml::mutable_paged_cache<F> cache(bytes.data(), 2, 64);
    expect_error([&] { ml::store_into_pages(rows, std::span(slots), cache); },
                 {"store_into_pages", "stride", "-128"});
  }
  SECTION("a k stride whose bytes overflow") {
    const ml::matrix_view<const float> huge(k.data(), 2, 128, INT64_MAX / 2);
    const ml::mutable_paged_cache<F> cache(bytes.data(), 2, 64);
    expect_error([&] { ml::store_into_pages(huge, std::span(slots), cache); },
                 {"store_into_pages", "k", "overflows"});
  }
  SECTION("an unsigned slot near UINT64_MAX is not padding") {
    std::vector<std::uint64_t> u{0, UINT64_MAX - 1};
    const ml::mutable_paged_cache<F> cache(bytes.data(), 2, 64);
    expect_error([&] { ml::store_into_pages(kv, std::span(u), cache); },
                 {"slot_mapping[1]", std::to_string(UINT64_MAX - 1)});
  }
  CHECK(bytes == before);
}

TEST_CASE("hostile, helpers: quantizers, fold_q_scales and as_matrix_view check before reading",
          "[hostile][helpers]") {
  std::vector<float> x(4 * 128, 0.5f);
  std::vector<std::uint8_t> data(4 * 128, 0xEE), scales(16, 0xEE);
  SECTION("quantize_rows_into with a huge output stride") {
    expect_error(
        [&] {
          ml::quantize_rows_into<ml::mxfp8>(ml::matrix_view<const float>(x.data(), 4, 128),
                                            data.data(), scales.data(), INT64_MAX / 2);
        },
        {"quantize_rows", "overflows"});
    CHECK(data[0] == 0xEE);
  }
  SECTION("quantize_rows on INT64_MAX / 64 rows") {
    expect_error(
        [&] {
          (void)ml::quantize_rows<ml::mxfp8>(
              ml::matrix_view<const float>(x.data(), INT64_MAX / 64, 128));
        },
        {"quantize_rows", "overflows"});
  }
  SECTION("fold_q_scales: null, negative stride, mismatched sizes") {
    std::vector<float> qs(8, 2.0f), w(8, 1.0f);
    expect_error([&] { ml::fold_q_scales(qs, ml::matrix_view<float>(nullptr, 2, 4)); },
                 {"fold_q_scales", "null"});
    expect_error([&] { ml::fold_q_scales(qs, ml::matrix_view<float>(w.data() + 4, 2, 4, -4)); },
                 {"fold_q_scales", "stride", "-4"});
    expect_error([&] { ml::fold_q_scales(qs, ml::matrix_view<float>(w.data(), -2, 4)); },
                 {"fold_q_scales", "-2"});
    CHECK(w == std::vector<float>(8, 1.0f));
    ml::fold_q_scales(qs, ml::matrix_view<float>(w.data(), 2, 4));
    CHECK(w == std::vector<float>(8, 2.0f));
  }
  SECTION("as_matrix_view(span, 1, INT64_MAX)") {
    std::vector<float> ten(10);
    expect_error([&] { (void)ml::as_matrix_view(std::span(ten), 1, INT64_MAX); },
                 {"as_matrix_view", "not whole rows"});
    const auto one = ml::as_matrix_view(std::span(ten).first(1), 1, INT64_MAX);
    CHECK(one.rows == 1);
    std::vector<float> twelve(12);
    CHECK(ml::as_matrix_view(std::span(twelve), 3, 4).rows == 3);            // 3 full strides
    CHECK(ml::as_matrix_view(std::span(twelve).first(11), 3, 4).rows == 3);  // last row unpadded
    expect_error([&] { (void)ml::as_matrix_view(std::span(twelve).first(9), 3, 4); },
                 {"not whole rows"});
  }
}

TEST_CASE("hostile, helpers: logits_buffer and aligned_page_stride reject bad sizes",
          "[hostile][helpers]") {
  expect_error([] { ml::logits_buffer<float> b(-1, 10); }, {"logits_buffer", "-1"});
  expect_error([] { ml::logits_buffer<float> b(2, -10); }, {"logits_buffer", "-10"});
  expect_error([] { ml::logits_buffer<float> b(INT64_MAX / 2, 128); },
               {"logits_buffer", "overflows"});
  expect_error([] { ml::logits_buffer<float> b(4, INT64_MAX - 2); },
               {"logits_buffer", "overflows"});
  for (std::int64_t a : {std::int64_t{6}, std::int64_t{1000}, std::int64_t{-512}, std::int64_t{0},
                         std::int64_t{1} << 30})
    expect_error([&] { ml::logits_buffer<ml::bf16> b(2, 10, a); },
                 {"logits_buffer", "alignment", std::to_string(a)});
  for (std::int64_t a : {1, 2, 4, 512, 1024, 4096}) {
    ml::logits_buffer<float> b(3, 10, a);
    CHECK(reinterpret_cast<std::uintptr_t>(b.data()) % static_cast<std::uintptr_t>(a) == 0);
    CHECK(b.stride() >= 10);
  }
  ml::logits_buffer<float> empty(0, 0);
  CHECK(empty.data() == nullptr);

  expect_error([] { (void)ml::aligned_page_stride<ml::mxfp8>(64, 0); },
               {"aligned_page_stride", "alignment = 0"});
  expect_error([] { (void)ml::aligned_page_stride<ml::mxfp8>(64, -512); },
               {"aligned_page_stride", "-512"});
  expect_error([] { (void)ml::aligned_page_stride<ml::mxfp8>(0, 512); },
               {"aligned_page_stride", "page_kv = 0"});
  CHECK(ml::aligned_page_stride<ml::mxfp8>(64, 512) == 8704);  // 64 x 132 = 8448 -> 17 x 512
  CHECK(ml::aligned_page_stride<ml::mxfp4>(64, 1) == ml::page_bytes<ml::mxfp4>(64));
}

// ---- 7. natural alignment of typed buffers ------------------------------------------------

TEST_CASE("hostile, alignment: misaligned weights, logits, ks/ke, lengths, tables are rejected",
          "[hostile][alignment]") {
  // Byte storage to carve misaligned typed pointers from (never read through them: rejected).
  alignas(64) static unsigned char raw[1 << 16];
  auto off = [&](std::size_t o) { return static_cast<void*>(raw + 64 + o); };
  dense_case c;
  SECTION("dense weights, logits, ks") {
    std::vector<float> out(static_cast<std::size_t>(c.num_q * c.cols));
    const ml::matrix_view<const float> w(static_cast<const float*>(off(4096 + 1)), c.num_q, c.H);
    expect_error([&] { c.run(w, c.ks, c.ke, ml::matrix_view<float>(out.data(), c.num_q, c.cols)); },
                 {"weights", "not aligned", "4"});
    const ml::matrix_view<float> o(static_cast<float*>(off(2)), c.num_q, c.cols);
    expect_error([&] { c.run(o); }, {"logits", "not aligned"});
    const std::span<const std::int32_t> ks(static_cast<const std::int32_t*>(off(8192 + 3)), 2);
    expect_error(
        [&] { c.run(c.w.view(), ks, c.ke, ml::matrix_view<float>(out.data(), c.num_q, c.cols)); },
        {"cu_seq_len_k_start", "not aligned"});
    const ml::matrix_view<ml::bf16> ob(static_cast<ml::bf16*>(off(1)), c.num_q, c.cols);
    expect_error(
        [&] {
          ml::fp8_fp4_mqa_logits(ml::backend::host{}, c.q.view(), c.kv.view(), c.w.view(),
                                 std::span<const std::int32_t>(c.ks),
                                 std::span<const std::int32_t>(c.ke), c.cols, ob);
        },
        {"logits", "not aligned", "2"});
  }
  SECTION("paged context_lens and block table, and their metadata") {
    paged_case p;
    auto table = rnd::block_table(p.rng, p.lens, p.max_blocks, p.page_kv, p.pages);
    std::vector<float> out(static_cast<std::size_t>(p.B * p.cols));
    const ml::matrix_view<float> o(out.data(), p.B, p.cols);
    const ml::matrix_view<const std::int32_t> lens(static_cast<const std::int32_t*>(off(2)), p.B,
                                                   p.next_n);
    expect_error([&] { (void)ml::get_paged_mqa_logits_metadata(lens, p.page_kv, 1); },
                 {"get_paged_mqa_logits_metadata", "context_lens", "not aligned"});
    expect_error(
        [&] {
          ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, p.q.view(), p.cache.view(), p.w.view(),
                                       lens, table.view(), p.schedule, p.cols, o);
        },
        {"context_lens", "not aligned"});
    const ml::matrix_view<const std::int32_t> bt(static_cast<const std::int32_t*>(off(4097)), p.B,
                                                 p.max_blocks);
    expect_error(
        [&] {
          ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, p.q.view(), p.cache.view(), p.w.view(),
                                       p.lens.view(), bt, p.schedule, p.cols, o);
        },
        {"block_table", "not aligned"});
  }
  SECTION("sparse and paged-sparse metadata inputs") {
    sparse_case s;
    const std::span<const std::int32_t> ks(static_cast<const std::int32_t*>(off(1)), 2);
    expect_error(
        [&] { (void)ml::get_sparse_mqa_logits_metadata(ks, s.ke, s.N, s.idx.view(), s.B); },
        {"get_sparse_mqa_logits_metadata", "ks", "not aligned"});
    const ml::matrix_view<const std::int32_t> idx(static_cast<const std::int32_t*>(off(2)), 2,
                                                  s.cap);
    expect_error([&] { (void)ml::get_sparse_mqa_logits_metadata(s.ks, s.ke, s.N, idx, s.B); },
                 {"sparse_kv_block_indices", "not aligned"});
    paged_sparse_case ps;
    const ml::matrix_view<const std::int32_t> bt(static_cast<const std::int32_t*>(off(3)), 2,
                                                 ps.max_blocks);
    expect_error(
        [&] {
          (void)ml::get_paged_sparse_mqa_logits_metadata(ps.lens, bt, ps.page_kv, ps.idx.view(),
                                                         ps.B);
        },
        {"block_table", "not aligned"});
  }
}

// ---- 8. resources -------------------------------------------------------------------------

TEST_CASE("hostile, resources: the paged-sparse snapshot holds only the used blocks",
          "[hostile][resources]") {
  // 8 rows with huge contexts and a full capacity, every index -1 but one: the snapshot is one
  // block of 16 tokens, not rows x cap x 16 tokens.
  constexpr std::int64_t rows = 8, cap = 256, B = 16, H = 1;
  constexpr std::int32_t page_kv = 64;
  rnd::engine rng{1311};
  auto cache = rnd::paged_cache<ml::mxfp8>(rng, 2, page_kv);
  std::vector<std::int32_t> lens(rows, INT32_MAX);
  auto table = rnd::matrix<std::int32_t>(rows, 4, 0, 1);
  auto idx = rnd::matrix<std::int32_t>(rows, cap, 0, -1);
  idx(3, 7) = 9;  // positions 144..159: page table[3][2] = 1, slots 16..31
  const auto meta = ml::get_paged_sparse_mqa_logits_metadata(
      lens, table.view(), page_kv, idx.view(), B, ml::paged_sparse_protocol::snapshot);
  auto q = rnd::rows<ml::mxfp8>(rng, rows * H);
  auto w = rnd::weights<float>(rng, rows, H);
  ml::logits_buffer<float> out(rows, cap * B);
  ml::fp8_fp4_paged_sparse_mqa_logits(ml::backend::host{}, q.view(), cache.view(), w.view(), meta,
                                      out.view(), ml::options{.truncate_long_contexts = true});
  CHECK(meta.snapshot_bytes() ==
        static_cast<std::size_t>(B * ml::paged_cache_view<ml::mxfp8>::token_bytes));
  // The one used block holds the logits of its 16 tokens; every other column is -inf.
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < cap * B; ++k) {
      const bool used = r == 3 && k / B == 7;
      if (used)
        CHECK(std::isfinite(out(r, k)));
      else
        CHECK(out(r, k) == -std::numeric_limits<float>::infinity());
    }
}

TEST_CASE("hostile, resources: a block selected by every row and entry is snapshotted once",
          "[hostile][resources]") {
  // 8 rows that pick one 16-token block in each of 512 entries (a copy per row and entry was
  // 8 x 512 x 16 tokens, 8.6 MB): the snapshot holds 16 tokens, and the logits are the reread
  // protocol's, row by row (rows whose context ends inside the block see only its start).
  constexpr std::int64_t rows = 8, cap = 512, B = 16, H = 1;
  constexpr std::int32_t page_kv = 64;
  rnd::engine rng(1317);
  auto cache = rnd::paged_cache<ml::mxfp8>(rng, 3, page_kv);
  std::vector<std::int32_t> lens(rows, cap * B);  // every entry read
  lens[2] = 16 * 9 + 5;                           // positions 144..148 of block 9 only
  lens[5] = 16 * 9;                               // none of it
  auto table = rnd::matrix<std::int32_t>(rows, 4, 0, 2);
  auto idx = rnd::matrix<std::int32_t>(rows, cap, 0, 9);  // positions 144..159: slot 2, page 2
  idx(7, 100) = 8;  // positions 128..143: another block of page 2 (table slot 2 as well)
  const auto snap = ml::get_paged_sparse_mqa_logits_metadata(
      lens, table.view(), page_kv, idx.view(), B, ml::paged_sparse_protocol::snapshot);
  const auto reread =
      ml::get_paged_sparse_mqa_logits_metadata(lens, table.view(), page_kv, idx.view(), B);
  auto q = rnd::rows<ml::mxfp8>(rng, rows * H);
  auto w = rnd::weights<float>(rng, rows, H);
  ml::logits_buffer<float> a(rows, cap * B), b(rows, cap * B);
  ml::fp8_fp4_paged_sparse_mqa_logits(ml::backend::host{}, q.view(), cache.view(), w.view(), snap,
                                      a.view(), ml::options{.truncate_long_contexts = true});
  ml::fp8_fp4_paged_sparse_mqa_logits(ml::backend::host{}, q.view(), cache.view(), w.view(), reread,
                                      b.view(), ml::options{.truncate_long_contexts = true});
  CHECK(snap.snapshot_bytes() ==
        static_cast<std::size_t>(2 * B * ml::paged_cache_view<ml::mxfp8>::token_bytes));
  CHECK(check::bitwise_equal(a, b));
  CHECK(std::isfinite(a(2, 4)));
  CHECK(a(2, 5) == -std::numeric_limits<float>::infinity());
  CHECK(a(5, 0) == -std::numeric_limits<float>::infinity());
  // Later calls read the snapshot, not the cache.
  std::fill(cache.bytes.begin(), cache.bytes.end(), std::uint8_t{0});
  ml::fp8_fp4_paged_sparse_mqa_logits(ml::backend::host{}, q.view(), cache.view(), w.view(), snap,
                                      a.view(), ml::options{.truncate_long_contexts = true});
  CHECK(check::bitwise_equal(a, b));
}

TEST_CASE("hostile, resources: the paged-sparse metadata keeps only the table entries it reads",
          "[hostile][resources]") {
  // A block table of 2^20 columns (4 MiB) with one used entry; the metadata must give the same
  // logits as one made from a one-column table: it reads exactly the used entries.
  constexpr std::int64_t rows = 1, cap = 8, B = 16, H = 2;
  constexpr std::int32_t page_kv = 64;
  rnd::engine rng{1313};
  auto cache = rnd::paged_cache<ml::mxfp8>(rng, 3, page_kv);
  std::vector<std::int32_t> lens{INT32_MAX};
  auto wide = rnd::matrix<std::int32_t>(rows, std::int64_t{1} << 20, 0, -7);  // not pages
  wide(0, 5) = 2;
  auto narrow = rnd::matrix<std::int32_t>(rows, 6, 0, -7);
  narrow(0, 5) = 2;
  auto idx = rnd::matrix<std::int32_t>(rows, cap, 0, -1);
  idx(0, 0) = 20, idx(0, 3) = 23;  // positions 320..335 and 368..383: table slot 5 for both
  constexpr auto snapshot = ml::paged_sparse_protocol::snapshot;
  const auto m_wide =
      ml::get_paged_sparse_mqa_logits_metadata(lens, wide.view(), page_kv, idx.view(), B, snapshot);
  const auto m_narrow = ml::get_paged_sparse_mqa_logits_metadata(lens, narrow.view(), page_kv,
                                                                 idx.view(), B, snapshot);
  wide.data.assign(wide.data.size(), 90210);  // the caller may reuse its table afterwards
  auto q = rnd::rows<ml::mxfp8>(rng, rows * H);
  auto w = rnd::weights<float>(rng, rows, H);
  ml::logits_buffer<float> a(rows, cap * B), b(rows, cap * B);
  ml::fp8_fp4_paged_sparse_mqa_logits(ml::backend::host{}, q.view(), cache.view(), w.view(), m_wide,
                                      a.view(), ml::options{.truncate_long_contexts = true});
  ml::fp8_fp4_paged_sparse_mqa_logits(ml::backend::host{}, q.view(), cache.view(), w.view(),
                                      m_narrow, b.view(),
                                      ml::options{.truncate_long_contexts = true});
  CHECK(check::bitwise_equal(a, b));
  CHECK(m_wide.snapshot_bytes() == 2 * B * ml::paged_cache_view<ml::mxfp8>::token_bytes);
  CHECK(m_wide.metadata_bytes() == m_narrow.metadata_bytes());
  CHECK(m_wide.metadata_bytes() < 1024);
}

TEST_CASE("hostile, resources: num_workers is capped at max_paged_workers",
          "[hostile][resources]") {
  paged_case c;
  for (int n : {ml::max_paged_workers + 1, 1 << 26, INT_MAX})
    expect_error([&] { (void)ml::get_paged_mqa_logits_metadata(c.lens.view(), c.page_kv, n); },
                 {"get_paged_mqa_logits_metadata", "num_workers", std::to_string(n),
                  std::to_string(ml::max_paged_workers)});
  const auto s = ml::get_paged_mqa_logits_metadata(c.lens.view(), c.page_kv, ml::max_paged_workers);
  CHECK(s.num_workers() == ml::max_paged_workers);
}

// ---- 9. denormal modes --------------------------------------------------------------------

#if defined(__SSE2__)
namespace {
// Sets FTZ | DAZ for the scope, as inference processes often run.
struct flush_denormals {
  unsigned saved = _mm_getcsr();
  flush_denormals() { _mm_setcsr(saved | 0x8040u); }
  ~flush_denormals() { _mm_setcsr(saved); }
};
}  // namespace

TEST_CASE("hostile, denormals: UE8M0 decode and the quantizers are exact under FTZ/DAZ",
          "[hostile][denormals][x86]") {
  // Blocks with an infinite element take scale byte 254, whose reciprocal 2^-127 is an fp32
  // subnormal; the finite elements (up to 3.3e38) must still get their codes.
  std::vector<float> x(128);
  rnd::engine rng{1317};
  for (int i = 0; i < 128; ++i)
    x[static_cast<std::size_t>(i)] =
        static_cast<float>(rnd::uniform(rng, -1000, 1000)) * 3.3e35f;  // |x| up to 3.3e38
  // An infinite element gives its block scale byte 254 (the largest finite scale).
  for (int b = 0; b < 4; ++b)
    x[static_cast<std::size_t>(b * 32)] = std::numeric_limits<float>::infinity();
  std::vector<std::uint8_t> d8(128), s8(4), d4(64), s4(4);
  ml::quantize_row<ml::mxfp8>(x.data(), d8.data(), s8.data());
  ml::quantize_row<ml::mxfp4>(x.data(), d4.data(), s4.data());
  CHECK(std::count(s4.begin(), s4.end(), std::uint8_t{254}) == 4);
  CHECK(std::count(s8.begin(), s8.end(), std::uint8_t{254}) == 4);
  CHECK(std::count(d4.begin(), d4.end(), std::uint8_t{0}) < 32);  // real codes, not flushed
  std::vector<std::uint8_t> f8(128), g8(4), f4(64), g4(4);
  float zero_scale = 0.0f;
  {
    flush_denormals ftz;
    ml::quantize_row<ml::mxfp8>(x.data(), f8.data(), g8.data());
    ml::quantize_row<ml::mxfp4>(x.data(), f4.data(), g4.data());
    volatile std::uint8_t zero = 0;
    zero_scale = ml::float_ue8m0::decode(zero);
  }
  CHECK(f8 == d8);
  CHECK(g8 == s8);
  CHECK(f4 == d4);
  CHECK(g4 == s4);
  CHECK(std::bit_cast<std::uint32_t>(zero_scale) == 0x00400000u);  // 2^-127, not flushed
}
#endif

// ---- 10. byte order -----------------------------------------------------------------------

TEST_CASE("hostile, byte order: the target is little-endian and scale words read as bytes",
          "[hostile][endian]") {
  static_assert(std::endian::native == std::endian::little);
  // The int32 scale word 0x7C7D7E7F is bytes 7F 7E 7D 7C: block k's scale is byte k.
  const std::int32_t word = 0x7C7D7E7F;
  std::vector<std::uint8_t> data(128, 0x38);
  const ml::rows_view<ml::mxfp8> v(data.data(), &word, 1);
  CHECK(v.scale(0)[0] == 0x7F);
  CHECK(v.scale(0)[3] == 0x7C);
}

// ---- 9. every helper array and size checked like the kernels' ------------------------------

TEST_CASE("hostile, helpers: a misaligned slot_mapping or q_scales is rejected before a read",
          "[hostile][helpers][alignment]") {
  alignas(64) static unsigned char raw[4096];
  SECTION("store_into_pages: an int64 slot_mapping at +4") {
    using F = ml::mxfp8;
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(ml::page_bytes<F>(64)) * 2, 0);
    std::vector<float> k(2 * 128, 1.0f);
    const ml::matrix_view<const float> kv(k.data(), 2, 128);
    const std::span<std::int64_t> slots(reinterpret_cast<std::int64_t*>(raw + 4), 2);
    const ml::mutable_paged_cache<F> cache(bytes.data(), 2, 64);
    const std::vector<std::uint8_t> before = bytes;
    expect_error([&] { ml::store_into_pages(kv, slots, cache); },
                 {"store_into_pages", "slot_mapping", "not aligned", "8"});
    CHECK(bytes == before);
  }
  SECTION("fold_q_scales: q_scales at +2") {
    std::vector<float> w(8, 1.0f);
    const std::span<const float> qs(reinterpret_cast<const float*>(raw + 2), 8);
    expect_error([&] { ml::fold_q_scales(qs, ml::matrix_view<float>(w.data(), 2, 4)); },
                 {"fold_q_scales", "q_scales", "not aligned", "4"});
    CHECK(w == std::vector<float>(8, 1.0f));
  }
}

TEST_CASE("hostile, helpers: logits_row_stride rejects sizes whose stride overflows",
          "[hostile][helpers]") {
  expect_error([] { (void)ml::logits_row_stride<float>(INT64_MAX, 512); },
               {"logits_row_stride", "cols = " + std::to_string(INT64_MAX), "overflows"});
  expect_error([] { (void)ml::logits_row_stride<float>(-1, 512); },
               {"logits_row_stride", "cols = -1"});
  expect_error([] { (void)ml::logits_row_stride<float>(10, 0); },
               {"logits_row_stride", "alignment_bytes = 0"});
  expect_error([] { (void)ml::logits_row_stride<float>(10, 6); },
               {"logits_row_stride", "alignment_bytes = 6"});
  // The largest column count that still rounds up to a multiple of 128 floats (cols + 128
  // overflowed on the way, undefined behaviour: found by fuzz_helpers), and the same stride in
  // an empty logits_buffer.
  CHECK(ml::logits_row_stride<float>(INT64_MAX - 127, 512) == INT64_MAX - 127);
  CHECK(ml::logits_row_stride<float>(INT64_MAX - 511, 2048) == INT64_MAX - 511);
  CHECK(ml::logits_buffer<float>(0, INT64_MAX - 511, 2048).stride() == INT64_MAX - 511);
  CHECK(ml::logits_row_stride<float>(0, 512) == 0);
  CHECK(ml::logits_row_stride<float>(129, 4) == 129);
}

TEST_CASE("hostile, pool: the largest spin does not overflow the clock", "[hostile][pool]") {
  // now() + spin overflowed (undefined behaviour, and a deadline in the past: no spin at all).
  ml::thread_pool pool(3, std::chrono::microseconds::max());
  std::atomic<int> ran{0};
  auto task = [&](std::int64_t) { ran.fetch_add(1); };
  for (int i = 0; i < 20; ++i) pool.parallel_for(50, task);
  CHECK(ran.load() == 1000);
  // The deadline is capped, never earlier than now.
  const auto now = std::chrono::steady_clock::now();
  CHECK(ml::detail::spin_deadline(now, std::chrono::microseconds::max()) ==
        std::chrono::steady_clock::time_point::max());
  CHECK(ml::detail::spin_deadline(now, std::chrono::microseconds{5}) ==
        now + std::chrono::microseconds{5});
}  // the destructor ends the workers' spin

TEST_CASE("hostile, messages: a wrong argument is named with its value", "[hostile][messages]") {
  SECTION("store_into_pages: a negative k stride is a stride error, not a shape error") {
    using F = ml::mxfp8;
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(ml::page_bytes<F>(64)), 0);
    std::vector<float> k(4 * 128, 1.0f);
    std::vector<std::int64_t> slots{0, 1, 2, 3};
    const ml::mutable_paged_cache<F> cache(bytes.data(), 1, 64);
    const ml::matrix_view<const float> kv(k.data() + 3 * 128, 4, 128, -128);
    try {
      ml::store_into_pages(kv, std::span(slots), cache);
      FAIL("no error");
    } catch (const ml::error& e) {
      CHECK_THAT(e.what(), Catch::Contains("k stride -128 < cols 128"));
      CHECK_THAT(e.what(), !Catch::Contains("shape"));
    }
  }
  SECTION("get_sparse_mqa_logits_metadata: -1 rows are named as rows, not as the capacity") {
    sparse_case c;
    const ml::matrix_view<const std::int32_t> idx(c.idx.data.data(), -1, c.cap);
    try {
      (void)ml::get_sparse_mqa_logits_metadata(c.ks, c.ke, c.N, idx, c.B);
      FAIL("no error");
    } catch (const ml::error& e) {
      CHECK_THAT(e.what(), Catch::Contains("sparse_kv_block_indices has -1 rows"));
      CHECK_THAT(e.what(), !Catch::Contains("capacity"));
    }
  }
  SECTION("aligned_page_stride: a head dim the format has no kernel for") {
    expect_error([] { (void)ml::aligned_page_stride<ml::mxfp8>(64, ml::head_dim_t{96}); },
                 {"aligned_page_stride", "head_dim = 96"});
    expect_error([] { (void)ml::page_bytes<ml::mxfp4>(64, ml::head_dim_t{32}); },
                 {"page_bytes", "head_dim = 32"});
    CHECK(ml::aligned_page_stride<ml::mxfp8>(64, ml::head_dim_t{64}) ==
          4608);  // 64 x 68 -> 9 x 512
  }
}

TEST_CASE("hostile, helpers: a helper's output overlapping its input is rejected, untouched",
          "[hostile][helpers][overlap]") {
  using F = ml::mxfp8;
  SECTION("store_into_pages: k or the slot mapping inside the cache") {
    std::vector<float> storage(static_cast<std::size_t>(ml::page_bytes<F>(64)) / 4 + 512, 1.0f);
    const ml::mutable_paged_cache<F> cache(storage.data(), 1, 64);
    const std::vector<float> before = storage;
    std::vector<std::int64_t> slots{0, 1};
    // k rows 0 and 1 are the cache's first bytes: token 0's codes would overwrite k row 1.
    const ml::matrix_view<const float> k(storage.data() + 10, 2, 128);
    expect_error([&] { ml::store_into_pages(k, std::span(slots), cache); },
                 {"store_into_pages", "k [", "overlap the cache"});
    CHECK(storage == before);
    std::vector<float> kf(256, 1.0f);
    auto* in_cache = reinterpret_cast<std::int64_t*>(storage.data() + 64);
    in_cache[0] = 0, in_cache[1] = 1;
    const std::vector<float> with_slots = storage;
    expect_error(
        [&] {
          ml::store_into_pages(ml::matrix_view<const float>(kf.data(), 2, 128),
                               std::span<std::int64_t>(in_cache, 2), cache);
        },
        {"store_into_pages", "slot_mapping [", "overlap the cache"});
    CHECK(storage == with_slots);
  }
  SECTION("quantize_rows_into: codes over the source rows, scales over the codes") {
    std::vector<float> x(4 * 128 + 256, 0.5f);
    const std::vector<float> before = x;
    std::vector<std::uint8_t> data(4 * 128, 0xEE), scales(16, 0xEE);
    const ml::matrix_view<const float> xv(x.data(), 4, 128);
    expect_error(
        [&] {
          ml::quantize_rows_into<F>(xv, reinterpret_cast<std::uint8_t*>(x.data() + 3 * 128),
                                    scales.data());
        },
        {"quantize_rows", "data [", "overlap x"});
    expect_error([&] { ml::quantize_rows_into<F>(xv, data.data(), data.data() + 100); },
                 {"quantize_rows", "data [", "overlap scales"});
    CHECK(x == before);
    CHECK(data == std::vector<std::uint8_t>(4 * 128, 0xEE));
  }
  SECTION("fold_q_scales: q_scales inside the weights") {
    std::vector<float> w(16, 2.0f);
    expect_error(
        [&] {
          ml::fold_q_scales(std::span<const float>(w.data() + 4, 8),
                            ml::matrix_view<float>(w.data(), 2, 4));
        },
        {"fold_q_scales", "q_scales [", "overlap the weights"});
    CHECK(w == std::vector<float>(16, 2.0f));
  }
}
