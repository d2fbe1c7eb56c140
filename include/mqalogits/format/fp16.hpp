// IEEE half-precision (fp16) storage, as upstream's SM100 kernels accept for the weights. Every
// fp16 value (subnormals, infinities, NaN) is exact in fp32, so the kernels decode it once and
// compute in fp32 as for bf16 and fp32 weights.
#pragma once

#include <bit>
#include <cstdint>

#include "../config.hpp"

MQALOGITS_NAMESPACE_BEGIN

// Its storage members mirror bf16's (bits, from_bits, ==): written in each so both stay plain
// 2-byte aggregates with no base class.
struct fp16 {
  std::uint16_t bits = 0;

  static constexpr fp16 from_bits(std::uint16_t b) {
    fp16 v;
    v.bits = b;
    return v;
  }
  // The exact fp32 value; a NaN stays NaN (quiet, sign and payload kept).
  constexpr float to_float() const {
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    const std::uint32_t exponent = (bits >> 10) & 0x1Fu, mantissa = bits & 0x3FFu;
    if (exponent == 0x1F)  // infinity (mantissa 0) or NaN
      return std::bit_cast<float>(sign | 0x7F800000u | (mantissa ? 0x400000u : 0u) |
                                  (mantissa << 13));
    if (exponent != 0)  // normal: rebias 15 -> 127
      return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
    if (mantissa == 0) return std::bit_cast<float>(sign);
    // Subnormal, mantissa x 2^-24: its top bit p becomes the implicit one of a normal fp32.
    const int p = 31 - std::countl_zero(mantissa);
    const std::uint32_t fraction = (mantissa << (23 - p)) & 0x7FFFFFu;
    return std::bit_cast<float>(sign | (static_cast<std::uint32_t>(p + 103) << 23) | fraction);
  }
  constexpr explicit operator float() const { return to_float(); }
  friend constexpr bool operator==(fp16 a, fp16 b) { return a.bits == b.bits; }
};

static_assert(sizeof(fp16) == 2 && alignof(fp16) == 2);

constexpr float to_float(fp16 v) {
  return v.to_float();
}

MQALOGITS_NAMESPACE_END
