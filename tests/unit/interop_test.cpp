// Interop: flat std::span buffers and (when Eigen is installed) Eigen matrices, maps, refs and
// vectors as the views the kernels take; the kernels give the same bits through either path.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "reference/random_inputs.hpp"

#if MQALOGITS_TEST_EIGEN
#include <mqalogits/interop/eigen.hpp>
#endif

namespace ml = mqalogits;
using ref::rand::engine;

namespace {

// Dense logits through plain views, the baseline every interop path must reproduce bit for bit.
struct dense_case {
  std::int64_t num_q = 3, H = 8, N = 70;
  ref::rand::owned_rows<ml::mxfp8> q, kv;
  ref::rand::owned_matrix<float> w;
  std::vector<std::int32_t> ks, ke;
  ml::logits_buffer<float> expected;

  explicit dense_case(engine& rng)
      : q(ref::rand::rows<ml::mxfp8>(rng, num_q * H)),
        kv(ref::rand::rows<ml::mxfp8>(rng, N)),
        w(ref::rand::weights<float>(rng, num_q, H)),
        ks{0, 5, 30},
        ke{70, 40, 66},
        expected(num_q, N) {
    ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), ks, ke, N, expected.view());
  }
  template <class View>
  bool same(const View& out) const {
    for (std::int64_t r = 0; r < num_q; ++r)
      for (std::int64_t c = 0; c < N; ++c)
        if (std::memcmp(&out(r, c), &expected(r, c), sizeof(float)) != 0) return false;
    return true;
  }
};

}  // namespace

TEST_CASE("interop: flat spans become checked matrix views", "[interop][span]") {
  std::vector<float> packed(12);
  const auto v = ml::as_matrix_view(std::span(packed), 4);
  CHECK(v.rows == 3);
  CHECK(v.cols == 4);
  CHECK(v.stride == 4);
  CHECK(v.data == packed.data());
  static_assert(std::is_same_v<decltype(v), const ml::matrix_view<float>>);
  const std::vector<std::int32_t> lens(6);
  const auto l = ml::as_matrix_view(std::span(lens), 2);  // context_lens [B = 3, next_n = 2]
  static_assert(std::is_same_v<decltype(l), const ml::matrix_view<const std::int32_t>>);
  CHECK(l.rows == 3);
  // Strided: rows * stride elements, or the last row's padding left off.
  std::vector<float> strided(3 * 6);
  CHECK(ml::as_matrix_view(std::span(strided), 4, 6).rows == 3);
  CHECK(ml::as_matrix_view(std::span(strided).first(16), 4, 6).rows == 3);
  CHECK(ml::as_matrix_view(std::span(strided).first(0), 4, 6).rows == 0);
  CHECK_THROWS_WITH(ml::as_matrix_view(std::span(packed).first(10), 4),
                    Catch::Contains("10 elements is not whole rows of 4"));
  CHECK_THROWS_WITH(ml::as_matrix_view(std::span(strided).first(14), 4, 6),
                    Catch::Contains("not whole rows"));
  CHECK_THROWS_WITH(ml::as_matrix_view(std::span(packed), 4, 3), Catch::Contains("stride >= cols"));
  CHECK_THROWS_AS(ml::as_matrix_view(std::span(packed), 0), ml::error);
}

TEST_CASE("interop: kernels take weights and logits from flat spans", "[interop][span]") {
  engine rng(21);
  const dense_case d(rng);
  std::vector<float> w(d.w.data.begin(), d.w.data.end());
  std::vector<float> logits(static_cast<std::size_t>(d.num_q * d.N));
  ml::fp8_fp4_mqa_logits(d.q.view(), d.kv.view(),
                         ml::as_matrix_view(std::span<const float>(w), d.H), std::span(d.ks),
                         std::span(d.ke), d.N, ml::as_matrix_view(std::span(logits), d.N));
  CHECK(d.same(ml::as_matrix_view(std::span<const float>(logits), d.N)));
}

#if MQALOGITS_TEST_EIGEN

using RowF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowI = Eigen::Matrix<std::int32_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

