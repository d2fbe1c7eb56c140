// get_paged_mqa_logits_metadata + fp8_fp4_paged_mqa_logits against ref::paged. Block-table
// slots past each context hold values that are not pages and the cache has few pages, so a
// kernel that read one would be rejected or walk out of the cache.
#include <catch2/catch.hpp>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/kernel_check.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;

namespace {

struct paged_inputs {
  std::int64_t H = 4;
  std::int32_t page_kv = 64;
  std::int64_t max_blocks = 4, num_pages = 7, page_stride = 0, max_context_len = 256;
};

std::int64_t padded_stride(std::int32_t page_kv, int token_bytes) {
  return (std::int64_t{page_kv} * token_bytes + 511) / 512 * 512 + 512;  // upstream-style + more
}

// Runs with schedules of 1, 3 and 7 workers on 1 and 2 threads: every result bitwise identical
// and matching the reference; then clean_logits = false.
template <class C>
void check_paged(rnd::engine& rng, const paged_inputs& in,
                 const rnd::owned_matrix<std::int32_t>& lens, const rnd::code_options& qo = {},
                 const rnd::code_options& ko = {}) {
  using F = typename C::format;
  using O = typename C::out;
  const std::int64_t B = lens.rows, next_n = lens.cols, rows = B * next_n;
  std::string lens_text;
  for (auto v : lens.data) lens_text += std::to_string(v) + " ";
  INFO(F::name << " on " << check::backend_name<typename C::backend>() << ", "
               << check::out_name<O>() << ", B " << B << ", next_n " << next_n << ", H " << in.H
               << ", page_kv " << in.page_kv << ", max_blocks " << in.max_blocks << ", pages "
               << in.num_pages << ", page_stride " << in.page_stride << ", max_context_len "
               << in.max_context_len << ", lens " << lens_text);
  const auto cache = rnd::paged_cache<F>(rng, in.num_pages, in.page_kv, in.page_stride, ko);
  const auto table = rnd::block_table(rng, lens, in.max_blocks, in.page_kv, in.num_pages);
  const auto q = rnd::rows<F>(rng, rows * in.H, qo);
  const auto w = rnd::weights<typename C::weight>(rng, rows, in.H);
  const ref::result expected =
      ref::paged(q.view(), cache.view(), w.view(), lens.view(), table.view(), in.max_context_len);

  // A context longer than the table or the output is an error unless the call opts into the
  // masking these tests check.
  bool too_long = false;
  for (auto v : lens.data) too_long |= v > std::min(in.max_blocks * in.page_kv, in.max_context_len);
  if (too_long) {
    const auto s = ml::get_paged_mqa_logits_metadata(lens.view(), in.page_kv, 1);
    ml::logits_buffer<O> out(rows, in.max_context_len);
    check::fill_sentinel(out);
    CHECK_THROWS_WITH(
        ml::fp8_fp4_paged_mqa_logits(typename C::backend{}, q.view(), cache.view(), w.view(),
                                     lens.view(), table.view(), s, in.max_context_len, out.view()),
        Catch::Contains("is longer than"));
    CHECK(check::untouched(out));
  }

  ml::thread_pool pool1(1), pool2(2);
  ml::logits_buffer<O> first(rows, in.max_context_len);
  bool have_first = false;
  for (int workers : {1, 3, 7}) {
    const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), in.page_kv, workers);
    for (ml::thread_pool* pool : {&pool1, &pool2}) {
      INFO(workers << " scheduled workers, " << pool->concurrency() << " threads");
      ml::logits_buffer<O> out(rows, in.max_context_len);
      check::fill_sentinel(out);
      ml::fp8_fp4_paged_mqa_logits(typename C::backend{}, q.view(), cache.view(), w.view(),
                                   lens.view(), table.view(), schedule, in.max_context_len,
                                   out.view(),
                                   {.executor = *pool, .truncate_long_contexts = too_long});
      if (!have_first) {
        CHECK(check::against(out, expected) == "");
        first = std::move(out);
        have_first = true;
      } else {
        CHECK(check::bitwise_equal(first, out));
      }
    }
  }
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), in.page_kv, 3);
  ml::logits_buffer<O> dirty(rows, in.max_context_len);
  check::fill_sentinel(dirty, 0x7F);
  ml::fp8_fp4_paged_mqa_logits(
      typename C::backend{}, q.view(), cache.view(), w.view(), lens.view(), table.view(), schedule,
      in.max_context_len, dirty.view(),
      {.executor = pool2, .clean_logits = false, .truncate_long_contexts = too_long});
  CHECK(check::against(dirty, expected, false) == "");
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("paged: page sizes x next_n x heads match the reference", "[paged]",
                        check::kernel_combos) {
  using F = typename TestType::format;
  // Each page size, next_n and head count appears; the product would be too slow.
  const auto [page_kv, next_n, H] =
      GENERATE(table<std::int32_t, std::int64_t, std::int64_t>({{32, 1, 1},
                                                                {64, 2, 4},
                                                                {128, 4, 32},
                                                                {256, 1, 64},
                                                                {64, 4, 64},
                                                                {32, 2, 32},
                                                                {128, 1, 4},
                                                                {256, 4, 1}}));
  const bool padded = GENERATE(false, true);
  rnd::engine rng(static_cast<std::uint64_t>(page_kv * 100 + next_n * 10 + H + padded));
  paged_inputs in;
  in.H = H;
  in.page_kv = page_kv;
  in.max_blocks = 3;
  in.num_pages = 5;
  in.page_stride = padded ? padded_stride(page_kv, F::data_bytes + F::scale_bytes) : 0;
  in.max_context_len = 3 * page_kv;
  // Lengths from 0 to past max_blocks * page_kv.
  auto lens = rnd::context_lens(rng, 3, next_n, 3 * page_kv + 20);
  lens(0, 0) = 0;
  check_paged<TestType>(rng, in, lens);
}

