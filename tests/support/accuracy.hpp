// The accuracy contract: |got - exact| <= 2^-7 |exact| + 2^-14 M, and the -inf mask exact.
#pragma once

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>

namespace accuracy {

inline bool within(double got, double exact, double magnitude) {
  if (std::isinf(exact) && exact < 0) return std::isinf(got) && got < 0;
  if (std::isinf(got) && got < 0) return false;
  if (std::isnan(exact)) return std::isnan(got);
  if (std::isnan(got)) return false;
  return std::fabs(got - exact) <= std::ldexp(std::fabs(exact), -7) + std::ldexp(magnitude, -14);
}

// Compares rows x cols values; returns "" or a description of the first mismatch and a count.
template <class GotFn, class ExactFn, class MagFn>
std::string compare(std::int64_t rows, std::int64_t cols, GotFn got, ExactFn exact, MagFn mag) {
  std::int64_t bad = 0;
  std::ostringstream first;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      if (!within(got(r, c), exact(r, c), mag(r, c))) {
        if (bad++ == 0)
          first << "first mismatch at [" << r << "][" << c << "]: got " << got(r, c)
                << ", expected " << exact(r, c) << " (M = " << mag(r, c) << ")";
      }
  if (!bad) return {};
  first << "; " << bad << " of " << rows * cols << " values off";
  return first.str();
}

}  // namespace accuracy
