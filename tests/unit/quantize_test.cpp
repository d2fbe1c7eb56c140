// The quantizers: element encoders against brute-force nearest-code searches over the
// reference's own decoders, known vectors, row round trips, the scale packing, and stores into
// paged caches through a slot mapping (checked byte for byte and through the kernels).
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <mqalogits/quantize.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/accuracy.hpp"
#include "support/formats.hpp"

namespace ml = mqalogits;
using ref::rand::engine;

namespace {

// The e4m3fn code nearest to x by brute force over the reference decoder: ties to the even code
// (even mantissa), |x| beyond the largest code saturates; NaN -> 0x7F.
std::uint8_t nearest_e4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 448) return std::signbit(x) ? 0xFE : 0x7E;  // saturate (differences lose digits there)
  int best = 0;
  for (int c = 1; c <= 0x7E; ++c) {
    const double d = std::fabs(ref::e4m3(static_cast<std::uint8_t>(c)) - a);
    const double bd = std::fabs(ref::e4m3(static_cast<std::uint8_t>(best)) - a);
    if (d < bd || (d == bd && (c & 1) == 0)) best = c;
  }
  return static_cast<std::uint8_t>(best | (std::signbit(x) ? 0x80 : 0));
}

// The e2m1 nibble nearest to x, ties toward zero, saturating, never -0; NaN -> 0.
std::uint8_t nearest_e2m1(float x) {
  if (std::isnan(x)) return 0;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 6) return x < 0 ? 15 : 7;
  int best = 0;
  for (int c = 1; c < 8; ++c)
    if (std::fabs(ref::e2m1(static_cast<std::uint8_t>(c)) - a) <
        std::fabs(ref::e2m1(static_cast<std::uint8_t>(best)) - a))
      best = c;  // strict: a tie keeps the smaller magnitude
  return static_cast<std::uint8_t>(best == 0 ? 0 : best | (x < 0 ? 0x8 : 0));
}

// Floats worth encoding: uniform in a range, random bit patterns (any finite value), and the
// exact midpoints between neighbouring codes.
std::vector<float> probe_values(engine& rng, float range, const std::vector<double>& codes) {
  std::vector<float> v;
  std::uniform_real_distribution<float> u(-range, range);
  for (int i = 0; i < 20000; ++i) v.push_back(u(rng));
  for (int i = 0; i < 20000; ++i) {
    const auto bits = static_cast<std::uint32_t>(ref::rand::uniform(rng, 0, 0xFFFFFFFF));
    const float f = std::bit_cast<float>(bits);
    if (std::isfinite(f)) v.push_back(f);
  }
  for (std::size_t i = 0; i + 1 < codes.size(); ++i) {
    const auto mid = static_cast<float>((codes[i] + codes[i + 1]) / 2);  // exact in fp32
    for (float f : {mid, -mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)})
      v.push_back(f);
  }
  return v;
}

template <class T>
T to(float f) {
  if constexpr (std::is_same_v<T, ml::bf16>)
    return ml::bf16::from_float(f);
  else
    return f;
}

// Random rows [n, 128] with per-block magnitudes spread over many binades (and some zero blocks).
template <class T>
std::vector<T> random_rows(engine& rng, std::int64_t n) {
  std::vector<T> x(static_cast<std::size_t>(n * 128));
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (std::int64_t r = 0; r < n; ++r)
    for (int b = 0; b < 4; ++b) {
      const int binade = static_cast<int>(ref::rand::uniform(rng, -30, 30));
      const bool zero = ref::rand::chance(rng, 0.05);
      for (int i = 0; i < 32; ++i)
        x[static_cast<std::size_t>(r * 128 + b * 32 + i)] =
            to<T>(zero ? 0.0f : std::ldexp(g(rng), binade));
    }
  return x;
}

float as_float(float f) {
  return f;
}
float as_float(ml::bf16 b) {
  return b.to_float();
}

}  // namespace

