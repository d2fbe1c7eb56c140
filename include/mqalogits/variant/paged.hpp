// Paged variant (decode): rows (b, j) of request b share its block table; column j is context
// position j, read from page block_table[b][j / page_kv], slot j % page_kv; valid iff
// j < context_lens[b][j'] and j < max_blocks * page_kv.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "../config.hpp"
#include "../error.hpp"
#include "../view/matrix_view.hpp"
#include "../view/paged_cache_view.hpp"
#include "metadata_checks.hpp"
#include "plan.hpp"

MQALOGITS_NAMESPACE_BEGIN

// The work schedule of the paged kernel: the context of every request cut into units of
// `keys_per_unit` positions, the units split into num_workers contiguous runs of (nearly) equal
// size, so long and short contexts balance. Worker w runs units from start[w] to start[w + 1],
// each a (request, unit) pair, as upstream's [num_sms + 1, 2] table. It must be regenerated when
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
    o.lens_.clear();
    o.start_.clear();
    next_n_ = std::exchange(o.next_n_, 0);
    page_kv_ = std::exchange(o.page_kv_, 0);
    keys_per_unit_ = std::exchange(o.keys_per_unit_, 0);
    total_units_ = std::exchange(o.total_units_, 0);
    return *this;
  }

  int num_workers() const { return static_cast<int>(start_.size()) - 1; }
  std::int64_t num_requests() const { return next_n_ ? rows() / next_n_ : 0; }
  std::int64_t next_n() const { return next_n_; }
  std::int32_t page_kv() const { return page_kv_; }
  std::int64_t keys_per_unit() const { return keys_per_unit_; }
  std::int64_t total_units() const { return total_units_; }
  std::int64_t request_units(std::int64_t b) const {
    return (request_keys(b) + keys_per_unit_ - 1) / keys_per_unit_;
  }
  const std::vector<position>& start() const { return start_; }
  const std::vector<std::int32_t>& context_lens() const { return lens_; }

  // Positions the schedule covers for request b: the longest context among its rows.
  std::int64_t request_keys(std::int64_t b) const {
    std::int64_t k = 0;
    for (std::int64_t j = 0; j < next_n_; ++j)
      k = std::max<std::int64_t>(k, lens_[static_cast<std::size_t>(b * next_n_ + j)]);
    return k;
  }

  friend paged_mqa_schedule get_paged_mqa_logits_metadata(
      matrix_view<const std::int32_t> context_lens, std::int32_t page_kv, int num_workers);

 private:
  std::int64_t rows() const { return static_cast<std::int64_t>(lens_.size()); }

  std::vector<std::int32_t> lens_;  // [B * next_n], the lengths this schedule was built for
  std::int64_t next_n_ = 0;
  std::int32_t page_kv_ = 0;
  std::int64_t keys_per_unit_ = 0;
  std::int64_t total_units_ = 0;
  std::vector<position> start_;  // [num_workers + 1]
};

// The most runs a paged schedule may be cut into: far above any core count (upstream passes the
// GPU's SM count, 132 on an H800), low enough that the schedule stays a few kilobytes.
inline constexpr int max_paged_workers = 4096;

inline bool supported_page_kv(std::int64_t page_kv) {
  return page_kv == 32 || page_kv == 64 || page_kv == 128 || page_kv == 256;
}

// context_lens: [B, next_n] (DeepGEMM-Ascend's [num_q, 1] is next_n = 1). num_workers: how many
// runs to cut the work into, usually the executor's concurrency.
inline paged_mqa_schedule get_paged_mqa_logits_metadata(
    matrix_view<const std::int32_t> context_lens, std::int32_t page_kv, int num_workers) {
  constexpr const char* where = "get_paged_mqa_logits_metadata";
  using detail::require;
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
    m << "page_kv = " << page_kv << " is not supported (32, 64, 128 or 256)";
  });
  require(num_workers >= 1 && num_workers <= max_paged_workers, where, [&](auto& m) {
    m << "num_workers = " << num_workers << " must be in [1, " << max_paged_workers << "]";
  });

  paged_mqa_schedule s;
  s.next_n_ = context_lens.cols;
  s.page_kv_ = page_kv;
  s.keys_per_unit_ = std::max<std::int64_t>(page_kv, 512);
  s.lens_.reserve(static_cast<std::size_t>(context_lens.rows * context_lens.cols));
  for (std::int64_t b = 0; b < context_lens.rows; ++b)
    for (std::int64_t j = 0; j < context_lens.cols; ++j) {
      const std::int32_t len = context_lens(b, j);
      require(len >= 0, where,
              [&](auto& m) { m << "context_lens[" << b << "][" << j << "] = " << len << " < 0"; });
      s.lens_.push_back(len);
    }

  const std::int64_t B = context_lens.rows;
  std::vector<std::int64_t> units(static_cast<std::size_t>(B));
  for (std::int64_t b = 0; b < B; ++b) {
    units[static_cast<std::size_t>(b)] = s.request_units(b);
    s.total_units_ += units[static_cast<std::size_t>(b)];
  }
  // Worker w starts at global unit floor(w * total / W), named as (request, unit in request).
  s.start_.reserve(static_cast<std::size_t>(num_workers) + 1);
  for (int w = 0; w <= num_workers; ++w) {
    const std::int64_t g = s.total_units_ * w / num_workers;
    paged_mqa_schedule::position p{B, 0};
    for (std::int64_t b = 0, before = 0; b < B; before += units[static_cast<std::size_t>(b++)])
      if (g < before + units[static_cast<std::size_t>(b)]) {
        p = {b, g - before};
        break;
      }
    s.start_.push_back(p);
  }
  return s;
}

