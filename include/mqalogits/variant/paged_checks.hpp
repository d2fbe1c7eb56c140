// The paged call's argument checks: varlen indices, context lengths, the kernel's inputs and
// the arguments a schedule is made from.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>

#include "../check/extent.hpp"
#include "../check/index_arrays.hpp"
#include "../check/output_width.hpp"
#include "../check/shapes.hpp"
#include "../config.hpp"
#include "../error.hpp"
#include "../std_abi.hpp"
#include "../view/index_array.hpp"
#include "../view/matrix_view.hpp"
#include "../view/paged_cache_view.hpp"
#include "paged_limits.hpp"

MQALOGITS_NAMESPACE_BEGIN

namespace detail {

// Upstream's varlen `indices`: rows with the same value are one request and must be consecutive
// (a value that reappears after another one is an error).
template <index_value I>
void check_varlen_indices(const char* where, std::span<const I> indices, std::int64_t rows) {
  require(static_cast<std::int64_t>(indices.size()) == rows, where, [&](auto& m) {
    m << "indices has " << indices.size() << " entries, expected " << rows
      << " (one per query row)";
  });
  check_index_span(where, "indices", indices);
  // (value, first row) of every run of equal values: a value with two runs is not consecutive.
  detail::vector<std::pair<I, std::size_t>> runs;
  for (std::size_t r = 0; r < indices.size(); ++r)
    if (r == 0 || indices[r] != indices[r - 1]) runs.emplace_back(indices[r], r);
  std::sort(runs.begin(), runs.end());
  for (std::size_t i = 1; i < runs.size(); ++i)
    require(runs[i].first != runs[i - 1].first, where, [&](auto& m) {
      m << "indices[" << runs[i].second << "] = " << runs[i].first << " reappears after row "
        << runs[i].second - 1 << " = " << indices[runs[i].second - 1]
        << ": rows of one request must be consecutive";
    });
}

// A context length the paged kernel can take: in [0, max_paged_context_len].
template <index_value I>
void check_paged_context_len(const char* where, I len, std::int64_t b, std::int64_t j) {
  require(len >= 0, where,
          [&](auto& m) { m << "context_lens[" << b << "][" << j << "] = " << len << " < 0"; });
  if constexpr (sizeof(I) > sizeof(std::int32_t))  // an int32 always fits
    require(len <= max_paged_context_len, where, [&](auto& m) {
      m << "context_lens[" << b << "][" << j << "] = " << len << " > " << max_paged_context_len
        << " (the longest context the paged kernel takes, as DeepGEMM's int32 lengths)";
    });
}

// A page size the paged kernel takes (paged_limits.hpp).
inline void check_page_kv(const char* where, std::int32_t page_kv) {
  require(supported_page_kv(page_kv), where, [&](auto& m) {
    m << "page_kv = " << page_kv << " is not supported (1.." << max_page_kv << ")";
  });
}

// The paged call's own arguments before the schedule is compared with them: context_lens
// [B, next_n >= 1] of lengths the kernel takes, block_table [B, max_blocks >= 1], a positive
// max_context_len and a cache of a supported page size.
template <class Format, index_value I>
void check_paged_inputs(const char* where, const paged_cache_view<Format>& cache,
                        matrix_view<const I> context_lens, matrix_view<const I> block_table,
                        std::int64_t max_context_len) {
  const std::int64_t B = context_lens.rows, next_n = context_lens.cols;
  require(next_n >= 1 && B >= 0, where, [&](auto& m) {
    m << "context_lens shape [" << B << ", " << next_n << "] must be [B, next_n >= 1]";
  });
  check_matrix(where, "context_lens", context_lens, B, next_n);
  // The plan's capacity max_blocks * page_kv must not overflow int64.
  require(block_table.cols >= 1 && block_table.cols <= INT64_MAX / max_page_kv, where,
          [&](auto& m) { m << "block_table has " << block_table.cols << " columns"; });
  check_matrix(where, "block_table", block_table, B, block_table.cols);
  check::max_context_len(where, max_context_len);
  check_cache(where, cache);
  check_page_kv(where, cache.page_kv);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = 0; j < next_n; ++j)
      check_paged_context_len(where, context_lens(b, j), b, j);
}

// Without options::truncate_long_contexts, every length must fit its block table
// (max_blocks * page_kv positions) and max_context_len.
template <index_value I>
void check_contexts_fit(const char* where, matrix_view<const I> context_lens,
                        std::int64_t max_blocks, std::int32_t page_kv,
                        std::int64_t max_context_len) {
  const std::int64_t capacity = max_blocks * std::int64_t{page_kv};
  for (std::int64_t b = 0; b < context_lens.rows; ++b)
    for (std::int64_t j = 0; j < context_lens.cols; ++j) {
      const std::int64_t len = context_lens(b, j);
      require(len <= capacity, where, [&](auto& m) {
        m << "context_lens[" << b << "][" << j << "] = " << len
          << " is longer than its block table, max_blocks * page_kv = " << max_blocks << " * "
          << page_kv << " = " << capacity
          << " (options::truncate_long_contexts masks the positions past it)";
      });
      require(len <= max_context_len, where, [&](auto& m) {
        m << "context_lens[" << b << "][" << j << "] = " << len
          << " is longer than max_context_len = " << max_context_len
          << " (options::truncate_long_contexts masks the positions past it)";
      });
    }
}

// The arguments a schedule is made from: context_lens [B, next_n], a supported page size, a
// worker count within the cap, and varlen indices (next_n 1) that group their rows.
template <index_value I>
void check_schedule_arguments(const char* where, matrix_view<const I> context_lens,
                              std::int32_t page_kv, int num_workers,
                              const std::span<const I>* indices) {
  require(context_lens.rows >= 0 && context_lens.cols >= 1, where, [&](auto& m) {
    m << "context_lens shape [" << context_lens.rows << ", " << context_lens.cols
      << "] must be [B, next_n] with next_n >= 1";
  });
  require(context_lens.rows == 0 || context_lens.data, where,
          [&](auto& m) { m << "context_lens is null with " << context_lens.rows << " rows"; });
  detail::check_matrix_extent(where, "context_lens", context_lens);  // stride, extent
  check_page_kv(where, page_kv);
  require(num_workers >= 1 && num_workers <= max_paged_workers, where, [&](auto& m) {
    m << "num_workers = " << num_workers << " must be in [1, " << max_paged_workers << "]";
  });
  if (indices) {
    require(context_lens.cols == 1, where, [&](auto& m) {
      m << "indices needs next_n == 1 (context_lens [B, 1]), context_lens has " << context_lens.cols
        << " columns";
    });
    detail::check_varlen_indices(where, *indices, context_lens.rows);
  }
}
}  // namespace detail

MQALOGITS_NAMESPACE_END