TEST_CASE("quantize: the e4m3 encoder is round-to-nearest-even with saturation to 448",
          "[quantize][encode]") {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    INFO("code " << c);
    CHECK(ml::encode_e4m3(static_cast<float>(ref::e4m3(static_cast<std::uint8_t>(c)))) == c);
  }
  CHECK(ml::encode_e4m3(448.0f) == 0x7E);
  CHECK(ml::encode_e4m3(464.0f) == 0x7E);  // the tie between 448 and (absent) 480
  CHECK(ml::encode_e4m3(1e30f) == 0x7E);
  CHECK(ml::encode_e4m3(-std::numeric_limits<float>::infinity()) == 0xFE);
  CHECK(ml::encode_e4m3(std::numeric_limits<float>::quiet_NaN()) == 0x7F);
  CHECK(ml::encode_e4m3(-0.0f) == 0x80);
  CHECK(ml::encode_e4m3(0x1p-10f) == 0x00);    // half the smallest subnormal: tie to even 0
  CHECK(ml::encode_e4m3(0x1.8p-10f) == 0x01);  // 0.75 of it
  CHECK(ml::encode_e4m3(0x3p-10f) == 0x02);    // 1.5 x 2^-9: tie between 1 and 2 -> even 2
  CHECK(ml::encode_e4m3(1.0625f) == 0x38);     // tie between 1 and 1.125 -> even 1
  CHECK(ml::encode_e4m3(1.1875f) == 0x3A);     // tie between 1.125 and 1.25 -> even 1.25
  CHECK(ml::encode_e4m3(0x1.ep-7f) == 0x08);   // rounds up out of the subnormals to 2^-6

  std::vector<double> codes;
  for (int c = 0; c <= 0x7E; ++c) codes.push_back(ref::e4m3(static_cast<std::uint8_t>(c)));
  engine rng(11);
  std::int64_t bad = 0;
  for (float f : probe_values(rng, 600.0f, codes))
    if (ml::encode_e4m3(f) != nearest_e4m3(f)) {
      if (bad++ < 5)
        WARN("x = " << f << ": got " << int{ml::encode_e4m3(f)} << ", nearest "
                    << int{nearest_e4m3(f)});
    }
  CHECK(bad == 0);
  static_assert(ml::encode_e4m3(1.0f) == 0x38, "usable at compile time");
}

TEST_CASE("quantize: the e2m1 encoder rounds ties toward zero and never yields -0",
          "[quantize][encode]") {
  struct known {
    float x;
    std::uint8_t nibble;
  };
  const known cases[] = {{0.0f, 0},  {-0.0f, 0},   {0.25f, 0},  {0.2501f, 1}, {-0.25f, 0},
                         {-0.1f, 0}, {-0.3f, 9},   {0.75f, 1},  {1.25f, 2},   {1.75f, 3},
                         {2.5f, 4},  {3.5f, 5},    {5.0f, 6},   {5.001f, 7},  {6.0f, 7},
                         {100.f, 7}, {-100.f, 15}, {-1.5f, 11}, {-4.0f, 14},  {1e-30f, 0}};
  for (const auto& k : cases) {
    INFO("x = " << k.x);
    CHECK(int{ml::encode_e2m1(k.x)} == int{k.nibble});
  }
  CHECK(ml::encode_e2m1(std::numeric_limits<float>::quiet_NaN()) == 0);
  CHECK(ml::encode_e2m1(std::numeric_limits<float>::infinity()) == 7);
  for (int c = 0; c < 16; ++c) {
    if (c == 8) continue;  // -0 encodes as +0
    INFO("nibble " << c);
    CHECK(ml::encode_e2m1(static_cast<float>(ref::e2m1(static_cast<std::uint8_t>(c)))) == c);
  }
  std::vector<double> codes;
  for (int c = 0; c < 8; ++c) codes.push_back(ref::e2m1(static_cast<std::uint8_t>(c)));
  engine rng(12);
  std::int64_t bad = 0;
  for (float f : probe_values(rng, 8.0f, codes))
    if (ml::encode_e2m1(f) != nearest_e2m1(f)) {
      if (bad++ < 5)
        WARN("x = " << f << ": got " << int{ml::encode_e2m1(f)} << ", nearest "
                    << int{nearest_e2m1(f)});
    }
  CHECK(bad == 0);
}

