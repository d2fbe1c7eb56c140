// Varlen paged decode (upstream's `indices`, next_n = 1): consecutive rows with the same index are
// one request and share the keys the kernel reads. Results must equal ref::paged, which knows
// nothing of requests, and the call without indices; bad indices get named errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include <mqalogits/neuron.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/error_of.hpp"
#include "support/kernel_check.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;

namespace {

using check::expect_error;

// Rows grouped into requests of 1..max_group rows. Every row of a request has the request's
// block-table row in the slots the request reads (up to its longest row) and its own garbage
// past them, so only the slots that are read agree, as upstream's engines leave them.
struct varlen_case {
  std::int64_t H = 4, page_kv = 64, max_blocks = 4, num_pages = 9, max_context_len = 256;
  std::vector<std::int32_t> indices;      // [rows]
  std::vector<std::int64_t> group_begin;  // [groups + 1]
  rnd::owned_matrix<std::int32_t> lens;   // [rows, 1]
  rnd::owned_matrix<std::int32_t> table;  // [rows, max_blocks]

  std::int64_t rows() const { return lens.rows; }
  std::span<const std::int32_t> index_span() const { return indices; }
};

varlen_case make_case(rnd::engine& rng, std::int64_t groups, std::int64_t max_group,
                      std::int32_t page_kv, std::int64_t max_blocks, std::int64_t num_pages) {
  varlen_case c;
  c.page_kv = page_kv;
  c.max_blocks = max_blocks;
  c.num_pages = num_pages;
  c.max_context_len = max_blocks * page_kv;
  c.group_begin.push_back(0);
  // Index values need not be 0, 1, 2 ...: distinct values in a shuffled order.
  std::vector<std::int32_t> values(static_cast<std::size_t>(groups));
  std::iota(values.begin(), values.end(), 0);
  std::shuffle(values.begin(), values.end(), rng);
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::int64_t n = rnd::uniform(rng, 1, max_group);
    for (std::int64_t i = 0; i < n; ++i) c.indices.push_back(values[g] * 7 - 3);
    c.group_begin.push_back(c.group_begin.back() + n);
  }
  const std::int64_t rows = c.group_begin.back();
  // Lengths from 0 to past the table's capacity.
  c.lens = rnd::context_lens(rng, rows, 1, max_blocks * page_kv + 20);
  c.table = rnd::matrix<std::int32_t>(rows, max_blocks);
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::int64_t r0 = c.group_begin[g], r1 = c.group_begin[g + 1];
    std::int64_t keys = 0;
    for (std::int64_t r = r0; r < r1; ++r) keys = std::max<std::int64_t>(keys, c.lens(r, 0));
    const std::int64_t used = std::min(max_blocks, (keys + page_kv - 1) / page_kv);
    for (std::int64_t s = 0; s < max_blocks; ++s) {
      const auto page = static_cast<std::int32_t>(rnd::uniform(rng, 0, num_pages - 1));
      for (std::int64_t r = r0; r < r1; ++r)
        c.table(r, s) = s < used ? page : rnd::garbage_page(rng, num_pages);
    }
  }
  return c;
}

// Equal values (NaN equal to NaN, +0 to -0): the sum of a row's heads may meet zero weights of
// the other rows of a decode pass on the neuron model, which can only change a zero's sign.
template <class O>
bool same_values(const ml::logits_buffer<O>& a, const ml::logits_buffer<O>& b) {
  for (std::int64_t r = 0; r < a.rows(); ++r)
    for (std::int64_t c = 0; c < a.cols(); ++c) {
      const float x = ml::to_float(a(r, c)), y = ml::to_float(b(r, c));
      if (!(x == y || (std::isnan(x) && std::isnan(y)))) return false;
    }
  return true;
}

