// get_sparse_mqa_logits_metadata + fp8_fp4_sparse_mqa_logits against ref::sparse. The KV holds
// exactly num_kv_tokens rows, so an index past the range that were read would leave the buffer.
#include <catch2/catch.hpp>

#include <limits>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/kernel_check.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;

namespace {

struct sparse_inputs {
  std::int64_t H = 4, N = 100, B = 16;
  std::vector<std::int32_t> ks, ke;
  bool unaligned = false;  // use_unaligned_ks
};

template <class C>
void check_sparse(rnd::engine& rng, const sparse_inputs& in,
                  const rnd::owned_matrix<std::int32_t>& idx, const rnd::code_options& qo = {},
                  const rnd::code_options& ko = {}) {
  using F = typename C::format;
  using O = typename C::out;
  const std::int64_t rows = idx.rows, cols = idx.cols * in.B;
  INFO(F::name << " on " << check::backend_name<typename C::backend>() << ", "
               << check::out_name<O>() << ", rows " << rows << ", H " << in.H << ", N " << in.N
               << ", B " << in.B << ", cap " << idx.cols << ", use_unaligned_ks " << in.unaligned);
  const auto q = rnd::rows<F>(rng, rows * in.H, qo);
  const auto kv = rnd::rows<F>(rng, in.N, ko);
  const auto w = rnd::weights<typename C::weight>(rng, rows, in.H);
  const ref::result expected = ref::sparse(q.view(), kv.view(), w.view(), std::span(in.ks),
                                           std::span(in.ke), in.N, idx.view(), in.B, in.unaligned);
  CHECK(check::valid_count(expected) > 0);
  const auto meta = ml::get_sparse_mqa_logits_metadata(std::span<const std::int32_t>(in.ks),
                                                       std::span<const std::int32_t>(in.ke), in.N,
                                                       idx.view(), in.B, in.unaligned);
  CHECK(meta.num_rows() == rows);
  CHECK(meta.use_unaligned_ks() == in.unaligned);
  CHECK(meta.num_cols() == cols);

  ml::thread_pool pool1(1), pool2(2);
  ml::logits_buffer<O> one(rows, cols), two(rows, cols), dirty(rows, cols);
  check::fill_sentinel(one);
  check::fill_sentinel(two);
  ml::fp8_fp4_sparse_mqa_logits(typename C::backend{}, q.view(), kv.view(), w.view(), meta,
                                one.view(), {.executor = pool1});
  ml::fp8_fp4_sparse_mqa_logits(typename C::backend{}, q.view(), kv.view(), w.view(), meta,
                                two.view(), {.executor = pool2});
  CHECK(check::against(one, expected) == "");
  CHECK(check::bitwise_equal(one, two));
  check::fill_sentinel(dirty, 0x7F);
  ml::fp8_fp4_sparse_mqa_logits(typename C::backend{}, q.view(), kv.view(), w.view(), meta,
                                dirty.view(), {.executor = pool2, .clean_logits = false});
  CHECK(check::against(dirty, expected, false) == "");
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("sparse: random selections match the reference", "[sparse]",
                        check::kernel_combos) {
  const std::int64_t B = GENERATE(8, 16);
  const std::int64_t H = GENERATE(1, 4, 32, 64);
  rnd::engine rng(static_cast<std::uint64_t>(B * 100 + H));
  sparse_inputs in;
  in.H = H;
  in.N = 150;
  in.B = B;
  in.unaligned = GENERATE(false, true);
  const std::int64_t rows = 5;
  in.ks = rnd::ints(rng, rows, -10, 100);  // most not multiples of B, some negative
  in.ke.resize(rows);
  for (std::int64_t r = 0; r < rows; ++r)
    in.ke[r] = static_cast<std::int32_t>(in.ks[r] + rnd::uniform(rng, 0, 120));  // some > N
  const auto idx =
      rnd::sparse_indices(rng, rows, 12, (in.N + B - 1) / B, {.pad = 0.2, .out_of_range = 0.1});
  check_sparse<TestType>(rng, in, idx);
}

TEMPLATE_LIST_TEST_CASE(
    "sparse: edge rows (ks > ke, negative ks, ke past N, ks % B, -1 and far indices)", "[sparse]",
    check::kernel_combos) {
  const std::int64_t B = GENERATE(8, 16);
  rnd::engine rng(43);
  sparse_inputs in;
  in.H = 4;
  in.N = 64;
  in.B = B;
  in.unaligned = GENERATE(false, true);
  //       ks > ke, ks < 0,  ke > N, ks % B = 3, ks = ke, whole, ks >= N, ke < 0
  in.ks = {40, -5, 10, 3, 20, 0, 70, -30};
  in.ke = {20, 30, 500, 64, 20, 64, 90, -2};
  const std::int64_t rows = static_cast<std::int64_t>(in.ks.size()), cap = 8;
  auto idx = rnd::matrix<std::int32_t>(rows, cap, 0, -1);
  const std::int32_t picks[cap] = {0,  1, 2,       3,
                                   -1, 7, 1000000, std::numeric_limits<std::int32_t>::max() / 16};
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t b = 0; b < cap; ++b) idx(r, b) = picks[(b + r) % cap];
  check_sparse<TestType>(rng, in, idx);
}

TEMPLATE_LIST_TEST_CASE("sparse: full capacity 4096 and 128 heads", "[sparse]",
                        check::each_format_combos) {
  rnd::engine rng(47);
  const std::int64_t cap = GENERATE(as<std::int64_t>{}, 4096, 1);
  sparse_inputs in;
  in.H = cap == 1 ? 128 : 1;
  in.N = 700;
  in.B = 8;
  in.ks = {0, 5};
  in.ke = {700, 600};
  const auto idx = rnd::sparse_indices(rng, 2, cap, 90, {.pad = 0.1, .out_of_range = 0.01});
  check_sparse<TestType>(rng, in, idx);
}

TEMPLATE_LIST_TEST_CASE("sparse: NaN codes and scales", "[sparse]", check::each_format_combos) {
  using F = typename TestType::format;
  const bool in_q = GENERATE(true, false);
  const bool scale = GENERATE(false, true);
  if (!scale && !rnd::detail::has_nan_code<F>) return;  // e2m1 has no NaN code
  INFO("NaN " << (scale ? "scale" : "code") << (in_q ? " in q" : " in kv"));
  rnd::engine rng(53);
  sparse_inputs in;
  in.H = 2;
  in.N = 32;
  in.B = 8;
  in.ks = {0, 0};
  in.ke = {32, 32};
  auto idx = rnd::matrix<std::int32_t>(2, 4);
  for (std::int64_t b = 0; b < 4; ++b) idx(0, b) = idx(1, b) = static_cast<std::int32_t>(b);
  rnd::code_options nan;
  (scale ? nan.nan_scales : nan.nan_codes) = 1;
  check_sparse<TestType>(rng, in, idx, in_q ? nan : rnd::code_options{},
                         in_q ? rnd::code_options{} : nan);
}

// The column -> token mapping of both modes, worked out by hand (B = 8): -1 marks a masked column.
TEST_CASE("sparse: aligned and unaligned column mapping, by hand", "[sparse]") {
  const auto tokens = [](std::int32_t ks, std::int32_t ke, std::vector<std::int32_t> blocks,
                         bool unaligned) {
    const std::vector<std::int32_t> s = {ks}, e = {ke};
    const ml::matrix_view<const std::int32_t> idx(blocks.data(), 1,
                                                  static_cast<std::int64_t>(blocks.size()));
    const auto meta = ml::get_sparse_mqa_logits_metadata(s, e, 40, idx, 8, unaligned);
    std::vector<std::int64_t> out;
    for (std::int64_t k = 0; k < meta.num_cols(); ++k) out.push_back(meta.token(0, k));
    return std::pair{meta.num_blocks(0), out};
  };
  const std::int64_t x = -1;
  // ks = 3, ke = 21, blocks {0, 2, 1, -1}: both modes have nb = 3.
  const auto [nb_a, aligned] = tokens(3, 21, {0, 2, 1, -1}, false);
  CHECK(nb_a == 3);
  CHECK(aligned == std::vector<std::int64_t>{x,  x,  x, 3, 4, 5, 6, 7,  16, 17, 18,
                                             19, 20, x, x, x, 8, 9, 10, 11, 12, 13,
                                             14, 15, x, x, x, x, x, x,  x,  x});
  const auto [nb_u, unaligned] = tokens(3, 21, {0, 2, 1, -1}, true);
  CHECK(nb_u == 3);
  CHECK(unaligned == std::vector<std::int64_t>{3,  4,  5, 6, 7, 8,  9,  10, 19, 20, x,
                                               x,  x,  x, x, x, 11, 12, 13, 14, 15, 16,
                                               17, 18, x, x, x, x,  x,  x,  x,  x});
  // ks = 6, ke = 18: [6, 18) overlaps 3 aligned blocks but spans 2 shifted ones.
  const auto [nb_a2, aligned2] = tokens(6, 18, {0, 1, 2}, false);
  CHECK(nb_a2 == 3);
  CHECK(aligned2 == std::vector<std::int64_t>{x,  x,  x,  x,  x,  x,  6, 7, 8, 9, 10, 11,
                                              12, 13, 14, 15, 16, 17, x, x, x, x, x,  x});
  const auto [nb_u2, unaligned2] = tokens(6, 18, {0, 1, 2}, true);
  CHECK(nb_u2 == 2);
  CHECK(unaligned2 == std::vector<std::int64_t>{6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
                                                x, x, x, x, x,  x,  x,  x,  x,  x,  x,  x});
  // ke <= ks: no block in either mode.
  CHECK(tokens(9, 9, {1}, false).first == 0);
  CHECK(tokens(9, 9, {1}, true).first == 0);
}

TEST_CASE("sparse: the metadata copies its inputs", "[sparse]") {
  rnd::engine rng(59);
  std::vector<std::int32_t> ks = {3, 0}, ke = {40, 20};
  auto idx = rnd::matrix<std::int32_t>(2, 4);
  for (std::int64_t b = 0; b < 4; ++b) idx(0, b) = idx(1, b) = static_cast<std::int32_t>(b);
  const auto meta = ml::get_sparse_mqa_logits_metadata(
      std::span<const std::int32_t>(ks), std::span<const std::int32_t>(ke), 64, idx.view(), 16);
  const auto q = rnd::rows<ml::mxfp8>(rng, 2);
  const auto kv = rnd::rows<ml::mxfp8>(rng, 64);
  const auto w = rnd::weights<float>(rng, 2, 1);
  const auto expected =
      ref::sparse(q.view(), kv.view(), w.view(), std::span(ks), std::span(ke), 64, idx.view(), 16);
  ks.assign({9, 9});  // the caller reuses its arrays: the metadata must not see it
  ke.assign({1, 1});
  for (auto& v : idx.data) v = -1;
  ml::logits_buffer<float> out(2, 64);
  ml::fp8_fp4_sparse_mqa_logits(q.view(), kv.view(), w.view(), meta, out.view());
  CHECK(check::valid_count(expected) > 0);
  CHECK(check::against(out, expected) == "");
}
