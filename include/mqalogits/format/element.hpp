// What an element codec (float_e4m3, float_e2m1) provides, and the one table of its decoded
// codes. A codec declares its name, max_finite, bits (per code), doubled_is_int8 (whether twice
// every code is an integer in [-128, 127]), decode(code), store / element on a row of codes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "../config.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace detail {

// Every code of Element decoded once, at compile time.
template <class Element>
constexpr std::array<float, std::size_t{1} << Element::bits> decoded_codes() {
  std::array<float, std::size_t{1} << Element::bits> table{};
  for (std::size_t c = 0; c < table.size(); ++c)
    table[c] = Element::decode(static_cast<std::uint8_t>(c));
  return table;
}

}  // namespace detail
MQALOGITS_NAMESPACE_END
