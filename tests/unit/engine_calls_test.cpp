// How engines call the kernels: the paged schedule as upstream's int32 [num_workers + 1, 2]
// array (written, taken back, checked against the call's lengths); contexts longer than their
// block table or the output, a named error unless the call opts into masking; sparse rows padded
// with repeated blocks, whose fused top-k never selects a token twice; the dense top-k's per-row
// offset. One format (FP8 with per-token scales, vLLM's and sglang's cache) and fp32 logits:
// what is tested here does not depend on the format.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/error_of.hpp"
#include "support/kernel_check.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;

namespace {

using F = ml::fp8_per_token;

// The array as its documentation defines it, computed independently of the library: the
// requests' units of keys_per_unit positions laid end to end, worker w starting at unit
// floor(w * total / W), named as (block-table row of its request, unit within the request).
// first_row[b]: block-table row of request b; keys[b]: the positions request b covers.
std::vector<std::int32_t> expected_array(const std::vector<std::int64_t>& first_row,
                                         const std::vector<std::int64_t>& keys,
                                         std::int64_t table_rows, std::int64_t unit, int W) {
  std::vector<std::int64_t> units;
  std::int64_t total = 0;
  for (auto k : keys) {
    units.push_back((k + unit - 1) / unit);
    total += units.back();
  }
  std::vector<std::int32_t> a;
  for (int w = 0; w <= W; ++w) {
    std::int64_t g = total * w / W, row = table_rows, u = 0;
    for (std::size_t b = 0; b < units.size(); g -= units[b], ++b)
      if (g < units[b]) {
        row = first_row[b];
        u = g;
        break;
      }
    a.push_back(static_cast<std::int32_t>(row));
    a.push_back(static_cast<std::int32_t>(u));
  }
  return a;
}

// A decode step's inputs: q, a cache whose block-table slots past every context are garbage.
struct paged_step {
  std::int64_t H = 4, max_blocks = 0, max_context_len = 0;
  std::int32_t page_kv = 0;
  rnd::owned_matrix<std::int32_t> lens, table;
  rnd::owned_paged_cache<F> cache;
  rnd::owned_rows<F> q;
  rnd::owned_matrix<float> w;

  paged_step(rnd::engine& rng, rnd::owned_matrix<std::int32_t> l, std::int32_t page,
             std::int64_t blocks)
      : max_blocks(blocks), max_context_len(blocks * page), page_kv(page), lens(std::move(l)) {
    cache = rnd::paged_cache<F>(rng, blocks + 2, page_kv);
    table = rnd::block_table(rng, lens, max_blocks, page_kv, blocks + 2);
    q = rnd::rows<F>(rng, lens.rows * lens.cols * H);
    w = rnd::weights<float>(rng, lens.rows * lens.cols, H);
  }
  std::int64_t rows() const { return lens.rows * lens.cols; }
  ref::result reference() const {
    return ref::paged(q.view(), cache.view(), w.view(), lens.view(), table.view(), max_context_len);
  }
};

}  // namespace

