// std::span interop: engines often hold weights, logits and lengths as flat row-major buffers.
// as_matrix_view turns one into the matrix_view the kernels take, with the shape checked.
//
//   std::vector<float> w(num_q * H);
//   ml::fp8_fp4_mqa_logits(q, kv, ml::as_matrix_view(std::span(w), H), ks, ke, ...);
//   auto lens = ml::as_matrix_view(std::span<const std::int32_t>(context_lens), next_n);
#pragma once

#include <cstdint>
#include <span>

#include "../config.hpp"
#include "../error.hpp"
#include "../view/matrix_view.hpp"

MQALOGITS_NAMESPACE_BEGIN

// A flat buffer as [rows, cols] with `stride` elements between rows (0: packed, stride = cols).
// The buffer must hold whole rows: rows * stride elements, or one row's padding less at the end.
template <class T, std::size_t Extent>
matrix_view<T> as_matrix_view(std::span<T, Extent> flat, std::int64_t cols,
                              std::int64_t stride = 0) {
  const std::int64_t s = stride ? stride : cols;
  const auto size = static_cast<std::int64_t>(flat.size());
  detail::require(cols >= 1 && s >= cols, "as_matrix_view", [&](auto& m) {
    m << "cols = " << cols << ", stride = " << s << ": need cols >= 1 and stride >= cols";
  });
  // Whole rows: (rows - 1) strides, then a full stride or just the row; no product overflows,
  // as (rows - 1) * s <= size.
  const std::int64_t rows = size / s + (size % s != 0);
  const std::int64_t last = rows == 0 ? 0 : size - (rows - 1) * s;
  detail::require(rows == 0 || last == s || last == cols, "as_matrix_view", [&](auto& m) {
    m << "a buffer of " << size << " elements is not whole rows of " << cols << " (stride " << s
      << ")";
  });
  return matrix_view<T>(flat.data(), rows, cols, s);
}

MQALOGITS_NAMESPACE_END
