// The view types: their compile-time properties, scale storage as uint8 / int16 / int32, paged
// page/slot addressing with padded strides, logits row strides and alignment, const conversion.
#include <catch2/catch.hpp>

#include <cstdint>
#include <type_traits>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"
#include "support/error_of.hpp"
#include "support/kernel_check.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;

// Views are small values: trivially copyable, passed by value to every thread.
static_assert(std::is_trivially_copyable_v<ml::rows_view<ml::mxfp8>>);
static_assert(std::is_trivially_copyable_v<ml::rows_view<ml::mxfp4>>);
static_assert(std::is_trivially_copyable_v<ml::paged_cache_view<ml::mxfp8>>);
static_assert(std::is_trivially_copyable_v<ml::paged_cache_view<ml::mxfp4>>);
static_assert(std::is_trivially_copyable_v<ml::matrix_view<const float>>);
static_assert(std::is_trivially_copyable_v<ml::matrix_view<ml::bf16>>);
static_assert(std::is_trivially_copyable_v<ml::bf16>);
static_assert(sizeof(ml::rows_view<ml::mxfp8>) <= 2 * sizeof(void*) + 4 * sizeof(std::int64_t));
static_assert(sizeof(ml::matrix_view<float>) == sizeof(void*) + 3 * sizeof(std::int64_t));
static_assert(sizeof(ml::paged_cache_view<ml::mxfp4>) <= sizeof(void*) + 3 * sizeof(std::int64_t));
static_assert(sizeof(ml::bf16) == 2 && alignof(ml::bf16) == 2);
static_assert(ml::paged_cache_view<ml::mxfp8>::token_bytes == 132);
static_assert(ml::paged_cache_view<ml::mxfp4>::token_bytes == 68);
// A mutable view converts to a const one, never the other way.
static_assert(std::is_convertible_v<ml::matrix_view<float>, ml::matrix_view<const float>>);
static_assert(!std::is_convertible_v<ml::matrix_view<const float>, ml::matrix_view<float>>);
static_assert(!std::is_convertible_v<ml::matrix_view<float>, ml::matrix_view<const ml::bf16>>);
// Scale storage types the rows_view accepts.
static_assert(std::is_constructible_v<ml::rows_view<ml::mxfp8>, const void*, const std::uint8_t*,
                                      std::int64_t>);
static_assert(std::is_constructible_v<ml::rows_view<ml::mxfp8>, const void*, const std::int16_t*,
                                      std::int64_t>);
static_assert(std::is_constructible_v<ml::rows_view<ml::mxfp4>, const void*, const std::int32_t*,
                                      std::int64_t>);
static_assert(
    !std::is_constructible_v<ml::rows_view<ml::mxfp8>, const void*, const double*, std::int64_t>);

TEST_CASE("rows_view: default strides and row addressing", "[view]") {
  std::uint8_t data[4 * 200] = {}, scales[4 * 16] = {};
  const ml::rows_view<ml::mxfp8> a(data, scales, 4);
  CHECK(a.data_stride == 128);
  CHECK(a.scale_stride == 4);
  CHECK(a.row(3) == data + 384);
  CHECK(a.scale(3) == scales + 12);
  const ml::rows_view<ml::mxfp4> b(data, scales, 4);
  CHECK(b.data_stride == 64);
  CHECK(b.row(2) == data + 128);
  const ml::rows_view<ml::mxfp4> c(data, scales, 4, 200, 16);
  CHECK(c.row(3) == data + 600);
  CHECK(c.scale(3) == scales + 48);
}

