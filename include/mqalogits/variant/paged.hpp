// Paged variant (decode): rows (b, j) of request b share its block table (varlen: consecutive
// rows with one index share identical block-table rows); column j is context position j, read
// from page block_table[b][j / page_kv], slot j % page_kv; valid iff j < context_lens[b][j'] and
// j < max_blocks * page_kv.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "../check/extent.hpp"
#include "../check/index_arrays.hpp"
#include "../check/overlap.hpp"
#include "../check/shapes.hpp"
#include "../config.hpp"
#include "../error.hpp"
#include "../std_abi.hpp"
#include "../view/index_array.hpp"
#include "../view/matrix_view.hpp"
#include "../view/paged_cache_view.hpp"
#include "plan.hpp"

MQALOGITS_NAMESPACE_BEGIN

class paged_mqa_schedule;
namespace detail {
template <index_value I>
void build_paged_schedule(paged_mqa_schedule& s, const char* where,
                          matrix_view<const I> context_lens, std::int32_t page_kv, int num_workers,
                          const std::span<const I>* indices);
}  // namespace detail

// The work schedule of the paged kernel: the context of every request cut into units of
// `keys_per_unit` positions, the units split into num_workers contiguous runs of (nearly) equal
// size, so long and short contexts balance. Worker w runs units from start[w] to start[w + 1],
// each a (request, unit) pair, as upstream's [num_sms + 1, 2] table. A request is the next_n
// rows of a block-table row, or (varlen, upstream's `indices`) a run of consecutive rows with
// the same index; its rows share each key tile the kernel decodes. It must be regenerated when
// the context lengths change: the kernel checks and rejects a stale schedule.
class paged_mqa_schedule {
 public:
  struct position {
    std::int64_t request = 0;
    std::int64_t unit = 0;
  };

  paged_mqa_schedule() = default;
  paged_mqa_schedule(const paged_mqa_schedule&) = default;
  paged_mqa_schedule& operator=(const paged_mqa_schedule&) = default;
  // A moved-from schedule is empty, as a default-constructed one: the kernel rejects it.
  paged_mqa_schedule(paged_mqa_schedule&& o) noexcept { *this = std::move(o); }
  paged_mqa_schedule& operator=(paged_mqa_schedule&& o) noexcept {
    if (this == &o) return *this;
    lens_ = std::move(o.lens_);
    start_ = std::move(o.start_);
    request_begin_ = std::move(o.request_begin_);
    indices_ = std::move(o.indices_);
    o.lens_.clear();
    o.start_.clear();
    o.request_begin_.clear();
    o.indices_.clear();
    next_n_ = std::exchange(o.next_n_, 0);
    page_kv_ = std::exchange(o.page_kv_, 0);
    keys_per_unit_ = std::exchange(o.keys_per_unit_, 0);
    total_units_ = std::exchange(o.total_units_, 0);
    varlen_ = std::exchange(o.varlen_, false);
    return *this;
  }

  int num_workers() const { return static_cast<int>(start_.size()) - 1; }
  std::int64_t num_requests() const {
    return request_begin_.empty() ? 0 : static_cast<std::int64_t>(request_begin_.size()) - 1;
  }
  // Query rows the schedule was made for (B * next_n).
  std::int64_t num_rows() const { return static_cast<std::int64_t>(lens_.size()); }
  std::int64_t next_n() const { return next_n_; }
  std::int32_t page_kv() const { return page_kv_; }
  std::int64_t keys_per_unit() const { return keys_per_unit_; }
  std::int64_t total_units() const { return total_units_; }
  std::int64_t request_units(std::int64_t b) const {
    return (request_keys(b) + keys_per_unit_ - 1) / keys_per_unit_;
  }
  const detail::vector<position>& start() const { return start_; }
  const detail::vector<std::int32_t>& context_lens() const { return lens_; }
  // Varlen: made with `indices` (one entry per row, int32 or int64 as given; empty otherwise).
  bool varlen() const { return varlen_; }
  const detail::vector<std::int64_t>& indices() const { return indices_; }
  // The query rows of request b: [first, first + count).
  std::int64_t request_first_row(std::int64_t b) const {
    return request_begin_[static_cast<std::size_t>(b)];
  }
  std::int64_t request_rows(std::int64_t b) const {
    return request_begin_[static_cast<std::size_t>(b) + 1] -
           request_begin_[static_cast<std::size_t>(b)];
  }

