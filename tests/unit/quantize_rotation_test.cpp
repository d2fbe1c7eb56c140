// The Walsh-Hadamard rotation of the quantisers (row_rotation::hadamard, DeepSeek-V4's indexer Q
// and K). The transform is checked against a plain O(D^2) product with H's entries from
// (-1)^popcount(i & j), written here; each rotating quantiser against "rotate, then the same
// quantiser with the rotation off", byte for byte. Rows of small integers times one power of two
// have sums exact in fp32, so there the O(D^2) reference is the rotation to the last bit; on
// arbitrary floats the sums round in another order, and the quantisers are compared against the
// library's own transform (and the transform against the reference within a few ulps).
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <mqalogits/quantize.hpp>

#include "support/error_of.hpp"

namespace ml = mqalogits;

namespace {

using ml::row_rotation;

// y = H_d x / sqrt(d): each sum in double (exact for the integer rows below), rounded to fp32,
// then one fp32 multiply by fp32(d^-0.5).
std::vector<float> reference_rotation(const float* x, int d) {
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  std::vector<float> y(static_cast<std::size_t>(d));
  for (int i = 0; i < d; ++i) {
    double sum = 0;
    for (int j = 0; j < d; ++j)
      sum += (std::popcount(static_cast<unsigned>(i & j)) % 2 ? -1.0 : 1.0) * double{x[j]};
    y[static_cast<std::size_t>(i)] = static_cast<float>(sum) * scale;
  }
  return y;
}

// Rows whose rotation is exact before the scale: integers of up to 8 bits (exact in bf16 too)
// times one power of two per row, including all-zero rows, a lone outlier, and magnitudes near
// 2^100 and 2^-100.
std::vector<float> exact_rows(std::mt19937& rng, int rows, int d) {
  std::vector<float> x;
  std::uniform_int_distribution<int> small(-255, 255), exponent(-30, 30), kind(0, 5);
  for (int r = 0; r < rows; ++r) {
    const int k = r < 6 ? r : kind(rng);
    const int e = k == 3 ? 100 : k == 4 ? -100 : exponent(rng);
    for (int i = 0; i < d; ++i) {
      float v = static_cast<float>(small(rng));
      if (k == 0) v = 0;                       // all zeros
      if (k == 1) v = i == 5 ? 255.0f : 1.0f;  // one outlier
      if (k == 2 && i % 3) v = 0;              // sparse
      x.push_back(std::ldexp(v, e));
    }
  }
  return x;
}

std::vector<float> random_rows(std::mt19937& rng, int rows, int d) {
  std::vector<float> x;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  for (int r = 0; r < rows; ++r) {
    const float row_scale = std::ldexp(1.0f, exponent(rng));
    for (int i = 0; i < d; ++i) x.push_back(normal(rng) * row_scale * (i == 17 ? 40.0f : 1.0f));
  }
  return x;
}

std::vector<ml::bf16> to_bf16(const std::vector<float>& x) {
  std::vector<ml::bf16> b;
  for (float v : x) b.push_back(ml::bf16::from_float(v));
  return b;
}
std::vector<float> to_fp32(const std::vector<ml::bf16>& x) {
  std::vector<float> f;
  for (ml::bf16 v : x) f.push_back(v.to_float());
  return f;
}

// Every row of x rotated, by the reference or by the library's transform.
std::vector<float> rotate_rows(const std::vector<float>& x, int d, bool reference) {
  std::vector<float> y(x);
  for (std::size_t r = 0; r < x.size() / static_cast<std::size_t>(d); ++r) {
    float* row = &y[r * static_cast<std::size_t>(d)];
    if (reference) {
      const std::vector<float> ref = reference_rotation(row, d);
      std::memcpy(row, ref.data(), ref.size() * sizeof(float));
    } else {
      ml::hadamard_rotate(row, d);
    }
  }
  return y;
}

// quantise(rows, rotation) -> every byte the quantiser writes. With the rotation on, fp32 and
// bf16 rows must write what the quantiser writes, rotation off, for the rows rotated first: by
// the O(D^2) reference on exact rows, by hadamard_rotate on arbitrary ones. Off must equal the
// call that leaves the argument out (`plain`).
template <class Quantise, class Plain>
void check_quantiser(int d, Quantise&& quantise, Plain&& plain) {
  std::mt19937 rng(static_cast<std::uint32_t>(d * 31 + 5));
  const int rows = 40;
  SECTION("exact rows against the O(D^2) product") {
    const std::vector<float> x = exact_rows(rng, rows, d);
    const std::vector<float> want_input = rotate_rows(x, d, true);
    CHECK(quantise(x, row_rotation::hadamard) == quantise(want_input, row_rotation::none));
    const std::vector<ml::bf16> xb = to_bf16(x);
    REQUIRE(to_fp32(xb) == x);  // 8-bit integers: exact in bf16
    CHECK(quantise(xb, row_rotation::hadamard) == quantise(want_input, row_rotation::none));
  }
  SECTION("arbitrary rows against the library's transform") {
    const std::vector<float> x = random_rows(rng, rows, d);
    CHECK(quantise(x, row_rotation::hadamard) ==
          quantise(rotate_rows(x, d, false), row_rotation::none));
    const std::vector<ml::bf16> xb = to_bf16(x);
    CHECK(quantise(xb, row_rotation::hadamard) ==
          quantise(rotate_rows(to_fp32(xb), d, false), row_rotation::none));
  }
  SECTION("off is the call without the option") {
    const std::vector<float> x = random_rows(rng, rows, d);
    CHECK(quantise(x, row_rotation::none) == plain(x));
    const std::vector<ml::bf16> xb = to_bf16(x);
    CHECK(quantise(xb, row_rotation::none) == plain(xb));
    CHECK(quantise(x, row_rotation::hadamard) != plain(x));
  }
}

template <class T>
ml::matrix_view<const T> rows_of(const std::vector<T>& x, int d) {
  return ml::matrix_view<const T>(x.data(), static_cast<std::int64_t>(x.size()) / d, d);
}

std::vector<std::uint8_t> bytes_of(const std::vector<float>& v) {
  std::vector<std::uint8_t> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace

TEST_CASE("hadamard_rotate: the O(D^2) product on exact rows, every power of two to 128",
          "[quantize][rotation]") {
  std::mt19937 rng(3);
  const auto check_dim = [&]<int D>() {
    INFO("D = " << D);
    const std::vector<float> x = exact_rows(rng, 12, D);
    for (std::size_t r = 0; r < 12; ++r) {
      std::vector<float> y(x.begin() + static_cast<std::ptrdiff_t>(r * D),
                           x.begin() + static_cast<std::ptrdiff_t>((r + 1) * D));
      const std::vector<float> want = reference_rotation(y.data(), D);
      ml::hadamard_rotate<D>(y.data());
      CHECK(bytes_of(y) == bytes_of(want));
    }
  };
  check_dim.operator()<2>();
  check_dim.operator()<4>();
  check_dim.operator()<8>();
  check_dim.operator()<16>();
  check_dim.operator()<32>();
  check_dim.operator()<64>();
  check_dim.operator()<128>();
  // Sylvester order: row 1 of H alternates signs, the last row of H_4 is (1, -1, -1, 1).
  float e1[4] = {0, 1, 0, 0}, e3[4] = {0, 0, 0, 1};
  ml::hadamard_rotate<4>(e1);
  ml::hadamard_rotate<4>(e3);
  CHECK(std::vector<float>(e1, e1 + 4) == std::vector<float>{0.5f, -0.5f, 0.5f, -0.5f});
  CHECK(std::vector<float>(e3, e3 + 4) == std::vector<float>{0.5f, -0.5f, -0.5f, 0.5f});
}

TEST_CASE("hadamard_rotate: arbitrary rows within a few ulps, orthonormal, every input type",
          "[quantize][rotation]") {
  std::mt19937 rng(9);
  for (int d : {128, 64, 32}) {
    INFO("d = " << d);
    const std::vector<float> x = random_rows(rng, 20, d);
    for (std::size_t r = 0; r < 20; ++r) {
      const float* row = &x[r * static_cast<std::size_t>(d)];
      std::vector<float> y(row, row + d);
      ml::hadamard_rotate(y.data(), d);
      const std::vector<float> want = reference_rotation(row, d);
      double norm_in = 0, norm_out = 0, magnitude = 0;
      for (int i = 0; i < d; ++i) magnitude += std::fabs(double{row[i]});
      for (int i = 0; i < d; ++i) {
        // log2(d) roundings of partial sums bounded by the row's l1 norm, then the scale.
        CHECK(
            std::fabs(double{y[static_cast<std::size_t>(i)]} - want[static_cast<std::size_t>(i)]) <=
            8 * 0x1p-24 * magnitude / std::sqrt(static_cast<double>(d)) * 2);
        norm_in += double{row[i]} * row[i];
        norm_out += double{y[static_cast<std::size_t>(i)]} * y[static_cast<std::size_t>(i)];
      }
      CHECK(norm_out == Approx(norm_in).epsilon(1e-5));
      // H / sqrt(d) is its own inverse.
      ml::hadamard_rotate(y.data(), d);
      for (int i = 0; i < d; ++i)
        CHECK(y[static_cast<std::size_t>(i)] == Approx(row[i]).margin(1e-5 * magnitude / d));
      // The loaders: fp32, bf16 and fp16 rows read, widened and rotated in one call.
      std::vector<float> got(static_cast<std::size_t>(d)), widened(row, row + d);
      ml::load_hadamard_rotated(row, d, got.data());
      ml::hadamard_rotate(widened.data(), d);
      CHECK(bytes_of(got) == bytes_of(widened));
      std::vector<ml::bf16> b;
      std::vector<ml::fp16> h;
      std::uniform_int_distribution<int> bits(0, 0x7BFF);  // finite fp16 magnitudes
      for (int i = 0; i < d; ++i) {
        b.push_back(ml::bf16::from_float(row[i]));
        h.push_back(
            ml::fp16::from_bits(static_cast<std::uint16_t>(bits(rng) | (i % 2 ? 0x8000 : 0))));
      }
      for (int i = 0; i < d; ++i)
        widened[static_cast<std::size_t>(i)] = b[static_cast<std::size_t>(i)].to_float();
      ml::hadamard_rotate(widened.data(), d);
      ml::load_hadamard_rotated(b.data(), d, got.data());
      CHECK(bytes_of(got) == bytes_of(widened));
      for (int i = 0; i < d; ++i)
        widened[static_cast<std::size_t>(i)] = h[static_cast<std::size_t>(i)].to_float();
      ml::hadamard_rotate(widened.data(), d);
      ml::load_hadamard_rotated(h.data(), d, got.data());
      CHECK(bytes_of(got) == bytes_of(widened));
    }
  }
  float row[48] = {};
  CHECK_THAT(check::error_of([&] { ml::hadamard_rotate(row, 48); }),
             Catch::Contains("hadamard_rotate") && Catch::Contains("rows of 48 elements"));
}

TEST_CASE("quantize_q_fold_weights: row_rotation::hadamard in q_fold_scaling",
          "[quantize][rotation]") {
  const int d = 128, heads = 4;
  for (const ml::q_fold_scaling base : {ml::vllm_v4_q_scaling(), ml::vllm_v32_q_scaling()}) {
    INFO("amax_floor " << base.amax_floor);
    const auto run = [&]<class T>(const std::vector<T>& q, row_rotation rotation,
                                  bool leave_out = false) {
      const auto qv = rows_of(q, d);
      const std::int64_t tokens = qv.rows / heads;
      std::vector<float> w, wo(static_cast<std::size_t>(qv.rows));
      for (std::int64_t i = 0; i < qv.rows; ++i)
        w.push_back(0.25f * static_cast<float>(i % 7) - 0.5f);
      std::vector<std::uint8_t> codes(static_cast<std::size_t>(qv.rows * d));
      ml::q_fold_scaling s = base;
      if (!leave_out) s.rotation = rotation;
      // DeepSeek-V4: softmax_scale 128^-0.5, head_scale H^-0.5.
      ml::quantize_q_fold_weights(qv, ml::matrix_view<const float>(w.data(), tokens, heads),
                                  codes.data(), 0, ml::matrix_view<float>(wo.data(), tokens, heads),
                                  static_cast<float>(std::pow(128.0, -0.5)), 0.125f, s);
      const std::vector<std::uint8_t> wb = bytes_of(wo);
      codes.insert(codes.end(), wb.begin(), wb.end());
      return codes;
    };
    check_quantiser(d, run, [&](const auto& q) { return run(q, row_rotation::none, true); });
  }
}

TEST_CASE("quantize_q_mxfp4_scale_weights: row_rotation::hadamard", "[quantize][rotation]") {
  const int d = 128, heads = 4;
  const auto run = [&]<class T>(const std::vector<T>& q, bool leave_out, row_rotation rotation) {
    const auto qv = rows_of(q, d);
    const std::int64_t tokens = qv.rows / heads;
    std::vector<float> w(static_cast<std::size_t>(qv.rows), 0.75f),
        wo(static_cast<std::size_t>(qv.rows));
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(qv.rows * (d / 2 + 4)));
    std::uint8_t* scales = codes.data() + qv.rows * d / 2;
    const ml::matrix_view<const float> wv(w.data(), tokens, heads);
    const ml::matrix_view<float> wov(wo.data(), tokens, heads);
    if (leave_out)
      ml::quantize_q_mxfp4_scale_weights(qv, wv, codes.data(), 0, scales, 4, wov, 0.5f, 0.25f);
    else
      ml::quantize_q_mxfp4_scale_weights(qv, wv, codes.data(), 0, scales, 4, wov, 0.5f, 0.25f,
                                         rotation);
    return codes;
  };
  check_quantiser(
      d, [&](const auto& q, row_rotation r) { return run(q, false, r); },
      [&](const auto& q) { return run(q, true, row_rotation::none); });
}

TEST_CASE("store_into_pages: fp8_per_token K cache insert with row_rotation::hadamard",
          "[quantize][rotation]") {
  const int d = 128, page_kv = 16;
  for (const bool ue8m0 : {false, true}) {
    INFO("ue8m0 " << ue8m0);
    const auto run = [&]<class T>(const std::vector<T>& k, bool leave_out, row_rotation rotation) {
      const auto kv = rows_of(k, d);
      const int pages = static_cast<int>(kv.rows) / page_kv + 2;
      std::vector<std::uint8_t> cache(
          static_cast<std::size_t>(pages * ml::page_bytes<ml::fp8_per_token>(page_kv)), 0xCD);
      std::vector<std::int64_t> slots;
      for (std::int64_t i = 0; i < kv.rows; ++i)
        slots.push_back(i % 5 == 4 ? -1 : (i * 7 + 2) % (pages * page_kv));
      const ml::mutable_paged_cache<ml::fp8_per_token> c(cache.data(), pages, page_kv);
      if (leave_out)
        ml::store_into_pages(kv, std::span<const std::int64_t>(slots), c,
                             ml::vllm_indexer_k_scaling(ue8m0));
      else
        ml::store_into_pages(kv, std::span<const std::int64_t>(slots), c,
                             ml::vllm_indexer_k_scaling(ue8m0), rotation);
      return cache;
    };
    check_quantiser(
        d, [&](const auto& k, row_rotation r) { return run(k, false, r); },
        [&](const auto& k) { return run(k, true, row_rotation::none); });
  }
}

TEST_CASE("store_into_pages_vllm_mxfp4: the MXFP4 K cache insert with row_rotation::hadamard",
          "[quantize][rotation]") {
  const int d = 128, page_kv = 8;
  const auto run = [&]<class T>(const std::vector<T>& k, bool leave_out, row_rotation rotation) {
    const auto kv = rows_of(k, d);
    const int pages = static_cast<int>(kv.rows) / page_kv + 1;
    std::vector<std::uint8_t> cache(
        static_cast<std::size_t>(pages * ml::page_bytes<ml::mxfp4>(page_kv)), 0xCD);
    std::vector<std::int32_t> slots;
    for (std::int64_t i = 0; i < kv.rows; ++i)
      slots.push_back(static_cast<std::int32_t>(i % 6 == 1 ? -1 : (i * 3 + 1) % (pages * page_kv)));
    const ml::mutable_paged_cache<ml::mxfp4> c(cache.data(), pages, page_kv);
    if (leave_out)
      ml::store_into_pages_vllm_mxfp4(kv, std::span<const std::int32_t>(slots), c);
    else
      ml::store_into_pages_vllm_mxfp4(kv, std::span<const std::int32_t>(slots), c, rotation);
    return cache;
  };
  check_quantiser(
      d, [&](const auto& k, row_rotation r) { return run(k, false, r); },
      [&](const auto& k) { return run(k, true, row_rotation::none); });
}

TEMPLATE_TEST_CASE("quantize_rows: row_rotation::hadamard", "[quantize][rotation]",
                   ml::fp8_per_token, ml::mxfp8, ml::mxfp4) {
  const int d = 128;
  const auto run = [&]<class T>(const std::vector<T>& x, bool leave_out, row_rotation rotation) {
    const auto xv = rows_of(x, d);
    const ml::quantized_rows<TestType> q =
        leave_out ? ml::quantize_rows<TestType>(xv)
                  : ml::quantize_rows<TestType>(xv, ml::per_token_scaling{}, rotation);
    std::vector<std::uint8_t> bytes(q.data.begin(), q.data.end());
    bytes.insert(bytes.end(), q.scales.begin(), q.scales.end());
    // quantize_rows_into with strides, and the flat-span overload, write the same bytes.
    std::vector<std::uint8_t> data(static_cast<std::size_t>(xv.rows * 144), 0),
        scales(static_cast<std::size_t>(xv.rows * 8), 0);
    ml::quantize_rows_into<TestType>(xv, data.data(), scales.data(), 144, 8, {}, rotation);
    for (std::int64_t r = 0; r < xv.rows; ++r) {
      const std::int64_t n = TestType::data_bytes_for(d);
      CHECK(std::memcmp(&data[static_cast<std::size_t>(r * 144)],
                        &q.data[static_cast<std::size_t>(r * n)],
                        static_cast<std::size_t>(n)) == 0);
      CHECK(std::memcmp(&scales[static_cast<std::size_t>(r * 8)],
                        &q.scales[static_cast<std::size_t>(r * TestType::scale_bytes)],
                        TestType::scale_bytes) == 0);
    }
    const ml::quantized_rows<TestType> flat =
        ml::quantize_rows<TestType>(std::span<const T>(x), {}, rotation);
    CHECK(std::vector<std::uint8_t>(flat.data.begin(), flat.data.end()) ==
          std::vector<std::uint8_t>(q.data.begin(), q.data.end()));
    return bytes;
  };
  check_quantiser(
      d, [&](const auto& x, row_rotation r) { return run(x, false, r); },
      [&](const auto& x) { return run(x, true, row_rotation::none); });
}

TEST_CASE("quantize_rows_vllm_mxfp4: row_rotation::hadamard", "[quantize][rotation]") {
  const int d = 128;
  const auto run = [&]<class T>(const std::vector<T>& x, bool leave_out, row_rotation rotation) {
    const auto xv = rows_of(x, d);
    std::vector<std::uint8_t> data(static_cast<std::size_t>(xv.rows * (d / 2 + 4)), 0);
    std::uint8_t* scales = data.data() + xv.rows * d / 2;
    if (leave_out)
      ml::quantize_rows_vllm_mxfp4(xv, data.data(), scales);
    else
      ml::quantize_rows_vllm_mxfp4(xv, data.data(), scales, 0, 4, rotation);
    return data;
  };
  check_quantiser(
      d, [&](const auto& x, row_rotation r) { return run(x, false, r); },
      [&](const auto& x) { return run(x, true, row_rotation::none); });
}

TEST_CASE("row_rotation: a value other than none or hadamard is a named error",
          "[quantize][rotation]") {
  const auto bad = static_cast<row_rotation>(7);
  std::vector<float> x(2 * 128, 1.0f), w(2, 1.0f), wo(2);
  std::vector<std::uint8_t> out(4096);
  const auto xv = ml::matrix_view<const float>(x.data(), 2, 128);
  const auto named = Catch::Contains("row_rotation value 7 is neither none nor hadamard");
  CHECK_THAT(check::error_of([&] { (void)ml::quantize_rows<ml::fp8_per_token>(xv, {}, bad); }),
             named && Catch::Contains("quantize_rows"));
  ml::q_fold_scaling s = ml::vllm_v4_q_scaling();
  s.rotation = bad;
  CHECK_THAT(check::error_of([&] {
               ml::quantize_q_fold_weights(xv, ml::matrix_view<const float>(w.data(), 1, 2),
                                           out.data(), 0, ml::matrix_view<float>(wo.data(), 1, 2),
                                           1.0f, 1.0f, s);
             }),
             named && Catch::Contains("quantize_q_fold_weights"));
  const std::int64_t slots[2] = {0, 1};
  CHECK_THAT(check::error_of([&] {
               ml::store_into_pages(xv, std::span<const std::int64_t>(slots),
                                    ml::mutable_paged_cache<ml::fp8_per_token>(out.data(), 1, 16),
                                    {}, bad);
             }),
             named && Catch::Contains("store_into_pages"));
  CHECK_THAT(check::error_of([&] {
               ml::store_into_pages_vllm_mxfp4(
                   xv, std::span<const std::int64_t>(slots),
                   ml::mutable_paged_cache<ml::mxfp4>(out.data(), 1, 16), bad);
             }),
             named && Catch::Contains("store_into_pages_vllm_mxfp4"));
  CHECK_THAT(check::error_of([&] {
               ml::quantize_q_mxfp4_scale_weights(
                   xv, ml::matrix_view<const float>(w.data(), 1, 2), out.data(), 0,
                   out.data() + 1024, 4, ml::matrix_view<float>(wo.data(), 1, 2), 1.0f, 1.0f, bad);
             }),
             named && Catch::Contains("quantize_q_mxfp4_scale_weights"));
  // Nothing was written before the check.
  CHECK(std::all_of(out.begin(), out.end(), [](std::uint8_t b) { return b == 0; }));
}