TEMPLATE_TEST_CASE("rows_view: scales as uint8[4], int16[2] and int32[1] give the same logits",
                   "[view]", ml::mxfp8, ml::mxfp4) {
  rnd::engine rng(71);
  const std::int64_t num_q = 2, H = 3, N = 20;
  const auto q = rnd::rows<TestType>(rng, num_q * H);
  const auto kv = rnd::rows<TestType>(rng, N);
  const auto w = rnd::weights<float>(rng, num_q, H);
  // DeepGEMM-Ascend's packed int16 (low byte = even block) and upstream's int32 (byte k = block k),
  // built arithmetically from the byte values, not by copying memory.
  auto pack16 = [](const std::vector<std::uint8_t>& s) {
    std::vector<std::int16_t> v(s.size() / 2);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<std::int16_t>(s[2 * i] | s[2 * i + 1] << 8);
    return v;
  };
  auto pack32 = [](const std::vector<std::uint8_t>& s) {
    std::vector<std::int32_t> v(s.size() / 4);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<std::int32_t>(std::uint32_t{s[4 * i]} | std::uint32_t{s[4 * i + 1]} << 8 |
                                       std::uint32_t{s[4 * i + 2]} << 16 |
                                       std::uint32_t{s[4 * i + 3]} << 24);
    return v;
  };
  const auto q16 = pack16(q.scales), kv16 = pack16(kv.scales);
  const auto q32 = pack32(q.scales), kv32 = pack32(kv.scales);
  const std::vector<std::int32_t> ks = {0, 3}, ke = {20, 15};
  auto run = [&](const ml::rows_view<TestType>& qv, const ml::rows_view<TestType>& kvv) {
    ml::logits_buffer<float> out(num_q, N);
    ml::fp8_fp4_mqa_logits(qv, kvv, w.view(), std::span<const std::int32_t>(ks),
                           std::span<const std::int32_t>(ke), N, out.view());
    return out;
  };
  const auto by8 = run(q.view(), kv.view());
  const auto by16 = run(ml::rows_view<TestType>(q.data.data(), q16.data(), num_q * H),
                        ml::rows_view<TestType>(kv.data.data(), kv16.data(), N));
  const auto by32 = run(ml::rows_view<TestType>(q.data.data(), q32.data(), num_q * H),
                        ml::rows_view<TestType>(kv.data.data(), kv32.data(), N));
  const auto expected = ref::dense(q.view(), kv.view(), w.view(), std::span(ks), std::span(ke), N);
  CHECK(check::against(by8, expected) == "");
  CHECK(check::bitwise_equal(by8, by16));
  CHECK(check::bitwise_equal(by8, by32));
  // The views point at the same block-order bytes.
  const ml::rows_view<TestType> v16(q.data.data(), q16.data(), num_q * H);
  for (std::int64_t r = 0; r < num_q * H; ++r)
    for (int b = 0; b < 4; ++b) CHECK(v16.scale(r)[b] == q.view().scale(r)[b]);
}

TEMPLATE_TEST_CASE("paged_cache_view: page and slot addressing with padded strides", "[view]",
                   ml::mxfp8, ml::mxfp4) {
  const std::int32_t page_kv = GENERATE(32, 64, 128, 256);
  const std::int64_t used = std::int64_t{page_kv} * (TestType::data_bytes + 4);
  const std::int64_t stride =
      GENERATE_COPY(as<std::int64_t>{}, 0, used + 7, (used + 511) / 512 * 512);
  INFO(TestType::name << " page_kv " << page_kv << " stride " << stride);
  std::vector<std::uint8_t> bytes(1);
  const ml::paged_cache_view<TestType> c(bytes.data(), 5, page_kv, stride);
  const std::int64_t s = stride ? stride : used;
  CHECK(c.page_stride == s);
  CHECK(c.num_pages == 5);
  for (std::int64_t p : {0, 1, 4})
    for (std::int64_t slot : {std::int64_t{0}, std::int64_t{1}, std::int64_t{page_kv} - 1}) {
      CHECK(c.page(p) == bytes.data() + p * s);
      CHECK(c.data(p, slot) == bytes.data() + p * s + slot * TestType::data_bytes);
      CHECK(c.scale(p, slot) ==
            bytes.data() + p * s + std::int64_t{page_kv} * TestType::data_bytes + slot * 4);
    }
  // The last scale byte of a page ends exactly at page_kv * token_bytes.
  CHECK(c.scale(0, page_kv - 1) + 4 == bytes.data() + used);
}