  // Positions the schedule covers for request b: the longest context among its rows.
  std::int64_t request_keys(std::int64_t b) const {
    std::int64_t k = 0;
    for (std::int64_t r = request_first_row(b); r < request_first_row(b) + request_rows(b); ++r)
      k = std::max<std::int64_t>(k, lens_[static_cast<std::size_t>(r)]);
    return k;
  }

  // Throws unless the schedule was made for these lengths (every one), this page size and these
  // varlen indices (null: none): a stale or foreign schedule would skip work.
  template <index_value I>
  void check_made_for(const char* where, matrix_view<const I> context_lens, std::int32_t page_kv,
                      const std::span<const I>* indices) const;

  template <index_value I>
  friend void detail::build_paged_schedule(paged_mqa_schedule&, const char*, matrix_view<const I>,
                                           std::int32_t, int, const std::span<const I>*);

 private:
  detail::vector<std::int32_t> lens_;  // [B * next_n], the lengths this schedule was built for
  detail::vector<std::int64_t> request_begin_;  // [requests + 1]: first row of each request
  detail::vector<std::int64_t> indices_;        // varlen: the indices it was made with
  std::int64_t next_n_ = 0;
  std::int32_t page_kv_ = 0;
  std::int64_t keys_per_unit_ = 0;
  std::int64_t total_units_ = 0;
  bool varlen_ = false;
  detail::vector<position> start_;  // [num_workers + 1]
};

// The most runs a paged schedule may be cut into: far above any core count (upstream passes the
// GPU's SM count, 132 on an H800), low enough that the schedule stays a few kilobytes.
inline constexpr int max_paged_workers = 4096;
// Page sizes of the paged kernel: every size from 1 (sglang on HIP) to 1024.
inline constexpr std::int64_t max_page_kv = 1024;
// The longest context the paged kernel takes, whether lengths come as int32 or int64: DeepGEMM's
// int32 lengths. A longer one is an error, not a length cut short.
inline constexpr std::int64_t max_paged_context_len = INT32_MAX;

inline bool supported_page_kv(std::int64_t page_kv) {
  return page_kv >= 1 && page_kv <= max_page_kv;
}

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

}  // namespace detail

template <index_value I>
void paged_mqa_schedule::check_made_for(const char* where, matrix_view<const I> context_lens,
                                        std::int32_t page_kv,
                                        const std::span<const I>* indices) const {
  using detail::require;
  const std::int64_t B = context_lens.rows, next_n = context_lens.cols;
  require(next_n_ == next_n && num_rows() == B * next_n && page_kv_ == page_kv, where,
          [&](auto& m) {
            m << "schedule was made for " << num_rows() / std::max<std::int64_t>(next_n_, 1)
              << " x " << next_n_ << " rows with page_kv " << page_kv_ << ", the call has " << B
              << " x " << next_n << " with page_kv " << page_kv;
          });
  // Varlen: the call's indices must be the schedule's (its requests are their runs).
  require(varlen_ == (indices != nullptr), where, [&](auto& m) {
    m << (indices ? "indices given but the schedule was made without them"
                  : "the schedule was made with indices, the call has none")
      << " (pass the same indices to get_paged_mqa_logits_metadata and the kernel)";
  });
  if (indices) {
    detail::check_span(where, "indices", *indices, B);
    for (std::size_t r = 0; r < indices->size(); ++r)
      require((*indices)[r] == indices_[r], where, [&](auto& m) {
        m << "indices[" << r << "] = " << (*indices)[r] << " but the schedule was made with "
          << indices_[r] << " (regenerate it with get_paged_mqa_logits_metadata)";
      });
  }
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = 0; j < next_n; ++j) {
      const std::int32_t made_for = lens_[static_cast<std::size_t>(b * next_n + j)];
      require(made_for == context_lens(b, j), where, [&](auto& m) {
        m << "schedule is stale: context_lens[" << b << "][" << j << "] = " << context_lens(b, j)
          << " but the schedule was made for " << made_for
          << " (regenerate it with get_paged_mqa_logits_metadata)";
      });
    }
}

