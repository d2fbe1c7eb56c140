// Element encoders, the inverse of format/: fp32 -> e4m3fn (round to nearest even, saturating)
// and fp32 -> e2m1 (upstream's rounding: ties toward zero, -0 becomes +0). Exact integer
// arithmetic on the fp32 bits: no floating-point environment (rounding mode, flush-to-zero) can
// change a code. The scales of a block come from its format's scale codec (its encode).
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

#include "../config.hpp"
#include "../format/e2m1.hpp"
#include "../format/e4m3.hpp"
#include "../format/ue8m0.hpp"  // ue8m0_for_amax, the UE8M0 block exponent

MQALOGITS_NAMESPACE_BEGIN

// The e4m3fn code nearest to x, ties to the even code; |x| > 448 (and +-inf) saturates to +-448,
// NaN gives 0x7F. The sign of zero is kept (-0.0f -> 0x80), as a cast does.
constexpr std::uint8_t encode_e4m3(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint8_t sign = static_cast<std::uint8_t>((u >> 24) & 0x80u);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7F;           // NaN
  if (a >= 0x43E00000u) return sign | 0x7Eu;  // |x| >= 448 (incl. inf): saturate
  if (a >= 0x3C800000u) {                     // |x| >= 2^-6: a normal e4m3 value
    // Round the 23-bit mantissa to 3 bits, to nearest even; a carry moves into the exponent.
    const std::uint32_t r = (a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20;  // fp32 exponent | 3 bits
    const std::uint32_t code = r - ((127u - 7u) << 3);                // rebias 127 -> 7
    return static_cast<std::uint8_t>(sign | (code > 0x7Eu ? 0x7Eu : code));
  }
  // Subnormal e4m3 (quantum 2^-9): |x| = mant * 2^(exp - 23) -> q = round(|x| * 2^9) in [0, 8]
  // (8 is the smallest normal, code 0x08).
  const int biased = static_cast<int>(a >> 23);
  if (biased == 0) return sign;  // fp32 subnormal: far below half of e4m3's 2^-9
  const int exp = biased - 127;
  const std::uint64_t mant = (a & 0x7FFFFFu) | 0x800000u;
  const int shift = 14 - exp;  // > 20
  if (shift >= 64) return sign;
  std::uint64_t q = mant >> shift;
  const std::uint64_t rest = mant & ((std::uint64_t{1} << shift) - 1);
  const std::uint64_t half = std::uint64_t{1} << (shift - 1);
  if (rest > half || (rest == half && (q & 1))) ++q;
  return static_cast<std::uint8_t>(sign | static_cast<std::uint32_t>(q));
}

// The e2m1 nibble nearest to x with ties toward zero (0.25 -> 0, 0.75 -> 0.5, 5 -> 4), |x| > 6
// saturating to 6, as upstream's FP4 cast does; a result of magnitude 0 is always +0 (nibble 0),
// and NaN gives 0 (e2m1 has no NaN).
constexpr std::uint8_t encode_e2m1(float x) {
  // Midpoints between consecutive magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}; strictly above one
  // moves up a step, so a tie stays on the smaller magnitude. Non-negative floats order like
  // their bit patterns, so integer compares do it without branches.
  constexpr std::uint32_t midpoints[7] = {0x3E800000u, 0x3F400000u, 0x3FA00000u, 0x3FE00000u,
                                          0x40200000u, 0x40600000u, 0x40A00000u};
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0;  // NaN
  std::uint32_t m = 0;
  for (std::uint32_t mid : midpoints) m += a > mid ? 1u : 0u;
  return static_cast<std::uint8_t>(m == 0 ? 0u : m | ((u >> 28) & 0x8u));
}

// The code of x in a data codec, found by the codec's tag: a new codec adds its own overload.
constexpr std::uint8_t encode_code(float_e4m3, float x) {
  return encode_e4m3(x);
}
constexpr std::uint8_t encode_code(float_e2m1, float x) {
  return encode_e2m1(x);
}

MQALOGITS_NAMESPACE_END
