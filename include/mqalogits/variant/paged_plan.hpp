// The paged variant's plan: its rows, keys read through the block table page by page, and
// work items cut along the schedule's runs.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../check/block_table.hpp"
#include "../config.hpp"
#include "../error.hpp"
#include "../view/index_array.hpp"
#include "../view/matrix_view.hpp"
#include "../view/paged_cache_view.hpp"
#include "paged_schedule.hpp"
#include "plan.hpp"

MQALOGITS_NAMESPACE_BEGIN

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
        check::block_table_page(where, b, s, table_(b, s), cache_.num_pages);
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