TEST_CASE("schedule array: layout, round trip and the object form's results", "[paged][schedule]") {
  rnd::engine rng(3001);
  const int workers = GENERATE(1, 2, 5, 16);
  const std::int32_t page_kv = GENERATE(1, 64, 100);
  const std::int64_t next_n = GENERATE(1, 2);
  const std::int64_t max_blocks = 3000 / page_kv + 1;
  auto lens = rnd::context_lens(rng, 6, next_n, 3000);
  lens(0, 0) = 0;  // an empty request first, and one in the middle
  if (next_n == 2) lens(0, 1) = 0;
  lens(3, 0) = 0;
  if (next_n == 2) lens(3, 1) = 0;
  INFO(workers << " workers, page_kv " << page_kv << ", next_n " << next_n);
  paged_step st(rng, lens, page_kv, max_blocks);

  const auto s = ml::get_paged_mqa_logits_metadata(st.lens.view(), page_kv, workers);
  const std::int64_t rows = ml::paged_mqa_schedule_array_rows(workers);
  REQUIRE(rows == workers + 1);
  auto arr = rnd::matrix<std::int32_t>(rows, 2, 3, -77);  // stride 3: the padding stays -77
  ml::get_paged_mqa_logits_metadata(st.lens.view(), page_kv, workers, arr.mut());

  std::vector<std::int64_t> first_row, keys;
  for (std::int64_t b = 0; b < 6; ++b) {
    first_row.push_back(b);
    keys.push_back(std::max<std::int64_t>(lens(b, 0), lens(b, next_n - 1)));
  }
  const auto want = expected_array(first_row, keys, 6, s.keys_per_unit(), workers);
  for (std::int64_t r = 0; r < rows; ++r) {
    INFO("row " << r);
    CHECK(arr(r, 0) == want[2 * r]);
    CHECK(arr(r, 1) == want[2 * r + 1]);
    CHECK(arr(r, 2) == -77);
  }
  CHECK(arr(rows - 1, 0) == 6);  // the end: upstream's (batch size, 0)
  CHECK(arr(rows - 1, 1) == 0);
  CHECK(arr(0, 0) != 0);  // request 0 is empty: no worker starts in it

  // The array taken back is the schedule it was written from.
  const auto back = ml::paged_mqa_schedule_from_array(arr.view(), st.lens.view(), page_kv);
  REQUIRE(back.num_workers() == workers);
  for (int i = 0; i <= workers; ++i) {
    CHECK(back.start()[i].request == s.start()[i].request);
    CHECK(back.start()[i].unit == s.start()[i].unit);
  }

  // The kernel given the array: the object form's results, bitwise, logits and top-k.
  ml::thread_pool pool(2);
  ml::logits_buffer<float> by_object(st.rows(), st.max_context_len),
      by_array(st.rows(), st.max_context_len);
  ml::fp8_fp4_paged_mqa_logits(st.q.view(), st.cache.view(), st.w.view(), st.lens.view(),
                               st.table.view(), s, st.max_context_len, by_object.view(),
                               {.executor = pool});
  ml::fp8_fp4_paged_mqa_logits(st.q.view(), st.cache.view(), st.w.view(), st.lens.view(),
                               st.table.view(), arr.view(), st.max_context_len, by_array.view(),
                               {.executor = pool});
  CHECK(check::against(by_array, st.reference()) == "");
  CHECK(check::bitwise_equal(by_object, by_array));

  auto idx_o = rnd::matrix<std::int32_t>(st.rows(), 50),
       idx_a = rnd::matrix<std::int32_t>(st.rows(), 50);
  auto val_o = rnd::matrix<float>(st.rows(), 50), val_a = rnd::matrix<float>(st.rows(), 50);
  ml::fp8_fp4_paged_mqa_logits(st.q.view(), st.cache.view(), st.w.view(), st.lens.view(),
                               st.table.view(), s, st.max_context_len,
                               ml::topk(idx_o.mut(), val_o.mut(), ml::topk_index::slot));
  ml::fp8_fp4_paged_mqa_logits(st.q.view(), st.cache.view(), st.w.view(), st.lens.view(),
                               st.table.view(), arr.view(), st.max_context_len,
                               ml::topk(idx_a.mut(), val_a.mut(), ml::topk_index::slot));
  CHECK(idx_o.data == idx_a.data);
  CHECK(std::memcmp(val_o.data.data(), val_a.data.data(), val_o.data.size() * sizeof(float)) == 0);

  // The legacy name takes the array as its schedule_meta too.
  ml::rows_view<F> bare = st.q.view();
  bare.scales = nullptr;
  ml::logits_buffer<float> legacy_o(st.rows(), st.max_context_len),
      legacy_a(st.rows(), st.max_context_len);
  ml::fp8_paged_mqa_logits(bare, st.cache.view(), st.w.view(), st.lens.view(), st.table.view(), s,
                           st.max_context_len, true, legacy_o.view());
  ml::fp8_paged_mqa_logits(bare, st.cache.view(), st.w.view(), st.lens.view(), st.table.view(),
                           arr.view(), st.max_context_len, true, legacy_a.view());
  CHECK(check::bitwise_equal(legacy_o, legacy_a));
  arr(0, 1) += 1;
  CHECK_THAT(check::error_of([&] {
               ml::fp8_paged_mqa_logits(bare, st.cache.view(), st.w.view(), st.lens.view(),
                                        st.table.view(), arr.view(), st.max_context_len, true,
                                        legacy_a.view());
             }),
             Catch::Contains("schedule array row 0") && Catch::Contains("regenerate"));
}