TEMPLATE_TEST_CASE("logits_row_stride and logits_buffer alignment", "[view]", ml::bf16, float) {
  const std::int64_t alignment = GENERATE(as<std::int64_t>{}, 512, 1024);
  const std::int64_t cols = GENERATE(as<std::int64_t>{}, 1, 100, 128, 256, 257, 1000, 4096);
  INFO(sizeof(TestType) << "-byte logits, " << cols << " cols, alignment " << alignment);
  const std::int64_t per = alignment / static_cast<std::int64_t>(sizeof(TestType));
  const std::int64_t stride = ml::logits_row_stride<TestType>(cols, alignment);
  CHECK(stride >= cols);
  CHECK(stride % per == 0);
  CHECK(stride < cols + per);
  ml::logits_buffer<TestType> out(3, cols, alignment);
  CHECK(out.stride() == stride);
  CHECK(out.rows() == 3);
  CHECK(out.cols() == cols);
  for (std::int64_t r = 0; r < 3; ++r)
    CHECK(reinterpret_cast<std::uintptr_t>(&out(r, 0)) % static_cast<std::uintptr_t>(alignment) ==
          0);
  const ml::matrix_view<TestType> v = out.view();
  CHECK(v.data == out.data());
  CHECK(v.stride == stride);
  const ml::matrix_view<const TestType> cv = v;  // const conversion keeps every field
  CHECK(cv.data == v.data);
  CHECK(cv.rows == 3);
  CHECK(cv.cols == cols);
  CHECK(cv.stride == stride);
  CHECK(ml::to_float(out(2, cols - 1)) == 0.0f);  // zero-initialised
}

TEST_CASE("logits_row_stride: the default alignment is 512 bytes", "[view]") {
  CHECK(ml::logits_row_stride<ml::bf16>(1) == 256);
  CHECK(ml::logits_row_stride<float>(1) == 128);
  CHECK(ml::logits_row_stride<float>(128) == 128);
  CHECK(ml::logits_row_stride<float>(129) == 256);
  CHECK(ml::logits_row_stride<ml::bf16>(1, 1024) == 512);
  CHECK(ml::logits_buffer<float>(2, 5).stride() == 128);
}

TEST_CASE("matrix_view: default stride, rows and element access", "[view]") {
  float data[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  const ml::matrix_view<float> a(data, 3, 4);
  CHECK(a.stride == 4);
  CHECK(a(2, 1) == 9);
  const ml::matrix_view<float> b(data, 2, 3, 6);
  CHECK(b(1, 2) == 8);
  CHECK(b.row(1) == data + 6);
  CHECK(b.row_span(1).size() == 3);
  CHECK(b.row_span(1)[0] == 6);
}

// The test suite compiles this file with MQALOGITS_ONLY_HEAD_DIM=128 (every file but the head-dim
// tests): a build of one head dim refuses rows of another by name, before touching the output.
#if MQALOGITS_ONLY_HEAD_DIM == 128
TEST_CASE("MQALOGITS_ONLY_HEAD_DIM: rows of another head dim are refused by name", "[view]") {
  STATIC_REQUIRE(ml::only_head_dim == 128);
  STATIC_REQUIRE(ml::has_head_dim<ml::mxfp8>(128));
  STATIC_REQUIRE(!ml::has_head_dim<ml::mxfp8>(64));
  rnd::engine rng(7);
  const auto q = rnd::rows<ml::mxfp8>(rng, 4);
  const auto kv = rnd::rows<ml::mxfp8>(rng, 3);
  const ml::rows_view<ml::mxfp8> q64(q.view().data, q.view().scales, 4, ml::head_dim_t{64});
  const ml::rows_view<ml::mxfp8> kv64(kv.view().data, kv.view().scales, 3, ml::head_dim_t{64});
  const auto w = rnd::weights<float>(rng, 1, 4);
  const std::vector<std::int32_t> ks{0}, ke{3};
  ml::logits_buffer<float> out(1, 3);
  check::fill_sentinel(out);
  const std::string message = check::error_of([&] {
    ml::fp8_fp4_mqa_logits(q64, kv64, w.view(), std::span<const std::int32_t>(ks),
                           std::span<const std::int32_t>(ke), 0, out.view());
  });
  CHECK_THAT(message, Catch::Contains("head_dim = 64") &&
                          Catch::Contains("128 in this build (MQALOGITS_ONLY_HEAD_DIM)"));
  CHECK(check::untouched(out));
}
#endif
