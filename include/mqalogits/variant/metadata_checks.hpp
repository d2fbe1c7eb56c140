// Checks the metadata functions share (SPEC §5): they read the caller's int32 arrays (lengths,
// ks / ke, block tables, sparse indices) before any kernel runs, so they must reject null
// pointers and strides whose byte offsets overflow before the first read.
#pragma once

#include <cstdint>
#include <span>

#include "../config.hpp"
#include "../error.hpp"
#include "../view/matrix_view.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace detail {

// int32 arrays are read as int32: they must sit at a multiple of 4 bytes.
inline void check_int32_aligned(const char* where, const char* name, const std::int32_t* p) {
  require(reinterpret_cast<std::uintptr_t>(p) % alignof(std::int32_t) == 0, where, [&](auto& msg) {
    msg << name << " address " << static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p))
        << " is not aligned to its element size 4";
  });
}

// m: [rows, cols] int32 with a row stride in elements.
inline void check_index_matrix(const char* where, const char* name,
                               matrix_view<const std::int32_t> m) {
  require(m.rows == 0 || m.cols == 0 || m.data, where, [&](auto& msg) {
    msg << name << " is null with shape [" << m.rows << ", " << m.cols << "]";
  });
  require(m.stride >= m.cols, where,
          [&](auto& msg) { msg << name << " stride " << m.stride << " < cols " << m.cols; });
  check_int32_aligned(where, name, m.data);
  // The byte offset of the last element read: ((rows - 1) * stride + cols) * 4.
  std::int64_t last = 0;
  const bool fits = m.rows <= 0 || (!__builtin_mul_overflow(m.rows - 1, m.stride, &last) &&
                                    !__builtin_add_overflow(last, m.cols, &last) &&
                                    !__builtin_mul_overflow(last, std::int64_t{4}, &last));
  require(fits, where, [&](auto& msg) {
    msg << name << " byte extent overflows: " << m.rows << " rows x stride " << m.stride;
  });
}

inline void check_index_span(const char* where, const char* name, std::span<const std::int32_t> s) {
  require(s.empty() || s.data(), where,
          [&](auto& msg) { msg << name << " is null with " << s.size() << " entries"; });
  check_int32_aligned(where, name, s.data());
}

}  // namespace detail
MQALOGITS_NAMESPACE_END