TEST_CASE("schedule array: varlen rows name the first query row of their request",
          "[paged][schedule]") {
  rnd::engine rng(3002);
  const int workers = GENERATE(1, 3, 8);
  // Requests {0, 1}, {2}, {3, 4, 5}, {6}: rows of a request share their block-table row.
  const std::vector<std::int32_t> indices = {7, 7, 2, 9, 9, 9, 4};
  const std::vector<std::int64_t> first = {0, 0, 2, 3, 3, 3, 6};
  auto lens = rnd::context_lens(rng, 7, 1, 700, 1);
  lens(2, 0) = 0;
  paged_step st(rng, lens, 64, 12);
  // A request reads up to its longest row, through identical block-table rows.
  std::vector<std::int64_t> first_row = {0, 2, 3, 6}, keys = {0, 0, 0, 0};
  const auto request = [](std::int64_t r) -> std::size_t {
    return r < 2 ? 0 : r < 3 ? 1 : r < 6 ? 2 : 3;
  };
  for (std::int64_t r = 0; r < 7; ++r)
    keys[request(r)] = std::max<std::int64_t>(keys[request(r)], lens(r, 0));
  std::vector<std::int64_t> row_keys;
  for (std::int64_t r = 0; r < 7; ++r) row_keys.push_back(keys[request(r)]);
  st.table = rnd::block_table(rng, row_keys, st.max_blocks, 64, st.cache.num_pages);
  for (std::int64_t r = 0; r < 7; ++r)
    for (std::int64_t s = 0; s < st.table.cols; ++s) st.table(r, s) = st.table(first[r], s);
  const std::span<const std::int32_t> ix(indices);
  const auto s = ml::get_paged_mqa_logits_metadata(st.lens.view(), 64, workers, ix);
  auto arr = rnd::matrix<std::int32_t>(workers + 1, 2);
  ml::get_paged_mqa_logits_metadata(st.lens.view(), 64, workers, ix, arr.mut());
  CHECK(arr.data == expected_array(first_row, keys, 7, s.keys_per_unit(), workers));

  ml::logits_buffer<float> by_object(7, st.max_context_len), by_array(7, st.max_context_len);
  ml::fp8_fp4_paged_mqa_logits(st.q.view(), st.cache.view(), st.w.view(), st.lens.view(),
                               st.table.view(), s, st.max_context_len, by_object.view(), ix);
  ml::fp8_fp4_paged_mqa_logits(st.q.view(), st.cache.view(), st.w.view(), st.lens.view(),
                               st.table.view(), arr.view(), st.max_context_len, by_array.view(),
                               ix);
  CHECK(check::against(by_array, st.reference()) == "");
  CHECK(check::bitwise_equal(by_object, by_array));

  // Other indices than the array was made with: rejected (here the requests' starts move).
  const std::vector<std::int32_t> other = {7, 2, 2, 9, 9, 9, 4};
  const std::string e = check::error_of([&] {
    ml::fp8_fp4_paged_mqa_logits(st.q.view(), st.cache.view(), st.w.view(), st.lens.view(),
                                 st.table.view(), arr.view(), st.max_context_len, by_array.view(),
                                 std::span<const std::int32_t>(other));
  });
  if (workers > 1) {
    CHECK_THAT(e, Catch::Contains("fp8_fp4_paged_mqa_logits") && Catch::Contains("stale") &&
                      Catch::Contains("regenerate"));
  }
}

TEST_CASE("schedule array: stale, foreign and wrongly shaped arrays are named errors",
          "[paged][schedule]") {
  rnd::engine rng(3003);
  auto lens = rnd::context_lens(rng, 4, 2, 2000, 600);
  paged_step st(rng, lens, 64, 32);
  auto arr = rnd::matrix<std::int32_t>(9, 2);
  ml::get_paged_mqa_logits_metadata(st.lens.view(), 64, 8, arr.mut());
  ml::logits_buffer<float> out(st.rows(), st.max_context_len);
  check::fill_sentinel(out);
  const auto call = [&](ml::matrix_view<const std::int32_t> a,
                        ml::matrix_view<const std::int32_t> l) {
    return check::error_of([&] {
      ml::fp8_fp4_paged_mqa_logits(st.q.view(), st.cache.view(), st.w.view(), l, st.table.view(), a,
                                   st.max_context_len, out.view());
    });
  };
  CHECK(call(arr.view(), st.lens.view()) == "");
  check::fill_sentinel(out);

  SECTION("stale: other lengths") {
    auto shorter = st.lens;
    shorter(0, 0) = shorter(0, 1) = 10;  // request 0 loses units: later starts move
    auto fresh = rnd::matrix<std::int32_t>(9, 2);
    ml::get_paged_mqa_logits_metadata(shorter.view(), 64, 8, fresh.mut());
    REQUIRE(fresh.data != arr.data);
    const std::string e = call(arr.view(), shorter.view());
    CHECK_THAT(e, Catch::Contains("fp8_fp4_paged_mqa_logits") &&
                      Catch::Contains("schedule array row") && Catch::Contains("stale") &&
                      Catch::Contains("regenerate it with get_paged_mqa_logits_metadata"));
  }
  SECTION("foreign: made for another page size") {
    auto other = rnd::matrix<std::int32_t>(9, 2);
    ml::get_paged_mqa_logits_metadata(st.lens.view(), 100, 8, other.mut());
    REQUIRE(other.data != arr.data);
    CHECK_THAT(call(other.view(), st.lens.view()),
               Catch::Contains("page_kv 64") && Catch::Contains("stale"));
  }
  SECTION("foreign: a corrupted entry, named by its row") {
    arr(3, 1) += 1;
    CHECK_THAT(call(arr.view(), st.lens.view()),
               Catch::Contains("schedule array row 3 = [") && Catch::Contains("regenerate"));
    arr(3, 1) -= 1;
    arr(8, 0) = -1;
    CHECK_THAT(call(arr.view(), st.lens.view()), Catch::Contains("schedule array row 8"));
  }
  SECTION("shape") {
    const auto shape = [&](std::int64_t rows, std::int64_t cols) {
      const std::string e = call({arr.data.data(), rows, cols}, st.lens.view());
      INFO(e);
      CHECK_THAT(e, Catch::Contains("schedule array shape [" + std::to_string(rows) + ", " +
                                    std::to_string(cols) + "]"));
      CHECK_THAT(e, Catch::Contains("[num_workers + 1, 2]") && Catch::Contains("regenerate"));
    };
    shape(9, 1);
    shape(9, 3);
    shape(1, 2);
    shape(0, 2);
    std::vector<std::int32_t> big(2 * 5000, 0);
    CHECK_THAT(call({big.data(), 4098, 2}, st.lens.view()),
               Catch::Contains("schedule array shape [4098, 2]"));
    // Another worker count's array, cut to this shape: rows disagree.
    CHECK_THAT(call({arr.data.data(), 5, 2}, st.lens.view()),
               Catch::Contains("schedule array row"));
    CHECK_THAT(call({nullptr, 9, 2}, st.lens.view()), Catch::Contains("schedule array is null"));
    CHECK_THAT(call({arr.data.data(), 9, 2, 1}, st.lens.view()),
               Catch::Contains("schedule array stride 1 < cols 2"));
  }
  CHECK(check::untouched(out));

  // The writer checks its output, and an empty schedule.
  auto small = rnd::matrix<std::int32_t>(8, 2);
  CHECK_THAT(check::error_of(
                 [&] { ml::get_paged_mqa_logits_metadata(st.lens.view(), 64, 8, small.mut()); }),
             Catch::Contains("write_paged_mqa_schedule_array") &&
                 Catch::Contains("out shape [8, 2], expected [9, 2]"));
  CHECK_THAT(check::error_of([&] {
               ml::write_paged_mqa_schedule_array(ml::paged_mqa_schedule{}, small.mut());
             }),
             Catch::Contains("schedule is empty"));
  // An array still exact for new lengths (same units everywhere) is accepted, and the results
  // are those of the new lengths: the kernel never uses more of the array than its boundaries.
  auto nudged = st.lens;
  nudged(2, 0) = std::max(1, nudged(2, 0) - 1);
  const auto exact = ml::get_paged_mqa_logits_metadata(nudged.view(), 64, 8);
  auto arr2 = rnd::matrix<std::int32_t>(9, 2);
  ml::write_paged_mqa_schedule_array(exact, arr2.mut());
  if (arr2.data == arr.data) {
    CHECK(call(arr.view(), nudged.view()) == "");
    CHECK(check::against(out, ref::paged(st.q.view(), st.cache.view(), st.w.view(), nudged.view(),
                                         st.table.view(), st.max_context_len)) == "");
  }
}