namespace detail {

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
  require(max_context_len > 0, where,
          [&](auto& m) { m << "max_context_len = " << max_context_len << " must be > 0"; });
  check_cache(where, cache);
  require(supported_page_kv(cache.page_kv), where, [&](auto& m) {
    m << "page_kv = " << cache.page_kv << " is not supported (1.." << max_page_kv << ")";
  });
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
  require(context_lens.stride >= context_lens.cols, where, [&](auto& m) {
    m << "context_lens stride " << context_lens.stride << " < cols " << context_lens.cols;
  });
  detail::check_matrix_extent(where, "context_lens", context_lens);  // overflowing extents
  require(supported_page_kv(page_kv), where, [&](auto& m) {
    m << "page_kv = " << page_kv << " is not supported (1.." << max_page_kv << ")";
  });
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

// The schedule with or without varlen indices (null: every next_n rows are a request), built
// into s: every member is set anew and the vectors keep their storage, so rebuilding a schedule
// of the same size allocates nothing.
template <index_value I>
void detail::build_paged_schedule(paged_mqa_schedule& s, const char* where,
                                  matrix_view<const I> context_lens, std::int32_t page_kv,
                                  int num_workers, const std::span<const I>* indices) {
  using detail::require;
  check_schedule_arguments(where, context_lens, page_kv, num_workers, indices);

  s.lens_.clear();
  s.request_begin_.clear();
  s.indices_.clear();
  s.start_.clear();
  s.total_units_ = 0;
  s.varlen_ = false;
  s.next_n_ = context_lens.cols;
  s.page_kv_ = page_kv;
  // At least 512 keys (one decoded tile), a whole number of pages so a unit never splits one.
  s.keys_per_unit_ = (std::int64_t{511} / page_kv + 1) * page_kv;
  s.lens_.reserve(static_cast<std::size_t>(context_lens.rows * context_lens.cols));
  for (std::int64_t b = 0; b < context_lens.rows; ++b)
    for (std::int64_t j = 0; j < context_lens.cols; ++j) {
      const I len = context_lens(b, j);
      detail::check_paged_context_len(where, len, b, j);
      s.lens_.push_back(static_cast<std::int32_t>(len));
    }
  const std::int64_t rows = s.num_rows();
  s.request_begin_.push_back(0);
  if (indices) {
    s.varlen_ = true;
    s.indices_.reserve(indices->size());
    for (const I index : *indices) s.indices_.push_back(index);
    for (std::int64_t r = 1; r < rows; ++r)
      if (s.indices_[static_cast<std::size_t>(r)] != s.indices_[static_cast<std::size_t>(r - 1)])
        s.request_begin_.push_back(r);
    if (rows > 0) s.request_begin_.push_back(rows);
  } else {
    for (std::int64_t b = 1; b <= context_lens.rows; ++b)
      s.request_begin_.push_back(b * context_lens.cols);
  }

  const std::int64_t B = s.num_requests();
  for (std::int64_t b = 0; b < B; ++b) {
    s.total_units_ += s.request_units(b);
    // The split below multiplies the total by the worker count.
    require(s.total_units_ <= INT64_MAX / max_paged_workers, where, [&](auto& m) {
      m << "context_lens hold more than " << INT64_MAX / max_paged_workers << " units of "
        << s.keys_per_unit_ << " positions";
    });
  }
  // Worker w starts at global unit floor(w * total / W), named as (request, unit in request);
  // the starts only grow with w, so one sweep over the requests names them all.
  s.start_.reserve(static_cast<std::size_t>(num_workers) + 1);
  std::int64_t b = 0, before = 0;  // units of the requests before b
  for (int w = 0; w <= num_workers; ++w) {
    const std::int64_t g = s.total_units_ * w / num_workers;
    while (b < B && g >= before + s.request_units(b)) before += s.request_units(b++);
    s.start_.push_back(b < B ? paged_mqa_schedule::position{b, g - before}
                             : paged_mqa_schedule::position{B, 0});
  }
}

namespace detail {
template <index_value I>
paged_mqa_schedule make_paged_schedule(const char* where, matrix_view<const I> context_lens,
                                       std::int32_t page_kv, int num_workers,
                                       const std::span<const I>* indices) {
  paged_mqa_schedule s;
  build_paged_schedule(s, where, context_lens, page_kv, num_workers, indices);
  return s;
}
}  // namespace detail

// context_lens: [B, next_n] (DeepGEMM-Ascend's [num_q, 1] is next_n = 1), int32 or int64, each
// in [0, max_paged_context_len]. num_workers: how many runs to cut the work into, usually the
// executor's concurrency.
template <index_matrix Lens>
paged_mqa_schedule get_paged_mqa_logits_metadata(const Lens& context_lens, std::int32_t page_kv,
                                                 int num_workers) {
  using I = index_matrix_value_of<Lens>;
  return detail::make_paged_schedule<I>("get_paged_mqa_logits_metadata", context_lens, page_kv,
                                        num_workers, nullptr);
}

// Varlen (upstream's `indices`, next_n = 1): context_lens [B, 1], indices [B]; consecutive rows
// with the same index are one request (their block-table rows must be identical, which the
// kernel checks) and share every key tile the kernel decodes. Each row keeps its own length;
// results equal those of the call without indices. A value may not reappear after another one.
// indices has the type of context_lens' elements.
template <index_matrix Lens>
paged_mqa_schedule get_paged_mqa_logits_metadata(
    const Lens& context_lens, std::int32_t page_kv, int num_workers,
    std::span<const index_matrix_value_of<Lens>> indices) {
  using I = index_matrix_value_of<Lens>;
  return detail::make_paged_schedule<I>("get_paged_mqa_logits_metadata", context_lens, page_kv,
                                        num_workers, &indices);
}

// The schedule as upstream's array: int32 [num_workers + 1, 2], the form DeepGEMM's
// get_paged_mqa_logits_metadata returns and engines keep in a static buffer. Row w (w <
// num_workers) is where worker w starts, row num_workers is the end:
//   [w][0]  the block-table row of the request the worker starts in: the request index b for
//           context_lens [B, next_n]; with varlen indices, the first query row of the request's
//           run (both as upstream). The end row holds B (the number of block-table rows).
//   [w][1]  the unit of that request it starts at, units of keys_per_unit() context positions
//           (upstream's split index, there of SPLIT_KV positions); 0 in the end row.
// Worker w runs from row w up to, not including, row w + 1. The array carries no lengths: the
// kernel takes it back with the call's context_lens (and indices) and page size, recomputes the
// schedule and rejects an array that differs from it (stale, made for other lengths, another
// page size or another worker count's shape), so a wrong array is an error, never a wrong read.
inline constexpr std::int64_t paged_mqa_schedule_array_cols = 2;

// Rows of the array for num_workers workers.
constexpr std::int64_t paged_mqa_schedule_array_rows(int num_workers) {
  return std::int64_t{num_workers} + 1;
}

// Writes schedule s into out, int32 [s.num_workers() + 1, 2] (row stride out.stride).
inline void write_paged_mqa_schedule_array(const paged_mqa_schedule& s,
                                           matrix_view<std::int32_t> out) {
  constexpr const char* where = "write_paged_mqa_schedule_array";
  using detail::require;
  require(s.num_workers() >= 1, where, [](auto& m) {
    m << "the schedule is empty (default-constructed or moved from); make it with "
         "get_paged_mqa_logits_metadata";
  });
  const std::int64_t rows = paged_mqa_schedule_array_rows(s.num_workers());
  require(out.rows == rows && out.cols == paged_mqa_schedule_array_cols, where, [&](auto& m) {
    m << "out shape [" << out.rows << ", " << out.cols << "], expected [" << rows
      << ", 2] (num_workers + 1 rows for " << s.num_workers() << " workers)";
  });
  detail::check_matrix_extent(where, "out", out);
  const std::int64_t table_rows = s.num_rows() / s.next_n();
  require(table_rows <= INT32_MAX, where, [&](auto& m) {
    m << table_rows << " block-table rows do not fit the array's int32 entries";
  });
  for (std::int64_t w = 0; w < rows; ++w) {
    const auto p = s.start()[static_cast<std::size_t>(w)];
    const std::int64_t row =
        p.request < s.num_requests() ? s.request_first_row(p.request) / s.next_n() : table_rows;
    out(w, 0) = static_cast<std::int32_t>(row);
    out(w, 1) = static_cast<std::int32_t>(p.unit);  // < request_units <= INT32_MAX / 512
  }
}

namespace detail {

// The schedule an array stands for: the one made for these lengths, page size and the array's
// worker count, after checking that the array holds exactly it.
// Built into s (schedule_from_array_into: no allocation when s already held a schedule as large).
template <index_value I>
const paged_mqa_schedule& schedule_from_array_into(paged_mqa_schedule& s, const char* where,
                                                   matrix_view<const std::int32_t> array,
                                                   matrix_view<const I> context_lens,
                                                   std::int32_t page_kv,
                                                   const std::span<const I>* indices) {
  require(array.cols == paged_mqa_schedule_array_cols && array.rows >= 2 &&
              array.rows <= paged_mqa_schedule_array_rows(max_paged_workers),
          where, [&](auto& m) {
            m << "schedule array shape [" << array.rows << ", " << array.cols
              << "] is not [num_workers + 1, 2] with num_workers in [1, " << max_paged_workers
              << "] (regenerate it with get_paged_mqa_logits_metadata)";
          });
  check_matrix_extent(where, "schedule array", array);
  build_paged_schedule(s, where, context_lens, page_kv, static_cast<int>(array.rows - 1), indices);
  const std::int64_t table_rows = s.num_rows() / s.next_n();
  for (std::int64_t w = 0; w < array.rows; ++w) {
    const auto p = s.start()[static_cast<std::size_t>(w)];
    const std::int64_t row =
        p.request < s.num_requests() ? s.request_first_row(p.request) / s.next_n() : table_rows;
    require(array(w, 0) == row && array(w, 1) == p.unit, where, [&](auto& m) {
      m << "schedule array row " << w << " = [" << array(w, 0) << ", " << array(w, 1)
        << "], but these context_lens" << (indices ? " and indices" : "") << " with page_kv "
        << page_kv << " give [" << row << ", " << p.unit
        << "]: the array is stale or was made for another call (regenerate it with "
           "get_paged_mqa_logits_metadata)";
    });
  }
  return s;
}
template <index_value I>
paged_mqa_schedule schedule_from_array(const char* where, matrix_view<const std::int32_t> array,
                                       matrix_view<const I> context_lens, std::int32_t page_kv,
                                       const std::span<const I>* indices) {
  paged_mqa_schedule s;
  schedule_from_array_into(s, where, array, context_lens, page_kv, indices);
  return s;
}

// Where a call keeps the schedule upstream's array stands for: storage this thread keeps between
// calls, one slot per nesting depth (a kernel called from a task of another on the same thread
// gets its own), so that a warm call with the array allocates nothing; past a few levels of
// nesting, a schedule of its own.
class array_schedule_slot {
 public:
  array_schedule_slot() : depth_(depth()++) {}
  ~array_schedule_slot() { --depth(); }
  array_schedule_slot(const array_schedule_slot&) = delete;
  array_schedule_slot& operator=(const array_schedule_slot&) = delete;
  paged_mqa_schedule& get() { return depth_ < slots ? storage()[depth_] : own_; }

