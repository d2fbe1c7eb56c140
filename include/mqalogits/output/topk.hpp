// The top-k selection: per output row, the k columns with the largest fp32 logits, written
// instead of the [rows, columns] logits (which are never materialised). This is what the
// DeepSeek-V3.2 indexer's logits are for: the engine attends only to the selected tokens.
//
//   ml::topk(indices)                               indices [rows, k] int32
//   ml::topk(indices, values)                       + values [rows, k] float
//   ml::topk(indices, values, ml::topk_index::slot) paged kernel only: cache slots
//   ml::topk(indices[, values], ml::topk_offset(o)) dense kernel only: column + o[row]
//
// passed where a kernel takes its logits view. k is the views' column count (any k >= 1).
// Row r of `indices` holds the columns (numbered as in the logits row) of the k largest valid
// logits of row r in descending order of value, ties broken by the lower column, NaN above
// +inf (as torch.topk); masked columns are never selected; a row with fewer than k valid
// columns is padded with -1 (values -inf). The sparse and paged-sparse kernels never select a
// token twice: where a row selects a block again (engines pad rows by repeating their last
// valid block), only the columns of its first entry are candidates. Ranking uses the fp32 logit,
// before any rounding to a logits type. The result equals a stable descending sort of the row's
// valid fp32 logits, for every executor and thread count.
//
// topk_index::slot (fp8_fp4_paged_mqa_logits only, what sglang's and vLLM's CPU topk_transform
// produce) writes block_table[request, pos / page_kv] * page_kv + pos % page_kv instead of the
// context position pos. Other kernels do not accept it (it does not compile).
//
// topk_offset(offsets) (fp8_fp4_mqa_logits and fp8_mqa_logits only; sglang's ragged prefill adds
// its per-row topk_indices_offset to the dense top-k) writes column + offsets[row] instead of the
// column, -1 kept; offsets has one int32 or int64 entry per row, each >= 0 and small enough that
// every column plus it fits int32 (checked).
//
// This header holds what the caller writes and its checks; the host's output policy that runs
// a selection, whichever backend computed the scores, is backend/host/topk_output.hpp.
#pragma once

#include <algorithm>
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
#include "../view/paged_cache_view.hpp"
#include "output.hpp"

MQALOGITS_NAMESPACE_BEGIN

// What a top-k selection writes in `indices`: the logits row's column, or (paged kernel) the
// cache slot of that context position.
namespace topk_index {
struct column_t {
  explicit constexpr column_t() = default;
};
struct slot_t {
  explicit constexpr slot_t() = default;
};
inline constexpr column_t column{};
inline constexpr slot_t slot{};
}  // namespace topk_index

// A top-k request as the kernels take it: the caller's views and the index kind. values with
// no data and shape [0, 0] means "indices only".
template <class Index>
struct topk_selection {
  matrix_view<std::int32_t> indices;
  matrix_view<float> values;
};

inline topk_selection<topk_index::column_t> topk(matrix_view<std::int32_t> indices) {
  return {indices, {}};
}
inline topk_selection<topk_index::column_t> topk(matrix_view<std::int32_t> indices,
                                                 matrix_view<float> values,
                                                 topk_index::column_t = topk_index::column) {
  return {indices, values};
}
inline topk_selection<topk_index::slot_t> topk(matrix_view<std::int32_t> indices,
                                               matrix_view<float> values, topk_index::slot_t) {
  return {indices, values};
}
inline topk_selection<topk_index::slot_t> topk(matrix_view<std::int32_t> indices,
                                               topk_index::slot_t) {
  return {indices, {}};
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

// What fp8_fp4_paged_mqa_logits accepts in the position of its output: any output, or a
// slot-translating selection (which needs the block table it is given).
template <class T>
concept paged_output_argument =
    output_argument<T> || std::is_same_v<T, topk_selection<topk_index::slot_t>>;

// What the dense kernel accepts in the position of its output: any output, or a selection with
// per-row offsets.
template <class T>
inline constexpr bool is_topk_offset_selection = false;
template <class I>
inline constexpr bool is_topk_offset_selection<topk_offset_selection<I>> = true;
template <class T>
concept dense_output_argument = output_argument<T> || is_topk_offset_selection<T>;

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
// The offsets' bytes, for the overlap check (none without offsets).
template <class Out>
byte_range topk_offsets_range(const Out&) {
  return range_of("top-k offsets", std::span<const std::int32_t>());
}
template <class I>
byte_range topk_offsets_range(const topk_offset_selection<I>& sel) {
  return range_of("top-k offsets", sel.offsets);
}
// A slot-translating selection writes page * page_kv + slot as int32: every slot of the cache
// must fit.
template <class Out, class Format>
void check_topk_slots(const char*, const Out&, const paged_cache_view<Format>&) {}
template <class Format>
void check_topk_slots(const char* where, const topk_selection<topk_index::slot_t>&,
                      const paged_cache_view<Format>& cache) {
  require(cache.num_pages <= (std::int64_t{INT32_MAX} + 1) / cache.page_kv, where, [&](auto& m) {
    m << "top-k slots of " << cache.num_pages << " pages x page_kv " << cache.page_kv
      << " do not fit int32";
  });
}
}  // namespace detail

MQALOGITS_NAMESPACE_END
