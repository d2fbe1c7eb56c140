// Non-owning row-major 2-D view: weights [num_q, H], block tables, sparse indices, logits.
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>

#include "../config.hpp"

MQALOGITS_NAMESPACE_BEGIN

template <class T>
struct matrix_view {
  using element_type = T;

  T* data = nullptr;  // [rows, stride] elements
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t stride = 0;  // elements between rows, >= cols

  constexpr matrix_view() = default;
  constexpr matrix_view(T* p, std::int64_t r, std::int64_t c, std::int64_t s = 0)
      : data(p), rows(r), cols(c), stride(s ? s : c) {}
  // A non-const view converts to a const one.
  template <class U>
    requires(std::is_same_v<const U, T> && !std::is_same_v<U, T>)
  constexpr matrix_view(const matrix_view<U>& o)
      : data(o.data), rows(o.rows), cols(o.cols), stride(o.stride) {}

  // A view with no columns may be null; offsetting a null pointer is undefined, so don't.
  T* row(std::int64_t r) const { return data ? data + r * stride : data; }
  T& operator()(std::int64_t r, std::int64_t c) const { return data[r * stride + c]; }
  std::span<T> row_span(std::int64_t r) const {
    return {row(r), static_cast<std::size_t>(cols)};
  }
};

static_assert(std::is_trivially_copyable_v<matrix_view<const float>>);

MQALOGITS_NAMESPACE_END