TEST_CASE("long contexts: a context past its block table or max_context_len is a named error",
          "[paged][truncate]") {
  rnd::engine rng(3101);
  // The engine bug this guards against: L = 300 with a 2-column table at page 64 (128 positions).
  auto lens = rnd::matrix<std::int32_t>(3, 1);
  lens(0, 0) = 100, lens(1, 0) = 300, lens(2, 0) = 128;
  paged_step st(rng, lens, 64, 2);
  st.max_context_len = 512;  // wider than the table: only the table limits
  const auto s = ml::get_paged_mqa_logits_metadata(st.lens.view(), 64, 2);
  ml::logits_buffer<float> out(3, st.max_context_len);
  check::fill_sentinel(out);
  const auto run = [&](std::int64_t max_context_len, const ml::options& opt) {
    ml::fp8_fp4_paged_mqa_logits(st.q.view(), st.cache.view(), st.w.view(), st.lens.view(),
                                 st.table.view(), s, max_context_len, out.view(), opt);
  };
  std::string e = check::error_of([&] { run(512, {}); });
  CHECK_THAT(e, Catch::Contains("fp8_fp4_paged_mqa_logits") &&
                    Catch::Contains("context_lens[1][0] = 300") &&
                    Catch::Contains("max_blocks * page_kv = 2 * 64 = 128") &&
                    Catch::Contains("truncate_long_contexts"));
  CHECK(check::untouched(out));

  // The output limit: a wide table, max_context_len 200 < 300.
  auto wide = rnd::block_table(rng, st.lens, 8, 64, st.cache.num_pages);
  out = ml::logits_buffer<float>(3, 200);
  check::fill_sentinel(out);
  e = check::error_of([&] {
    ml::fp8_fp4_paged_mqa_logits(st.q.view(), st.cache.view(), st.w.view(), st.lens.view(),
                                 wide.view(), s, 200, out.view());
  });
  CHECK_THAT(e, Catch::Contains("context_lens[1][0] = 300") &&
                    Catch::Contains("longer than max_context_len = 200"));
  CHECK(check::untouched(out));

  // Opting in masks the positions past the table: 128 valid columns in row 1.
  out = ml::logits_buffer<float>(3, 512);
  CHECK(check::error_of([&] { run(512, {.truncate_long_contexts = true}); }) == "");
  const auto expected = st.reference();
  CHECK(check::against(out, expected) == "");
  CHECK(std::isfinite(out.view()(1, 127)));
  CHECK(std::isinf(out.view()(1, 128)));

  // The legacy name and the top-k output follow the same rule.
  auto idx = rnd::matrix<std::int32_t>(3, 200);
  const auto bare = [&] {
    ml::rows_view<F> q = st.q.view();
    q.scales = nullptr;
    return q;
  }();
  e = check::error_of([&] {
    ml::fp8_paged_mqa_logits(bare, st.cache.view(), st.w.view(), st.lens.view(), st.table.view(), s,
                             512, false, ml::topk(idx.mut()));
  });
  CHECK_THAT(e, Catch::Contains("context_lens[1][0] = 300"));
  ml::fp8_paged_mqa_logits(bare, st.cache.view(), st.w.view(), st.lens.view(), st.table.view(), s,
                           512, false, ml::topk(idx.mut()), {.truncate_long_contexts = true});
  CHECK(idx(1, 127) >= 0);
  CHECK(idx(1, 128) == -1);  // a top-k of 128: the table's positions only
}