 private:
  static constexpr int slots = 4;
  static int& depth() {
    thread_local int d = 0;
    return d;
  }
  static paged_mqa_schedule* storage() {
    thread_local paged_mqa_schedule kept[slots];
    return kept;
  }
  int depth_;
  paged_mqa_schedule own_;
};

// The array form's out against the lengths and indices its schedule was built from (already
// checked by the schedule's construction): no shared byte.
template <index_matrix Lens>
void check_schedule_array_out(const matrix_view<std::int32_t>& out, const Lens& context_lens,
                              std::span<const index_matrix_value_of<Lens>> indices) {
  constexpr const char* where = "get_paged_mqa_logits_metadata";
  const matrix_view<const index_matrix_value_of<Lens>> lens = context_lens;
  check_matrix_extent(where, "out", out);
  check_outputs_disjoint(where, {range_of("out", out)},
                         {range_of("context_lens", lens), range_of("indices", indices)});
}

}  // namespace detail

// get_paged_mqa_logits_metadata writing upstream's array form into out, int32
// [paged_mqa_schedule_array_rows(num_workers), 2]; the kernel takes the array back.
// out may share no byte with context_lens or indices (checked before it is written).
template <index_matrix Lens>
void get_paged_mqa_logits_metadata(const Lens& context_lens, std::int32_t page_kv, int num_workers,
                                   matrix_view<std::int32_t> out) {
  const auto schedule = get_paged_mqa_logits_metadata(context_lens, page_kv, num_workers);
  detail::check_schedule_array_out(out, context_lens, {});
  write_paged_mqa_schedule_array(schedule, out);
}
// The same with varlen indices.
template <index_matrix Lens>
void get_paged_mqa_logits_metadata(const Lens& context_lens, std::int32_t page_kv, int num_workers,
                                   std::span<const index_matrix_value_of<Lens>> indices,
                                   matrix_view<std::int32_t> out) {
  const auto schedule = get_paged_mqa_logits_metadata(context_lens, page_kv, num_workers, indices);
  detail::check_schedule_array_out(out, context_lens, indices);
  write_paged_mqa_schedule_array(schedule, out);
}

// The schedule object an array stands for, checked against the lengths (and varlen indices) of
// the call it is for: an array that is not exactly the one get_paged_mqa_logits_metadata makes
// for them (stale, foreign, wrongly shaped) is rejected. O(B + num_workers).
template <index_matrix Lens>
paged_mqa_schedule paged_mqa_schedule_from_array(matrix_view<const std::int32_t> array,
                                                 const Lens& context_lens, std::int32_t page_kv) {
  using I = index_matrix_value_of<Lens>;
  return detail::schedule_from_array<I>("paged_mqa_schedule_from_array", array, context_lens,
                                        page_kv, nullptr);
}
template <index_matrix Lens>
paged_mqa_schedule paged_mqa_schedule_from_array(
    matrix_view<const std::int32_t> array, const Lens& context_lens, std::int32_t page_kv,
    std::span<const index_matrix_value_of<Lens>> indices) {
  using I = index_matrix_value_of<Lens>;
  return detail::schedule_from_array<I>("paged_mqa_schedule_from_array", array, context_lens,
                                        page_kv, &indices);
}

// Keys per indirect read of a paged cache: a page, or for pages over 256 keys the largest part of
// one that divides it (a part of a page is contiguous too), so a chunk of reads fits on-chip.
constexpr std::int64_t paged_gather_block(std::int64_t page_kv) {
  for (std::int64_t d = std::min<std::int64_t>(page_kv, 256); d > 1; --d)
    if (page_kv % d == 0) return d;
  return 1;
}

template <class Format, index_value I = std::int32_t>
class paged_plan {
 public:
  // block_table: [B, max_blocks]; context_lens: [B, next_n]; q rows are (b, j) in order. The
  // groups are the schedule's requests: next_n rows of one block-table row, or (varlen) a run
  // of rows whose block-table rows are identical, read through the run's first row.
  paged_plan(paged_cache_view<Format> cache, matrix_view<const I> block_table,
             matrix_view<const I> context_lens, std::int64_t max_context_len,
             const paged_mqa_schedule& schedule)
      : cache_(cache),
        table_(block_table),
        lens_(context_lens),
        cols_(max_context_len),
        schedule_(&schedule),
        gather_block_(paged_gather_block(cache.page_kv)) {}