TEMPLATE_LIST_TEST_CASE(
    "paged: edge contexts (empty, longer than the table, clipped by max_context_len)", "[paged]",
    check::kernel_combos) {
  rnd::engine rng(23);
  paged_inputs in;
  in.H = 4;
  in.page_kv = 32;
  in.max_blocks = 4;  // capacity 128 positions
  in.num_pages = 3;   // few pages: any garbage slot read would be out of the cache
  in.max_context_len = GENERATE(as<std::int64_t>{}, 40, 128, 200);
  auto lens = rnd::matrix<std::int32_t>(6, 2);
  const std::int32_t values[6][2] = {{0, 0}, {0, 1}, {31, 32}, {33, 100}, {128, 129}, {500, 1000}};
  for (int b = 0; b < 6; ++b)
    for (int j = 0; j < 2; ++j) lens(b, j) = values[b][j];
  check_paged<TestType>(rng, in, lens);
}

TEMPLATE_LIST_TEST_CASE("paged: DeepGEMM-Ascend's [num_q, 1] form and 128 heads", "[paged]",
                        check::each_format_combos) {
  rnd::engine rng(29);
  paged_inputs in;
  in.H = 128;
  in.page_kv = 64;
  in.max_blocks = 2;
  in.num_pages = 4;
  in.max_context_len = 128;
  const auto lens = rnd::context_lens(rng, 3, 1, 140, 1);
  check_paged<TestType>(rng, in, lens);
}

TEMPLATE_LIST_TEST_CASE("paged: long contexts spread over several schedule units", "[paged]",
                        check::each_format_combos) {
  rnd::engine rng(31);
  paged_inputs in;
  in.H = 1;
  in.page_kv = 64;
  in.max_blocks = 24;  // 1536 positions: three 512-key units
  in.num_pages = 30;
  in.max_context_len = 1536;
  auto lens = rnd::matrix<std::int32_t>(3, 2);
  lens(0, 0) = 1536, lens(0, 1) = 1500, lens(1, 0) = 3, lens(1, 1) = 700, lens(2, 0) = 1025,
          lens(2, 1) = 0;
  check_paged<TestType>(rng, in, lens);
}

TEMPLATE_LIST_TEST_CASE("paged: NaN codes and scales in q and in the cache", "[paged]",
                        check::kernel_combos) {
  using F = typename TestType::format;
  const bool in_q = GENERATE(true, false);
  const bool scale = GENERATE(false, true);
  if (!scale && !rnd::detail::has_nan_code<F>) return;  // e2m1 has no NaN code
  INFO("NaN " << (scale ? "scale" : "code") << (in_q ? " in q" : " in the cache"));
  rnd::engine rng(37);
  paged_inputs in;
  in.H = 4;
  in.page_kv = 32;
  in.max_blocks = 2;
  in.num_pages = 2;
  in.max_context_len = 64;
  auto lens = rnd::matrix<std::int32_t>(2, 1);
  lens(0, 0) = 64;
  lens(1, 0) = 64;
  rnd::code_options nan;
  (scale ? nan.nan_scales : nan.nan_codes) = 2;
  const auto cache =
      rnd::paged_cache<F>(rng, in.num_pages, in.page_kv, 0, in_q ? rnd::code_options{} : nan);
  auto table = rnd::matrix<std::int32_t>(2, 2);
  table(0, 0) = 0, table(0, 1) = 1, table(1, 0) = 1, table(1, 1) = 0;
  const auto q = rnd::rows<F>(rng, 2 * in.H, in_q ? nan : rnd::code_options{});
  const auto w = rnd::weights<typename TestType::weight>(rng, 2, in.H);
  const auto expected = ref::paged(q.view(), cache.view(), w.view(), lens.view(), table.view(), 64);
  CHECK(check::nan_count(expected) > 0);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), in.page_kv, 1);
  ml::logits_buffer<typename TestType::out> out(2, 64);
  ml::fp8_fp4_paged_mqa_logits(typename TestType::backend{}, q.view(), cache.view(), w.view(),
                               lens.view(), table.view(), schedule, 64, out.view());
  CHECK(check::against(out, expected) == "");
}

