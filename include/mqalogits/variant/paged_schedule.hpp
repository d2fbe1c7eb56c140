// The paged kernel's work schedule (what get_paged_mqa_logits_metadata returns): the type, its
// queries, and its check against the call it is used for (paged_metadata.hpp builds it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>

#include "../check/shapes.hpp"
#include "../config.hpp"
#include "../error.hpp"
#include "../std_abi.hpp"
#include "../view/index_array.hpp"
#include "../view/matrix_view.hpp"

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

MQALOGITS_NAMESPACE_END
