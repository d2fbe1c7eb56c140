// The shape checks of the views a call takes (Q and key rows, weights, logits, index spans, the
// paged cache): each names the function, the argument and the offending value; all run before
// anything is written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>

#include "../config.hpp"
#include "../error.hpp"
#include "../view/index_array.hpp"
#include "../view/matrix_view.hpp"
#include "../view/paged_cache_view.hpp"
#include "../view/rows_view.hpp"
#include "elements.hpp"
#include "extent.hpp"

MQALOGITS_NAMESPACE_BEGIN

namespace detail {

// A view's head dim is one the format has kernels for: 128, 64, or 32 for the FP8 formats.
template <class Format>
void check_head_dim(const char* where, const char* name, int head_dim) {
  require(has_head_dim<Format>(head_dim), where, [&](auto& m) {
    m << name << " head_dim = " << head_dim << " is not supported by " << Format::name << " ("
      << head_dims_text<Format>() << ")";
  });
}

// K (or the cache) must have Q's head dim: the dot products run over one length.
inline void check_same_head_dim(const char* where, const char* name, int head_dim, int q_head_dim) {
  require(head_dim == q_head_dim, where, [&](auto& m) {
    m << name << " head_dim = " << head_dim << " differs from q head_dim = " << q_head_dim;
  });
}

template <class Format>
void check_rows(const char* where, const char* name, const rows_view<Format>& v,
                std::int64_t expected_rows) {
  check_head_dim<Format>(where, name, v.head_dim);
  require(v.rows == expected_rows, where,
          [&](auto& m) { m << name << " has " << v.rows << " rows, expected " << expected_rows; });
  require(v.rows == 0 || (v.data && (v.scales || scales_optional_v<Format>)), where, [&](auto& m) {
    m << name << (v.data ? " scales" : " data") << " is null with " << v.rows << " rows";
  });
  require(v.data_stride >= v.data_bytes(), where, [&](auto& m) {
    m << name << " data stride " << v.data_stride << " < row size " << v.data_bytes();
  });
  require(v.scale_stride >= Format::scale_bytes, where, [&](auto& m) {
    m << name << " scale stride " << v.scale_stride << " < row size " << Format::scale_bytes;
  });
  // One check per stride, so the message names the stride that overflows.
  require(extent_fits(v.rows, v.data_stride, v.data_bytes()), where, [&](auto& m) {
    m << name << " data byte extent overflows: " << v.rows << " rows x stride " << v.data_stride;
  });
  require(extent_fits(v.rows, v.scale_stride, Format::scale_bytes), where, [&](auto& m) {
    m << name << " scale byte extent overflows: " << v.rows << " rows x stride " << v.scale_stride;
  });
}

template <class T>
void check_matrix(const char* where, const char* name, const matrix_view<T>& v, std::int64_t rows,
                  std::int64_t cols) {
  require(v.rows == rows && v.cols == cols, where, [&](auto& m) {
    m << name << " shape [" << v.rows << ", " << v.cols << "], expected [" << rows << ", " << cols
      << "]";
  });
  check_matrix_extent(where, name, v);
}

inline void check_heads(const char* where, std::int64_t heads) {
  require(heads >= 1 && heads <= max_heads, where, [&](auto& m) {
    m << "weights have " << heads << " heads (columns); supported: 1.." << max_heads;
  });
}

template <index_value I>
void check_span(const char* where, const char* name, std::span<const I> s, std::int64_t size) {
  require(static_cast<std::int64_t>(s.size()) == size, where,
          [&](auto& m) { m << name << " has " << s.size() << " entries, expected " << size; });
  require(size == 0 || s.data(), where, [&](auto& m) { m << name << " is null"; });
  check_aligned(where, name, s.data(), alignof(I));
}

template <class Format>
void check_cache(const char* where, const paged_cache_view<Format>& c) {
  check_head_dim<Format>(where, "cache", c.head_dim);
  require(c.num_pages >= 0, where, [&](auto& m) { m << "cache num_pages = " << c.num_pages; });
  require(c.num_pages == 0 || c.base, where,
          [&](auto& m) { m << "cache is null with " << c.num_pages << " pages"; });
  require(c.page_kv >= 1, where, [&](auto& m) { m << "cache page_kv = " << c.page_kv; });
  const std::int64_t page_bytes = std::int64_t{c.page_kv} * c.bytes_per_token();
  require(c.page_stride >= page_bytes, where, [&](auto& m) {
    m << "cache page_stride " << c.page_stride << " < page_kv * token_bytes = " << page_bytes;
  });
  require(extent_fits(c.num_pages, c.page_stride, page_bytes), where, [&](auto& m) {
    m << "cache byte extent overflows: " << c.num_pages << " pages x stride " << c.page_stride;
  });
}

// Checks Q [rows * H rows], weights [rows, H] and out [rows, cols]; H comes from the weights.
template <class Format, class W, class Output>
void check_q_weights_out(const char* where, const rows_view<Format>& q,
                         const matrix_view<const W>& w, const Output& output, std::int64_t rows,
                         std::int64_t cols) {
  check_heads(where, w.cols);
  check_matrix(where, "weights", w, rows, w.cols);
  std::int64_t q_rows = 0;
  require(!__builtin_mul_overflow(rows, w.cols, &q_rows), where,
          [&](auto& m) { m << rows << " rows x " << w.cols << " heads overflows"; });
  // Q's row count follows from the weights' shape: say so, or a weights mistake reads as a Q one.
  require(q.rows == q_rows, where, [&](auto& m) {
    m << "q has " << q.rows << " rows, but weights [" << w.rows << ", " << w.cols << "] need "
      << rows << " x " << w.cols << " = " << q_rows;
  });
  check_rows(where, "q", q, q_rows);
  output.check(where, rows, cols);
}

}  // namespace detail
MQALOGITS_NAMESPACE_END
