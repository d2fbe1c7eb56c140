// bfloat16 storage with round-to-nearest-even conversion from fp32; NaN stays NaN.
#pragma once

#include <bit>
#include <cstdint>

#include "../config.hpp"

MQALOGITS_NAMESPACE_BEGIN

struct bf16 {
  std::uint16_t bits = 0;

  static constexpr bf16 from_bits(std::uint16_t b) {
    bf16 v;
    v.bits = b;
    return v;
  }
  static constexpr bf16 from_float(float f) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)  // NaN: keep sign and payload top, force quiet
      return from_bits(static_cast<std::uint16_t>((u >> 16) | 0x0040u));
    const std::uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);
    return from_bits(static_cast<std::uint16_t>((u + rounding) >> 16));
  }
  constexpr float to_float() const {
    return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
  }
  constexpr explicit operator float() const { return to_float(); }
  friend constexpr bool operator==(bf16 a, bf16 b) { return a.bits == b.bits; }
};

static_assert(sizeof(bf16) == 2 && alignof(bf16) == 2);

// Scalar conversions the kernels use for weights and outputs of either element type.
constexpr float to_float(float v) {
  return v;
}
constexpr float to_float(bf16 v) {
  return v.to_float();
}
template <class T>
constexpr T from_float(float v);
template <>
constexpr float from_float<float>(float v) {
  return v;
}
template <>
constexpr bf16 from_float<bf16>(float v) {
  return bf16::from_float(v);
}

MQALOGITS_NAMESPACE_END