TEST_CASE("long contexts: paged-sparse rows past their block table are a named error",
          "[paged][truncate]") {
  rnd::engine rng(3102);
  const std::int32_t page_kv = 32;
  const std::int64_t B = 16, cap = 12, max_blocks = 3;  // the table covers 96 positions
  const std::vector<std::int32_t> lens = {90, 96, 150};
  const auto cache = rnd::paged_cache<F>(rng, 5, page_kv);
  std::vector<std::int64_t> keys(lens.begin(), lens.end());
  const auto table = rnd::block_table(rng, keys, max_blocks, page_kv, 5);
  auto idx = rnd::matrix<std::int32_t>(3, cap, 0, -1);
  for (std::int64_t r = 0; r < 3; ++r)
    for (std::int64_t b = 0; b < cap; ++b) idx(r, b) = static_cast<std::int32_t>(b);
  const auto q = rnd::rows<F>(rng, 3 * 4);
  const auto w = rnd::weights<float>(rng, 3, 4);
  const auto meta = ml::get_paged_sparse_mqa_logits_metadata(std::span<const std::int32_t>(lens),
                                                             table.view(), page_kv, idx.view(), B);
  CHECK(meta.long_context_row() == 2);
  ml::logits_buffer<float> out(3, cap * B);
  check::fill_sentinel(out);
  const std::string e = check::error_of([&] {
    ml::fp8_fp4_paged_sparse_mqa_logits(q.view(), cache.view(), w.view(), meta, out.view());
  });
  CHECK_THAT(e, Catch::Contains("fp8_fp4_paged_sparse_mqa_logits") &&
                    Catch::Contains("context_lens[2] = 150") &&
                    Catch::Contains("max_blocks * page_kv = 3 * 32 = 96") &&
                    Catch::Contains("truncate_long_contexts"));
  CHECK(check::untouched(out));
  ml::fp8_fp4_paged_sparse_mqa_logits(q.view(), cache.view(), w.view(), meta, out.view(),
                                      {.truncate_long_contexts = true});
  CHECK(check::against(out, ref::paged_sparse(q.view(), cache.view(), w.view(),
                                              std::span<const std::int32_t>(lens), table.view(),
                                              idx.view(), B)) == "");
  CHECK(std::isinf(out.view()(2, 96)));  // position 96: past the table
  // Rows that fit are no error.
  const std::vector<std::int32_t> fit = {90, 96, 96};
  const auto ok = ml::get_paged_sparse_mqa_logits_metadata(std::span<const std::int32_t>(fit),
                                                           table.view(), page_kv, idx.view(), B);
  CHECK(ok.long_context_row() == -1);
  CHECK(check::error_of([&] {
          ml::fp8_fp4_paged_sparse_mqa_logits(q.view(), cache.view(), w.view(), ok, out.view());
        }) == "");
}

namespace {

// The fused top-k's contract on a selection with repeated blocks: the library's own fp32 logits
// row (every column it writes, repeats included), with every column whose token an earlier
// column of the row already covers removed, stable-sorted (descending, NaN first, ties to the
// lower column). token(r, c) is the token column c reads, or -1 when the column is masked.
struct dedup_expect {
  std::vector<std::vector<std::pair<float, std::int32_t>>> rows;
  std::int64_t dropped = 0;  // valid columns left out as repeats
};

template <class Token>
dedup_expect dedup_sorted(const std::vector<float>& logits, std::int64_t rows, std::int64_t cols,
                          Token token) {
  dedup_expect e;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<std::pair<float, std::int32_t>> row;
    std::vector<std::int64_t> seen;
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t t = token(r, c);
      if (t < 0) continue;
      if (std::find(seen.begin(), seen.end(), t) != seen.end()) {
        ++e.dropped;
        continue;
      }
      seen.push_back(t);
      row.emplace_back(logits[static_cast<std::size_t>(r * cols + c)],
                       static_cast<std::int32_t>(c));
    }
    std::stable_sort(row.begin(), row.end(), [](const auto& a, const auto& b) {
      if (std::isnan(a.first)) return !std::isnan(b.first);
      if (std::isnan(b.first)) return false;
      return a.first > b.first;
    });
    e.rows.push_back(std::move(row));
  }
  return e;
}

