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
#include "scale_codec.hpp"

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

// Elements per scale block of the OCP MX formats (one UE8M0 byte each).
inline constexpr int mx_scale_block = 32;
// The same value under its older name, for existing callers.
inline constexpr int scale_block = mx_scale_block;

// The UE8M0 exponent byte e of a block whose largest magnitude is amax, for codes up to
// max_code: the smallest e with amax <= max_code * 2^(e - 127) (amax / max_code rounded up to a
// power of two), clamped to [1, 254]. amax = 0 gives 1; inf or NaN gives 254.
constexpr std::uint8_t ue8m0_for_amax(float amax, float max_code) {
  if (!(amax < std::numeric_limits<float>::infinity())) return 254;  // inf, NaN
  if (amax <= 0) return 1;
  // Start from the binade estimate and correct by exact comparisons with max_code * 2^k
  // (max_code is 448 or 6: every such product is exact in double).
  const int ea = static_cast<int>((std::bit_cast<std::uint32_t>(amax) >> 23) & 0xFF) - 127;
  int k = ea - 9;  // max_code < 2^9, so max_code * 2^(ea - 9) < 2^ea <= amax
  double bound = static_cast<double>(max_code);
  for (int i = 0; i < k; ++i) bound *= 2.0;
  for (int i = 0; i > k; --i) bound *= 0.5;
  while (static_cast<double>(amax) > bound) {
    bound *= 2.0;
    ++k;
  }
  const int e = k + 127;
  return static_cast<std::uint8_t>(e < 1 ? 1 : (e > 254 ? 254 : e));
}

// The scale codec of the MX formats: one UE8M0 byte per block of 32 elements, in block order, in
// the row's 4-byte scale field (a row of 64 elements uses its first 2 bytes, one of 32 its
// first byte). Callers hold the field as uint8[4], int16[2] (low byte = even block) or int32[1]
// (byte k = block k), the same bytes in little-endian memory.
struct ue8m0_block_scales {
  using codec = float_ue8m0;
  static constexpr int bytes_per_scale = 1;
  static constexpr bool power_of_two = true;  // scales fold into exponents exactly
  static constexpr bool ue8m0_bytes = true;
  static constexpr bool optional = false;  // every row has its scales
  static constexpr bool takes_scaling_rule = false;
  // The OCP MX block, whatever the head dim.
  static constexpr int block_size(int /*head_dim*/) { return mx_scale_block; }
  // Upstream's one int32 per row: 4 bytes for up to 4 blocks.
  static constexpr int field_bytes(int blocks) { return word_scale_field(blocks, bytes_per_scale); }
  template <class Storage>
  static constexpr bool accepts_storage =
      std::is_same_v<Storage, std::uint8_t> || std::is_same_v<Storage, std::int16_t> ||
      std::is_same_v<Storage, std::int32_t>;
  // The biased exponent of block b (2^(e - 127)), and its value.
  static constexpr int exponent(const std::uint8_t* scales, int b) { return scales[b]; }
  static constexpr float value(const std::uint8_t* scales, int b) {
    return ue8m0_values[scales[b]];
  }

  // A chosen exponent e: codes are x * 2^(127 - e). One normal factor per block, never a second
  // product per element (a 2^-126 * 0.5 path produced subnormal intermediates that cost
  // microcode assists on every element); e = 254 (|x| near fp32's maximum) needs 2^-127, an fp32
  // subnormal that denormals-are-zero mode would read as 0, so that block alone takes two normal
  // factors, 2^-64 * 2^-63 (the same codes).
  struct encoding {
    std::uint8_t e;
    float factor;  // 2^(127 - e), or 2^-64 when e = 254
    constexpr float apply(float x) const { return e == 254 ? x * factor * 0x1p-63f : x * factor; }
    constexpr void store(std::uint8_t* field, int block) const { field[block] = e; }
  };
  // amax / max_code rounded up to a power of two (ue8m0_for_amax).
  static constexpr encoding encode(float amax, float max_code) {
    const std::uint8_t e = ue8m0_for_amax(amax, max_code);
    return {e,
            e == 254 ? 0x1p-64f : std::bit_cast<float>(static_cast<std::uint32_t>(254 - e) << 23)};
  }
};

static_assert(scale_codec<ue8m0_block_scales>);

MQALOGITS_NAMESPACE_END
