// The paged schedule as upstream's int32 array: written, read back and checked against the
// call it is for, and kept per thread between calls that pass it.
#pragma once

#include <cstdint>
#include <span>

#include "../check/extent.hpp"
#include "../check/overlap.hpp"
#include "../config.hpp"
#include "../error.hpp"
#include "../view/index_array.hpp"
#include "../view/matrix_view.hpp"
#include "paged_limits.hpp"
#include "paged_metadata.hpp"
#include "paged_schedule.hpp"

MQALOGITS_NAMESPACE_BEGIN

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

MQALOGITS_NAMESPACE_END
