// Exhaustive codec tests: every e4m3fn, e2m1 and UE8M0 code against fp32 values built here from
// the bit fields, bf16 rounding against an integer round-to-nearest-even, and the MX row
// decoders against element x scale.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"

namespace ml = mqalogits;

namespace {

// e4m3fn as fp32 bits: the exponent rebiased from 7 to 127, the 3 mantissa bits moved to the
// top of fp32's 23; subnormals (exponent 0) are m * 2^-9, spelled out as a table.
float e4m3_expected(int c) {
  const std::uint32_t sign = (c & 0x80) ? 0x80000000u : 0u;
  const int e = (c >> 3) & 0xF, m = c & 7;
  if (e == 15 && m == 7) return std::numeric_limits<float>::quiet_NaN();
  if (e == 0) {
    constexpr float sub[8] = {0.0f, 0x1p-9f, 0x2p-9f, 0x3p-9f, 0x4p-9f, 0x5p-9f, 0x6p-9f, 0x7p-9f};
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(sub[m]) | sign);
  }
  return std::bit_cast<float>(sign | static_cast<std::uint32_t>(e - 7 + 127) << 23 |
                              static_cast<std::uint32_t>(m) << 20);
}

bool same(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) ||
         std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

// Round-to-nearest-even of fp32 bits to bf16 bits, by integer arithmetic on the dropped half.
std::uint16_t bf16_expected(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  std::uint32_t hi = u >> 16;
  const std::uint32_t lo = u & 0xFFFF;
  if (lo > 0x8000 || (lo == 0x8000 && (hi & 1))) ++hi;
  return static_cast<std::uint16_t>(hi);
}

}  // namespace

TEST_CASE("e4m3fn: all 256 codes", "[format]") {
  for (int c = 0; c < 256; ++c) {
    INFO("code 0x" << std::hex << c);
    const float expected = e4m3_expected(c);
    CHECK(same(ml::e4m3_values[static_cast<std::size_t>(c)], expected));
    CHECK(same(ml::float_e4m3::decode(static_cast<std::uint8_t>(c)), expected));
    // Every code is exact in bf16 (the 3 mantissa bits fit in 7).
    CHECK(same(ml::bf16::from_float(expected).to_float(), expected));
  }
  CHECK(ml::e4m3_values[0x7E] == 448.0f);
  CHECK(ml::e4m3_values[0xFE] == -448.0f);
  CHECK(ml::float_e4m3::max_finite == 448.0f);
  CHECK(ml::e4m3_values[0x01] == 0x1p-9f);  // smallest subnormal
  CHECK(ml::e4m3_values[0x07] == 0x7p-9f);  // largest subnormal
  CHECK(ml::e4m3_values[0x08] == 0x1p-6f);  // smallest normal
  CHECK(ml::e4m3_values[0x38] == 1.0f);
  CHECK(ml::e4m3_values[0x00] == 0.0f);
  CHECK(!std::signbit(ml::e4m3_values[0x00]));
  CHECK(ml::e4m3_values[0x80] == 0.0f);
  CHECK(std::signbit(ml::e4m3_values[0x80]));
  CHECK(std::isnan(ml::e4m3_values[0x7F]));
  CHECK(std::isnan(ml::e4m3_values[0xFF]));
  int nans = 0;
  for (float v : ml::e4m3_values) nans += std::isnan(v);
  CHECK(nans == 2);  // no infinities, no other NaN
  for (float v : ml::e4m3_values) CHECK(!std::isinf(v));
}

TEST_CASE("e2m1: all 16 codes and the nibble order of packing", "[format]") {
  const float magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (int c = 0; c < 16; ++c) {
    INFO("nibble " << c);
    const float expected = (c & 8) ? -magnitudes[c & 7] : magnitudes[c & 7];
    CHECK(ml::e2m1_values[static_cast<std::size_t>(c)] == expected);
    CHECK(ml::float_e2m1::decode(static_cast<std::uint8_t>(c)) == expected);
    CHECK(ml::float_e2m1::decode_doubled(static_cast<std::uint8_t>(c)) == 2 * expected);
    // The high bits of a byte are ignored by the nibble decoders.
    CHECK(ml::float_e2m1::decode(static_cast<std::uint8_t>(c | 0xF0)) == expected);
  }
  CHECK(std::signbit(ml::e2m1_values[8]));  // -0
  CHECK(ml::float_e2m1::max_finite == 6.0f);
  // Element 2i is the low nibble of byte i, element 2i+1 the high nibble.
  std::uint8_t packed[64] = {};
  for (int i = 0; i < 64; ++i)
    packed[i] = static_cast<std::uint8_t>(((i + 3) % 16) << 4 | (i % 16));
  for (int i = 0; i < 128; ++i) {
    INFO("element " << i);
    const int expected = (i % 2) ? ((i / 2 + 3) % 16) : ((i / 2) % 16);
    CHECK(ml::float_e2m1::nibble(packed, i) == expected);
    CHECK(ml::mxfp4::element(packed, i) == ml::e2m1_values[static_cast<std::size_t>(expected)]);
  }
}

TEST_CASE("UE8M0: all 256 codes", "[format]") {
  for (int e = 0; e < 256; ++e) {
    INFO("exponent byte " << e);
    const float got = ml::ue8m0_values[static_cast<std::size_t>(e)];
    CHECK(same(ml::float_ue8m0::decode(static_cast<std::uint8_t>(e)), got));
    if (e == 255) {
      CHECK(std::isnan(got));
    } else {
      CHECK(static_cast<double>(got) == std::ldexp(1.0, e - 127));  // exact, 2^-127 included
    }
  }
  CHECK(ml::ue8m0_values[0] == 0x1p-127f);
  CHECK(ml::ue8m0_values[0] > 0.0f);
  CHECK(ml::ue8m0_values[127] == 1.0f);
  CHECK(ml::ue8m0_values[254] == 0x1p127f);
}

