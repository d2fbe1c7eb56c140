// Head dims 32, 64 and 128 (32 for the FP8 formats only, as upstream): the format traits of each
// binding, views that carry a run-time head dim, the four kernels and the legacy names against
// the reference on the host (the NeuronCore model's: neuron_head_dim_test.cpp), the fused top-k at
// D = 64, the quantizers, and the named errors for a mismatch between Q and K or an unsupported
// head dim, with the output untouched.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/head_dim_kernels.hpp"
#include "support/kernel_check.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;

// ---- the traits of each binding ----

static_assert(std::is_same_v<ml::mxfp8::with_head_dim<128>, ml::mxfp8>);
static_assert(std::is_same_v<ml::mxfp4::with_head_dim<128>, ml::mxfp4>);
static_assert(std::is_same_v<ml::fp8_per_token::with_head_dim<128>, ml::fp8_per_token>);
static_assert(ml::mxfp8::head_dim == 128 && ml::default_head_dim == 128 && ml::head_dim == 128);
static_assert(ml::mxfp8::with_head_dim<64>::data_bytes == 64);
static_assert(ml::mxfp8::with_head_dim<64>::blocks == 2);
static_assert(ml::mxfp8::with_head_dim<32>::data_bytes == 32);
static_assert(ml::mxfp8::with_head_dim<32>::blocks == 1);
static_assert(ml::mxfp4::with_head_dim<64>::data_bytes == 32);
static_assert(ml::mxfp4::with_head_dim<64>::blocks == 2);
static_assert(ml::fp8_per_token::with_head_dim<32>::scale_block == 32);
static_assert(ml::fp8_per_token::with_head_dim<64>::blocks == 1);
// The scale field stays 4 bytes whatever the head dim.
static_assert(ml::mxfp8::with_head_dim<32>::scale_bytes == 4);
static_assert(ml::mxfp4::with_head_dim<64>::scale_bytes == 4);
static_assert(ml::fp8_per_token::with_head_dim<64>::scale_bytes == 4);
static_assert(ml::mxfp8::supports_head_dim(32) && ml::fp8_per_token::supports_head_dim(32));
static_assert(!ml::mxfp4::supports_head_dim(32) && ml::mxfp4::supports_head_dim(64));
static_assert(!ml::mxfp8::supports_head_dim(96) && !ml::mxfp8::supports_head_dim(256));
static_assert(ml::row_format<ml::mxfp4::with_head_dim<64>>);
static_assert(ml::row_format<ml::fp8_per_token::with_head_dim<32>>);

using namespace head_dims;

TEST_CASE("head dims: MXFP8 kernels at D = 32, 64, 128 against the reference",
          "[head_dim][kernels]") {
  check_every_head_dim<ml::mxfp8, ml::backend::host>();
}
TEST_CASE("head dims: MXFP4 kernels at D = 64, 128 against the reference", "[head_dim][kernels]") {
  check_every_head_dim<ml::mxfp4, ml::backend::host>();
}
TEST_CASE("head dims: FP8 per-token kernels at D = 32, 64, 128 against the reference",
          "[head_dim][kernels]") {
  check_every_head_dim<ml::fp8_per_token, ml::backend::host>();
}

TEST_CASE("head dims: views carry the head dim and default strides follow it", "[head_dim][view]") {
  std::vector<std::uint8_t> bytes(4096);
  const ml::rows_view<ml::mxfp8> a(bytes.data(), bytes.data(), 3);
  CHECK(a.head_dim == 128);
  CHECK(a.data_stride == 128);
  CHECK(a.data_bytes() == 128);
  const ml::rows_view<ml::mxfp8> b(bytes.data(), bytes.data(), 3, ml::head_dim_t{32});
  CHECK(b.head_dim == 32);
  CHECK(b.data_stride == 32);
  CHECK(b.scale_stride == 4);
  const ml::rows_view<ml::mxfp4> c(bytes.data(), bytes.data(), 3, ml::head_dim_t{64}, 40, 8);
  CHECK(c.data_bytes() == 32);
  CHECK(c.data_stride == 40);
  CHECK(c.scale_stride == 8);
  const ml::rows_view<ml::fp8_per_token> d(bytes.data(), nullptr, 3, ml::head_dim_t{64});
  CHECK(d.data_stride == 64);
  CHECK(d.scales == nullptr);
  const ml::rows_view<ml::mxfp8::with_head_dim<64>> e(bytes.data(), bytes.data(), 3);
  CHECK(e.head_dim == 64);
  CHECK(e.data_stride == 64);

  const ml::paged_cache_view<ml::mxfp8> p(bytes.data(), 2, 16, ml::head_dim_t{64});
  CHECK(p.head_dim == 64);
  CHECK(p.bytes_per_token() == 68);
  CHECK(p.page_stride == 16 * 68);
  CHECK(p.scale(1, 3) == bytes.data() + 16 * 68 + 16 * 64 + 3 * 4);
  CHECK(p.data(1, 3) == bytes.data() + 16 * 68 + 3 * 64);
  const ml::paged_cache_view<ml::mxfp4> p4(bytes.data(), 2, 8, ml::head_dim_t{64}, 512);
  CHECK(p4.bytes_per_token() == 36);
  CHECK(p4.page_stride == 512);
  CHECK(ml::page_bytes<ml::mxfp8>(16, ml::head_dim_t{32}) == 16 * 36);
  CHECK(ml::aligned_page_stride<ml::mxfp8>(16, ml::head_dim_t{32}) == 1024);
  CHECK(ml::aligned_page_stride<ml::mxfp8>(64) == 64 * 132 / 512 * 512 + 512);
}

