// The top-k selection: per output row, the k columns with the largest fp32 logits, written
// instead of the [rows, columns] logits (which are never materialised). This is what the
// DeepSeek-V3.2 indexer's logits are for: the engine attends only to the selected tokens.
//
//   ml::topk(indices)                               indices [rows, k] int32
//   ml::topk(indices, values)                       + values [rows, k] float
//   ml::topk(indices, values, ml::topk_index::slot)      paged kernels: cache slots
//   ml::topk(indices, values, ml::topk_index::position)  sparse kernels: request-local positions
//   ml::topk(indices[, values], ml::topk_offset(o))      dense kernel only: column + o[row]
//   ml::topk(...).with_short_rows()                      dense and paged: rows of len <= k
//                                                        unranked, 0..len-1 ascending
//
// passed where a kernel takes its logits view (alone, or beside candidate blocks:
// candidate_blocks.hpp). k is the views' column count (any k >= 1).
// Row r of `indices` holds the columns (numbered as in the logits row) of the k largest valid
// logits of row r in descending order of value, ties broken by the lower column, NaN above
// +inf (as torch.topk); masked columns are never selected; a row with fewer than k valid
// columns is padded with -1 (values -inf). The sparse and paged-sparse kernels never select a
// token twice: where a row selects a block again (engines pad rows by repeating their last
// valid block), only the columns of its first entry are candidates. Ranking uses the fp32 logit,
// before any rounding to a logits type. The result equals a stable descending sort of the row's
// valid fp32 logits, for every executor and thread count.
//
// Index kinds other than the column (a kernel that does not take one does not compile with it):
// - topk_index::slot (fp8_fp4_paged_mqa_logits and fp8_fp4_paged_sparse_mqa_logits; what
//   sglang's and vLLM's CPU topk_transform produce) writes block_table[request, pos / page_kv] *
//   page_kv + pos % page_kv for the selected context position pos.
// - topk_index::position (fp8_fp4_sparse_mqa_logits and fp8_fp4_paged_sparse_mqa_logits; what
//   DeepSeek V4.1's consumer layers map their selection to) writes the selected token's
//   request-local position: token - ks[row] on the sparse kernel (under either column mapping),
//   the context position on the paged-sparse kernel. Rows are ranked as with columns (ties to
//   the lower column).
//
// topk_offset(offsets) (fp8_fp4_mqa_logits and fp8_mqa_logits only; sglang's ragged prefill adds
// its per-row topk_indices_offset to the dense top-k) writes column + offsets[row] instead of the
// column, -1 kept; offsets has one int32 or int64 entry per row, each >= 0 and small enough that
// every column plus it fits int32 (checked).
//
// This header holds what the caller writes and its checks; the output policy that runs a
// selection, whichever backend computed the scores, is topk_output.hpp.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>

#include "../check/overlap.hpp"
#include "../check/shapes.hpp"
#include "../config.hpp"
#include "../error.hpp"
#include "../view/index_array.hpp"
#include "../view/matrix_view.hpp"
#include "output.hpp"

MQALOGITS_NAMESPACE_BEGIN

// What a top-k selection writes in `indices`: the logits row's column, the request-local
// position of the selected token (sparse and paged-sparse kernels), or the cache slot of that
// position (paged and paged-sparse kernels).
namespace topk_index {
struct column_t {
  explicit constexpr column_t() = default;
};
struct position_t {
  explicit constexpr position_t() = default;
};
struct slot_t {
  explicit constexpr slot_t() = default;
};
inline constexpr column_t column{};
inline constexpr position_t position{};
inline constexpr slot_t slot{};
}  // namespace topk_index

template <class T>
concept topk_index_kind = std::same_as<T, topk_index::column_t> ||
    std::same_as<T, topk_index::position_t> || std::same_as<T, topk_index::slot_t>;

// A top-k request as the kernels take it: the caller's views and the index kind. values with
// no data and shape [0, 0] means "indices only". short_rows: see with_short_rows().
template <class Index>
struct topk_selection {
  matrix_view<std::int32_t> indices;
  matrix_view<float> values;
  bool short_rows = false;