TEST_CASE("quantize: the UE8M0 scale is amax / max code rounded up to a power of two",
          "[quantize][encode]") {
  CHECK(ml::ue8m0_for_amax(448.0f, 448.0f) == 127);
  CHECK(ml::ue8m0_for_amax(std::nextafter(448.0f, 1e9f), 448.0f) == 128);
  CHECK(ml::ue8m0_for_amax(224.0f, 448.0f) == 126);
  CHECK(ml::ue8m0_for_amax(1.0f, 448.0f) == 119);  // 1/448 -> 2^-8
  CHECK(ml::ue8m0_for_amax(6.0f, 6.0f) == 127);
  CHECK(ml::ue8m0_for_amax(6.5f, 6.0f) == 128);
  CHECK(ml::ue8m0_for_amax(1.0f, 6.0f) == 125);  // 1/6 -> 2^-2
  CHECK(ml::ue8m0_for_amax(0.0f, 448.0f) == 1);  // clamped to the normal range
  CHECK(ml::ue8m0_for_amax(1e-38f, 448.0f) == 1);
  CHECK(ml::ue8m0_for_amax(0x1p-149f, 6.0f) == 1);
  CHECK(ml::ue8m0_for_amax(std::numeric_limits<float>::max(), 6.0f) == 253);  // 2^128 / 6 -> 2^126
  CHECK(ml::ue8m0_for_amax(std::numeric_limits<float>::max(), 1e-30f) == 254);  // clamped
  CHECK(ml::ue8m0_for_amax(std::numeric_limits<float>::infinity(), 448.0f) == 254);
  CHECK(ml::ue8m0_for_amax(std::numeric_limits<float>::quiet_NaN(), 448.0f) == 254);
  engine rng(13);
  for (int i = 0; i < 20000; ++i) {
    const float amax =
        std::bit_cast<float>(static_cast<std::uint32_t>(ref::rand::uniform(rng, 1, 0x7F7FFFFF)));
    for (double max_code : {448.0, 6.0}) {
      const int e = ml::ue8m0_for_amax(amax, static_cast<float>(max_code));
      INFO("amax " << amax << " max code " << max_code << " e " << e);
      REQUIRE(e >= 1);
      REQUIRE(e <= 254);
      // The smallest such power of two: amax fits under it, and not under the one below.
      if (e < 254) REQUIRE(static_cast<double>(amax) <= std::ldexp(max_code, e - 127));
      if (e > 1) REQUIRE(static_cast<double>(amax) > std::ldexp(max_code, e - 128));
    }
  }
}

TEST_CASE("quantize: known MXFP8, MXFP4 and FP8 per-token rows", "[quantize][rows]") {
  float x[128] = {};
  for (int i = 0; i < 32; ++i) x[i] = 1.0f;  // block 0: amax 448 -> e 127
  x[0] = 448.0f;
  x[1] = -2.5f;                               // between 2.5 (exact in e4m3) ...
  for (int i = 32; i < 64; ++i) x[i] = 0.5f;  // block 1: amax 1 -> 2^-8, 1 -> 256
  x[32] = 1.0f;
  x[33] = -0.0f;
  // block 2 all zero -> e 1; block 3: 3.0 and tiny values
  x[96] = 3.0f;
  x[97] = 0.001f;

  std::uint8_t data[128], sf[4];
  ml::quantize_row<ml::mxfp8>(x, data, sf);
  CHECK(sf[0] == 127);
  CHECK(sf[1] == 119);
  CHECK(sf[2] == 1);
  CHECK(sf[3] == 120);  // 3 / 448 = 2^-7.2 -> 2^-7
  CHECK(data[0] == 0x7E);
  CHECK(data[1] == 0xC2);  // -2.5 = -1.25 * 2
  CHECK(data[2] == 0x38);
  CHECK(data[32] == 0x78);  // 256 = 2^8
  CHECK(data[33] == 0x80);
  CHECK(data[34] == 0x70);  // 128
  CHECK(data[64] == 0x00);

  std::uint8_t p[64], sf4[4];
  ml::quantize_row<ml::mxfp4>(x, p, sf4);
  CHECK(sf4[0] == 134);  // 448 / 6 = 74.7 -> 2^7
  CHECK(sf4[1] == 125);  // 1 / 6 -> 2^-2
  CHECK(sf4[2] == 1);
  CHECK(sf4[3] == 126);  // 3 / 6 -> 2^-1
  // 448 / 128 = 3.5 (tie 3 / 4 -> 3, nibble 5); -2.5 / 128 -> -0.0195 -> 0 (+0, not 8).
  CHECK((p[0] & 0xF) == 5);
  CHECK((p[0] >> 4) == 0);
  CHECK((p[16] & 0xF) == 6);  // 1.0 / 0.25 = 4
  CHECK((p[16] >> 4) == 0);   // -0 -> +0
  CHECK(p[17] == 0x44);       // 0.5 / 0.25 = 2, twice
  CHECK((p[48] & 0xF) == 7);  // 3 / 0.5 = 6

  std::uint8_t d8[128], s8[4];
  ml::quantize_row<ml::fp8_per_token>(x, d8, s8);
  float s;
  std::memcpy(&s, s8, 4);
  CHECK(s == 1.0f);  // amax 448 / 448
  CHECK(d8[0] == 0x7E);
  CHECK(d8[2] == 0x38);
}

