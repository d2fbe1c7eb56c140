// fp8_fp4_mqa_logits against ref::dense on random inputs and on every edge of the column rule.
#include <catch2/catch.hpp>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/kernel_check.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;

namespace {

struct dense_inputs {
  std::int64_t num_q = 0, H = 0, N = 0;
  std::vector<std::int32_t> ks, ke;
  std::int64_t max_seqlen_k = 0;
};

// Runs the kernel with 1 and 2 threads (bitwise identical, both matching the reference) and
// once more with clean_logits = false (valid columns still right).
template <class C>
void check_dense(rnd::engine& rng, const dense_inputs& in, const rnd::code_options& qo = {},
                 const rnd::code_options& ko = {}, std::int64_t min_valid = 1) {
  using F = typename C::format;
  using O = typename C::out;
  INFO(F::name << " on " << check::backend_name<typename C::backend>() << ", "
               << check::out_name<O>() << ", num_q " << in.num_q << ", H " << in.H << ", N " << in.N
               << ", max_seqlen_k " << in.max_seqlen_k);
  const auto q = rnd::rows<F>(rng, in.num_q * in.H, qo);
  const auto kv = rnd::rows<F>(rng, in.N, ko);
  const auto w = rnd::weights<typename C::weight>(rng, in.num_q, in.H);
  const ref::result expected = ref::dense(q.view(), kv.view(), w.view(), std::span(in.ks),
                                          std::span(in.ke), in.max_seqlen_k);
  CHECK(check::valid_count(expected) >= min_valid);
  const std::int64_t cols = in.max_seqlen_k ? in.max_seqlen_k : in.N;

  ml::logits_buffer<O> one(in.num_q, cols), two(in.num_q, cols), dirty(in.num_q, cols);
  ml::thread_pool pool1(1), pool2(2);
  check::fill_sentinel(one);
  check::fill_sentinel(two);
  // A row with tokens past N or past its max_seqlen_k columns is refused, the output untouched,
  // unless the call opts in to truncation (the reference's semantics).
  bool truncates = false;
  for (std::size_t r = 0; r < in.ks.size(); ++r)
    truncates |=
        in.ke[r] > in.ks[r] &&
        (in.ke[r] > in.N || (in.max_seqlen_k > 0 && in.ke[r] - in.ks[r] > in.max_seqlen_k));
  if (truncates) {
    CHECK_THROWS_WITH(ml::fp8_fp4_mqa_logits(typename C::backend{}, q.view(), kv.view(), w.view(),
                                             std::span<const std::int32_t>(in.ks),
                                             std::span<const std::int32_t>(in.ke), in.max_seqlen_k,
                                             one.view(), {.executor = pool1}),
                      Catch::Contains("truncate_long_contexts"));
    CHECK(check::untouched(one));
  }
  ml::fp8_fp4_mqa_logits(typename C::backend{}, q.view(), kv.view(), w.view(),
                         std::span<const std::int32_t>(in.ks), std::span<const std::int32_t>(in.ke),
                         in.max_seqlen_k, one.view(),
                         {.executor = pool1, .truncate_long_contexts = truncates});
  ml::fp8_fp4_mqa_logits(typename C::backend{}, q.view(), kv.view(), w.view(),
                         std::span<const std::int32_t>(in.ks), std::span<const std::int32_t>(in.ke),
                         in.max_seqlen_k, two.view(),
                         {.executor = pool2, .truncate_long_contexts = truncates});
  CHECK(check::against(one, expected) == "");
  CHECK(check::bitwise_equal(one, two));

  check::fill_sentinel(dirty, 0x7F);  // NaN-looking garbage in every column
  ml::fp8_fp4_mqa_logits(
      typename C::backend{}, q.view(), kv.view(), w.view(), std::span<const std::int32_t>(in.ks),
      std::span<const std::int32_t>(in.ke), in.max_seqlen_k, dirty.view(),
      {.executor = pool2, .clean_logits = false, .truncate_long_contexts = truncates});
  CHECK(check::against(dirty, expected, false) == "");
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("dense: random ranges match the reference", "[dense]",
                        check::kernel_combos) {
  const std::int64_t H = GENERATE(1, 4, 32, 64);
  const std::int64_t N = GENERATE(37, 300);
  rnd::engine rng(static_cast<std::uint64_t>(H * 1000 + N));
  dense_inputs in;
  in.num_q = 6;
  in.H = H;
  in.N = N;
  // Causal-style windows, some clipped, some past N, some negative starts.
  in.ks = rnd::ints(rng, in.num_q, -8, N - 1);
  in.ke.resize(in.ks.size());
  for (std::size_t i = 0; i < in.ks.size(); ++i)
    in.ke[i] = static_cast<std::int32_t>(in.ks[i] + rnd::uniform(rng, 1, N / 2 + 20));
  in.max_seqlen_k = GENERATE(as<std::int64_t>{}, 0, 1, 40, 700);
  check_dense<TestType>(rng, in);
}

TEMPLATE_LIST_TEST_CASE("dense: edge rows (ks > ke, ke past N, negative ks, empty, full width)",
                        "[dense]", check::kernel_combos) {
  rnd::engine rng(11);
  dense_inputs in;
  in.H = 4;
  in.N = 50;
  //        ks > ke, ke > N, ks < 0, ks = ke, ks >= N, ks < 0 && ke <= 0, whole range, interior
  in.ks = {30, 10, -7, 20, 50, -9, 0, 13};
  in.ke = {10, 90, 5, 20, 60, 0, 50, 17};
  in.num_q = static_cast<std::int64_t>(in.ks.size());
  // Narrower than most ranges, wider than all, and full width.
  in.max_seqlen_k = GENERATE(as<std::int64_t>{}, 3, 64, 0);
  check_dense<TestType>(rng, in);
}

TEMPLATE_LIST_TEST_CASE("dense: 128 heads and more rows than one work item", "[dense]",
                        check::each_format_combos) {
  rnd::engine rng(5);
  dense_inputs in;
  in.H = 128;
  in.N = 40;
  in.num_q = 11;  // > 8 rows per work item
  in.ks = rnd::ints(rng, in.num_q, 0, 10);
  in.ke = rnd::ints(rng, in.num_q, 20, 40);
  in.max_seqlen_k = 32;
  check_dense<TestType>(rng, in);
}

TEMPLATE_LIST_TEST_CASE("dense: keys past one work item of 512 and a partial key tile", "[dense]",
                        check::each_format_combos) {
  rnd::engine rng(6);
  dense_inputs in;
  in.H = 1;
  in.N = 1100;
  in.num_q = 3;
  in.ks = {0, 3, 500};
  in.ke = {1100, 1037, 1029};
  in.max_seqlen_k = GENERATE(as<std::int64_t>{}, 1100, 0);
  check_dense<TestType>(rng, in);
}

TEMPLATE_LIST_TEST_CASE("dense: NaN codes and NaN scales give NaN logits where they reach",
                        "[dense]", check::kernel_combos) {
  using F = typename TestType::format;
  const std::string where = GENERATE("q", "kv");
  const bool scale = GENERATE(false, true);
  if (!scale && !rnd::detail::has_nan_code<F>) return;  // e2m1 has no NaN code
  INFO("NaN " << (scale ? "scale" : "code") << " in " << where);
  rnd::engine rng(13);
  dense_inputs in;
  in.H = 4;
  in.N = 24;
  in.num_q = 4;
  in.ks = {0, 0, 5, 0};
  in.ke = {24, 10, 24, 24};
  in.max_seqlen_k = 24;
  rnd::code_options nan;
  (scale ? nan.nan_scales : nan.nan_codes) = 1;
  // The reference sees the same NaN; require that it reached some valid column.
  const auto q = rnd::rows<F>(rng, in.num_q * in.H, where == "q" ? nan : rnd::code_options{});
  const auto kv = rnd::rows<F>(rng, in.N, where == "kv" ? nan : rnd::code_options{});
  const auto w = rnd::weights<typename TestType::weight>(rng, in.num_q, in.H);
  const auto expected = ref::dense(q.view(), kv.view(), w.view(), std::span(in.ks),
                                   std::span(in.ke), in.max_seqlen_k);
  CHECK(check::nan_count(expected) > 0);
  ml::logits_buffer<typename TestType::out> out(in.num_q, in.max_seqlen_k);
  ml::fp8_fp4_mqa_logits(typename TestType::backend{}, q.view(), kv.view(), w.view(),
                         std::span<const std::int32_t>(in.ks), std::span<const std::int32_t>(in.ke),
                         in.max_seqlen_k, out.view());
  CHECK(check::against(out, expected) == "");
}

TEMPLATE_LIST_TEST_CASE("dense: padded strides for q, kv, weights and logits", "[dense]",
                        check::each_format_combos) {
  using F = typename TestType::format;
  using O = typename TestType::out;
  rnd::engine rng(17);
  const std::int64_t num_q = 3, H = 4, N = 30, cols = 30;
  const auto q = rnd::rows<F>(rng, num_q * H, {}, F::data_bytes + 40, 12);
  const auto kv = rnd::rows<F>(rng, N, {}, 256, 8);
  const auto w = rnd::weights<typename TestType::weight>(rng, num_q, H, 9);
  const std::vector<std::int32_t> ks = {0, 4, 29}, ke = {30, 20, 30};
  const auto expected =
      ref::dense(q.view(), kv.view(), w.view(), std::span(ks), std::span(ke), cols);
  ml::logits_buffer<O> out(num_q, cols, 1024);
  CHECK(out.stride() == ml::logits_row_stride<O>(cols, 1024));
  ml::fp8_fp4_mqa_logits(typename TestType::backend{}, q.view(), kv.view(), w.view(),
                         std::span<const std::int32_t>(ks), std::span<const std::int32_t>(ke), cols,
                         out.view());
  CHECK(check::against(out, expected) == "");
}