// Checks a top-k result against the expected rows: indices exactly, values bitwise.
std::string topk_mismatch(const dedup_expect& e, const rnd::owned_matrix<std::int32_t>& idx,
                          const rnd::owned_matrix<float>& val) {
  for (std::int64_t r = 0; r < idx.rows; ++r) {
    const auto& want = e.rows[static_cast<std::size_t>(r)];
    for (std::int64_t i = 0; i < idx.cols; ++i) {
      const bool have = i < static_cast<std::int64_t>(want.size());
      const std::int32_t wi = have ? want[static_cast<std::size_t>(i)].second : -1;
      const float wv =
          have ? want[static_cast<std::size_t>(i)].first : -std::numeric_limits<float>::infinity();
      if (idx(r, i) != wi || std::memcmp(&val(r, i), &wv, sizeof(float)) != 0)
        return "row " + std::to_string(r) + " entry " + std::to_string(i) + ": got (" +
               std::to_string(idx(r, i)) + ", " + std::to_string(val(r, i)) + "), want (" +
               std::to_string(wi) + ", " + std::to_string(wv) + ")";
    }
  }
  return "";
}

// A selection as engines pad it: `valid` distinct blocks (in any order), then the padding.
enum class padding { repeat_last, minus_one, arbitrary };
rnd::owned_matrix<std::int32_t> padded_selection(rnd::engine& rng, std::int64_t rows,
                                                 std::int64_t cap, std::int64_t max_block,
                                                 padding pad) {
  auto m = rnd::matrix<std::int32_t>(rows, cap, 0, -1);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<std::int32_t> blocks(static_cast<std::size_t>(max_block));
    std::iota(blocks.begin(), blocks.end(), 0);
    std::shuffle(blocks.begin(), blocks.end(), rng);
    // At most a third of the row: the padding then lies inside the blocks the row reads.
    const std::int64_t valid = rnd::uniform(rng, r == 0 ? 0 : 1, std::min(cap, max_block) / 3);
    if (pad != padding::arbitrary) std::sort(blocks.begin(), blocks.begin() + valid);
    for (std::int64_t b = 0; b < cap; ++b) {
      if (b < valid) {
        m(r, b) = blocks[static_cast<std::size_t>(b)];
      } else if (pad == padding::repeat_last) {
        m(r, b) = valid > 0 ? m(r, valid - 1) : -1;  // vLLM: the last valid block again
      } else if (pad == padding::arbitrary) {        // repeats of any earlier entry, and -1s
        m(r, b) = valid > 0 && !rnd::chance(rng, 0.2) ? m(r, rnd::uniform(rng, 0, b - 1)) : -1;
      }
    }
  }
  return m;
}

const char* padding_name(padding p) {
  return p == padding::repeat_last ? "repeat last" : p == padding::minus_one ? "-1" : "arbitrary";
}

}  // namespace

TEST_CASE("sparse top-k: a token is never selected twice when rows repeat blocks",
          "[sparse][topk][dedup]") {
  const padding pad = GENERATE(padding::repeat_last, padding::minus_one, padding::arbitrary);
  const std::int64_t B = GENERATE(8, 16);
  const bool unaligned = GENERATE(false, true);
  const std::int64_t k = GENERATE(1, 7, 64, 400);
  rnd::engine rng(static_cast<std::uint64_t>(3200 + B + 10 * k + unaligned + 3 * int(pad)));
  INFO(padding_name(pad) << " padding, B " << B << (unaligned ? ", unaligned" : "") << ", k " << k);
  const std::int64_t rows = 9, cap = 24, N = 300, H = 4;
  const auto kv = rnd::rows<F>(rng, N);
  const auto q = rnd::rows<F>(rng, rows * H);
  const auto w = rnd::weights<float>(rng, rows, H);
  auto ks = rnd::ints(rng, rows, 0, 40), ke = rnd::ints(rng, rows, 200, N + 20);
  const auto idx = padded_selection(rng, rows, cap, (N + B - 1) / B, pad);
  const auto meta = ml::get_sparse_mqa_logits_metadata(ks, std::span<const std::int32_t>(ke), N,
                                                       idx.view(), B, unaligned);
  const std::int64_t cols = cap * B;
  // The logits row keeps its repeated columns; the two-pass reference reads it.
  std::vector<float> logits(static_cast<std::size_t>(rows * cols));
  ml::fp8_fp4_sparse_mqa_logits(q.view(), kv.view(), w.view(), meta,
                                ml::matrix_view<float>(logits.data(), rows, cols));
  const auto want = dedup_sorted(logits, rows, cols,
                                 [&](std::int64_t r, std::int64_t c) { return meta.token(r, c); });
  if (pad != padding::minus_one) CHECK(want.dropped > 0);
  ml::thread_pool pool(2);
  auto got_i = rnd::matrix<std::int32_t>(rows, k);
  auto got_v = rnd::matrix<float>(rows, k);
  ml::fp8_fp4_sparse_mqa_logits(q.view(), kv.view(), w.view(), meta,
                                ml::topk(got_i.mut(), got_v.mut()), {.executor = pool});
  CHECK(topk_mismatch(want, got_i, got_v) == "");
  for (std::int64_t r = 0; r < rows; ++r) {  // the property itself, spelled out
    std::vector<std::int64_t> tokens;
    for (std::int64_t i = 0; i < k; ++i)
      if (got_i(r, i) >= 0) tokens.push_back(meta.token(r, got_i(r, i)));
    std::sort(tokens.begin(), tokens.end());
    CHECK(std::adjacent_find(tokens.begin(), tokens.end()) == tokens.end());
  }
}

