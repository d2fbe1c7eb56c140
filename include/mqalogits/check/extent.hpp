// The checks every view gets before anything reads through it: no null pointer with a non-zero
// extent, rows no closer than their length, and a byte extent that 64 bits can address. Shared by
// the entry points and the metadata functions, which read the caller's arrays first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "../config.hpp"
#include "../error.hpp"
#include "../view/matrix_view.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace detail {

// True when (rows - 1) * stride + row_bytes bytes from the base are addressable in 64 bits.
inline bool extent_fits(std::int64_t rows, std::int64_t stride_bytes, std::int64_t row_bytes) {
  if (rows <= 0) return true;
  std::int64_t span;
  return !__builtin_mul_overflow(rows - 1, stride_bytes, &span) &&
         !__builtin_add_overflow(span, row_bytes, &span);
}

// Weights, logits, lengths, block tables and indices are read and written as typed elements, so
// they must sit at their type's natural alignment (a misaligned one is undefined behaviour in
// C++, and faults on some targets); quantised rows and caches are bytes and may sit anywhere.
inline void check_aligned(const char* where, const char* name, const void* p, std::size_t align) {
  require(reinterpret_cast<std::uintptr_t>(p) % align == 0, where, [&](auto& m) {
    m << name << " address " << static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p))
      << " is not aligned to its element size " << align;
  });
}

// m: [rows, cols] with a row stride in elements, whatever its shape is meant to be.
template <class T>
void check_matrix_extent(const char* where, const char* name, const matrix_view<T>& v) {
  require(v.rows == 0 || v.cols == 0 || v.data, where, [&](auto& m) {
    m << name << " is null with shape [" << v.rows << ", " << v.cols << "]";
  });
  require(v.stride >= v.cols, where,
          [&](auto& m) { m << name << " stride " << v.stride << " < cols " << v.cols; });
  check_aligned(where, name, v.data, alignof(T));
  // The stride bound first: it keeps stride * sizeof(T) (and cols * sizeof(T)) from overflowing.
  require(v.stride <= std::numeric_limits<std::int64_t>::max() / 8 &&
              extent_fits(v.rows, v.stride * static_cast<std::int64_t>(sizeof(T)),
                          v.cols * static_cast<std::int64_t>(sizeof(T))),
          where, [&](auto& m) {
            m << name << " byte extent overflows: " << v.rows << " rows x stride " << v.stride;
          });
}

}  // namespace detail
MQALOGITS_NAMESPACE_END