TEST_CASE("bf16: round to nearest even, NaN stays NaN, overflow to inf", "[format]") {
  // Ties: 1 + 2^-8 is halfway between 1 and 1 + 2^-7; even is 1. 1 + 3 * 2^-8 goes up.
  CHECK(ml::bf16::from_float(1.0f + 0x1p-8f).to_float() == 1.0f);
  CHECK(ml::bf16::from_float(1.0f + 3 * 0x1p-8f).to_float() == 1.0f + 0x1p-6f);
  CHECK(ml::bf16::from_float(1.0f + 0x1p-8f + 0x1p-20f).to_float() == 1.0f + 0x1p-7f);
  CHECK(ml::bf16::from_float(-(1.0f + 0x1p-8f)).to_float() == -1.0f);
  // Overflow: values that round past the largest finite bf16 become inf.
  CHECK(ml::bf16::from_float(std::numeric_limits<float>::max()).to_float() ==
        std::numeric_limits<float>::infinity());
  CHECK(ml::bf16::from_float(-std::numeric_limits<float>::max()).to_float() ==
        -std::numeric_limits<float>::infinity());
  CHECK(ml::bf16::from_float(0x1.FEp127f).to_float() == 0x1.FEp127f);  // largest finite stays
  CHECK(std::isinf(ml::bf16::from_float(std::numeric_limits<float>::infinity()).to_float()));
  // NaN stays NaN, including NaNs whose payload sits only in the dropped low bits.
  for (std::uint32_t bits :
       {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu, 0x7F80FFFFu}) {
    INFO("NaN bits 0x" << std::hex << bits);
    const ml::bf16 b = ml::bf16::from_float(std::bit_cast<float>(bits));
    CHECK(std::isnan(b.to_float()));
    CHECK((b.bits & 0x8000) == ((bits >> 16) & 0x8000));  // sign kept
  }
  // Exhaustive over a spread of fp32 bit patterns (every finite pattern with a stride, and
  // every low half of a few high halves).
  std::int64_t bad = 0;
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFull; u += 0x10001) {
    const float f = std::bit_cast<float>(static_cast<std::uint32_t>(u));
    if (std::isnan(f)) continue;
    bad += ml::bf16::from_float(f).bits != bf16_expected(f);
  }
  for (std::uint32_t hi : {0x3F80u, 0x3F81u, 0x0000u, 0x8001u, 0x7F7Fu, 0x0080u})
    for (std::uint32_t lo = 0; lo <= 0xFFFF; ++lo) {
      const float f = std::bit_cast<float>(hi << 16 | lo);
      bad += ml::bf16::from_float(f).bits != bf16_expected(f);
    }
  CHECK(bad == 0);
  // Round trip of every non-NaN bf16 is exact.
  for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
    const ml::bf16 v = ml::bf16::from_bits(static_cast<std::uint16_t>(b));
    if (std::isnan(v.to_float())) continue;
    if (ml::bf16::from_float(v.to_float()).bits != b) ++bad;
  }
  CHECK(bad == 0);
  CHECK(ml::to_float(ml::from_float<ml::bf16>(2.5f)) == 2.5f);
  CHECK(ml::from_float<float>(2.5f) == 2.5f);
}

TEMPLATE_TEST_CASE("MX decode_row is element x 2^(scale - 127) per 32-block", "[format]", ml::mxfp8,
                   ml::mxfp4) {
  ref::rand::engine rng(3);
  // Scales from the whole byte range (0 = 2^-127 included), NaN codes and a 255 scale.
  for (int trial = 0; trial < 64; ++trial) {
    INFO(TestType::name << " trial " << trial);
    std::uint8_t data[TestType::data_bytes], scales[4];
    for (auto& b : data) b = static_cast<std::uint8_t>(ref::rand::uniform(rng, 0, 255));
    for (auto& s : scales) s = static_cast<std::uint8_t>(ref::rand::uniform(rng, 0, 255));
    if (trial == 0) scales[0] = 0, scales[1] = 1, scales[2] = 254, scales[3] = 255;
    float out[128];
    TestType::decode_row(data, scales, out);
    for (int i = 0; i < 128; ++i) {
      float code;
      if constexpr (std::is_same_v<TestType, ml::mxfp8>) {
        code = e4m3_expected(data[i]);
      } else {
        const int nib = (i % 2) ? data[i / 2] >> 4 : data[i / 2] & 0xF;
        code = ml::e2m1_values[static_cast<std::size_t>(nib)];
      }
      const std::uint8_t s = scales[i / 32];
      const double expected =
          s == 255 ? std::nan("") : static_cast<double>(code) * std::ldexp(1.0, s - 127);
      // The product is exact in double; fp32 holds it unless it underflows past 2^-149.
      const float want = static_cast<float>(expected);
      INFO("element " << i << " code " << code << " scale byte " << int{s});
      CHECK(same(out[i], want));
    }
  }
  STATIC_REQUIRE(TestType::scale_bytes == 4);
  STATIC_REQUIRE(TestType::data_bytes == (std::is_same_v<TestType, ml::mxfp8> ? 128 : 64));
}
