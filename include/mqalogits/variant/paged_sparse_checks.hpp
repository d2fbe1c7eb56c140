// The paged-sparse metadata's own argument check: DeepGEMM's varlen `indices`, which group the
// query rows of a request.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "../check/index_arrays.hpp"
#include "../config.hpp"
#include "../error.hpp"
#include "../std_abi.hpp"
#include "../view/index_array.hpp"
#include "../view/matrix_view.hpp"

MQALOGITS_NAMESPACE_BEGIN

namespace detail {
// DeepGEMM's `indices` groups the query rows of one request: rows with the same value must be
// consecutive and have identical block-table rows. Results never depend on it.
template <index_value I>
void check_request_indices(const char* where, std::span<const I> indices,
                           matrix_view<const I> block_table) {
  if (indices.empty()) return;  // every row its own request
  require(static_cast<std::int64_t>(indices.size()) == block_table.rows, where, [&](auto& m) {
    m << "indices has " << indices.size() << " entries, expected one per query row ("
      << block_table.rows << ")";
  });
  check_index_span(where, "indices", indices);
  detail::vector<I> closed;  // requests whose rows have ended
  for (std::size_t r = 1; r <= indices.size(); ++r) {
    if (r < indices.size() && indices[r] == indices[r - 1]) {
      const auto row = static_cast<std::int64_t>(r);
      for (std::int64_t c = 0; c < block_table.cols; ++c)
        require(block_table(row, c) == block_table(row - 1, c), where, [&](auto& m) {
          m << "indices[" << r - 1 << "] = indices[" << r << "] = " << indices[r]
            << " (one request) but block_table[" << r - 1 << "][" << c
            << "] = " << block_table(row - 1, c) << " differs from block_table[" << r << "][" << c
            << "] = " << block_table(row, c);
        });
      continue;
    }
    closed.push_back(indices[r - 1]);
  }
  std::sort(closed.begin(), closed.end());
  const auto twice = std::adjacent_find(closed.begin(), closed.end());
  require(twice == closed.end(), where, [&](auto& m) {
    m << "indices value " << *twice
      << " appears in two runs of rows: the rows of a request must be consecutive";
  });
}
}  // namespace detail

MQALOGITS_NAMESPACE_END
