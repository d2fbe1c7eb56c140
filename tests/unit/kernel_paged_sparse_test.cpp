// get_paged_sparse_mqa_logits_metadata + fp8_fp4_paged_sparse_mqa_logits against
// ref::paged_sparse, under both protocols: reread (each call reads the cache it is given) and
// snapshot (the first call gathers the keys, later calls reuse them).
#include <catch2/catch.hpp>

#include <thread>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/kernel_check.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;

namespace {

struct ps_inputs {
  std::int64_t H = 4, B = 16, max_blocks = 3, num_pages = 5, page_stride = 0;
  std::int32_t page_kv = 64;
};

std::vector<std::int64_t> as_keys(const std::vector<std::int32_t>& lens) {
  return {lens.begin(), lens.end()};
}

template <class C>
void check_paged_sparse(rnd::engine& rng, const ps_inputs& in,
                        const std::vector<std::int32_t>& lens,
                        const rnd::owned_matrix<std::int32_t>& idx,
                        const rnd::code_options& qo = {}, const rnd::code_options& ko = {}) {
  using F = typename C::format;
  using O = typename C::out;
  const std::int64_t rows = idx.rows, cols = idx.cols * in.B;
  INFO(F::name << " on " << check::backend_name<typename C::backend>() << ", "
               << check::out_name<O>() << ", rows " << rows << ", H " << in.H << ", page_kv "
               << in.page_kv << ", B " << in.B << ", cap " << idx.cols << ", max_blocks "
               << in.max_blocks << ", page_stride " << in.page_stride);
  const auto cache = rnd::paged_cache<F>(rng, in.num_pages, in.page_kv, in.page_stride, ko);
  const auto keys = as_keys(lens);
  const auto table = rnd::block_table(rng, keys, in.max_blocks, in.page_kv, in.num_pages);
  const auto q = rnd::rows<F>(rng, rows * in.H, qo);
  const auto w = rnd::weights<typename C::weight>(rng, rows, in.H);
  const ref::result expected = ref::paged_sparse(q.view(), cache.view(), w.view(), std::span(lens),
                                                 table.view(), idx.view(), in.B);
  CHECK(check::valid_count(expected) > 0);

  ml::thread_pool pool1(1), pool2(2);
  ml::logits_buffer<O> first_protocol(rows, cols);
  for (const auto protocol :
       {ml::paged_sparse_protocol::reread, ml::paged_sparse_protocol::snapshot}) {
    const bool snapshot = protocol == ml::paged_sparse_protocol::snapshot;
    INFO((snapshot ? "snapshot" : "reread") << " protocol");
    ml::logits_buffer<O> one(rows, cols), two(rows, cols), dirty(rows, cols);
    {
      const auto meta = ml::get_paged_sparse_mqa_logits_metadata(
          std::span<const std::int32_t>(lens), table.view(), in.page_kv, idx.view(), in.B,
          protocol);
      CHECK(meta.protocol() == protocol);
      CHECK(!meta.has_snapshot());
      check::fill_sentinel(one);
      ml::fp8_fp4_paged_sparse_mqa_logits(typename C::backend{}, q.view(), cache.view(), w.view(),
                                          meta, one.view(),
                                          {.executor = pool1, .truncate_long_contexts = true});
      CHECK(meta.has_snapshot() == snapshot);
      CHECK(check::against(one, expected) == "");
      check::fill_sentinel(dirty, 0x7F);
      ml::fp8_fp4_paged_sparse_mqa_logits(
          typename C::backend{}, q.view(), cache.view(), w.view(), meta, dirty.view(),
          {.executor = pool2, .clean_logits = false, .truncate_long_contexts = true});
      CHECK(check::against(dirty, expected, false) == "");
    }
    // A fresh metadata object whose first call runs on two threads.
    const auto meta2 = ml::get_paged_sparse_mqa_logits_metadata(
        std::span<const std::int32_t>(lens), table.view(), in.page_kv, idx.view(), in.B, protocol);
    check::fill_sentinel(two);
    ml::fp8_fp4_paged_sparse_mqa_logits(typename C::backend{}, q.view(), cache.view(), w.view(),
                                        meta2, two.view(),
                                        {.executor = pool2, .truncate_long_contexts = true});
    CHECK(check::bitwise_equal(one, two));
    if (snapshot)
      CHECK(check::bitwise_equal(one, first_protocol));  // the protocols agree, bit for bit
    else
      first_protocol = std::move(one);
  }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("paged sparse: page sizes x block sizes x heads match the reference",
                        "[paged_sparse]", check::kernel_combos) {
  using F = typename TestType::format;
  const auto [page_kv, B, H] =
      GENERATE(table<std::int32_t, std::int64_t, std::int64_t>({{64, 8, 1},
                                                                {64, 16, 32},
                                                                {128, 8, 64},
                                                                {128, 16, 4},
                                                                {8, 8, 4},
                                                                {16, 16, 2},
                                                                {48, 16, 4},
                                                                {256, 8, 4}}));
  const bool padded = GENERATE(false, true);
  rnd::engine rng(static_cast<std::uint64_t>(page_kv + B * 7 + H * 13 + padded));
  ps_inputs in;
  in.H = H;
  in.B = B;
  in.page_kv = page_kv;
  in.max_blocks = std::max<std::int64_t>(3, 192 / page_kv);  // small pages: more of them
  in.num_pages = in.max_blocks + 1;
  const std::int64_t used = std::int64_t{page_kv} * (F::data_bytes + F::scale_bytes);
  in.page_stride = padded ? (used + 511) / 512 * 512 + 512 : 0;
  const std::int64_t cap = std::max<std::int64_t>(8, 2 * (page_kv / B) - 1);  // any capacity
  const auto capacity = static_cast<std::int32_t>(in.max_blocks * page_kv);
  // Lengths: empty, partial block, past max_blocks * page_kv, random.
  std::vector<std::int32_t> lens = {0, 5, capacity + 40};
  for (int i = 0; i < 3; ++i)
    lens.push_back(static_cast<std::int32_t>(rnd::uniform(rng, 1, capacity)));
  const std::int64_t rows = static_cast<std::int64_t>(lens.size());
  auto idx = rnd::sparse_indices(rng, rows, cap, (capacity + 40) / B + 1,
                                 {.pad = 0.2, .out_of_range = 0.1});
  check_paged_sparse<TestType>(rng, in, lens, idx);
}

TEMPLATE_LIST_TEST_CASE("paged sparse: 128 heads, NaN codes and scales", "[paged_sparse]",
                        check::each_format_combos) {
  using F = typename TestType::format;
  const int nan = GENERATE(0, 1, 2);                      // none, a NaN code, a NaN scale
  if (nan == 1 && !rnd::detail::has_nan_code<F>) return;  // e2m1 has no NaN code
  const bool in_q = GENERATE(true, false);
  INFO("NaN kind " << nan << (in_q ? " in q" : " in the cache"));
  rnd::engine rng(61);
  ps_inputs in;
  in.H = nan ? 2 : 128;
  in.B = 16;
  in.page_kv = 64;
  in.max_blocks = 1;
  in.num_pages = 1;
  const std::vector<std::int32_t> lens = {64, 64};
  auto idx = rnd::matrix<std::int32_t>(2, 4);
  for (std::int64_t b = 0; b < 4; ++b) idx(0, b) = idx(1, b) = static_cast<std::int32_t>(b);
  rnd::code_options o;
  if (nan == 1) o.nan_codes = 1;
  if (nan == 2) o.nan_scales = 1;
  check_paged_sparse<TestType>(rng, in, lens, idx, in_q ? o : rnd::code_options{},
                               in_q ? rnd::code_options{} : o);
}

TEMPLATE_LIST_TEST_CASE("paged sparse: first call snapshots, later calls reuse it",
                        "[paged_sparse]", check::kernel_combos) {
  using F = typename TestType::format;
  using O = typename TestType::out;
  using W = typename TestType::weight;
  rnd::engine rng(67);
  const std::int32_t page_kv = 64;
  const std::int64_t B = 16, H = 4, rows = 3, cap = 8, pages = 4;
  const std::vector<std::int32_t> lens = {200, 64, 17};
  auto cache = rnd::paged_cache<F>(rng, pages, page_kv);
  const auto table = rnd::block_table(rng, as_keys(lens), 4, page_kv, pages);
  const auto idx = rnd::sparse_indices(rng, rows, cap, 13, {.pad = 0.1, .tail_padding = false});
  const auto q1 = rnd::rows<F>(rng, rows * H);
  const auto w1 = rnd::weights<W>(rng, rows, H);
  const auto q2 = rnd::rows<F>(rng, rows * H);
  const auto w2 = rnd::weights<W>(rng, rows, H);

  constexpr auto snapshot = ml::paged_sparse_protocol::snapshot;
  const auto meta = ml::get_paged_sparse_mqa_logits_metadata(
      std::span<const std::int32_t>(lens), table.view(), page_kv, idx.view(), B, snapshot);
  const auto old_1 = ref::paged_sparse(q1.view(), cache.view(), w1.view(), std::span(lens),
                                       table.view(), idx.view(), B);
  const auto old_2 = ref::paged_sparse(q2.view(), cache.view(), w2.view(), std::span(lens),
                                       table.view(), idx.view(), B);
  ml::logits_buffer<O> first(rows, cap * B);
  ml::fp8_fp4_paged_sparse_mqa_logits(typename TestType::backend{}, q1.view(), cache.view(),
                                      w1.view(), meta, first.view());
  CHECK(check::against(first, old_1) == "");
  CHECK(meta.snapshot_bytes() > 0);

  // New KV contents: every data byte of every page rewritten.
  const auto fresh = rnd::paged_cache<F>(rng, pages, page_kv);
  cache.bytes = fresh.bytes;
  const auto new_1 = ref::paged_sparse(q1.view(), cache.view(), w1.view(), std::span(lens),
                                       table.view(), idx.view(), B);
  REQUIRE(check::against(first, new_1) != "");  // the change is visible in the logits

  SECTION("the same metadata gives the old results, bit for bit") {
    ml::logits_buffer<O> again(rows, cap * B);
    ml::fp8_fp4_paged_sparse_mqa_logits(typename TestType::backend{}, q1.view(), cache.view(),
                                        w1.view(), meta, again.view());
    CHECK(check::bitwise_equal(first, again));
  }
  SECTION("new Q and weights with the same metadata use the snapshot") {
    ml::logits_buffer<O> out(rows, cap * B);
    ml::thread_pool pool(2);
    ml::fp8_fp4_paged_sparse_mqa_logits(typename TestType::backend{}, q2.view(), cache.view(),
                                        w2.view(), meta, out.view(), {.executor = pool});
    CHECK(check::against(out, old_2) == "");
  }
  SECTION("a new metadata object sees the change") {
    const auto meta2 = ml::get_paged_sparse_mqa_logits_metadata(
        std::span<const std::int32_t>(lens), table.view(), page_kv, idx.view(), B, snapshot);
    ml::logits_buffer<O> out(rows, cap * B);
    ml::fp8_fp4_paged_sparse_mqa_logits(typename TestType::backend{}, q1.view(), cache.view(),
                                        w1.view(), meta2, out.view());
    CHECK(check::against(out, new_1) == "");
  }
  SECTION("concurrent first calls on one metadata object agree") {
    const auto meta3 = ml::get_paged_sparse_mqa_logits_metadata(
        std::span<const std::int32_t>(lens), table.view(), page_kv, idx.view(), B, snapshot);
    ml::logits_buffer<O> a(rows, cap * B), b(rows, cap * B);
    std::thread t([&] {
      ml::fp8_fp4_paged_sparse_mqa_logits(typename TestType::backend{}, q1.view(), cache.view(),
                                          w1.view(), meta3, a.view());
    });
    ml::fp8_fp4_paged_sparse_mqa_logits(typename TestType::backend{}, q1.view(), cache.view(),
                                        w1.view(), meta3, b.view());
    t.join();
    CHECK(check::against(a, new_1) == "");
    CHECK(check::bitwise_equal(a, b));
  }
}

// The reread protocol, as engines use it: one metadata object per decode step, one cache per
// indexer layer. Each call must score the bytes of the cache it is given.
TEMPLATE_LIST_TEST_CASE("paged sparse: one reread metadata serves caches of several layers",
                        "[paged_sparse]", check::kernel_combos) {
  using F = typename TestType::format;
  using O = typename TestType::out;
  using W = typename TestType::weight;
  rnd::engine rng(71);
  const std::int32_t page_kv = 32;
  const std::int64_t B = 8, H = 4, rows = 4, cap = 6, pages = 6;
  const std::vector<std::int32_t> lens = {150, 70, 9, 128};
  const auto layer_a = rnd::paged_cache<F>(rng, pages, page_kv);
  const auto layer_b = rnd::paged_cache<F>(rng, pages + 2, page_kv, 8192);  // more pages, padded
  const auto table = rnd::block_table(rng, as_keys(lens), 5, page_kv, pages);
  const auto idx = rnd::sparse_indices(rng, rows, cap, 19, {.pad = 0.1});
  const auto q = rnd::rows<F>(rng, rows * H);
  const auto w = rnd::weights<W>(rng, rows, H);
  const std::vector<std::int32_t> requests = {0, 1, 1, 2};  // rows 1 and 2: one request
  auto shared_table = table;
  for (std::int64_t c = 0; c < shared_table.cols; ++c) shared_table(2, c) = shared_table(1, c);
  const auto lens_span = std::span<const std::int32_t>(lens);
  const auto meta = ml::get_paged_sparse_mqa_logits_metadata(lens_span, shared_table.view(),
                                                             requests, page_kv, idx.view(), B);
  CHECK(meta.protocol() == ml::paged_sparse_protocol::reread);
  const auto expect_a = ref::paged_sparse(q.view(), layer_a.view(), w.view(), std::span(lens),
                                          shared_table.view(), idx.view(), B);
  const auto expect_b = ref::paged_sparse(q.view(), layer_b.view(), w.view(), std::span(lens),
                                          shared_table.view(), idx.view(), B);
  REQUIRE(check::valid_count(expect_a) > 0);
  ml::logits_buffer<O> a(rows, cap * B), b(rows, cap * B), a_again(rows, cap * B);
  ml::fp8_fp4_paged_sparse_mqa_logits(typename TestType::backend{}, q.view(), layer_a.view(),
                                      w.view(), meta, a.view());
  ml::fp8_fp4_paged_sparse_mqa_logits(typename TestType::backend{}, q.view(), layer_b.view(),
                                      w.view(), meta, b.view());
  ml::fp8_fp4_paged_sparse_mqa_logits(typename TestType::backend{}, q.view(), layer_a.view(),
                                      w.view(), meta, a_again.view());
  CHECK(check::against(a, expect_a) == "");
  CHECK(check::against(b, expect_b) == "");
  CHECK(check::against(b, expect_a) != "");  // the layers' logits differ
  CHECK(check::bitwise_equal(a, a_again));
  CHECK(!meta.has_snapshot());
  CHECK(meta.snapshot_bytes() == 0);

  // The same rows without `indices` (every row its own request) give the same logits.
  const auto solo = ml::get_paged_sparse_mqa_logits_metadata(lens_span, shared_table.view(),
                                                             page_kv, idx.view(), B);
  ml::logits_buffer<O> b_solo(rows, cap * B);
  ml::fp8_fp4_paged_sparse_mqa_logits(typename TestType::backend{}, q.view(), layer_b.view(),
                                      w.view(), solo, b_solo.view());
  CHECK(check::bitwise_equal(b, b_solo));

  // A snapshot metadata keeps scoring the first cache it saw.
  const auto snap =
      ml::get_paged_sparse_mqa_logits_metadata(lens_span, shared_table.view(), requests, page_kv,
                                               idx.view(), B, ml::paged_sparse_protocol::snapshot);
  ml::logits_buffer<O> s1(rows, cap * B), s2(rows, cap * B);
  ml::fp8_fp4_paged_sparse_mqa_logits(typename TestType::backend{}, q.view(), layer_a.view(),
                                      w.view(), snap, s1.view());
  ml::fp8_fp4_paged_sparse_mqa_logits(typename TestType::backend{}, q.view(), layer_b.view(),
                                      w.view(), snap, s2.view());
  CHECK(check::bitwise_equal(s1, a));
  CHECK(check::bitwise_equal(s2, a));  // still layer A's keys, as documented

  // A reread call checks each cache's geometry: page_kv, and a page for every entry it reads.
  const auto small = rnd::paged_cache<F>(rng, 1, page_kv);
  const auto other_page = rnd::paged_cache<F>(rng, pages, 2 * page_kv);
  ml::logits_buffer<O> untouched(rows, cap * B);
  check::fill_sentinel(untouched);
  CHECK_THROWS_WITH(
      ml::fp8_fp4_paged_sparse_mqa_logits(typename TestType::backend{}, q.view(), small.view(),
                                          w.view(), meta, untouched.view()),
      Catch::Contains("is not a page (num_pages = 1)"));
  CHECK_THROWS_WITH(
      ml::fp8_fp4_paged_sparse_mqa_logits(typename TestType::backend{}, q.view(), other_page.view(),
                                          w.view(), meta, untouched.view()),
      Catch::Contains("cache page_kv = 64 but the metadata was made for 32"));
  CHECK(check::untouched(untouched));
}

TEST_CASE("paged sparse: indices must group consecutive rows with one block-table row",
          "[paged_sparse][bad_input]") {
  const std::vector<std::int32_t> lens = {16, 16, 16};
  std::vector<std::int32_t> table_data = {0, 1, 0, 1, 2, 3};
  const ml::matrix_view<const std::int32_t> table(table_data.data(), 3, 2);
  std::vector<std::int32_t> idx_data(3 * 2, 0);
  const ml::matrix_view<const std::int32_t> idx(idx_data.data(), 3, 2);
  const auto make = [&](std::vector<std::int32_t> requests) {
    return ml::get_paged_sparse_mqa_logits_metadata(lens, table, requests, 16, idx, 8);
  };
  CHECK_NOTHROW(make({5, 5, 6}));
  CHECK_NOTHROW(make({}));
  CHECK_THROWS_WITH(make({5, 6, 5}), Catch::Contains("indices value 5 appears in two runs"));
  CHECK_THROWS_WITH(make({5, 6, 6}), Catch::Contains("block_table[1][0] = 0 differs from "
                                                     "block_table[2][0] = 2"));
  CHECK_THROWS_WITH(make({1, 2}), Catch::Contains("indices has 2 entries, expected one per query "
                                                  "row (3)"));
  CHECK_THROWS_WITH(ml::get_paged_sparse_mqa_logits_metadata(lens, table, 24, idx, 16),
                    Catch::Contains("page_kv = 24 must be a positive multiple of "
                                    "sparse_block_kv = 16"));
  CHECK_THROWS_WITH(ml::get_paged_sparse_mqa_logits_metadata(lens, table, 0, idx, 8),
                    Catch::Contains("page_kv = 0 must be a positive multiple"));
}