template <class C>
void check_varlen(rnd::engine& rng, const varlen_case& c) {
  using F = typename C::format;
  using O = typename C::out;
  using Backend = typename C::backend;
  const std::int64_t rows = c.rows();
  INFO(F::name << " on " << check::backend_name<Backend>() << ", " << check::out_name<O>() << ", "
               << rows << " rows in " << c.group_begin.size() - 1 << " requests, H " << c.H
               << ", page_kv " << c.page_kv);
  const auto cache = rnd::paged_cache<F>(rng, c.num_pages, static_cast<std::int32_t>(c.page_kv));
  const auto q = rnd::rows<F>(rng, rows * c.H);
  const auto w = rnd::weights<typename C::weight>(rng, rows, c.H);
  const ref::result expected = ref::paged(q.view(), cache.view(), w.view(), c.lens.view(),
                                          c.table.view(), c.max_context_len);
  REQUIRE(check::valid_count(expected) > 0);
  const auto page_kv = static_cast<std::int32_t>(c.page_kv);

  // Without indices: every row its own request (the rows' tables are each read on their own).
  ml::logits_buffer<O> plain(rows, c.max_context_len);
  const auto plain_schedule = ml::get_paged_mqa_logits_metadata(c.lens.view(), page_kv, 3);
  ml::fp8_fp4_paged_mqa_logits(Backend{}, q.view(), cache.view(), w.view(), c.lens.view(),
                               c.table.view(), plain_schedule, c.max_context_len, plain.view(),
                               ml::options{.truncate_long_contexts = true});
  CHECK(check::against(plain, expected) == "");

  ml::thread_pool pool1(1), pool2(2);
  for (int workers : {1, 3, 7}) {
    const auto schedule =
        ml::get_paged_mqa_logits_metadata(c.lens.view(), page_kv, workers, c.index_span());
    REQUIRE(schedule.varlen());
    REQUIRE(schedule.num_requests() == static_cast<std::int64_t>(c.group_begin.size()) - 1);
    for (std::int64_t g = 0; g < schedule.num_requests(); ++g) {
      CHECK(schedule.request_first_row(g) == c.group_begin[g]);
      CHECK(schedule.request_rows(g) == c.group_begin[g + 1] - c.group_begin[g]);
    }
    for (ml::thread_pool* pool : {&pool1, &pool2}) {
      INFO(workers << " scheduled workers, " << pool->concurrency() << " threads");
      ml::logits_buffer<O> out(rows, c.max_context_len);
      check::fill_sentinel(out);
      ml::fp8_fp4_paged_mqa_logits(Backend{}, q.view(), cache.view(), w.view(), c.lens.view(),
                                   c.table.view(), schedule, c.max_context_len, out.view(),
                                   c.index_span(),
                                   {.executor = *pool, .truncate_long_contexts = true});
      CHECK(check::against(out, expected) == "");
      if constexpr (std::is_same_v<Backend, ml::backend::host>)
        CHECK(check::bitwise_equal(out, plain));
      else
        CHECK(same_values(out, plain));
    }
  }
  // clean_logits = false: the valid columns still match.
  const auto schedule =
      ml::get_paged_mqa_logits_metadata(c.lens.view(), page_kv, 2, c.index_span());
  ml::logits_buffer<O> dirty(rows, c.max_context_len);
  check::fill_sentinel(dirty, 0x7F);
  ml::fp8_fp4_paged_mqa_logits(
      Backend{}, q.view(), cache.view(), w.view(), c.lens.view(), c.table.view(), schedule,
      c.max_context_len, dirty.view(), c.index_span(),
      {.executor = pool2, .clean_logits = false, .truncate_long_contexts = true});
  CHECK(check::against(dirty, expected, false) == "");
}

}  // namespace

TEMPLATE_LIST_TEST_CASE(
    "paged varlen: requests of 1..4 rows match the reference and the call "
    "without indices",
    "[paged][varlen]", check::kernel_combos) {
  const auto [page_kv, H, groups] = GENERATE(
      table<std::int32_t, std::int64_t, std::int64_t>({{32, 4, 6}, {64, 32, 5}, {16, 64, 4}}));
  rnd::engine rng(static_cast<std::uint64_t>(page_kv * 131 + H * 7 + groups));
  auto c = make_case(rng, groups, 4, page_kv, 4, 9);
  c.H = H;
  check_varlen<TestType>(rng, c);
}