  std::int64_t num_rows() const { return lens_.rows * lens_.cols; }
  std::int64_t num_cols() const { return cols_; }
  std::int64_t num_groups() const { return schedule_->num_requests(); }
  std::int64_t next_n() const { return lens_.cols; }
  row_span group_rows(std::int64_t g) const {
    const std::int64_t first = schedule_->request_first_row(g);
    return {first, first + schedule_->request_rows(g)};
  }

  row_keys row(std::int64_t r) const {
    const std::int64_t len = lens_(r / next_n(), r % next_n());
    const std::int64_t capacity = table_.cols * std::int64_t{cache_.page_kv};
    return {0, std::min({std::max<std::int64_t>(len, 0), capacity, cols_}), 0};
  }
  // The key of a row's request-local position 0: keys are context positions.
  std::int64_t position_key(std::int64_t) const { return 0; }
  // Keys a request actually reads: the longest of its rows' ranges.
  std::int64_t group_keys(std::int64_t g) const {
    std::int64_t k = 0;
    for (std::int64_t r = group_rows(g).begin; r < group_rows(g).end; ++r)
      k = std::max(k, row(r).key_end);
    return k;
  }
  // The block-table row request g reads through.
  std::int64_t table_row(std::int64_t g) const { return group_rows(g).begin / next_n(); }
  std::int64_t page_of(std::int64_t g, std::int64_t k) const {
    return table_(table_row(g), k / cache_.page_kv);
  }
  key_ref key(std::int64_t g, std::int64_t k) const {
    const std::int64_t page = page_of(g, k), slot = k % cache_.page_kv;
    return {cache_.data(page, slot), cache_.scale(page, slot)};
  }
  // Keys on pages spread through memory: the host driver fetches them a tile ahead.
  static constexpr bool keys_on_pages = true;
  // Keys [k0, k0 + n) of group g in order, visit(i, key k0 + i): the same keys as key(), one
  // division for the run and then page by page (the driver looks a tile's keys up at once).
  template <class Visit>
  void keys(std::int64_t g, std::int64_t k0, std::int64_t n, Visit visit) const {
    const std::int64_t page_kv = cache_.page_kv, data_bytes = cache_.data_bytes();
    std::int64_t page_slot = k0 / page_kv, slot = k0 % page_kv;
    for (std::int64_t i = 0; i < n; ++page_slot, slot = 0) {
      const std::int64_t page = table_(table_row(g), page_slot);
      const std::uint8_t* data = cache_.data(page, slot);
      const std::uint8_t* scale = cache_.scale(page, slot);
      const std::int64_t run = std::min(n - i, page_kv - slot);
      for (std::int64_t j = 0; j < run; ++j, ++i)
        visit(i, key_ref{data + j * data_bytes, scale + j * Format::scale_bytes});
    }
  }

