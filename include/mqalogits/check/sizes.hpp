// Sizes computed from a caller's values (a width, a row count, a block size): int64 arithmetic
// whose overflow is an mqalogits::error naming the call and the argument, instead of a wrapped
// value or undefined behaviour. For bindings and engines that size buffers from user input.
#pragma once

#include <cstdint>
#include <limits>

#include "../config.hpp"
#include "../error.hpp"

MQALOGITS_NAMESPACE_BEGIN

// a + b.
inline std::int64_t checked_add(const char* where, const char* what, std::int64_t a,
                                std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r))
    detail::require(false, where,
                    [&](auto& m) { m << what << ": " << a << " + " << b << " overflows int64"; });
  return r;
}

// a * b.
inline std::int64_t checked_mul(const char* where, const char* what, std::int64_t a,
                                std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    detail::require(false, where,
                    [&](auto& m) { m << what << ": " << a << " x " << b << " overflows int64"; });
  return r;
}

// x rounded up to a multiple of `multiple` (x >= 0, multiple >= 1).
inline std::int64_t checked_round_up(const char* where, const char* what, std::int64_t x,
                                     std::int64_t multiple) {
  detail::require(x >= 0 && multiple >= 1, where, [&](auto& m) {
    m << what << " = " << x << " rounded up to a multiple of " << multiple
      << ": needs a value >= 0 and a multiple >= 1";
  });
  const std::int64_t up = checked_add(where, what, x, multiple - 1);
  return up / multiple * multiple;
}

// v narrowed to int32, or a named error when it does not fit.
inline std::int32_t checked_int32(const char* where, const char* what, std::int64_t v) {
  detail::require(v >= std::numeric_limits<std::int32_t>::min() &&
                      v <= std::numeric_limits<std::int32_t>::max(),
                  where, [&](auto& m) { m << what << " = " << v << " does not fit in int32"; });
  return static_cast<std::int32_t>(v);
}

MQALOGITS_NAMESPACE_END