TEMPLATE_PRODUCT_TEST_CASE(
    "quantize: rows round-trip within half a code step and re-quantize "
    "to the same bytes",
    "[quantize][rows]", std::pair,
    ((ml::mxfp8, float), (ml::mxfp8, ml::bf16), (ml::mxfp4, float), (ml::mxfp4, ml::bf16),
     (ml::fp8_per_token, float), (ml::fp8_per_token, ml::bf16))) {
  using Format = typename TestType::first_type;
  using T = typename TestType::second_type;
  engine rng(14);
  const std::int64_t n = 64;
  const auto x = random_rows<T>(rng, n);
  const auto q = ml::quantize_rows<Format>(std::span<const T>(x));
  REQUIRE(q.rows == n);
  std::vector<float> back(static_cast<std::size_t>(n * 128));
  for (std::int64_t r = 0; r < n; ++r)
    Format::decode_row(q.view().row(r), q.view().scale(r), back.data() + r * 128);
  std::int64_t bad = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    for (int b = 0; b < 4; ++b) {
      const int i0 = std::is_same_v<Format, ml::fp8_per_token> ? 0 : b * 32;
      const int i1 = std::is_same_v<Format, ml::fp8_per_token> ? 128 : i0 + 32;
      double amax = 0, scale;
      for (int i = i0; i < i1; ++i)
        amax = std::max(amax, std::fabs(double(as_float(x[r * 128 + i]))));
      if constexpr (std::is_same_v<Format, ml::fp8_per_token>) {
        scale = q.token_scale(r);
        CHECK(scale == (amax > 0 ? static_cast<float>(amax) / 448.0f : 1.0f));
      } else {
        scale = ref::ue8m0(q.view().scale(r)[b]);
        // Minimal power of two: the block's amax needs more than half the code range.
        constexpr double max_code = std::is_same_v<Format, ml::mxfp8> ? 448.0 : 6.0;
        if (amax > 0 && q.view().scale(r)[b] > 1) CHECK(amax / scale > max_code / 2);
        CHECK(amax / scale <= max_code);
      }
      for (int i = i0; i < i1; ++i) {
        const double v = as_float(x[r * 128 + i]), got = back[r * 128 + i],
                     a = std::fabs(v) / scale;
        // Half the gap between the codes around |v| / scale.
        double half_step;
        if constexpr (std::is_same_v<Format, ml::mxfp4>)
          half_step = a < 2 ? 0.25 : (a < 4 ? 0.5 : 1.0);
        else
          half_step = a < 0x1p-6 ? 0x1p-10 : std::ldexp(1.0, std::ilogb(a) - 4);
        // fp8_per_token divides by a scale that is not a power of two: x / scale is rounded to
        // fp32 once before the code is chosen, which may move a near-tie by an ulp.
        const double slack =
            std::is_same_v<Format, ml::fp8_per_token> ? std::ldexp(std::fabs(v), -22) : 0.0;
        if (std::fabs(got - v) > half_step * scale * (1 + 1e-6) + slack) {
          if (bad++ < 5)
            WARN(std::setprecision(10) << "row " << r << " [" << i << "]: " << v << " -> " << got
                                       << " (scale " << scale << ")");
        }
      }
      if (std::is_same_v<Format, ml::fp8_per_token>) break;
    }
  }
  CHECK(bad == 0);
  // Quantising the dequantised values gives the same values back (the bytes may differ: a block
  // whose largest code is exactly half the range gets a scale half as large and codes twice).
  const auto again = ml::quantize_rows<Format>(std::span<const float>(back));
  std::vector<float> back2(back.size());
  for (std::int64_t r = 0; r < n; ++r)
    Format::decode_row(again.view().row(r), again.view().scale(r), back2.data() + r * 128);
  std::int64_t moved = 0;
  for (std::size_t i = 0; i < back.size(); ++i) moved += back[i] != back2[i];
  CHECK(moved == 0);
}