TEST_CASE("paged-sparse top-k: a token is never selected twice when rows repeat blocks",
          "[paged_sparse][topk][dedup]") {
  const padding pad = GENERATE(padding::repeat_last, padding::minus_one, padding::arbitrary);
  const auto protocol =
      GENERATE(ml::paged_sparse_protocol::reread, ml::paged_sparse_protocol::snapshot);
  const std::int64_t k = GENERATE(5, 100, 1000);
  rnd::engine rng(static_cast<std::uint64_t>(3300 + k + 3 * int(pad)));
  INFO(padding_name(pad) << " padding, k " << k);
  const std::int32_t page_kv = 64;
  const std::int64_t B = 16, rows = 7, cap = 40, H = 4, max_blocks = 8;
  std::vector<std::int32_t> lens;
  for (std::int64_t r = 0; r < rows; ++r)
    lens.push_back(static_cast<std::int32_t>(rnd::uniform(rng, 300, max_blocks * page_kv)));
  const auto cache = rnd::paged_cache<F>(rng, 12, page_kv);
  std::vector<std::int64_t> keys(lens.begin(), lens.end());
  const auto table = rnd::block_table(rng, keys, max_blocks, page_kv, 12);
  // Blocks inside every row's context (lengths >= 300), so repeats of them are valid columns.
  const auto idx = padded_selection(rng, rows, cap, 300 / B, pad);
  const auto q = rnd::rows<F>(rng, rows * H);
  const auto w = rnd::weights<float>(rng, rows, H);
  const auto meta = ml::get_paged_sparse_mqa_logits_metadata(
      std::span<const std::int32_t>(lens), table.view(), page_kv, idx.view(), B, protocol);
  const std::int64_t cols = cap * B;
  std::vector<float> logits(static_cast<std::size_t>(rows * cols));
  ml::fp8_fp4_paged_sparse_mqa_logits(q.view(), cache.view(), w.view(), meta,
                                      ml::matrix_view<float>(logits.data(), rows, cols));
  const auto want = dedup_sorted(
      logits, rows, cols, [&](std::int64_t r, std::int64_t c) { return meta.position(r, c); });
  if (pad != padding::minus_one) CHECK(want.dropped > 0);
  auto got_i = rnd::matrix<std::int32_t>(rows, k);
  auto got_v = rnd::matrix<float>(rows, k);
  ml::thread_pool pool(2);
  ml::fp8_fp4_paged_sparse_mqa_logits(q.view(), cache.view(), w.view(), meta,
                                      ml::topk(got_i.mut(), got_v.mut()), {.executor = pool});
  CHECK(topk_mismatch(want, got_i, got_v) == "");
  // The logits output still holds every repeated column (the same value as the first).
  if (pad == padding::repeat_last)
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = B; c < cols; ++c)
        if (meta.position(r, c) >= 0 && idx(r, c / B) == idx(r, c / B - 1))
          CHECK(std::memcmp(&logits[r * cols + c], &logits[r * cols + c - B], 4) == 0);
}

// The offset is a dense-kernel option (and its legacy name's): the other kernels' columns are
// not sglang's ragged positions, and they do not accept it.
static_assert(ml::dense_output_argument<ml::topk_offset_selection<std::int32_t>>);
static_assert(ml::dense_output_argument<ml::topk_offset_selection<std::int64_t>>);
static_assert(!ml::output_argument<ml::topk_offset_selection<std::int32_t>>);
static_assert(!ml::paged_output_argument<ml::topk_offset_selection<std::int32_t>>);
static_assert(ml::detail::legacy_dense_output<ml::topk_offset_selection<std::int32_t>>);
static_assert(!ml::detail::legacy_paged_output<ml::topk_offset_selection<std::int32_t>>);

