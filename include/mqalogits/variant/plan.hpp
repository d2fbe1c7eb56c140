// What every variant plan provides: which key each output column reads and whether it is valid.
//
// A plan groups output rows that share one key sequence (all dense rows share the KV tokens; the
// next_n rows of a paged request share its context; a sparse row has its own selection). For
// row r, the keys [key_begin, key_end) of its group are its candidate columns, column =
// key - col_offset; every column outside that range is -inf. Inside it, key(g, k) returns the
// key's bytes, or null bytes when that key is masked (a -1 sparse index, a token outside
// [ks, ke)); a masked key is -inf too. Plans guarantee key(g, k) is safe to call for every k in
// a work item's key range: that is how "block-table slots past the context are never read" is
// enforced, once, here.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <vector>

#include "../config.hpp"
#include "../std_abi.hpp"

MQALOGITS_NAMESPACE_BEGIN

struct key_ref {
  const std::uint8_t* data = nullptr;   // Format::data_bytes
  const std::uint8_t* scale = nullptr;  // Format::scale_bytes
  constexpr bool valid() const { return data != nullptr; }
};

struct row_keys {
  std::int64_t key_begin = 0;   // first candidate key of the row
  std::int64_t key_end = 0;     // one past the last; empty when key_end <= key_begin
  std::int64_t col_offset = 0;  // column = key - col_offset
  constexpr bool empty() const { return key_end <= key_begin; }
};

struct row_span {
  std::int64_t begin = 0, end = 0;
};

// One unit of work: rows [row_begin, row_end) of group `group`, keys [key_begin, key_end).
// Every output element is written by exactly one work item, so results never depend on how
// items are spread over threads.
struct work_item {
  std::int64_t group = 0;
  std::int64_t row_begin = 0, row_end = 0;
  std::int64_t key_begin = 0, key_end = 0;
};

// Work items grouped into tasks (one task = one executor index).
struct work_list {
  detail::vector<work_item> items;
  detail::vector<std::int64_t> task_begin{0};  // task t runs items [task_begin[t], task_begin[t+1])

  std::int64_t num_tasks() const { return static_cast<std::int64_t>(task_begin.size()) - 1; }
  void close_task() { task_begin.push_back(static_cast<std::int64_t>(items.size())); }
  // Empties the list, keeping its storage (a reused list then costs no allocation).
  void clear() {
    items.clear();
    task_begin.assign(1, 0);
  }
};

// How a backend likes its work cut.
struct tiling {
  std::int64_t rows_per_item = 8;    // rows sharing one decoded key tile
  std::int64_t keys_per_item = 512;  // keys per work item
};

template <class P>
concept variant_plan = requires(const P& p, std::int64_t i, work_list& list) {
  { p.num_rows() } -> std::convertible_to<std::int64_t>;
  { p.num_cols() } -> std::convertible_to<std::int64_t>;
  { p.num_groups() } -> std::convertible_to<std::int64_t>;
  { p.group_rows(i) } -> std::same_as<row_span>;
  { p.row(i) } -> std::same_as<row_keys>;
  { p.key(i, i) } -> std::same_as<key_ref>;
  p.fill_work(tiling{}, list);
  // Prefill (dense: query tokens share one key sequence) or decode (the others).
  { P::prefill } -> std::convertible_to<bool>;
  // Keys per indirect read: a page (paged), a selected block (sparse); 0 for contiguous keys.
  { p.gather_block() } -> std::convertible_to<std::int64_t>;
};

namespace detail {

// The union of the candidate keys of rows [rows.begin, rows.end) of one group: [key_begin,
// key_end) from the first row's first key to the last row's end, empty where no row has keys.
template <class Plan>
row_keys key_union(const Plan& plan, row_span rows) {
  row_keys u{INT64_MAX, INT64_MIN, 0};
  for (std::int64_t r = rows.begin; r < rows.end; ++r) {
    const row_keys k = plan.row(r);
    if (k.empty()) continue;
    u.key_begin = std::min(u.key_begin, k.key_begin);
    u.key_end = std::max(u.key_end, k.key_end);
  }
  return u.empty() ? row_keys{} : u;
}

// The default cut into `list`: per group, blocks of rows_per_item rows, each block's key union in
// chunks of keys_per_item; one item per task. Plans whose keys are a schedule (paged) cut their
// own.
template <class Plan>
void split_work(const Plan& plan, const tiling& t, work_list& list) {
  list.clear();
  for (std::int64_t g = 0; g < plan.num_groups(); ++g) {
    const row_span rows = plan.group_rows(g);
    for (std::int64_t r0 = rows.begin; r0 < rows.end; r0 += t.rows_per_item) {
      const std::int64_t r1 = std::min(rows.end, r0 + t.rows_per_item);
      const row_keys keys = key_union(plan, {r0, r1});
      for (std::int64_t k0 = keys.key_begin; k0 < keys.key_end; k0 += t.keys_per_item) {
        list.items.push_back({g, r0, r1, k0, std::min(keys.key_end, k0 + t.keys_per_item)});
        list.close_task();
      }
    }
  }
}

}  // namespace detail
MQALOGITS_NAMESPACE_END