TEST_CASE("head dims: the fused top-k at D = 64 picks the kernel's own top logits",
          "[head_dim][topk]") {
  using F = ml::mxfp8;
  using G = F::with_head_dim<64>;
  std::mt19937_64 rng(77);
  const std::int64_t H = 16, B = 4, pages = 12, max_blocks = 6, k = 7;
  const std::int32_t page_kv = 16;
  const std::int64_t max_len = max_blocks * page_kv;
  const auto cache = rnd::paged_cache<G>(rng, pages, page_kv);
  const auto lens = rnd::context_lens(rng, B, 1, max_len, 3);
  const auto table = rnd::block_table(rng, lens, max_blocks, page_kv, pages);
  const auto q = rnd::rows<G>(rng, B * H);
  const auto w = rnd::weights<float>(rng, B, H);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 2);
  const auto expected =
      ref::paged(as_rows<F>(q), as_cache<F>(cache), w.view(), lens.view(), table.view(), max_len);
  ml::logits_buffer<float> full(B, max_len);
  ml::fp8_fp4_paged_mqa_logits(as_rows<F>(q), as_cache<F>(cache), w.view(), lens.view(),
                               table.view(), schedule, max_len, full.view());
  REQUIRE(check::against(full, expected) == "");
  std::vector<std::int32_t> idx(static_cast<std::size_t>(B * k));
  std::vector<float> val(idx.size());
  ml::fp8_fp4_paged_mqa_logits(as_rows<F>(q), as_cache<F>(cache), w.view(), lens.view(),
                               table.view(), schedule, max_len,
                               ml::topk(ml::matrix_view<std::int32_t>(idx.data(), B, k),
                                        ml::matrix_view<float>(val.data(), B, k)));
  for (std::int64_t r = 0; r < B; ++r) {
    std::vector<float> row;
    for (std::int64_t c = 0; c < std::min<std::int64_t>(lens(r, 0), max_len); ++c)
      row.push_back(full(r, c));
    std::sort(row.begin(), row.end(), std::greater<>());
    INFO("row " << r << ", context " << lens(r, 0));
    for (std::int64_t i = 0; i < k; ++i) {
      const auto at = static_cast<std::size_t>(r * k + i);
      if (i >= static_cast<std::int64_t>(row.size())) {
        CHECK(idx[at] == -1);
        continue;
      }
      CHECK(val[at] == row[static_cast<std::size_t>(i)]);
      REQUIRE(idx[at] >= 0);
      REQUIRE(idx[at] < lens(r, 0));
      CHECK(full(r, idx[at]) == val[at]);
    }
  }
}

TEST_CASE("head dims: the legacy FP8 names take D = 64 and 32", "[head_dim][legacy]") {
  using F = ml::fp8_per_token;
  std::mt19937_64 rng(5);
  for (int d : {32, 64}) {
    INFO("D = " << d);
    const std::int64_t H = 4, num_q = 3, N = 40;
    auto run = [&]<class G>() {
      const auto q = rnd::rows<G>(rng, num_q * H);
      const auto kv = rnd::rows<G>(rng, N);
      const auto w = rnd::weights<float>(rng, num_q, H);
      const std::vector<std::int32_t> ks(num_q, 0), ke(num_q, static_cast<std::int32_t>(N));
      const ml::rows_view<F> bare_q(q.data.data(), nullptr, q.n, ml::head_dim_t{d});
      const auto expected =
          ref::dense(bare_q, as_rows<F>(kv), w.view(), std::span(ks), std::span(ke), 0);
      ml::logits_buffer<float> out(num_q, N);
      ml::fp8_mqa_logits(bare_q, as_rows<F>(kv), w.view(), ks, ke, true, 0, out.view());
      CHECK(check::against(out, expected) == "");
    };
    if (d == 32)
      run.template operator()<F::with_head_dim<32>>();
    else
      run.template operator()<F::with_head_dim<64>>();
  }
}

