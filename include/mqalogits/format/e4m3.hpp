// FP8 e4m3fn: sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is subnormal,
// 0x7F / 0xFF are NaN, there is no infinity, the largest finite value is 448.
#pragma once

#include <array>
#include <cstdint>
#include <limits>

#include "../config.hpp"
#include "element.hpp"

MQALOGITS_NAMESPACE_BEGIN

// An element codec (element.hpp): the members float_e2m1 has, with a byte's values.
struct float_e4m3 {
  static constexpr const char* name = "e4m3fn";
  static constexpr float max_finite = 448.0f;
  static constexpr int bits = 8;  // one code per byte
  // Twice a code is not an integer in general: no exact int8 path.
  static constexpr bool doubled_is_int8 = false;
  // Element i of a row of codes (defined below, after the table), and storing code c there.
  static constexpr float element(const std::uint8_t* data, int i);
  static constexpr void store(std::uint8_t* data, int i, std::uint8_t code) { data[i] = code; }

  // Exact value of one code (every code is exact in fp32 and in bf16).
  static constexpr float decode(std::uint8_t code) {
    if ((code & 0x7F) == 0x7F) return std::numeric_limits<float>::quiet_NaN();
    const int exponent = (code >> 3) & 0xF;
    const int mantissa = code & 0x7;
    // Subnormal: m/8 * 2^-6 = m * 2^-9. Normal: (8 + m)/8 * 2^(e-7) = (8 + m) * 2^(e-10).
    float magnitude =
        exponent == 0 ? static_cast<float>(mantissa) : static_cast<float>(8 + mantissa);
    int shift = exponent == 0 ? -9 : exponent - 10;
    for (; shift > 0; --shift) magnitude *= 2.0f;
    for (; shift < 0; ++shift) magnitude *= 0.5f;
    return (code & 0x80) ? -magnitude : magnitude;
  }
};

// All 256 codes decoded once, at compile time.
inline constexpr std::array<float, 256> e4m3_values = detail::decoded_codes<float_e4m3>();

constexpr float float_e4m3::element(const std::uint8_t* data, int i) {
  return e4m3_values[data[i]];
}

MQALOGITS_NAMESPACE_END