TEST_CASE("quantize: scale bytes read as uint8[4], int16[2] and int32[1] agree",
          "[quantize][layout]") {
  engine rng(15);
  const auto x = random_rows<float>(rng, 8);
  const auto q = ml::quantize_rows<ml::mxfp8>(std::span<const float>(x));
  std::vector<std::int16_t> as16(16);
  std::vector<std::int32_t> as32(8);
  std::memcpy(as16.data(), q.scales.data(), 32);
  std::memcpy(as32.data(), q.scales.data(), 32);
  for (int r = 0; r < 8; ++r) {
    const std::uint8_t* e = q.scales.data() + r * 4;
    INFO("row " << r);
    // Little-endian: int32 byte k = block k; int16 word j = blocks 2j (low byte), 2j + 1.
    CHECK(static_cast<std::uint32_t>(as32[r]) ==
          (e[0] | e[1] << 8 | e[2] << 16 | static_cast<std::uint32_t>(e[3]) << 24));
    CHECK(static_cast<std::uint16_t>(as16[2 * r]) == (e[0] | e[1] << 8));
    CHECK(static_cast<std::uint16_t>(as16[2 * r + 1]) == (e[2] | e[3] << 8));
    float a[128], b[128], c[128];
    ml::mxfp8::decode_row(q.data.data() + r * 128, e, a);
    const ml::rows_view<ml::mxfp8> v16(q.data.data(), as16.data(), 8);
    const ml::rows_view<ml::mxfp8> v32(q.data.data(), as32.data(), 8);
    ml::mxfp8::decode_row(v16.row(r), v16.scale(r), b);
    ml::mxfp8::decode_row(v32.row(r), v32.scale(r), c);
    CHECK(std::memcmp(a, b, sizeof a) == 0);
    CHECK(std::memcmp(a, c, sizeof a) == 0);
  }
}

