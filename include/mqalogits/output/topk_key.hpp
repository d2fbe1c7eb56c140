// The order the fused top-k ranks by (topk.hpp, run by topk_output.hpp): (fp32 score, column) as
// one unsigned integer key, and the two streaming steps over keys written one element at a time,
// which define what the host ISAs' vector versions of them (backend/host/isa/) compute.
#pragma once

#include <bit>
#include <cstdint>

#include "../config.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace detail {

// A total order on (fp32 score, column) as one unsigned integer, larger = ranked first:
// the score's bits mapped so that unsigned order is numeric order (NaN of either sign above
// +inf, -0 equal to +0), then the column reversed (ties to the lower column), then one bit that
// keeps the sign of a zero or NaN so the value written back is the logit itself.
struct topk_key {
  static constexpr std::uint32_t nan_rank = 0xFFFFFFFFu, zero_rank = 0x80000000u;

  // Branch-free (selects only): it runs on every score that passes the value threshold.
  static std::uint64_t make(float score, std::int64_t col) {
    const auto b = std::bit_cast<std::uint32_t>(score);
    const std::uint32_t mag = b & 0x7FFFFFFFu, sign = b >> 31;
    // Negative: all bits flipped; positive: the sign bit set.
    const std::uint32_t ordered = b ^ ((0u - sign) | 0x80000000u);
    const bool nan = mag > 0x7F800000u, zero = mag == 0;
    const std::uint32_t rank = nan ? nan_rank : zero ? zero_rank : ordered;
    const std::uint32_t keep = (nan || zero) ? sign : 0u;
    const auto reversed = static_cast<std::uint32_t>(0x7FFFFFFF - col);
    return (std::uint64_t{rank} << 32) | (std::uint64_t{reversed} << 1) | keep;
  }
  static std::uint32_t rank(std::uint64_t key) { return static_cast<std::uint32_t>(key >> 32); }
  static std::int32_t column(std::uint64_t key) {
    return static_cast<std::int32_t>(0x7FFFFFFF -
                                     static_cast<std::int64_t>((key >> 1) & 0x7FFFFFFFu));
  }
  static float value(std::uint64_t key) {
    const std::uint32_t r = rank(key);
    const std::uint32_t keep = static_cast<std::uint32_t>(key & 1u) << 31;
    // Selects, not branches: a finished row's values are decoded in a loop that vectorises.
    const std::uint32_t bits = r == nan_rank    ? 0x7FC00000u | keep
                               : r == zero_rank ? keep
                               : (r >> 31)      ? r & 0x7FFFFFFFu
                                                : ~r;
    return std::bit_cast<float>(bits);
  }
};

// Appends at out the key of every score i of scores[0, n) (column col + i) that is valid and
// ranks above floor, in column order; returns how many (at most n are written). bar is floor's
// value: a score below it cannot rank above floor (NaN is never below). One score at a time:
// the portable path, the tail of a vector one, and what the host ISAs' admit_keys equal.
inline std::int64_t admit_keys_scalar(const float* scores, const unsigned char* valid,
                                      std::int64_t n, std::int64_t col, std::uint64_t floor,
                                      float bar, std::uint64_t* out) {
  std::int64_t held = 0;
  // Once the threshold has risen, most slices hold few candidates or none: one branch-free
  // pass (it vectorises) counts them.
  std::int64_t passing = 0;
  for (std::int64_t i = 0; i < n; ++i) passing += (valid[i] != 0) & !(scores[i] < bar);
  if (passing == 0) return 0;
  if (passing * 8 < n) {
    // Few pass: a branch that is nearly always "no" is the cheapest filter.
    for (std::int64_t i = 0; i < n; ++i) {
      if (!valid[i] || scores[i] < bar) continue;
      const std::uint64_t key = topk_key::make(scores[i], col + i);
      if (key > floor) out[held++] = key;
    }
  } else {
    // Many pass (a row's first keys, or a threshold near the median): branch-free, since a
    // branch on the outcome would mispredict about every other key.
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint64_t key = topk_key::make(scores[i], col + i);
      out[held] = key;
      held += (valid[i] != 0) & (key > floor);
    }
  }
  return held;
}

// The keys >= t of keys[0, n) moved to the front in order; returns how many. In place: the
// write position never passes the read one. Branch-free (whether a key is kept is close to
// random). The host ISAs' compact_at_least equal it.
inline std::int64_t compact_at_least_scalar(std::uint64_t* keys, std::int64_t n, std::uint64_t t) {
  std::int64_t out = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint64_t x = keys[i];
    keys[out] = x;
    out += x >= t;
  }
  return out;
}

}  // namespace detail
MQALOGITS_NAMESPACE_END
