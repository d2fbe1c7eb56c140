// Upstream's 1-D context_lens [B] with next_n rows per request: expand_context_lens gives each
// row its causal length, the paged kernel's result equals a scalar reference that masks row j of
// request b past position len[b] - next_n + j, and the schedule table made from the 1-D lengths
// is the one made from the expanded ones.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/kernel_check.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;
using i32 = std::int32_t;
using i64 = std::int64_t;

TEST_CASE("context_lens: the 1-D form expands to causal rows", "[paged][context_lens]") {
  const std::vector<i32> lens = {10, 2, 0, 7};
  std::vector<i32> out(4 * 3, -99);
  ml::expand_context_lens(std::span<const i32>(lens), ml::matrix_view<i32>(out.data(), 4, 3));
  // Row j of request b sees t <= len - next_n + j: a length of len - 2 + j (never below 0).
  CHECK(out == std::vector<i32>{8, 9, 10, 0, 1, 2, 0, 0, 0, 5, 6, 7});
  const std::vector<i64> wide = {5};
  std::vector<i64> one(1);
  ml::expand_context_lens(std::span<const i64>(wide), ml::matrix_view<i64>(one.data(), 1, 1));
  CHECK(one[0] == 5);  // next_n = 1: the length itself
  CHECK_THROWS_WITH(
      ml::expand_context_lens(std::span<const i32>(lens), ml::matrix_view<i32>(out.data(), 3, 4)),
      Catch::Contains("expected [B, next_n >= 1]"));
}

TEST_CASE("context_lens: the paged kernel on expanded 1-D lengths", "[paged][context_lens]") {
  using F = ml::mxfp8;
  rnd::engine rng(91);
  const i64 B = 3, next_n = 4, H = 4, max_blocks = 6, num_pages = 20, max_context_len = 384;
  const i32 page_kv = 64;
  const std::vector<i32> lens = {300, 3, 129};
  // The reference: every row over its request's whole context, then row j masked past
  // len - next_n + j, as upstream's reference does.
  auto whole = rnd::matrix<i32>(B, next_n);
  for (i64 b = 0; b < B; ++b)
    for (i64 j = 0; j < next_n; ++j) whole(b, j) = lens[static_cast<std::size_t>(b)];
  const auto cache = rnd::paged_cache<F>(rng, num_pages, page_kv, 0);
  const auto table = rnd::block_table(rng, whole, max_blocks, page_kv, num_pages);
  const auto q = rnd::rows<F>(rng, B * next_n * H);
  const auto w = rnd::weights<float>(rng, B * next_n, H);
  ref::result expected =
      ref::paged(q.view(), cache.view(), w.view(), whole.view(), table.view(), max_context_len);
  for (i64 b = 0; b < B; ++b)
    for (i64 j = 0; j < next_n; ++j)
      for (i64 c = lens[static_cast<std::size_t>(b)] - next_n + j + 1; c < max_context_len; ++c)
        if (c >= 0) {
          const auto at = static_cast<std::size_t>((b * next_n + j) * max_context_len + c);
          expected.value[at] = -std::numeric_limits<double>::infinity();
          expected.magnitude[at] = 0;
        }

  auto expanded = rnd::matrix<i32>(B, next_n);
  ml::expand_context_lens(std::span<const i32>(lens), expanded.mut());
  // Upstream's table from the 1-D lengths (a [B, 1] matrix) is the expanded lengths' table.
  const ml::matrix_view<const i32> as_column(lens.data(), B, 1);
  auto from_1d = rnd::matrix<i32>(ml::paged_mqa_schedule_array_rows(5), 2);
  auto from_2d = from_1d;
  ml::get_paged_mqa_logits_metadata(as_column, page_kv, 5, from_1d.mut());
  ml::get_paged_mqa_logits_metadata(expanded.view(), page_kv, 5, from_2d.mut());
  CHECK(from_1d.data == from_2d.data);

  ml::thread_pool pool(2);
  ml::logits_buffer<float> out(B * next_n, max_context_len);
  ml::fp8_fp4_paged_mqa_logits(q.view(), cache.view(), w.view(), expanded.view(), table.view(),
                               from_1d.view(), max_context_len, out.view(), {.executor = pool});
  CHECK(check::against(out, expected) == "");
}