  // Per scheduled worker, one task: its run of (request, unit) pairs. A request of more than
  // rows_per_item rows is cut into row blocks, each block's units back to back.
  void fill_work(const tiling& t, work_list& list) const {
    list.clear();
    const auto& start = schedule_->start();
    const std::int64_t unit = schedule_->keys_per_unit();
    const std::int64_t block_rows = std::max<std::int64_t>(t.rows_per_item, 1);
    for (int w = 0; w < schedule_->num_workers(); ++w) {
      const auto begin = start[static_cast<std::size_t>(w)];
      const auto end = start[static_cast<std::size_t>(w) + 1];
      for (std::int64_t b = begin.request; b <= end.request && b < num_groups(); ++b) {
        const std::int64_t u0 = b == begin.request ? begin.unit : 0;
        // Units past the request's keys (capacity, columns) are skipped at once, not one by one
        // (a length of INT32_MAX is 4M units).
        const std::int64_t keys = group_keys(b);
        const std::int64_t u1 = std::min(b == end.request ? end.unit : schedule_->request_units(b),
                                         (keys + unit - 1) / unit);
        if (u0 >= u1) continue;
        const row_span rows = group_rows(b);
        for (std::int64_t r0 = rows.begin; r0 < rows.end; r0 += block_rows)
          for (std::int64_t u = u0; u < u1; ++u)
            list.items.push_back({b, r0, std::min(rows.end, r0 + block_rows), u * unit,
                                  std::min(keys, (u + 1) * unit)});
      }
      list.close_task();
    }
  }