TEST_CASE("interop: Eigen maps, refs and matrices become matrix views", "[interop][eigen]") {
  std::vector<float> buf(4 * 10);
  const Eigen::Map<const RowF, 0, Eigen::OuterStride<>> m(buf.data(), 4, 7,
                                                          Eigen::OuterStride<>(10));
  const auto v = ml::as_matrix_view(m);
  static_assert(std::is_same_v<decltype(v), const ml::matrix_view<const float>>);
  CHECK(v.data == buf.data());
  CHECK(v.rows == 4);
  CHECK(v.cols == 7);
  CHECK(v.stride == 10);

  RowF owned(3, 5);
  const auto o = ml::as_matrix_view(owned);
  static_assert(std::is_same_v<decltype(o), const ml::matrix_view<float>>);
  CHECK(o.stride == 5);
  const Eigen::Ref<const RowF> r = owned;
  CHECK(ml::as_matrix_view(r).data == owned.data());
  // A block of rows keeps the parent's row stride.
  RowF big(6, 9);
  const auto b = ml::as_matrix_view(big.block(2, 0, 3, 9));
  CHECK(b.data == big.data() + 18);
  CHECK(b.stride == 9);
  // Elements must be contiguous inside a row.
  const Eigen::Map<const RowF, 0, Eigen::Stride<Eigen::Dynamic, 2>> gappy(
      buf.data(), 2, 4, Eigen::Stride<Eigen::Dynamic, 2>(10, 2));
  CHECK_THROWS_WITH(ml::as_matrix_view(gappy), Catch::Contains("inner stride 2"));

  Eigen::VectorXi ks(3);
  const auto s = ml::as_span(ks);
  static_assert(std::is_same_v<decltype(s), const std::span<int>>);
  CHECK(s.size() == 3);
  CHECK(s.data() == ks.data());
  const Eigen::VectorXi& cks = ks;
  static_assert(std::is_same_v<decltype(ml::as_span(cks)), std::span<const int>>);
}

TEST_CASE("interop: kernels through Eigen give the same bits", "[interop][eigen]") {
  engine rng(22);
  const dense_case d(rng);
  const Eigen::Map<const RowF> w(d.w.data.data(), d.num_q, d.H);
  Eigen::VectorXi ks(d.num_q), ke(d.num_q);
  for (std::int64_t i = 0; i < d.num_q; ++i) ks[i] = d.ks[i], ke[i] = d.ke[i];
  RowF logits(d.num_q, d.N);
  ml::fp8_fp4_mqa_logits(d.q.view(), d.kv.view(), ml::as_matrix_view(w), ml::as_span(ks),
                         ml::as_span(ke), d.N, ml::as_matrix_view(logits));
  CHECK(d.same(ml::as_matrix_view(std::as_const(logits))));

  // Paged: context_lens [B, next_n] and the block table as Eigen matrices.
  const std::int32_t page_kv = 32;
  const auto cache = ref::rand::paged_cache<ml::mxfp8>(rng, 4, page_kv);
  RowI lens(1, 2), table(1, 3);
  lens << 50, 70;
  table << 3, 0, 2;
  const auto q = ref::rand::rows<ml::mxfp8>(rng, 2 * d.H);
  const auto w2 = ref::rand::weights<float>(rng, 2, d.H);
  const auto schedule = ml::get_paged_mqa_logits_metadata(ml::as_matrix_view(lens), page_kv, 2);
  RowF paged_out(2, 96);
  ml::fp8_fp4_paged_mqa_logits(q.view(), cache.view(), w2.view(), ml::as_matrix_view(lens),
                               ml::as_matrix_view(table), schedule, 96,
                               ml::as_matrix_view(paged_out));
  ml::logits_buffer<float> plain(2, 96);
  const ml::matrix_view<const std::int32_t> lv(lens.data(), 1, 2), tv(table.data(), 1, 3);
  ml::fp8_fp4_paged_mqa_logits(q.view(), cache.view(), w2.view(), lv, tv, schedule, 96,
                               plain.view());
  std::int64_t diff = 0;
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 96; ++c) diff += std::memcmp(&paged_out(r, c), &plain(r, c), 4) != 0;
  CHECK(diff == 0);
}

#endif  // MQALOGITS_TEST_EIGEN