TEMPLATE_LIST_TEST_CASE("paged varlen: one request of many rows, and every row its own request",
                        "[paged][varlen]", check::each_format_combos) {
  rnd::engine rng(61);
  // One request of 11 rows: more than a work item's 8 rows, so it is cut into row blocks.
  auto one = make_case(rng, 1, 1, 32, 3, 4);
  one.indices.assign(11, 5);
  one.group_begin = {0, 11};
  one.lens = rnd::context_lens(rng, 11, 1, 3 * 32 + 5);
  one.table = rnd::matrix<std::int32_t>(11, 3);
  for (std::int64_t s = 0; s < 3; ++s) {
    const auto page = static_cast<std::int32_t>(rnd::uniform(rng, 0, 3));
    for (std::int64_t r = 0; r < 11; ++r) one.table(r, s) = page;
  }
  check_varlen<TestType>(rng, one);
  // Singletons: the varlen schedule is the plain one.
  auto singles = make_case(rng, 7, 1, 64, 2, 5);
  check_varlen<TestType>(rng, singles);
}

TEST_CASE("paged varlen: a request's rows read each page once on the neuron model",
          "[paged][varlen][neuron]") {
  using F = ml::mxfp8;
  rnd::engine rng(67);
  const std::int32_t page_kv = 32;
  auto c = make_case(rng, 5, 4, page_kv, 6, 12);
  const std::int64_t rows = c.rows();
  const auto cache = rnd::paged_cache<F>(rng, c.num_pages, page_kv);
  const auto q = rnd::rows<F>(rng, rows * c.H);
  const auto w = rnd::weights<float>(rng, rows, c.H);
  const auto cost = [&](bool varlen) {
    ml::neuron_backend::report rep;
    ml::logits_buffer<float> out(rows, c.max_context_len);
    ml::neuron_backend::capture cap(rep);
    if (varlen)
      ml::fp8_fp4_paged_mqa_logits(
          check::trn2{}, q.view(), cache.view(), w.view(), c.lens.view(), c.table.view(),
          ml::get_paged_mqa_logits_metadata(c.lens.view(), page_kv, 1, c.index_span()),
          c.max_context_len, out.view(), c.index_span(),
          ml::options{.truncate_long_contexts = true});
    else
      ml::fp8_fp4_paged_mqa_logits(
          check::trn2{}, q.view(), cache.view(), w.view(), c.lens.view(), c.table.view(),
          ml::get_paged_mqa_logits_metadata(c.lens.view(), page_kv, 1), c.max_context_len,
          out.view(), ml::options{.truncate_long_contexts = true});
    return rep.dma_gathered_blocks;
  };
  // Pages read: per request its longest row's (varlen), per row its own (not).
  const auto pages = [&](std::int64_t len) {
    return (std::min(len, c.max_blocks * page_kv) + page_kv - 1) / page_kv;
  };
  std::int64_t shared = 0, separate = 0;
  for (std::size_t g = 0; g + 1 < c.group_begin.size(); ++g) {
    std::int64_t longest = 0;
    for (std::int64_t r = c.group_begin[g]; r < c.group_begin[g + 1]; ++r) {
      longest = std::max<std::int64_t>(longest, c.lens(r, 0));
      separate += pages(c.lens(r, 0));
    }
    shared += pages(longest);
  }
  INFO("pages: " << shared << " shared, " << separate << " one row at a time");
  REQUIRE(shared < separate);
  // Each page is one gathered block per transfer (codes, and scales where they are separate).
  const std::int64_t varlen_blocks = cost(true), plain_blocks = cost(false);
  const std::int64_t per_page = varlen_blocks / shared;
  CHECK(per_page >= 1);
  CHECK(varlen_blocks == per_page * shared);
  CHECK(plain_blocks == per_page * separate);
}

