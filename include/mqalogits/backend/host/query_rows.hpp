// The query rows of a work item, decoded once per row and thread into the workspace in the
// form the path's kernels read (heads padded to the vector width), with their head weights.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../config.hpp"
#include "../../format/bf16.hpp"
#include "../../view/matrix_view.hpp"
#include "../../view/rows_view.hpp"
#include "decode.hpp"
#include "kernel_abi.hpp"
#include "workspace.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// The buffers decode_rows fills for `rows` query rows of `padded` heads (padded_heads).
template <class Format>
void reserve_rows(workspace& ws, std::int64_t rows, int padded) {
  constexpr int head_dim = Format::head_dim;
  ws.w.reserve(static_cast<std::size_t>(rows * padded));
  if constexpr (int8_path<Format>) {
    constexpr int blocks = Format::blocks;
    ws.q_i8.reserve(static_cast<std::size_t>(rows * padded * head_dim / 4));
    ws.q_bias.reserve(static_cast<std::size_t>(rows * padded * blocks));
    ws.q_scale.reserve(static_cast<std::size_t>(rows * padded * blocks));
    ws.q_fold.reserve(static_cast<std::size_t>(rows * padded * head_dim / 4));
    ws.q_fold_start.reserve(static_cast<std::size_t>(rows * padded));
    ws.q_fold_scale.reserve(static_cast<std::size_t>(rows * padded));
    ws.q_compact.reserve(static_cast<std::size_t>(rows));
  } else {
    ws.q_f32.reserve(static_cast<std::size_t>(rows * padded * head_dim));
    ws.q_bf16.reserve(static_cast<std::size_t>(rows * padded * head_dim / 2));
    ws.q_bf16_scale.reserve(static_cast<std::size_t>(rows * padded));
    ws.q_compact.reserve(static_cast<std::size_t>(rows));
  }
}

// Heads rounded up to the path's vector width.
inline int padded_heads(const host_abi::format_kernels& kernels, int heads) {
  return (heads + kernels.lanes - 1) / kernels.lanes * kernels.lanes;
}

template <class Format>
host_abi::rows_ref rows_of(const rows_view<Format>& q) {
  return {q.data, q.scales, q.data_stride, q.scale_stride};
}

// Decoded query rows [first_row, end_row) of one item, in the workspace (kept when the
// workspace holds them already from an earlier item of this call).
template <class Format, class W>
void decode_rows(const host_abi::format_kernels& kernels, const rows_view<Format>& q,
                 const matrix_view<const W>& w, std::int64_t first_row, std::int64_t end_row,
                 std::uint64_t call, workspace& ws) {
  if (ws.call == call && ws.row_begin == first_row && ws.row_end == end_row) return;
  const int heads = static_cast<int>(w.cols);
  const int padded = padded_heads(kernels, heads);
  const std::int64_t rows = end_row - first_row;
  reserve_rows<Format>(ws, rows, padded);
  const host_abi::rows_ref q_rows = rows_of(q);
  constexpr int head_dim = Format::head_dim;
  if constexpr (int8_path<Format>) {
    constexpr int blocks = Format::blocks;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t q_row = (first_row + r) * heads;  // the row's first head
      kernels.decode_q_i8(q_rows, q_row, heads, padded, ws.q_i8.data() + r * padded * head_dim / 4,
                          ws.q_bias.data() + r * padded * blocks,
                          ws.q_scale.data() + r * padded * blocks);
      ws.q_compact.data()[r] =
          kernels.fold_rows &&
          kernels.decode_q_i8_fold(
              q_rows, q_row, heads, padded, ws.q_fold.data() + r * padded * head_dim / 4,
              ws.q_fold_start.data() + r * padded, ws.q_fold_scale.data() + r * padded);
    }
  } else {
    // Both forms of a row that has the bf16 one: its scores over keys without it take the fp32
    // kernel.
    for (std::int64_t r = 0; r < rows; ++r) {
      kernels.decode_q_f32(q_rows, (first_row + r) * heads, heads, padded,
                           ws.q_f32.data() + r * padded * head_dim);
      ws.q_compact.data()[r] = static_cast<unsigned char>(
          kernels.bf16_kernel
              ? kernels.decode_q_bf16(q_rows, (first_row + r) * heads, heads, padded,
                                      ws.q_bf16.data() + r * padded * head_dim / 2,
                                      ws.q_bf16_scale.data() + r * padded)
              : 0);
    }
  }
  float* weights = ws.w.data();  // [rows, padded], zero past the heads
  for (std::int64_t r = 0; r < rows; ++r)
    for (int h = 0; h < padded; ++h)
      weights[r * padded + h] = h < heads ? to_float(w(first_row + r, h)) : 0.0f;
  ws.call = call;
  ws.row_begin = first_row;
  ws.row_end = end_row;
}

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
