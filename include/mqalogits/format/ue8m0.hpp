// UE8M0 block scale: byte e means 2^(e - 127); 255 is NaN (OCP MX); 0 is 2^-127 (an fp32
// subnormal, still exact).
//
// Denormals: decode builds the value from its bits, so it is exact whatever the floating-point
// mode. A process running with flush-to-zero / denormals-are-zero (MXCSR FTZ|DAZ, common in
// inference engines) makes the *arithmetic* on byte 0 see 2^-127 as 0: a block with K or Q
// scale byte 0 then contributes 0 to its logit on the host kernels. Bytes 1..254 (every scale
// the quantizers write) are normal floats and unaffected.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "../config.hpp"

MQALOGITS_NAMESPACE_BEGIN

struct float_ue8m0 {
  static constexpr const char* name = "ue8m0";

  static constexpr float decode(std::uint8_t e) {
    if (e == 255) return std::numeric_limits<float>::quiet_NaN();
    // e >= 1: exponent field e, mantissa 0. e == 0: the subnormal with only the top mantissa bit.
    const std::uint32_t bits = e == 0 ? 0x00400000u : static_cast<std::uint32_t>(e) << 23;
    return std::bit_cast<float>(bits);
  }
};

namespace detail {
constexpr std::array<float, 256> make_ue8m0_table() {
  std::array<float, 256> table{};
  for (std::size_t e = 0; e < 256; ++e)
    table[e] = float_ue8m0::decode(static_cast<std::uint8_t>(e));
  return table;
}
}  // namespace detail

inline constexpr std::array<float, 256> ue8m0_values = detail::make_ue8m0_table();

// The scale codec of the MX formats: one UE8M0 byte per block of a row, in block order, in the
// row's 4-byte scale field. Callers hold the field as uint8[4], int16[2] (low byte = even
// block) or int32[1] (byte k = block k), the same bytes in little-endian memory.
struct ue8m0_block_scales {
  using codec = float_ue8m0;
  static constexpr bool power_of_two = true;  // scales fold into exponents exactly
  static constexpr bool optional = false;     // every row has its scales
  template <class Storage>
  static constexpr bool accepts_storage =
      std::is_same_v<Storage, std::uint8_t> || std::is_same_v<Storage, std::int16_t> ||
      std::is_same_v<Storage, std::int32_t>;
  // The biased exponent of block b (2^(e - 127)), and its value.
  static constexpr int exponent(const std::uint8_t* scales, int b) { return scales[b]; }
  static constexpr float value(const std::uint8_t* scales, int b) {
    return ue8m0_values[scales[b]];
  }
};

MQALOGITS_NAMESPACE_END