TEST_CASE("paged varlen: bad indices get named errors before the output is touched",
          "[paged][varlen][bad_input]") {
  using F = ml::mxfp8;
  rnd::engine rng(71);
  auto c = make_case(rng, 4, 3, 32, 3, 6);
  // Make sure a request of at least 2 rows reads at least one slot.
  c.indices.insert(c.indices.begin(), {-50, -50});
  c.group_begin.clear();
  const std::int64_t rows = static_cast<std::int64_t>(c.indices.size());
  c.lens = rnd::context_lens(rng, rows, 1, 3 * 32, 1);
  {
    auto table = rnd::matrix<std::int32_t>(rows, 3);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t s = 0; s < 3; ++s)
        table(r, s) = r > 0 && c.indices[r] == c.indices[r - 1]
                          ? table(r - 1, s)
                          : static_cast<std::int32_t>(rnd::uniform(rng, 0, 5));
    c.table = std::move(table);
  }
  const std::int32_t page_kv = 32;
  const auto cache = rnd::paged_cache<F>(rng, c.num_pages, page_kv);
  const auto q = rnd::rows<F>(rng, rows * c.H);
  const auto w = rnd::weights<float>(rng, rows, c.H);
  const auto varlen = ml::get_paged_mqa_logits_metadata(c.lens.view(), page_kv, 2, c.index_span());
  const auto plain = ml::get_paged_mqa_logits_metadata(c.lens.view(), page_kv, 2);
  ml::logits_buffer<float> out(rows, c.max_context_len);
  check::fill_sentinel(out);
  const auto call = [&](const ml::paged_mqa_schedule& s, const std::int32_t* idx,
                        ml::matrix_view<const std::int32_t> table) {
    if (idx)
      ml::fp8_fp4_paged_mqa_logits(
          ml::backend::host{}, q.view(), cache.view(), w.view(), c.lens.view(), table, s,
          c.max_context_len, out.view(),
          std::span<const std::int32_t>(idx, static_cast<std::size_t>(rows)),
          ml::options{.truncate_long_contexts = true});
    else
      ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, q.view(), cache.view(), w.view(),
                                   c.lens.view(), table, s, c.max_context_len, out.view(),
                                   ml::options{.truncate_long_contexts = true});
  };
  constexpr const char* kernel = "fp8_fp4_paged_mqa_logits";
  constexpr const char* metadata = "get_paged_mqa_logits_metadata";

  SECTION("metadata: a value that reappears after another") {
    std::vector<std::int32_t> bad = {1, 1, 2, 1};
    auto lens = rnd::context_lens(rng, 4, 1, 50);
    expect_error([&] { (void)ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 1, bad); },
                 {metadata, "indices[3] = 1", "consecutive"});
  }
  SECTION("metadata: indices of the wrong length") {
    std::vector<std::int32_t> bad(static_cast<std::size_t>(rows) + 1, 0);
    expect_error([&] { (void)ml::get_paged_mqa_logits_metadata(c.lens.view(), page_kv, 1, bad); },
                 {metadata, "indices", std::to_string(rows + 1), std::to_string(rows)});
  }
  SECTION("metadata: indices with next_n > 1") {
    auto lens = rnd::context_lens(rng, 3, 2, 50);
    std::vector<std::int32_t> idx = {0, 1, 2};
    expect_error([&] { (void)ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 1, idx); },
                 {metadata, "indices", "next_n"});
  }
  SECTION("kernel: a varlen schedule without indices") {
    expect_error([&] { call(varlen, nullptr, c.table.view()); }, {kernel, "indices", "schedule"});
  }
  SECTION("kernel: indices with a schedule made without them") {
    expect_error([&] { call(plain, c.indices.data(), c.table.view()); },
                 {kernel, "indices", "schedule"});
  }
  SECTION("kernel: indices that differ from the schedule's") {
    std::vector<std::int32_t> other = c.indices;
    other.back() += 1000;  // still consecutive runs, but not the schedule's
    expect_error([&] { call(varlen, other.data(), c.table.view()); },
                 {kernel, "indices[" + std::to_string(rows - 1) + "]", std::to_string(other.back()),
                  "schedule"});
  }
  SECTION("kernel: rows of one request with different pages in a slot it reads") {
    auto table = c.table;
    table(1, 0) = (table(0, 0) + 1) % static_cast<std::int32_t>(c.num_pages);
    expect_error([&] { call(varlen, c.indices.data(), table.view()); },
                 {kernel, "block_table[1][0]", "block_table[0][0]", "identical"});
  }
  CHECK(check::untouched(out));
}