TEMPLATE_LIST_TEST_CASE("quantize: store_into_pages writes the page layout through a slot mapping",
                        "[quantize][pages]", check::all_formats) {
  using Format = TestType;
  const std::int32_t page_kv = GENERATE(32, 64);
  const bool wide_slots = GENERATE(false, true);
  engine rng(16 + page_kv + wide_slots);
  const std::int64_t pages = 5, n = 100;
  const std::int64_t stride = ml::aligned_page_stride<Format>(page_kv) + 512;
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(pages * stride), 0xA5);
  const ml::mutable_paged_cache<Format> cache(bytes.data(), pages, page_kv, stride);
  const auto x = random_rows<float>(rng, n);
  const ml::matrix_view<const float> xv(x.data(), n, 128);
  // A shuffled permutation of the slots; every 7th token is padding (-1).
  std::vector<std::int64_t> all(static_cast<std::size_t>(pages * page_kv));
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int64_t>(i);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<std::int64_t> slots64(all.begin(), all.begin() + n);
  for (std::int64_t i = 0; i < n; i += 7) slots64[static_cast<std::size_t>(i)] = -1;
  std::vector<std::int32_t> slots32(slots64.begin(), slots64.end());
  INFO(Format::name << " page_kv " << page_kv << (wide_slots ? " int64" : " int32") << " slots");

  // A slot past the cache is rejected before anything is written.
  auto bad = slots64;
  bad[50] = pages * page_kv;
  CHECK_THROWS_WITH(ml::store_into_pages(xv, std::span<const std::int64_t>(bad), cache),
                    Catch::Contains("slot_mapping[50]"));
  CHECK(std::all_of(bytes.begin(), bytes.end(), [](auto b) { return b == 0xA5; }));

  if (wide_slots)
    ml::store_into_pages(xv, std::span<const std::int64_t>(slots64), cache);
  else
    ml::store_into_pages(xv, std::span<const std::int32_t>(slots32), cache);

  const auto rows = ml::quantize_rows<Format>(xv);
  std::vector<char> written(bytes.size(), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t slot = slots64[static_cast<std::size_t>(i)];
    if (slot < 0) continue;
    const std::int64_t page = slot / page_kv, off = slot % page_kv;
    const std::int64_t d = page * stride + off * Format::data_bytes;
    const std::int64_t s =
        page * stride + std::int64_t{page_kv} * Format::data_bytes + off * Format::scale_bytes;
    INFO("token " << i << " slot " << slot);
    CHECK(std::memcmp(bytes.data() + d, rows.view().row(i), Format::data_bytes) == 0);
    CHECK(std::memcmp(bytes.data() + s, rows.view().scale(i), Format::scale_bytes) == 0);
    std::fill(written.begin() + d, written.begin() + d + Format::data_bytes, 1);
    std::fill(written.begin() + s, written.begin() + s + Format::scale_bytes, 1);
  }
  std::int64_t stray = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) stray += !written[i] && bytes[i] != 0xA5;
  CHECK(stray == 0);

  // The pre-quantised overload writes the same bytes.
  std::vector<std::uint8_t> copy(bytes.size(), 0xA5);
  ml::store_into_pages(rows.view(), std::span<const std::int64_t>(slots64),
                       ml::mutable_paged_cache<Format>(copy.data(), pages, page_kv, stride));
  CHECK(copy == bytes);
}

TEMPLATE_LIST_TEST_CASE("quantize: keys stored into pages give the logits of the same keys as rows",
                        "[quantize][pages]", check::all_formats) {
  using Format = TestType;
  engine rng(17);
  const std::int32_t page_kv = 64;
  const std::int64_t H = 8, N = 150, pages = 6, max_blocks = 3;
  const auto k = random_rows<float>(rng, N);
  const auto xq = random_rows<float>(rng, H);
  const ml::matrix_view<const float> kv_in(k.data(), N, 128);
  // Request 0's context is the N tokens, laid out on pages 4, 1, 3 (its block-table row).
  const std::vector<std::int32_t> table_row{4, 1, 3};
  std::vector<std::int64_t> slots(static_cast<std::size_t>(N));
  for (std::int64_t t = 0; t < N; ++t)
    slots[t] = table_row[t / page_kv] * std::int64_t{page_kv} + t % page_kv;
  std::vector<std::uint8_t> bytes(
      static_cast<std::size_t>(pages * ml::page_bytes<Format>(page_kv)));
  const ml::mutable_paged_cache<Format> cache(bytes.data(), pages, page_kv);
  ml::store_into_pages(kv_in, std::span<const std::int64_t>(slots), cache);

  const auto kv = ml::quantize_rows<Format>(kv_in);
  const auto q = ml::quantize_rows<Format>(ml::matrix_view<const float>(xq.data(), H, 128));
  const auto w = ref::rand::weights<float>(rng, 1, H);
  const std::vector<std::int32_t> ks{0}, ke{static_cast<std::int32_t>(N)};
  const std::vector<std::int32_t> lens{static_cast<std::int32_t>(N)};
  const ml::matrix_view<const std::int32_t> lv(lens.data(), 1, 1),
      tv(table_row.data(), 1, max_blocks);

  const ref::result dense = ref::dense(q.view(), kv.view(), w.view(), ks, ke, N);
  const ref::result paged = ref::paged(q.view(), cache.view(), w.view(), lv, tv, N);
  CHECK(dense.value == paged.value);  // identical decoded keys, identical doubles

  const auto schedule = ml::get_paged_mqa_logits_metadata(lv, page_kv, 2);
  ml::logits_buffer<float> out(1, N);
  ml::fp8_fp4_paged_mqa_logits(q.view(), cache.view(), w.view(), lv, tv, schedule, N, out.view());
  const std::string diff = accuracy::compare(
      1, N, [&](auto r, auto c) { return double(out(r, c)); },
      [&](auto r, auto c) { return dense.at(r, c); },
      [&](auto r, auto c) { return dense.mag(r, c); });
  INFO(Format::name << ": " << diff);
  CHECK(diff.empty());
}

