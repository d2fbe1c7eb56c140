// get_paged_mqa_logits_metadata: the paged schedule built from the context lengths (and varlen
// indices), the units of every request split into balanced runs of workers.
#pragma once

#include <cstdint>
#include <span>

#include "../config.hpp"
#include "../error.hpp"
#include "../view/index_array.hpp"
#include "../view/matrix_view.hpp"
#include "paged_checks.hpp"
#include "paged_limits.hpp"
#include "paged_schedule.hpp"

MQALOGITS_NAMESPACE_BEGIN

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

MQALOGITS_NAMESPACE_END
