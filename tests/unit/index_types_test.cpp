// int64 index arrays (ks / ke, context lengths, block tables, sparse block indices, request
// indices): the same logits, bit for bit, as the int32 call on the same values, on both
// backends and every format (each format once: index arrays are read before, and apart from, the
// format's kernel, so the logit and weight types add compile time and no coverage); and values
// no int32 can hold, which must act as the int32 value with the
// same meaning (past every bound, before every start) without overflowing anything.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <mqalogits/neuron.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/error_of.hpp"
#include "support/kernel_check.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;
using i32 = std::int32_t;
using i64 = std::int64_t;

namespace {

std::vector<i64> widen(const std::vector<i32>& v) {
  return {v.begin(), v.end()};
}
struct wide_matrix {
  std::vector<i64> data;
  i64 rows = 0, cols = 0;
  explicit wide_matrix(const rnd::owned_matrix<i32>& m) : rows(m.rows), cols(m.cols) {
    for (i64 r = 0; r < m.rows; ++r)
      for (i64 c = 0; c < m.cols; ++c) data.push_back(m(r, c));
  }
  ml::matrix_view<const i64> view() const { return {data.data(), rows, cols}; }
};

constexpr i64 big = i64{1} << 40;  // no int32 holds it

// The int64 copy of a paged block table, with every slot past each request's context (never
// read) set to a value no int32 holds.
wide_matrix wide_table(const rnd::owned_matrix<i32>& table, const std::vector<i64>& keys,
                       i64 page_kv) {
  wide_matrix t(table);
  for (i64 r = 0; r < t.rows; ++r)
    for (i64 s = (keys[static_cast<std::size_t>(r)] + page_kv - 1) / page_kv; s < t.cols; ++s)
      t.data[static_cast<std::size_t>(r * t.cols + s)] = (s % 2 ? big : -big);
  return t;
}

// Both top-k outputs (cache slots and positions) of one paged call, for bitwise comparison.
struct paged_topk {
  std::vector<i32> slots, positions;
  std::vector<float> slot_values, position_values;
};
template <class Backend, class F, class W, class I>
paged_topk run_topk(const rnd::owned_rows<F>& q, const rnd::owned_paged_cache<F>& cache,
                    const rnd::owned_matrix<W>& w, ml::matrix_view<const I> lens,
                    ml::matrix_view<const I> table, const ml::paged_mqa_schedule& schedule,
                    i64 cols, i64 k, const std::vector<I>* indices) {
  const i64 rows = lens.rows * lens.cols;
  paged_topk t;
  t.slots.assign(static_cast<std::size_t>(rows * k), 77);
  t.positions = t.slots;
  t.slot_values.assign(static_cast<std::size_t>(rows * k), 1.5f);
  t.position_values = t.slot_values;
  const auto slot_sel =
      ml::topk(ml::matrix_view<i32>(t.slots.data(), rows, k),
               ml::matrix_view<float>(t.slot_values.data(), rows, k), ml::topk_index::slot);
  const auto pos_sel = ml::topk(ml::matrix_view<i32>(t.positions.data(), rows, k),
                                ml::matrix_view<float>(t.position_values.data(), rows, k));
  if (indices) {
    ml::fp8_fp4_paged_mqa_logits(Backend{}, q.view(), cache.view(), w.view(), lens, table, schedule,
                                 cols, slot_sel, *indices,
                                 ml::options{.truncate_long_contexts = true});
    ml::fp8_fp4_paged_mqa_logits(Backend{}, q.view(), cache.view(), w.view(), lens, table, schedule,
                                 cols, pos_sel, *indices,
                                 ml::options{.truncate_long_contexts = true});
  } else {
    ml::fp8_fp4_paged_mqa_logits(Backend{}, q.view(), cache.view(), w.view(), lens, table, schedule,
                                 cols, slot_sel, ml::options{.truncate_long_contexts = true});
    ml::fp8_fp4_paged_mqa_logits(Backend{}, q.view(), cache.view(), w.view(), lens, table, schedule,
                                 cols, pos_sel, ml::options{.truncate_long_contexts = true});
  }
  return t;
}
bool bitwise_equal(const paged_topk& a, const paged_topk& b) {
  const auto same = [](const auto& x, const auto& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) == 0;
  };
  return same(a.slots, b.slots) && same(a.positions, b.positions) &&
         same(a.slot_values, b.slot_values) && same(a.position_values, b.position_values);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("index types: dense ks / ke as int64", "[index_types][dense]",
                        check::each_format_combos) {
  using F = typename TestType::format;
  using O = typename TestType::out;
  rnd::engine rng(901);
  const i64 num_q = 6, H = 4, N = 300, cols = GENERATE(as<i64>{}, 0, 200);
  const auto q = rnd::rows<F>(rng, num_q * H);
  const auto kv = rnd::rows<F>(rng, N);
  const auto w = rnd::weights<typename TestType::weight>(rng, num_q, H);
  // Rows 4 and 5 hold values past int32 in the int64 call and their int32 equivalents here.
  const std::vector<i32> ks = {
      0, 17, -40, 250, std::numeric_limits<i32>::min(), std::numeric_limits<i32>::max()};
  const std::vector<i32> ke = {300, 120, 90, std::numeric_limits<i32>::max(), 200, 300};
  std::vector<i64> ks64 = widen(ks), ke64 = widen(ke);
  ks64[4] = -big;
  ks64[5] = big;
  ke64[3] = big;
  const i64 out_cols = cols == 0 ? N : cols;
  ml::logits_buffer<O> narrow(num_q, out_cols), wide(num_q, out_cols);
  // Rows past N (row 3) and longer than 200 columns: truncated, as the reference does.
  ml::fp8_fp4_mqa_logits(typename TestType::backend{}, q.view(), kv.view(), w.view(), ks, ke, cols,
                         narrow.view(), {.truncate_long_contexts = true});
  ml::fp8_fp4_mqa_logits(typename TestType::backend{}, q.view(), kv.view(), w.view(), ks64, ke64,
                         cols, wide.view(), {.truncate_long_contexts = true});
  CHECK(check::against(narrow, ref::dense(q.view(), kv.view(), w.view(), std::span(ks),
                                          std::span(ke), cols)) == "");
  CHECK(check::bitwise_equal(narrow, wide));
}

TEMPLATE_LIST_TEST_CASE("index types: sparse metadata from int64 arrays", "[index_types][sparse]",
                        check::each_format_combos) {
  using F = typename TestType::format;
  using O = typename TestType::out;
  const bool unaligned = GENERATE(false, true);
  const i64 B = GENERATE(as<i64>{}, 8, 16);
  rnd::engine rng(static_cast<std::uint64_t>(903 + B + unaligned));
  const i64 rows = 6, H = 4, N = 200, cap = 10;
  const auto q = rnd::rows<F>(rng, rows * H);
  const auto kv = rnd::rows<F>(rng, N);
  const auto w = rnd::weights<typename TestType::weight>(rng, rows, H);
  // Row 4: ks before every int32 (same remainder mod B), ke past every int32; row 5: ke past
  // every int32 and far block indices.
  const i32 low = -(i32{1} << 30) + 3;  // -2^30 + 3: remainder 3 mod 8 and 16, as -2^40 + 3
  std::vector<i32> ks = {0, 5, 13, -7, low, 0}, ke = {200, 150, 90, 60, 200, 200};
  auto idx = rnd::sparse_indices(rng, rows, cap, N / B + 2, {.pad = 0.2, .out_of_range = 0.1});
  for (i64 b = 0; b < cap; b += 3) idx(5, b) = std::numeric_limits<i32>::max();
  wide_matrix idx64(idx);
  std::vector<i64> ks64 = widen(ks), ke64 = widen(ke);
  ks64[4] = -big + 3;
  ke64[4] = big;
  ke64[5] = big;
  for (i64 b = 0; b < cap; b += 3) idx64.data[static_cast<std::size_t>(5 * cap + b)] = big;
  const auto m32 = ml::get_sparse_mqa_logits_metadata(
      std::span<const i32>(ks), std::span<const i32>(ke), N, idx.view(), B, unaligned);
  const auto m64 = ml::get_sparse_mqa_logits_metadata(
      std::span<const i64>(ks64), std::span<const i64>(ke64), N, idx64.view(), B, unaligned);
  ml::logits_buffer<O> narrow(rows, cap * B), wide(rows, cap * B);
  ml::fp8_fp4_sparse_mqa_logits(typename TestType::backend{}, q.view(), kv.view(), w.view(), m32,
                                narrow.view());
  ml::fp8_fp4_sparse_mqa_logits(typename TestType::backend{}, q.view(), kv.view(), w.view(), m64,
                                wide.view());
  const auto expected = ref::sparse(q.view(), kv.view(), w.view(), std::span(ks), std::span(ke), N,
                                    idx.view(), B, unaligned);
  CHECK(check::valid_count(expected) > 0);
  CHECK(check::against(narrow, expected) == "");
  CHECK(check::bitwise_equal(narrow, wide));
}

TEMPLATE_LIST_TEST_CASE("index types: paged sparse metadata from int64 arrays",
                        "[index_types][paged_sparse]", check::each_format_combos) {
  using F = typename TestType::format;
  using O = typename TestType::out;
  const auto protocol =
      GENERATE(ml::paged_sparse_protocol::reread, ml::paged_sparse_protocol::snapshot);
  rnd::engine rng(907);
  const std::int32_t page_kv = 32;
  const i64 rows = 5, H = 4, B = 8, cap = 9, pages = 7, max_blocks = 5;
  const auto cache = rnd::paged_cache<F>(rng, pages, page_kv);
  std::vector<i32> lens = {160, 33, 0, 100, std::numeric_limits<i32>::max()};
  const auto table =
      rnd::block_table(rng, std::vector<i64>{160, 33, 0, 100, 160}, max_blocks, page_kv, pages);
  auto idx = rnd::sparse_indices(rng, rows, cap, 22, {.pad = 0.2, .out_of_range = 0.1});
  idx(4, 1) = std::numeric_limits<i32>::max();
  const auto q = rnd::rows<F>(rng, rows * H);
  const auto w = rnd::weights<typename TestType::weight>(rng, rows, H);
  const std::vector<i32> requests = {0, 1, 2, 3, 4};
  std::vector<i64> lens64 = widen(lens), requests64 = widen(requests);
  lens64[4] = big;
  wide_matrix table64(table), idx64(idx);
  idx64.data[static_cast<std::size_t>(4 * cap + 1)] = big;
  const auto m32 = ml::get_paged_sparse_mqa_logits_metadata(
      std::span<const i32>(lens), table.view(), std::span<const i32>(requests), page_kv, idx.view(),
      B, protocol);
  const auto m64 = ml::get_paged_sparse_mqa_logits_metadata(
      std::span<const i64>(lens64), table64.view(), std::span<const i64>(requests64), page_kv,
      idx64.view(), B, protocol);
  ml::logits_buffer<O> narrow(rows, cap * B), wide(rows, cap * B);
  ml::fp8_fp4_paged_sparse_mqa_logits(typename TestType::backend{}, q.view(), cache.view(),
                                      w.view(), m32, narrow.view(),
                                      ml::options{.truncate_long_contexts = true});
  ml::fp8_fp4_paged_sparse_mqa_logits(typename TestType::backend{}, q.view(), cache.view(),
                                      w.view(), m64, wide.view(),
                                      ml::options{.truncate_long_contexts = true});
  const auto expected = ref::paged_sparse(q.view(), cache.view(), w.view(), std::span(lens),
                                          table.view(), idx.view(), B);
  CHECK(check::valid_count(expected) > 0);
  CHECK(check::against(narrow, expected) == "");
  CHECK(check::bitwise_equal(narrow, wide));
}

TEST_CASE("index types: int64 bad values get the same named errors", "[index_types][bad_input]") {
  const std::vector<i64> ks = {0, 0}, ke = {10, 10};
  std::vector<i64> idx(2 * 4, 0);
  const ml::matrix_view<const i64> iv(idx.data(), 2, 4);
  CHECK_THROWS_WITH(ml::get_sparse_mqa_logits_metadata(std::span<const i64>(ks),
                                                       std::span<const i64>(ke), 0, iv, 8),
                    Catch::Contains("num_kv_tokens = 0"));
  CHECK_THROWS_WITH(ml::get_sparse_mqa_logits_metadata(
                        std::span<const i64>(ks), std::span<const i64>(ke), i64{1} << 62, iv, 8),
                    Catch::Contains("must be in [1, 2^61]"));
  const std::vector<i64> lens = {5, -big};
  std::vector<i64> table(2 * 2, 0);
  CHECK_THROWS_WITH(
      ml::get_paged_sparse_mqa_logits_metadata(
          std::span<const i64>(lens), ml::matrix_view<const i64>(table.data(), 2, 2), 16, iv, 8),
      Catch::Contains("context_lens[1] = -1099511627776 < 0"));
}

TEMPLATE_LIST_TEST_CASE("index types: paged context lengths, block table and indices as int64",
                        "[index_types][paged]", check::each_format_combos) {
  using F = typename TestType::format;
  using O = typename TestType::out;
  using Backend = typename TestType::backend;
  const bool varlen = GENERATE(false, true);
  const std::int32_t page_kv = GENERATE(16, 64);
  rnd::engine rng(static_cast<std::uint64_t>(911 + page_kv + varlen));
  const i64 H = 4, max_blocks = 5, pages = 9, cols = max_blocks * page_kv;
  // Plain: 4 requests x next_n 2. Varlen: 7 rows in requests of 2, 1, 3 and 1 rows.
  const i64 B = varlen ? 7 : 4, next_n = varlen ? 1 : 2, rows = B * next_n;
  auto lens = rnd::context_lens(rng, B, next_n, cols + 20);
  lens(0, 0) = 0;                                  // an empty row
  lens(1, 0) = static_cast<i32>(cols + 7);         // past the table's capacity
  lens(2, 0) = static_cast<i32>(3 * page_kv - 1);  // a page's last position
  const std::vector<i32> indices32 = {4, 4, 9, 1, 1, 1, 3};
  // The same requests under labels no int32 holds.
  const std::vector<i64> indices64 = {big, big, -big, 2 * big, 2 * big, 2 * big, 7};
  // Every row of a request has the request's block-table row in the slots it reads.
  std::vector<i64> keys(static_cast<std::size_t>(B), 0);
  for (i64 b = 0; b < B; ++b)
    for (i64 j = 0; j < next_n; ++j) keys[b] = std::max<i64>(keys[b], lens(b, j));
  if (varlen)
    for (i64 r = 1; r < B; ++r)
      if (indices32[r] == indices32[r - 1]) keys[r - 1] = keys[r] = std::max(keys[r - 1], keys[r]);
  auto table = rnd::block_table(rng, keys, max_blocks, page_kv, pages);
  if (varlen)
    for (i64 r = 1; r < B; ++r)
      if (indices32[r] == indices32[r - 1])
        for (i64 s = 0; s < max_blocks; ++s) table(r, s) = table(r - 1, s);
  const wide_matrix lens64(lens);
  const wide_matrix table64 = wide_table(table, keys, page_kv);
  const auto cache = rnd::paged_cache<F>(rng, pages, page_kv);
  const auto q = rnd::rows<F>(rng, rows * H);
  const auto w = rnd::weights<typename TestType::weight>(rng, rows, H);
  INFO(F::name << " on " << check::backend_name<Backend>() << (varlen ? ", varlen" : "")
               << ", page_kv " << page_kv);

  const auto s32 = varlen ? ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 3, indices32)
                          : ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 3);
  const auto s64 = varlen ? ml::get_paged_mqa_logits_metadata(lens64.view(), page_kv, 3, indices64)
                          : ml::get_paged_mqa_logits_metadata(lens64.view(), page_kv, 3);
  REQUIRE(s32.num_requests() == s64.num_requests());
  ml::logits_buffer<O> narrow(rows, cols), wide(rows, cols);
  if (varlen) {
    ml::fp8_fp4_paged_mqa_logits(Backend{}, q.view(), cache.view(), w.view(), lens.view(),
                                 table.view(), s32, cols, narrow.view(), indices32,
                                 ml::options{.truncate_long_contexts = true});
    ml::fp8_fp4_paged_mqa_logits(Backend{}, q.view(), cache.view(), w.view(), lens64.view(),
                                 table64.view(), s64, cols, wide.view(), indices64,
                                 ml::options{.truncate_long_contexts = true});
  } else {
    ml::fp8_fp4_paged_mqa_logits(Backend{}, q.view(), cache.view(), w.view(), lens.view(),
                                 table.view(), s32, cols, narrow.view(),
                                 ml::options{.truncate_long_contexts = true});
    ml::fp8_fp4_paged_mqa_logits(Backend{}, q.view(), cache.view(), w.view(), lens64.view(),
                                 table64.view(), s64, cols, wide.view(),
                                 ml::options{.truncate_long_contexts = true});
  }
  const auto expected =
      ref::paged(q.view(), cache.view(), w.view(), lens.view(), table.view(), cols);
  CHECK(check::valid_count(expected) > 0);
  CHECK(check::against(narrow, expected) == "");
  CHECK(check::bitwise_equal(narrow, wide));

  // The fused top-k, slots (read through the int64 table) and positions, k below and above a
  // row's valid columns.
  for (const i64 k : {i64{5}, cols + 3}) {
    INFO("top-k " << k);
    const auto t32 = run_topk<Backend>(q, cache, w, lens.view(), table.view(), s32, cols, k,
                                       varlen ? &indices32 : nullptr);
    const auto t64 = run_topk<Backend>(q, cache, w, lens64.view(), table64.view(), s64, cols, k,
                                       varlen ? &indices64 : nullptr);
    CHECK(bitwise_equal(t32, t64));
    // Each slot is its position's page slot in the int32 table.
    for (i64 r = 0; r < rows; ++r)
      for (i64 i = 0; i < k; ++i) {
        const i32 pos = t32.positions[static_cast<std::size_t>(r * k + i)];
        const i32 slot = t32.slots[static_cast<std::size_t>(r * k + i)];
        if (pos < 0) {
          CHECK(slot == -1);
          continue;
        }
        CHECK(slot == table(r / next_n, pos / page_kv) * page_kv + pos % page_kv);
      }
  }
}