TEST_CASE("head dims: a mismatch between Q and K, or an unsupported head dim, is a named error",
          "[head_dim][errors]") {
  using F = ml::mxfp8;
  std::mt19937_64 rng(9);
  const std::int64_t H = 4, num_q = 2, N = 32;
  const auto q128 = rnd::rows<F>(rng, num_q * H);
  const auto kv128 = rnd::rows<F>(rng, N);
  const auto w = rnd::weights<float>(rng, num_q, H);
  const std::vector<std::int32_t> ks(num_q, 0), ke(num_q, static_cast<std::int32_t>(N));
  // The 128-byte rows read as rows of 64 (strides 128): valid views of another head dim.
  const ml::rows_view<F> q64(q128.data.data(), q128.scales.data(), q128.n, ml::head_dim_t{64}, 128);
  const ml::rows_view<F> kv64(kv128.data.data(), kv128.scales.data(), N, ml::head_dim_t{64}, 128);
  const ml::rows_view<F> q96(q128.data.data(), q128.scales.data(), q128.n, ml::head_dim_t{96}, 128);
  ml::logits_buffer<float> out(num_q, N);

  check::fill_sentinel(out);
  CHECK_THROWS_WITH(ml::fp8_fp4_mqa_logits(q64, kv128.view(), w.view(), ks, ke, 0, out.view()),
                    Catch::Contains("fp8_fp4_mqa_logits") &&
                        Catch::Contains("kv head_dim = 128 differs from q head_dim = 64"));
  CHECK(check::untouched(out));
  CHECK_THROWS_WITH(ml::fp8_fp4_mqa_logits(q96, kv64, w.view(), ks, ke, 0, out.view()),
                    Catch::Contains("q head_dim = 96 is not supported by MXFP8 (128, 64 or 32)"));
  CHECK(check::untouched(out));
  CHECK_THROWS_WITH(ml::fp8_fp4_mqa_logits(q96, q96, w.view(), ks, ke, 0, out.view()),
                    Catch::Contains("head_dim = 96 is not supported"));
  CHECK(check::untouched(out));

  // MXFP4 has no head dim 32.
  {
    const auto q4 = rnd::rows<ml::mxfp4>(rng, num_q * H);
    const auto k4 = rnd::rows<ml::mxfp4>(rng, N);
    const ml::rows_view<ml::mxfp4> q32(q4.data.data(), q4.scales.data(), q4.n, ml::head_dim_t{32},
                                       64);
    const ml::rows_view<ml::mxfp4> k32(k4.data.data(), k4.scales.data(), N, ml::head_dim_t{32}, 64);
    CHECK_THROWS_WITH(ml::fp8_fp4_mqa_logits(q32, k32, w.view(), ks, ke, 0, out.view()),
                      Catch::Contains("head_dim = 32 is not supported by MXFP4 (128 or 64)"));
    CHECK(check::untouched(out));
  }

  // Sparse: K of another head dim.
  {
    const auto idx = rnd::sparse_indices(rng, num_q, 2, N / 8);
    const auto meta = ml::get_sparse_mqa_logits_metadata(
        std::span<const std::int32_t>(ks), std::span<const std::int32_t>(ke), N, idx.view(), 8);
    ml::logits_buffer<float> sout(num_q, 16);
    check::fill_sentinel(sout);
    CHECK_THROWS_WITH(ml::fp8_fp4_sparse_mqa_logits(q128.view(), kv64, w.view(), meta, sout.view()),
                      Catch::Contains("fp8_fp4_sparse_mqa_logits") &&
                          Catch::Contains("kv head_dim = 64 differs from q head_dim = 128"));
    CHECK(check::untouched(sout));
    CHECK_THROWS_WITH(ml::fp8_fp4_sparse_mqa_logits(q96, kv64, w.view(), meta, sout.view()),
                      Catch::Contains("head_dim = 96 is not supported"));
    CHECK(check::untouched(sout));
  }

  // Paged and paged sparse: a cache of another head dim, or an unsupported one.
  {
    const std::int32_t page_kv = 16;
    const auto cache = rnd::paged_cache<F>(rng, 4, page_kv);
    const ml::paged_cache_view<F> cache64(cache.bytes.data(), 4, page_kv, ml::head_dim_t{64},
                                          cache.page_stride);
    const ml::paged_cache_view<F> cache96(cache.bytes.data(), 4, page_kv, ml::head_dim_t{96},
                                          cache.page_stride);
    const auto lens = rnd::context_lens(rng, num_q, 1, 40, 1);
    const auto table = rnd::block_table(rng, lens, 4, page_kv, 4);
    const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 1);
    ml::logits_buffer<float> pout(num_q, 64);
    check::fill_sentinel(pout);
    CHECK_THROWS_WITH(ml::fp8_fp4_paged_mqa_logits(q128.view(), cache64, w.view(), lens.view(),
                                                   table.view(), schedule, 64, pout.view()),
                      Catch::Contains("fp8_fp4_paged_mqa_logits") &&
                          Catch::Contains("cache head_dim = 64 differs from q head_dim = 128"));
    CHECK(check::untouched(pout));
    CHECK_THROWS_WITH(ml::fp8_fp4_paged_mqa_logits(q128.view(), cache96, w.view(), lens.view(),
                                                   table.view(), schedule, 64, pout.view()),
                      Catch::Contains("cache head_dim = 96 is not supported by MXFP8"));
    CHECK(check::untouched(pout));
    // The top-k output: the same checks before anything is written.
    std::vector<std::int32_t> idx(static_cast<std::size_t>(num_q * 3), 12345);
    CHECK_THROWS_WITH(ml::fp8_fp4_paged_mqa_logits(
                          q128.view(), cache64, w.view(), lens.view(), table.view(), schedule, 64,
                          ml::topk(ml::matrix_view<std::int32_t>(idx.data(), num_q, 3))),
                      Catch::Contains("cache head_dim = 64 differs from q head_dim = 128"));
    CHECK(std::all_of(idx.begin(), idx.end(), [](std::int32_t v) { return v == 12345; }));

    const std::vector<std::int32_t> plens(lens.data.begin(), lens.data.end());
    const auto sidx = rnd::sparse_indices(rng, num_q, 2, 4);
    for (const auto protocol :
         {ml::paged_sparse_protocol::reread, ml::paged_sparse_protocol::snapshot}) {
      const auto meta = ml::get_paged_sparse_mqa_logits_metadata(
          std::span<const std::int32_t>(plens), table.view(), page_kv, sidx.view(), 8, protocol);
      ml::logits_buffer<float> sout(num_q, 16);
      check::fill_sentinel(sout);
      CHECK_THROWS_WITH(
          ml::fp8_fp4_paged_sparse_mqa_logits(q128.view(), cache64, w.view(), meta, sout.view()),
          Catch::Contains("fp8_fp4_paged_sparse_mqa_logits") &&
              Catch::Contains("cache head_dim = 64 differs from q head_dim = 128"));
      CHECK(check::untouched(sout));
      CHECK(!meta.has_snapshot());
      // A snapshot taken at one head dim is not read at another.
      if (protocol == ml::paged_sparse_protocol::snapshot) {
        ml::fp8_fp4_paged_sparse_mqa_logits(q64, cache64, w.view(), meta, sout.view());
        check::fill_sentinel(sout);
        CHECK_THROWS_WITH(ml::fp8_fp4_paged_sparse_mqa_logits(q128.view(), cache.view(), w.view(),
                                                              meta, sout.view()),
                          Catch::Contains("snapshot of head_dim 64"));
        CHECK(check::untouched(sout));
      }
    }
  }

  // The legacy names check the same.
  {
    const auto qf = rnd::rows<ml::fp8_per_token>(rng, num_q * H);
    const auto kf = rnd::rows<ml::fp8_per_token>(rng, N);
    const ml::rows_view<ml::fp8_per_token> bare64(qf.data.data(), nullptr, qf.n, ml::head_dim_t{64},
                                                  128);
    ml::logits_buffer<float> lout(num_q, N);
    check::fill_sentinel(lout);
    CHECK_THROWS_WITH(ml::fp8_mqa_logits(bare64, kf.view(), w.view(), ks, ke, true, 0, lout.view()),
                      Catch::Contains("kv head_dim = 128 differs from q head_dim = 64"));
    CHECK(check::untouched(lout));
  }
}

