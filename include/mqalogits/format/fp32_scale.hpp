// The scale codec of upstream's FP8 per-token format: one little-endian float32 per row, for all
// of its elements. Q rows may come without it (engines fold Q's scale into the weights): a null
// scale pointer reads as 1.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../config.hpp"

MQALOGITS_NAMESPACE_BEGIN

struct fp32_row_scale {
  static constexpr bool power_of_two = false;  // any fp32: applied as a multiply
  static constexpr bool optional = true;
  // A float array, or the raw bytes of a cache.
  template <class Storage>
  static constexpr bool accepts_storage =
      std::is_same_v<Storage, float> || std::is_same_v<Storage, std::uint8_t>;
  // memcpy: the 4 bytes may sit at any alignment inside a cache page.
  static float value(const std::uint8_t* scales, int /*block*/) {
    float s = 1.0f;
    if (scales) std::memcpy(&s, scales, sizeof s);
    return s;
  }
};

MQALOGITS_NAMESPACE_END