TEST_CASE("paged varlen: slots past a request's longest row may differ between its rows",
          "[paged][varlen]") {
  // make_case gives each row its own garbage past the request's slots; the call must accept it.
  rnd::engine rng(73);
  auto c = make_case(rng, 3, 4, 32, 5, 7);
  for (std::int64_t r = 0; r < c.rows(); ++r) c.lens(r, 0) = 40;  // two of five slots read
  for (std::size_t g = 0; g + 1 < c.group_begin.size(); ++g)
    for (std::int64_t r = c.group_begin[g]; r < c.group_begin[g + 1]; ++r)
      for (std::int64_t s = 0; s < 5; ++s)
        c.table(r, s) = s < 2 ? c.table(c.group_begin[g], s) : rnd::garbage_page(rng, 7);
  check_varlen<check::combo<ml::fp8_per_token, float, float>>(rng, c);
}

TEMPLATE_TEST_CASE("paged varlen: the fused top-k (cache slots) equals the call without indices",
                   "[paged][varlen][topk]", ml::backend::host, check::trn2) {
  using F = ml::mxfp8;
  rnd::engine rng(79);
  const std::int32_t page_kv = 32;
  const auto c = make_case(rng, 6, 4, page_kv, 5, 12);
  const std::int64_t rows = c.rows(), k = 40;
  const auto cache = rnd::paged_cache<F>(rng, c.num_pages, page_kv);
  const auto q = rnd::rows<F>(rng, rows * c.H);
  const auto w = rnd::weights<float>(rng, rows, c.H);
  std::vector<std::int32_t> vi(rows * k), pi(rows * k);
  std::vector<float> vv(rows * k), pv(rows * k);
  ml::fp8_fp4_paged_mqa_logits(
      TestType{}, q.view(), cache.view(), w.view(), c.lens.view(), c.table.view(),
      ml::get_paged_mqa_logits_metadata(c.lens.view(), page_kv, 3, c.index_span()),
      c.max_context_len,
      ml::topk(ml::matrix_view<std::int32_t>(vi.data(), rows, k),
               ml::matrix_view<float>(vv.data(), rows, k), ml::topk_index::slot),
      c.index_span(), ml::options{.truncate_long_contexts = true});
  ml::fp8_fp4_paged_mqa_logits(
      TestType{}, q.view(), cache.view(), w.view(), c.lens.view(), c.table.view(),
      ml::get_paged_mqa_logits_metadata(c.lens.view(), page_kv, 3), c.max_context_len,
      ml::topk(ml::matrix_view<std::int32_t>(pi.data(), rows, k),
               ml::matrix_view<float>(pv.data(), rows, k), ml::topk_index::slot),
      ml::options{.truncate_long_contexts = true});
  CHECK(vi == pi);
  for (std::size_t i = 0; i < vv.size(); ++i)
    CHECK((vv[i] == pv[i] || (std::isnan(vv[i]) && std::isnan(pv[i]))));
  // Some row selected something: a slot of the cache.
  CHECK(std::any_of(vi.begin(), vi.end(),
                    [&](std::int32_t s) { return s >= 0 && s < c.num_pages * page_kv; }));
}