TEST_CASE("head dims: the quantizers write rows of the source's column count",
          "[head_dim][quantize]") {
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const std::int64_t n = 9;
  auto check_d = [&]<class F, int D>() {
    using G = typename F::template with_head_dim<D>;
    INFO(F::name << " D = " << D);
    std::vector<float> x(static_cast<std::size_t>(n * D));
    for (auto& v : x) v = normal(rng);
    const auto rows = ml::quantize_rows<F>(ml::matrix_view<const float>(x.data(), n, D));
    CHECK(rows.head_dim == D);
    REQUIRE(rows.data.size() == static_cast<std::size_t>(n * G::data_bytes));
    const auto view = rows.view();
    CHECK(view.head_dim == D);
    CHECK(view.data_stride == G::data_bytes);
    // Row by row, the rebound format's own quantize_row writes the same bytes.
    for (std::int64_t r = 0; r < n; ++r) {
      std::vector<std::uint8_t> data(G::data_bytes), scales(4, 0);
      ml::quantize_row<G>(x.data() + r * D, data.data(), scales.data());
      CHECK(std::memcmp(data.data(), view.row(r), G::data_bytes) == 0);
      const std::size_t scale_used = G::power_of_two_scales ? G::blocks : 4;  // fp32: 4 bytes
      CHECK(std::memcmp(scales.data(), view.scale(r), scale_used) == 0);
      // The decoded row is close to the input (a quantizer, not a copy).
      const auto decoded = ref::row<F>(view.row(r), view.scale(r), D);
      REQUIRE(decoded.size() == static_cast<std::size_t>(D));
      double err = 0, mag = 0;
      for (int i = 0; i < D; ++i) {
        err = std::max(err, std::fabs(decoded[i] - x[r * D + i]));
        mag = std::max(mag, std::fabs(static_cast<double>(x[r * D + i])));
      }
      CHECK(err <= 0.5 * mag);
    }
    // Into pages of the same head dim: each token's bytes at its slot.
    const std::int32_t page_kv = 4;
    std::vector<std::uint8_t> pages(
        static_cast<std::size_t>(3 * ml::page_bytes<F>(page_kv, ml::head_dim_t{D})), 0);
    const ml::mutable_paged_cache<F> cache(pages.data(), 3, page_kv, ml::head_dim_t{D});
    std::vector<std::int64_t> slots(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) slots[i] = (i * 5) % 12;
    slots[2] = -1;
    ml::store_into_pages(ml::matrix_view<const float>(x.data(), n, D), std::span(slots), cache);
    const auto cv = cache.view();
    CHECK(cv.head_dim == D);
    for (std::int64_t i = 0; i < n; ++i) {
      if (slots[i] < 0) continue;
      const std::int64_t p = slots[i] / page_kv, s = slots[i] % page_kv;
      CHECK(std::memcmp(cv.data(p, s), view.row(i), G::data_bytes) == 0);
      CHECK(std::memcmp(cv.scale(p, s), view.scale(i), 4) == 0);
    }
    // Already-quantised rows copy the same bytes.
    std::vector<std::uint8_t> pages2(pages.size(), 0);
    const ml::mutable_paged_cache<F> cache2(pages2.data(), 3, page_kv, ml::head_dim_t{D});
    ml::store_into_pages(view, std::span(slots), cache2);
    CHECK(pages2 == pages);
    // A source of another column count than the cache's head dim is rejected, nothing written.
    std::vector<float> wide(static_cast<std::size_t>(n * 128), 1.0f);
    std::vector<std::uint8_t> before = pages;
    CHECK_THROWS_WITH(ml::store_into_pages(ml::matrix_view<const float>(wide.data(), n, 128),
                                           std::span(slots), cache),
                      Catch::Contains("must be [tokens, " + std::to_string(D) + "]"));
    CHECK(pages == before);
  };
  check_d.template operator()<ml::mxfp8, 32>();
  check_d.template operator()<ml::mxfp8, 64>();
  check_d.template operator()<ml::mxfp4, 64>();
  check_d.template operator()<ml::fp8_per_token, 32>();
  check_d.template operator()<ml::fp8_per_token, 64>();

  std::vector<float> x(4 * 96, 1.0f);
  CHECK_THROWS_WITH(ml::quantize_rows<ml::mxfp8>(ml::matrix_view<const float>(x.data(), 4, 96)),
                    Catch::Contains("head_dim 128, 64 or 32"));
  CHECK_THROWS_WITH(ml::quantize_rows<ml::mxfp4>(ml::matrix_view<const float>(x.data(), 4, 32)),
                    Catch::Contains("head_dim 128 or 64 for MXFP4"));
  // The flat-span form reads rows of the binding's head dim.
  const auto flat = ml::quantize_rows<ml::mxfp8::with_head_dim<32>>(std::span<const float>(x));
  CHECK(flat.rows == 12);
  CHECK(flat.head_dim == 32);
}