TEST_CASE("dense top-k: a per-row offset on the selected columns (sglang's ragged prefill)",
          "[dense][topk][offset]") {
  const std::int64_t max_seqlen_k = GENERATE(0, 96);
  rnd::engine rng(3400 + static_cast<std::uint64_t>(max_seqlen_k));
  const std::int64_t rows = 6, N = 200, H = 4, k = 40;
  const auto kv = rnd::rows<F>(rng, N);
  const auto q = rnd::rows<F>(rng, rows * H);
  const auto w = rnd::weights<float>(rng, rows, H);
  std::vector<std::int32_t> ks = {0, 10, 50, 100, 190, 7}, ke = {5, 90, 150, 200, 190, 60};
  const std::vector<std::int32_t> offsets = {0, 1000, 7, 123456, 3, 0};
  const std::vector<std::int64_t> offsets64(offsets.begin(), offsets.end());
  auto plain = rnd::matrix<std::int32_t>(rows, k), shifted = rnd::matrix<std::int32_t>(rows, k),
       shifted64 = rnd::matrix<std::int32_t>(rows, k);
  auto plain_v = rnd::matrix<float>(rows, k), shifted_v = rnd::matrix<float>(rows, k);
  // Rows 2 and 3 hold 100 tokens: with max_seqlen_k = 96 they keep their first 96.
  const ml::options truncate{.truncate_long_contexts = true};
  ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), ks, ke, max_seqlen_k,
                         ml::topk(plain.mut(), plain_v.mut()), truncate);
  ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), ks, ke, max_seqlen_k,
                         ml::topk(shifted.mut(), shifted_v.mut(), ml::topk_offset(offsets)),
                         truncate);
  // int64 offsets (the index arrays' other type), indices only.
  const std::vector<std::int64_t> ks64(ks.begin(), ks.end()), ke64(ke.begin(), ke.end());
  ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), ks64, ke64, max_seqlen_k,
                         ml::topk(shifted64.mut(), ml::topk_offset(offsets64)), truncate);
  std::int64_t minus_ones = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < k; ++i) {
      INFO("row " << r << " entry " << i);
      const std::int32_t c = plain(r, i);
      minus_ones += c == -1;
      CHECK(shifted(r, i) == (c < 0 ? -1 : c + offsets[static_cast<std::size_t>(r)]));
      CHECK(shifted64(r, i) == shifted(r, i));
    }
  CHECK(minus_ones > 0);  // rows 0 and 4 have fewer than k valid columns: -1 stays -1
  CHECK(std::memcmp(plain_v.data.data(), shifted_v.data.data(), plain_v.data.size() * 4) == 0);
  // The legacy name (sglang's call) takes the same selection.
  if (max_seqlen_k == 0) {
    auto legacy = rnd::matrix<std::int32_t>(rows, k);
    ml::rows_view<F> bare = q.view();
    bare.scales = nullptr;  // its Q: codes only (engines fold the scales into the weights)
    auto plain_bare = rnd::matrix<std::int32_t>(rows, k);
    const ml::matrix_view<const float> fw = w.view();
    ml::fp8_mqa_logits(bare, kv.view(), fw, ks, ke, false, 0, ml::topk(plain_bare.mut()));
    ml::fp8_mqa_logits(bare, kv.view(), fw, ks, ke, false, 0,
                       ml::topk(legacy.mut(), ml::topk_offset(offsets)));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t i = 0; i < k; ++i)
        CHECK(
            legacy(r, i) ==
            (plain_bare(r, i) < 0 ? -1 : plain_bare(r, i) + offsets[static_cast<std::size_t>(r)]));
  }

  // Bad offsets: named, the output untouched.
  auto out = rnd::matrix<std::int32_t>(rows, k, 0, 77);
  const auto call = [&](const std::vector<std::int32_t>& o) {
    return check::error_of([&] {
      ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), ks, ke, max_seqlen_k,
                             ml::topk(out.mut(), ml::topk_offset(o)));
    });
  };
  CHECK_THAT(call({1, 2, 3}), Catch::Contains("fp8_fp4_mqa_logits") &&
                                  Catch::Contains("top-k offsets has 3 entries, expected 6"));
  auto bad = offsets;
  bad[2] = -5;
  CHECK_THAT(call(bad), Catch::Contains("top-k offsets[2] = -5"));
  bad[2] = std::numeric_limits<std::int32_t>::max() - 10;
  CHECK_THAT(call(bad), Catch::Contains("top-k offsets[2] = ") && Catch::Contains("int32"));
  CHECK(std::all_of(out.data.begin(), out.data.end(), [](std::int32_t v) { return v == 77; }));
  // An output overlapping the offsets is rejected.
  std::vector<std::int32_t> shared(static_cast<std::size_t>(rows * k + rows), 0);
  CHECK_THAT(check::error_of([&] {
               ml::fp8_fp4_mqa_logits(
                   q.view(), kv.view(), w.view(), ks, ke, max_seqlen_k,
                   ml::topk(ml::matrix_view<std::int32_t>(shared.data(), rows, k),
                            ml::topk_offset(std::span<const std::int32_t>(
                                shared.data() + rows * k - 1, static_cast<std::size_t>(rows)))));
             }),
             Catch::Contains("top-k offsets"));
}