TEST_CASE("paged: the schedule covers every unit once, for any worker count", "[paged]") {
  rnd::engine rng(41);
  const int workers = GENERATE(1, 3, 7, 64);
  const std::int32_t page_kv = GENERATE(1, 32, 100, 256, 1024);
  const auto lens = rnd::context_lens(rng, 5, 2, 3000);
  const auto s = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, workers);
  INFO(workers << " workers, page_kv " << page_kv);
  CHECK(s.num_workers() == workers);
  CHECK(s.num_requests() == 5);
  CHECK(s.next_n() == 2);
  std::int64_t total = 0;
  for (std::int64_t b = 0; b < 5; ++b) {
    const std::int64_t keys = std::max(lens(b, 0), lens(b, 1));
    CHECK(s.request_keys(b) == keys);
    CHECK(s.request_units(b) == (keys + s.keys_per_unit() - 1) / s.keys_per_unit());
    total += s.request_units(b);
  }
  CHECK(s.total_units() == total);
  REQUIRE(s.start().size() == static_cast<std::size_t>(workers) + 1);
  CHECK(s.start().front().request == 0);
  CHECK(s.start().front().unit == 0);
  CHECK(s.start().back().request == 5);
  for (int i = 0; i < workers; ++i) {  // runs are in order
    const auto a = s.start()[i], b = s.start()[i + 1];
    CHECK((a.request < b.request || (a.request == b.request && a.unit <= b.unit)));
  }
}

// The host driver fetches the next tile of paged keys ahead only where a prefetch into L2 stays
// out of L1; the CPUs that fill L1 anyway, by CPUID family and model.
TEST_CASE("paged: the tile-ahead fetch is skipped on CPUs whose L2 prefetch fills L1", "[paged]") {
  using ml::host_backend::prefetch_fills_l1;
  STATIC_REQUIRE(prefetch_fills_l1(true, 0x17, 0x31));    // Zen 2 (Rome)
  STATIC_REQUIRE(prefetch_fills_l1(true, 0x18, 0x00));    // Hygon Dhyana (Zen)
  STATIC_REQUIRE(prefetch_fills_l1(true, 0x19, 0x01));    // Zen 3 (Milan)
  STATIC_REQUIRE(prefetch_fills_l1(true, 0x19, 0x21));    // Zen 3 (Vermeer)
  STATIC_REQUIRE(prefetch_fills_l1(true, 0x19, 0x44));    // Zen 3+ (Rembrandt)
  STATIC_REQUIRE(prefetch_fills_l1(true, 0x19, 0x50));    // Zen 3 (Cezanne)
  STATIC_REQUIRE(!prefetch_fills_l1(true, 0x19, 0x11));   // Zen 4 (Genoa)
  STATIC_REQUIRE(!prefetch_fills_l1(true, 0x19, 0x61));   // Zen 4 (Raphael)
  STATIC_REQUIRE(!prefetch_fills_l1(true, 0x19, 0x74));   // Zen 4 (Phoenix)
  STATIC_REQUIRE(!prefetch_fills_l1(true, 0x19, 0xA0));   // Zen 4c (Bergamo)
  STATIC_REQUIRE(!prefetch_fills_l1(true, 0x1A, 0x02));   // Zen 5 (Turin)
  STATIC_REQUIRE(!prefetch_fills_l1(false, 0x06, 0xCF));  // Intel (Emerald Rapids)
}

TEMPLATE_LIST_TEST_CASE("paged: any page size from 1 to 1024 (sglang's 1, odd sizes, 1024)",
                        "[paged]", check::kernel_combos) {
  using F = typename TestType::format;
  const auto [page_kv, next_n, max_blocks] =
      GENERATE(table<std::int32_t, std::int64_t, std::int64_t>(
          {{1, 2, 300}, {16, 1, 20}, {256, 2, 3}, {3, 1, 70}, {1000, 1, 2}, {1024, 2, 2}}));
  const bool padded = GENERATE(false, true);
  rnd::engine rng(static_cast<std::uint64_t>(page_kv * 10 + next_n + padded));
  paged_inputs in;
  in.H = 4;
  in.page_kv = page_kv;
  in.max_blocks = max_blocks;
  in.num_pages = max_blocks + 2;
  in.page_stride = padded ? padded_stride(page_kv, F::data_bytes + F::scale_bytes) : 0;
  in.max_context_len = max_blocks * page_kv;
  auto lens = rnd::context_lens(rng, 3, next_n, max_blocks * page_kv + 20);
  lens(0, 0) = static_cast<std::int32_t>(max_blocks * page_kv);  // the whole table
  check_paged<TestType>(rng, in, lens);
}