TEST_CASE("quantize: fp8_per_token Q scales fold into the weights", "[quantize][rows]") {
  engine rng(18);
  const std::int64_t num_q = 3, H = 4, N = 40;
  const auto xq = random_rows<float>(rng, num_q * H);
  const auto xk = random_rows<float>(rng, N);
  const auto q = ml::quantize_rows<ml::fp8_per_token>(std::span<const float>(xq));
  const auto kv = ml::quantize_rows<ml::fp8_per_token>(std::span<const float>(xk));
  auto w = ref::rand::weights<float>(rng, num_q, H);
  const std::vector<std::int32_t> ks(num_q, 0), ke(num_q, static_cast<std::int32_t>(N));
  // Reference: Q with its scales; library: unscaled Q and the scales folded into w.
  const ref::result e = ref::dense(q.view(), kv.view(), w.view(), ks, ke, N);
  CHECK_THROWS_AS(ml::fold_q_scales(ml::token_scales(kv), w.mut()), ml::error);
  ml::fold_q_scales(ml::token_scales(q), w.mut());
  ml::logits_buffer<float> out(num_q, N);
  ml::fp8_fp4_mqa_logits(q.unscaled_view(), kv.view(), w.view(), ks, ke, N, out.view());
  const std::string diff = accuracy::compare(
      num_q, N, [&](auto r, auto c) { return double(out(r, c)); },
      [&](auto r, auto c) { return e.at(r, c); }, [&](auto r, auto c) { return e.mag(r, c); });
  INFO(diff);
  CHECK(diff.empty());
}

TEST_CASE("quantize: mutable and const spans and views give the same bytes", "[quantize][api]") {
  engine rng(19);
  auto x = random_rows<float>(rng, 5);
  const auto a = ml::quantize_rows<ml::mxfp8>(std::span<const float>(x));
  const auto b = ml::quantize_rows<ml::mxfp8>(std::span(x));  // std::span<float>
  const auto c = ml::quantize_rows<ml::mxfp8>(ml::matrix_view<float>(x.data(), 5, 128));
  CHECK(a.data == b.data);
  CHECK(a.data == c.data);
  CHECK(a.scales == c.scales);
  CHECK_THROWS_WITH(ml::quantize_rows<ml::mxfp8>(std::span(x).first(300)),
                    Catch::Contains("not a multiple of 128"));
  CHECK_THROWS_WITH(ml::quantize_rows<ml::mxfp8>(ml::matrix_view<float>(x.data(), 2, 96)),
                    Catch::Contains("must be [rows, head_dim] with head_dim 128, 64 or 32"));

  std::vector<std::uint8_t> p1(ml::page_bytes<ml::mxfp8>(32) * 2), p2(p1.size());
  std::vector<std::int32_t> slots{3, -1, 40, 0, 63};
  ml::store_into_pages(ml::matrix_view<float>(x.data(), 5, 128), std::span(slots),
                       ml::mutable_paged_cache<ml::mxfp8>(p1.data(), 2, 32));
  ml::store_into_pages(a.view(), std::span<const std::int32_t>(slots),
                       ml::mutable_paged_cache<ml::mxfp8>(p2.data(), 2, 32));
  CHECK(p1 == p2);
  CHECK(std::memcmp(p1.data() + 40 % 32 * 128 + ml::page_bytes<ml::mxfp8>(32),
                    a.data.data() + 2 * 128, 128) == 0);
}