  // A row with no more valid columns than k (len <= k) is written as its valid columns in
  // ascending order (0..len-1 where columns are request-local positions), -1 after them, as
  // vLLM's and sglang's short-context paths do: such a row is not ranked. Dense and paged
  // kernels; values cannot be asked for with it (a short row has none).
  topk_selection with_short_rows() const {
    topk_selection s = *this;
    s.short_rows = true;
    return s;
  }
};

template <topk_index_kind Index = topk_index::column_t>
topk_selection<Index> topk(matrix_view<std::int32_t> indices, Index = Index{}) {
  return {indices, {}};
}
template <topk_index_kind Index = topk_index::column_t>
topk_selection<Index> topk(matrix_view<std::int32_t> indices, matrix_view<float> values,
                           Index = Index{}) {
  return {indices, values};
}

// A per-row offset for the dense top-k's columns: ml::topk(indices[, values], topk_offset(o)).
template <index_value I>
struct topk_offsets {
  std::span<const I> offsets;
};
template <index_array R>
topk_offsets<index_value_of<R>> topk_offset(const R& offsets) {
  return {index_span(offsets)};
}
template <index_value I>
struct topk_offset_selection {
  matrix_view<std::int32_t> indices;
  matrix_view<float> values;
  std::span<const I> offsets;
  bool short_rows = false;

  topk_offset_selection with_short_rows() const {  // as topk_selection's
    topk_offset_selection s = *this;
    s.short_rows = true;
    return s;
  }
};
template <index_value I>
topk_offset_selection<I> topk(matrix_view<std::int32_t> indices, topk_offsets<I> offsets) {
  return {indices, {}, offsets.offsets};
}
template <index_value I>
topk_offset_selection<I> topk(matrix_view<std::int32_t> indices, matrix_view<float> values,
                              topk_offsets<I> offsets) {
  return {indices, values, offsets.offsets};
}

template <class T>
inline constexpr bool is_topk_offset_selection = false;
template <class I>
inline constexpr bool is_topk_offset_selection<topk_offset_selection<I>> = true;
template <class T>
inline constexpr bool is_topk_selection = false;
template <class Index>
inline constexpr bool is_topk_selection<topk_selection<Index>> = true;

namespace detail {
// One offset per row, each >= 0 and with offset + (cols - 1) within int32.
template <class I>
void check_topk_offsets(const char* where, std::span<const I> offsets, std::int64_t rows,
                        std::int64_t cols) {
  check_span(where, "top-k offsets", offsets, rows);
  const std::int64_t limit =
      std::int64_t{std::numeric_limits<std::int32_t>::max()} - std::max<std::int64_t>(cols - 1, 0);
  for (std::size_t r = 0; r < offsets.size(); ++r)
    require(offsets[r] >= 0 && offsets[r] <= limit, where, [&](auto& m) {
      m << "top-k offsets[" << r << "] = " << offsets[r] << " must be in [0, " << limit
        << "] (column + offset must fit int32 for " << cols << " columns)";
    });
}
// The offsets of an output that has them (every other output: none to check).
template <class Out>
void check_topk_offsets_of(const char*, const Out&, std::int64_t, std::int64_t) {}
template <class I>
void check_topk_offsets_of(const char* where, const topk_offset_selection<I>& sel,
                           std::int64_t rows, std::int64_t cols) {
  check_topk_offsets(where, sel.offsets, rows, cols);
}
// The offsets' bytes, for the overlap check (none without offsets).
template <class Out>
byte_range topk_offsets_range(const Out&) {
  return range_of("top-k offsets", std::span<const std::int32_t>());
}
template <class I>
byte_range topk_offsets_range(const topk_offset_selection<I>& sel) {
  return range_of("top-k offsets", sel.offsets);
}
}  // namespace detail

MQALOGITS_NAMESPACE_END
