// FP4 e2m1: bit 3 is the sign, bits 0..2 index {0, 0.5, 1, 1.5, 2, 3, 4, 6}. Two codes share a
// byte: element 2i in the low nibble of byte i, element 2i+1 in the high nibble.
#pragma once

#include <array>
#include <cstdint>

#include "../config.hpp"
#include "element.hpp"

MQALOGITS_NAMESPACE_BEGIN

// An element codec (element.hpp): the members float_e4m3 has, with a nibble's values.
struct float_e2m1 {
  static constexpr const char* name = "e2m1";
  static constexpr float max_finite = 6.0f;
  static constexpr int bits = 4;  // two codes per byte
  // Twice every code is an integer in [-12, 12] (decode_doubled): block dot products are exact
  // in int8 x int8 -> int32.
  static constexpr bool doubled_is_int8 = true;
  // Element i of a packed row (defined below, after the table).
  static constexpr float element(const std::uint8_t* packed, int i);

  static constexpr float decode(std::uint8_t nibble) {
    constexpr float magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const float m = magnitudes[nibble & 0x7];
    return (nibble & 0x8) ? -m : m;
  }
  // Twice the value: an integer in [-12, 12], so block dot products are exact in int8/int32.
  static constexpr std::int8_t decode_doubled(std::uint8_t nibble) {
    constexpr std::int8_t magnitudes[8] = {0, 1, 2, 3, 4, 6, 8, 12};
    const std::int8_t m = magnitudes[nibble & 0x7];
    return (nibble & 0x8) ? static_cast<std::int8_t>(-m) : m;
  }
  // Stores a nibble as element i of a packed row (the other nibble of its byte is kept).
  static constexpr void store(std::uint8_t* packed, int i, std::uint8_t code) {
    std::uint8_t& byte = packed[i >> 1];
    byte = (i & 1) ? static_cast<std::uint8_t>((byte & 0x0F) | (code << 4))
                   : static_cast<std::uint8_t>((byte & 0xF0) | (code & 0x0F));
  }
  // Element i of a packed row.
  static constexpr std::uint8_t nibble(const std::uint8_t* packed, int i) {
    return (i & 1) ? static_cast<std::uint8_t>(packed[i >> 1] >> 4)
                   : static_cast<std::uint8_t>(packed[i >> 1] & 0xF);
  }
};

// All 16 codes decoded once, at compile time.
inline constexpr std::array<float, 16> e2m1_values = detail::decoded_codes<float_e2m1>();

constexpr float float_e2m1::element(const std::uint8_t* packed, int i) {
  return e2m1_values[nibble(packed, i)];
}

MQALOGITS_NAMESPACE_END