template <class Format>
class paged_plan {
 public:
  // block_table: [B, max_blocks]; context_lens: [B, next_n]; q rows are (b, j) in order.
  paged_plan(paged_cache_view<Format> cache, matrix_view<const std::int32_t> block_table,
             matrix_view<const std::int32_t> context_lens, std::int64_t max_context_len,
             const paged_mqa_schedule& schedule)
      : cache_(cache),
        table_(block_table),
        lens_(context_lens),
        cols_(max_context_len),
        schedule_(&schedule) {}

  std::int64_t num_rows() const { return lens_.rows * lens_.cols; }
  std::int64_t num_cols() const { return cols_; }
  std::int64_t num_groups() const { return lens_.rows; }
  std::int64_t next_n() const { return lens_.cols; }
  row_span group_rows(std::int64_t b) const { return {b * next_n(), (b + 1) * next_n()}; }

  row_keys row(std::int64_t r) const {
    const std::int64_t len = lens_(r / next_n(), r % next_n());
    const std::int64_t capacity = table_.cols * std::int64_t{cache_.page_kv};
    return {0, std::min({std::max<std::int64_t>(len, 0), capacity, cols_}), 0};
  }
  // Keys a request actually reads: the longest of its rows' ranges.
  std::int64_t group_keys(std::int64_t b) const {
    std::int64_t k = 0;
    for (std::int64_t r = group_rows(b).begin; r < group_rows(b).end; ++r)
      k = std::max(k, row(r).key_end);
    return k;
  }
  std::int64_t page_of(std::int64_t b, std::int64_t k) const {
    return table_(b, k / cache_.page_kv);
  }
  key_ref key(std::int64_t b, std::int64_t k) const {
    const std::int64_t page = page_of(b, k), slot = k % cache_.page_kv;
    return {cache_.data(page, slot), cache_.scale(page, slot)};
  }

  // One task per scheduled worker, running its run of (request, unit) pairs.
  void fill_work(const tiling&, work_list& list) const {
    list.clear();
    const auto& start = schedule_->start();
    const std::int64_t unit = schedule_->keys_per_unit();
    for (int w = 0; w < schedule_->num_workers(); ++w) {
      auto [b, u] = start[static_cast<std::size_t>(w)];
      const auto end = start[static_cast<std::size_t>(w) + 1];
      while (b < end.request || (b == end.request && u < end.unit)) {
        if (u >= schedule_->request_units(b)) {  // past this request's units: next request
          ++b;
          u = 0;
          continue;
        }
        const std::int64_t k0 = u * unit, k1 = std::min(group_keys(b), k0 + unit);
        if (k0 >= k1) {  // the rest of the request's units lie past its keys (capacity, columns):
          u = schedule_->request_units(b);  // skip them at once, not one by one (a length of
          continue;                         // INT32_MAX is 4M units)
        }
        list.items.push_back({b, group_rows(b).begin, group_rows(b).end, k0, k1});
        ++u;
      }
      list.close_task();
    }
  }

  static constexpr bool prefill = false;
  std::int64_t gather_block() const { return cache_.page_kv; }  // one page per indirect read

  const paged_cache_view<Format>& cache() const { return cache_; }

 private:
  paged_cache_view<Format> cache_;
  matrix_view<const std::int32_t> table_;
  matrix_view<const std::int32_t> lens_;
  std::int64_t cols_;
  const paged_mqa_schedule* schedule_;
};

MQALOGITS_NAMESPACE_END
