// quantize_rows_into takes a flat span of rows * 128 values, as quantize_rows does: the same bytes
// as the matrix_view form, into the caller's strided buffers, and a named error (buffers
// untouched) when the span is not whole rows.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "support/formats.hpp"

namespace ml = mqalogits;

TEMPLATE_LIST_TEST_CASE("quantize_rows_into: a span gives the matrix_view form's bytes",
                        "[quantize]", check::all_formats) {
  using F = TestType;
  constexpr std::int64_t rows = 5, data_stride = F::data_bytes + 3, scale_stride = 8;
  std::mt19937 rng(77);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(rows * 128);
  for (auto& v : x) v = normal(rng);
  x[7] = 0.0f;

  std::vector<std::uint8_t> data_a(rows * data_stride, 0xEE), scales_a(rows * scale_stride, 0xEE);
  std::vector<std::uint8_t> data_b = data_a, scales_b = scales_a;
  ml::quantize_rows_into<F>(std::span<const float>(x), data_a.data(), scales_a.data(), data_stride,
                            scale_stride);
  ml::quantize_rows_into<F>(ml::matrix_view<const float>(x.data(), rows, 128), data_b.data(),
                            scales_b.data(), data_stride, scale_stride);
  CHECK(data_a == data_b);
  CHECK(scales_a == scales_b);
  // The packed defaults match quantize_rows.
  const auto q = ml::quantize_rows<F>(std::span<const float>(x));
  std::vector<std::uint8_t> data_c(rows * F::data_bytes), scales_c(rows * F::scale_bytes);
  ml::quantize_rows_into<F>(std::span<const float>(x), data_c.data(), scales_c.data());
  CHECK(std::ranges::equal(data_c, q.data));
  CHECK(std::ranges::equal(scales_c, q.scales));
  // Padding between rows is never written.
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = F::data_bytes; i < data_stride; ++i)
      CHECK(data_a[static_cast<std::size_t>(r * data_stride + i)] == 0xEE);

  std::vector<std::uint8_t> before = data_a;
  CHECK_THROWS_WITH(ml::quantize_rows_into<F>(std::span<const float>(x).first(200), data_a.data(),
                                              scales_a.data()),
                    Catch::Contains("quantize_rows") && Catch::Contains("200 elements"));
  CHECK(data_a == before);
}