TEMPLATE_TEST_CASE("index types: legacy fp8_paged_mqa_logits with int64 arrays",
                   "[index_types][paged][legacy]", ml::backend::host,
                   ml::backend::neuron<ml::backend::trn2>) {
  using F = ml::fp8_per_token;
  rnd::engine rng(913);
  const std::int32_t page_kv = 32;
  const i64 B = 3, next_n = 2, H = 8, max_blocks = 4, pages = 6, cols = max_blocks * page_kv;
  const auto lens = rnd::context_lens(rng, B, next_n, cols + 10, 1);
  std::vector<i64> keys(static_cast<std::size_t>(B), 0);
  for (i64 b = 0; b < B; ++b) keys[b] = std::max<i64>(lens(b, 0), lens(b, 1));
  const auto table = rnd::block_table(rng, keys, max_blocks, page_kv, pages);
  const wide_matrix lens64(lens), table64 = wide_table(table, keys, page_kv);
  const auto cache = rnd::paged_cache<F>(rng, pages, page_kv);
  const auto q = rnd::rows<F>(rng, B * next_n * H);
  ml::rows_view<F> bare = q.view();
  bare.scales = nullptr;  // upstream's legacy Q: codes only
  const auto w = rnd::weights<float>(rng, B * next_n, H);
  const auto s32 = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 2);
  const auto s64 = ml::get_paged_mqa_logits_metadata(lens64.view(), page_kv, 2);
  ml::logits_buffer<float> narrow(B * next_n, cols), wide(B * next_n, cols),
      reference(B * next_n, cols);
  ml::fp8_paged_mqa_logits(TestType{}, bare, cache.view(), w.view(), lens.view(), table.view(), s32,
                           cols, true, narrow.view());
  ml::fp8_paged_mqa_logits(TestType{}, bare, cache.view(), w.view(), lens64.view(), table64.view(),
                           s64, cols, true, wide.view());
  ml::fp8_fp4_paged_mqa_logits(TestType{}, bare, cache.view(), w.view(), lens.view(), table.view(),
                               s32, cols, reference.view());
  CHECK(check::bitwise_equal(narrow, reference));
  CHECK(check::bitwise_equal(narrow, wide));
}