  // Throws unless every block-table slot the plan reads names a page (slots past a request's
  // keys are not read) and, for varlen requests read through their first row's table, the
  // request's other rows hold the same pages in every slot it reads.
  void check_block_table(const char* where) const {
    using detail::require;
    for (std::int64_t g = 0; g < num_groups(); ++g) {
      const std::int64_t slots = (group_keys(g) + cache_.page_kv - 1) / cache_.page_kv;
      const std::int64_t b = table_row(g);
      for (std::int64_t s = 0; s < slots; ++s) {
        const std::int64_t page = table_(b, s);
        require(page >= 0 && page < cache_.num_pages, where, [&](auto& m) {
          m << "block_table[" << b << "][" << s << "] = " << page
            << " is not a page (num_pages = " << cache_.num_pages << ")";
        });
      }
      if (!schedule_->varlen()) continue;
      const row_span rows = group_rows(g);
      for (std::int64_t r = rows.begin + 1; r < rows.end; ++r)
        for (std::int64_t s = 0; s < slots; ++s)
          require(table_(r, s) == table_(b, s), where, [&](auto& m) {
            m << "block_table[" << r << "][" << s << "] = " << table_(r, s)
              << " differs from block_table[" << b << "][" << s << "] = " << table_(b, s)
              << ", but indices[" << r << "] = indices[" << b
              << "]: rows of one request need identical block-table rows";
          });
    }
  }

  static constexpr bool prefill = false;
  std::int64_t gather_block() const { return gather_block_; }

  const paged_cache_view<Format>& cache() const { return cache_; }

 private:
  paged_cache_view<Format> cache_;
  matrix_view<const I> table_;
  matrix_view<const I> lens_;
  std::int64_t cols_;
  const paged_mqa_schedule* schedule_;
  std::int64_t gather_block_;
};

MQALOGITS_NAMESPACE_END
