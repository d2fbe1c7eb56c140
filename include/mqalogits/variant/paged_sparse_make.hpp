// get_paged_sparse_mqa_logits_metadata: the paged-sparse call's arguments checked and kept as
// its metadata.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "../check/extent.hpp"
#include "../check/index_arrays.hpp"
#include "../config.hpp"
#include "../error.hpp"
#include "../view/index_array.hpp"
#include "../view/matrix_view.hpp"
#include "paged_sparse_checks.hpp"
#include "paged_sparse_metadata.hpp"
#include "sparse.hpp"

MQALOGITS_NAMESPACE_BEGIN

namespace detail {
template <index_value I>
paged_sparse_mqa_metadata make_paged_sparse_metadata(
    std::span<const I> context_lens, matrix_view<const I> block_table, std::span<const I> indices,
    std::int32_t page_kv, matrix_view<const I> sparse_kv_block_indices,
    std::int64_t sparse_block_kv, paged_sparse_protocol protocol) {
  constexpr const char* where = "get_paged_sparse_mqa_logits_metadata";
  check_sparse_indices(where, sparse_kv_block_indices, sparse_block_kv);
  require(page_kv > 0 && page_kv % sparse_block_kv == 0, where, [&](auto& m) {
    m << "page_kv = " << page_kv
      << " must be a positive multiple of sparse_block_kv = " << sparse_block_kv;
  });
  require(protocol == paged_sparse_protocol::reread || protocol == paged_sparse_protocol::snapshot,
          where, [&](auto& m) { m << "protocol " << static_cast<int>(protocol) << " is unknown"; });
  const std::int64_t rows = sparse_kv_block_indices.rows, cap = sparse_kv_block_indices.cols;
  require(static_cast<std::int64_t>(context_lens.size()) == rows, where, [&](auto& m) {
    m << "context_lens has " << context_lens.size() << " entries, sparse_kv_block_indices has "
      << rows << " rows";
  });
  require(block_table.rows == rows && block_table.cols >= 1, where, [&](auto& m) {
    m << "block_table shape [" << block_table.rows << ", " << block_table.cols << "] must be ["
      << rows << ", max_blocks >= 1]";
  });
  require(rows == 0 || block_table.data, where,
          [&](auto& m) { m << "block_table is null with " << rows << " rows"; });
  check_matrix_extent(where, "block_table", block_table);  // stride, extent
  check_index_span(where, "context_lens", context_lens);
  for (std::size_t r = 0; r < context_lens.size(); ++r)
    require(context_lens[r] >= 0, where,
            [&](auto& m) { m << "context_lens[" << r << "] = " << context_lens[r] << " < 0"; });
  check_request_indices(where, indices, block_table);

  paged_sparse_mqa_metadata meta;
  auto& f = *meta.f_;
  f.rows = rows;
  f.cap = cap;
  f.block = sparse_block_kv;
  f.page_kv = page_kv;
  f.max_blocks = block_table.cols;
  f.protocol = protocol;
  for (const I len : context_lens) f.lens.push_back(bounded(len));
  std::int64_t capacity = 0;  // positions the block table covers (overflow: all of them)
  if (__builtin_mul_overflow(block_table.cols, std::int64_t{page_kv}, &capacity))
    capacity = INT64_MAX;
  for (std::int64_t r = 0; r < rows && f.long_row < 0; ++r)
    if (context_lens[static_cast<std::size_t>(r)] > capacity) f.long_row = r;
  f.idx = copy_rows(sparse_kv_block_indices,
                    [&](std::int64_t v) { return bounded_block(v, sparse_block_kv); });
  // Only the block-table entries the selection reads: one per used block, not the whole table.
  f.block_page.assign(f.idx.size(), 0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t b = 0; b < meta.num_blocks(r); ++b) {
      if (!meta.block_used(r, b)) continue;
      const std::int64_t slot = meta.block_table_slot(r, b);
      const std::int64_t page = block_table(r, slot);
      f.block_page[static_cast<std::size_t>(r * cap + b)] = page;
      if (f.lowest.row < 0 || page < f.lowest.page) f.lowest = {r, slot, page};
      if (f.highest.row < 0 || page > f.highest.page) f.highest = {r, slot, page};
    }
  f.repeated =
      find_repeated_blocks(f.idx, rows, cap, [&](std::int64_t r) { return meta.num_blocks(r); });
  if (protocol == paged_sparse_protocol::snapshot)
    f.snap = std::make_unique<paged_sparse_snapshot>();
  return meta;
}

}  // namespace detail

// context_lens: [num_q]; block_table: [num_q, max_blocks]; indices: [num_q] the request of each
// row (DeepGEMM's varlen grouping; empty: every row its own request); page_kv: a positive
// multiple of sparse_block_kv (8 or 16); sparse_kv_block_indices: [num_q, cap] (-1 pads). Index
// arrays all int32 (as DeepGEMM takes them) or all int64, the type context_lens has; the
// metadata keeps its own copy.
template <index_array Lens>
paged_sparse_mqa_metadata get_paged_sparse_mqa_logits_metadata(
    const Lens& context_lens, matrix_view<const index_value_of<Lens>> block_table,
    std::span<const index_value_of<Lens>> indices, std::int32_t page_kv,
    matrix_view<const index_value_of<Lens>> sparse_kv_block_indices, std::int64_t sparse_block_kv,
    paged_sparse_protocol protocol = paged_sparse_protocol::reread) {
  return detail::make_paged_sparse_metadata(index_span(context_lens), block_table, indices, page_kv,
                                            sparse_kv_block_indices, sparse_block_kv, protocol);
}

// The same, every query row its own request.
template <index_array Lens>
paged_sparse_mqa_metadata get_paged_sparse_mqa_logits_metadata(
    const Lens& context_lens, matrix_view<const index_value_of<Lens>> block_table,
    std::int32_t page_kv, matrix_view<const index_value_of<Lens>> sparse_kv_block_indices,
    std::int64_t sparse_block_kv, paged_sparse_protocol protocol = paged_sparse_protocol::reread) {
  return detail::make_paged_sparse_metadata(index_span(context_lens), block_table,
                                            std::span<const index_value_of<Lens>>(), page_kv,
                                            sparse_kv_block_indices, sparse_block_kv, protocol);
}

MQALOGITS_NAMESPACE_END
