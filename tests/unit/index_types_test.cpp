// int64 index arrays (ks / ke, context lengths, block tables, sparse block indices, request
// indices): the same logits, bit for bit, as the int32 call on the same values, on every
// backend and format; and values no int32 can hold, which must act as the int32 value with the
// same meaning (past every bound, before every start) without overflowing anything.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
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

}  // namespace

TEMPLATE_LIST_TEST_CASE("index types: dense ks / ke as int64", "[index_types][dense]",
                        check::kernel_combos) {
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
  ml::fp8_fp4_mqa_logits(typename TestType::backend{}, q.view(), kv.view(), w.view(), ks, ke, cols,
                         narrow.view());
  ml::fp8_fp4_mqa_logits(typename TestType::backend{}, q.view(), kv.view(), w.view(), ks64, ke64,
                         cols, wide.view());
  CHECK(check::against(narrow, ref::dense(q.view(), kv.view(), w.view(), std::span(ks),
                                          std::span(ke), cols)) == "");
  CHECK(check::bitwise_equal(narrow, wide));
}

TEMPLATE_LIST_TEST_CASE("index types: sparse metadata from int64 arrays", "[index_types][sparse]",
                        check::kernel_combos) {
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
                        "[index_types][paged_sparse]", check::kernel_combos) {
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
                                      w.view(), m32, narrow.view());
  ml::fp8_fp4_paged_sparse_mqa_logits(typename TestType::backend{}, q.view(), cache.view(),
                                      w.view(), m64, wide.view());
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