TEMPLATE_TEST_CASE("index types: int64 paged values out of range get named errors",
                   "[index_types][paged][bad_input]", ml::backend::host,
                   ml::backend::neuron<ml::backend::trn2>) {
  using F = ml::mxfp8;
  rnd::engine rng(917);
  const std::int32_t page_kv = 16;
  const i64 B = 2, H = 4, max_blocks = 3, pages = 4, cols = max_blocks * page_kv;
  const auto cache = rnd::paged_cache<F>(rng, pages, page_kv);
  const auto q = rnd::rows<F>(rng, B * H);
  const auto w = rnd::weights<float>(rng, B, H);
  std::vector<i64> lens = {20, 40}, table = {0, 1, big, 2, 3, 0};
  const ml::matrix_view<const i64> lv(lens.data(), B, 1), tv(table.data(), B, max_blocks);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lv, page_kv, 2);
  ml::logits_buffer<float> out(B, cols);
  check::fill_sentinel(out);
  const auto call = [&](const ml::paged_mqa_schedule& s) {
    ml::fp8_fp4_paged_mqa_logits(TestType{}, q.view(), cache.view(), w.view(), lv, tv, s, cols,
                                 out.view());
  };
  const auto call_varlen = [&](const ml::paged_mqa_schedule& s, const std::vector<i64>& idx) {
    ml::fp8_fp4_paged_mqa_logits(TestType{}, q.view(), cache.view(), w.view(), lv, tv, s, cols,
                                 out.view(), idx);
  };
  const auto expect = [&](auto&& fn, std::initializer_list<std::string> parts) {
    const std::string message = check::error_of(fn);
    INFO("message: " << message);
    REQUIRE(!message.empty());
    for (const std::string& p : parts) CHECK_THAT(message, Catch::Contains(p));
    CHECK(check::untouched(out));
  };
  // A context length past int32: the metadata and the kernel name it.
  lens[1] = i64{1} << 31;
  expect([&] { (void)ml::get_paged_mqa_logits_metadata(lv, page_kv, 2); },
         {"get_paged_mqa_logits_metadata", "context_lens[1][0] = 2147483648", "2147483647"});
  expect([&] { call(schedule); },
         {"fp8_fp4_paged_mqa_logits", "context_lens[1][0] = 2147483648", "2147483647"});
  lens[1] = big;
  expect([&] { call(schedule); }, {"context_lens[1][0] = 1099511627776"});
  lens[1] = -big;
  expect([&] { (void)ml::get_paged_mqa_logits_metadata(lv, page_kv, 2); },
         {"context_lens[1][0] = -1099511627776 < 0"});
  expect([&] { call(schedule); }, {"context_lens[1][0] = -1099511627776 < 0"});
  lens[1] = 40;
  // A page past int32 in a slot the context reads (row 0 reads slots 0 and 1 only).
  table[1] = big;
  expect([&] { call(schedule); }, {"block_table[0][1] = 1099511627776", "is not a page"});
  table[1] = -big;
  expect([&] { call(schedule); }, {"block_table[0][1] = -1099511627776", "is not a page"});
  table[1] = 1;
  // The top-k slots: the same check, before any row is padded.
  std::vector<i32> slots(static_cast<std::size_t>(B * 4), 77);
  table[4] = big;  // row 1 reads slots 0..2
  {
    const auto sel = ml::topk(ml::matrix_view<i32>(slots.data(), B, 4), ml::topk_index::slot);
    const std::string message = check::error_of([&] {
      ml::fp8_fp4_paged_mqa_logits(TestType{}, q.view(), cache.view(), w.view(), lv, tv, schedule,
                                   cols, sel);
    });
    CHECK_THAT(message, Catch::Contains("block_table[1][1] = 1099511627776"));
    CHECK(std::all_of(slots.begin(), slots.end(), [](i32 v) { return v == 77; }));
  }
  table[4] = 3;
  // Varlen indices past int32 must be the schedule's, value for value.
  const std::vector<i64> idx = {big, -big}, other = {big, big + 1};
  const auto vschedule = ml::get_paged_mqa_logits_metadata(lv, page_kv, 2, idx);
  expect([&] { call_varlen(vschedule, other); },
         {"indices[1] = 1099511627777", "schedule was made with -1099511627776"});
  // And the untouched output was never the only outcome: the good call writes it.
  call(schedule);
  CHECK(!check::untouched(out));
}
