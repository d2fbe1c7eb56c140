// The fused top-k as an output policy (topk_output): what a top-k selection (topk.hpp) becomes,
// whichever backend computed the scores; its vector steps are the host's (selection_steps.hpp).
//
// How it runs: a row's keys are scored by one or several executor tasks; each task streams the
// scores of the rows it works on through a candidate buffer of 4k keys per row. Each time the
// buffer fills it is cut to a few more than its k best (a threshold read off a sample of it),
// whose smallest becomes the admission threshold, so memory never depends on the context
// length; a finished row's best are radix sorted. (4k: a prefill row of up to 4k columns, k =
// 2048 of 8192 say, is then cut once, at its end.) A row scored by one task is written by that
// task; rows shared by neighbouring tasks are merged once in finish(), in task order. The
// per-task buffers belong to the calling thread and are reused by its later calls, so a warm
// call allocates nothing.
//
// The Numbering turns a selected column into what `indices` holds (topk_numbering.hpp); one that
// has a write_row member writes whole rows itself (the candidate blocks' ordering and padding).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>

#include "../check/overlap.hpp"
#include "../check/shapes.hpp"
#include "../config.hpp"
#include "../error.hpp"
#include "../exec/executor.hpp"
#include "../exec/thread_scratch.hpp"
#include "../std_abi.hpp"
#include "../view/matrix_view.hpp"
#include "output.hpp"
#include "selection_steps.hpp"
#include "topk_select.hpp"

MQALOGITS_NAMESPACE_BEGIN

namespace detail {

// Scratch of one executor task: the candidate buffers of the rows it is scoring now, and the
// sorted candidates of the rows it shares with a neighbouring task (merged in finish()).
struct alignas(64) topk_task {
  struct spilled_row {
    std::int64_t row = 0, begin = 0, count = 0;
  };
  std::int64_t row_begin = 0, row_end = 0;
  bool shared = false;
  detail::vector<std::uint64_t> candidates;  // [rows of the block, capacity]
  detail::vector<std::int64_t> count;        // candidates held per row
  detail::vector<std::uint64_t> floor;       // per row: a key must exceed it to enter
  detail::vector<float> floor_value;         // its score (-inf until the buffer first fills)
  detail::vector<std::uint64_t> spill;
  detail::vector<spilled_row> spilled;
  detail::vector<std::uint64_t> sort_scratch;  // capacity keys (task 0's also serves finish())
};

struct topk_scratch {
  struct part {
    std::int64_t row = 0, task = 0, begin = 0, count = 0;
  };
  detail::vector<topk_task> tasks;
  detail::vector<part> parts;  // the spilled rows of every task, by row
  detail::vector<std::uint64_t> merge;
  // Per output row, the highest threshold any task has reached on it: a task that holds k keys
  // above a key proves that key is not among the row's k best, so the other tasks of a row
  // split across tasks drop it too (a later task of a long decode row starts near the final
  // threshold instead of refilling its buffer from nothing). Only raised; only a hint: the
  // result is the exact top k whichever task publishes first.
  std::unique_ptr<std::atomic<std::uint64_t>[], detail::array_delete> row_floor;
  std::size_t row_floor_rows = 0;
  // Per output row, whether it has been written (finish() pads the others).
  detail::vector<unsigned char> written;
  // Per output row with short rows asked for: its first valid column and its length when it is
  // short (written whole by finish(), its scores dropped), length -1 otherwise. Empty without.
  struct short_row {
    std::int64_t first = 0, len = -1;
  };
  detail::vector<short_row> short_rows;
};

}  // namespace detail

// A key a task could not finish alone (a candidate block that straddles two tasks, merged by
// the candidate policy): admitted to its row with the tasks' spilled keys in finish().
namespace detail {
struct extra_key {
  std::int64_t row = 0;
  std::uint64_t key = 0;
};
}  // namespace detail

template <class Numbering, class Steps = detail::selection_steps>
class topk_output {
 public:
  // The host driver groups consecutive work items into tasks for this output and says which
  // rows each task is on (open_rows / close_task), so candidate storage is per task, not per
  // 512-key work item.
  static constexpr bool groups_work_items = true;

  topk_output(const matrix_view<std::int32_t>& indices, const matrix_view<float>& values,
              Numbering numbering = {}, bool short_rows = false)
      : indices_(indices), values_(values), number_(numbering), short_rows_(short_rows) {}

  void check(const char* where, std::int64_t rows, std::int64_t cols) const {
    using detail::require;
    require(indices_.cols >= 1, where, [&](auto& m) {
      m << "top-k indices has " << indices_.cols << " columns (k must be >= 1)";
    });
    detail::check_matrix(where, "top-k indices", indices_, rows, indices_.cols);
    if (has_values())
      detail::check_matrix(where, "top-k values", values_, rows, indices_.cols);
    else
      require(values_.rows == 0 && values_.cols == 0, where, [&](auto& m) {
        m << "top-k values is null with shape [" << values_.rows << ", " << values_.cols << "]";
      });
    // Columns are written as int32.
    require(cols <= std::int64_t{std::numeric_limits<std::int32_t>::max()}, where, [&](auto& m) {
      m << "top-k over " << cols << " columns: column numbers do not fit int32";
    });
    require(!short_rows_ || !has_values(), where, [&](auto& m) {
      m << "top-k with short rows cannot write values: a row of len <= k is not scored";
    });
  }

  // The scratch of `tasks` tasks with up to max_rows rows open at once, all of it reserved
  // first (so no task or finish() allocates, and a failed allocation leaves the output as it
  // was).
  template <class Plan>
  void begin(const Plan& plan, std::int64_t tasks, const executor_ref&, std::int64_t max_rows = 1) {
    k_ = indices_.cols;
    const std::int64_t cols = std::max<std::int64_t>(plan.num_cols(), 0);
    // 4k per row, or more than the row can hold (never full, never cut) when that is less.
    capacity_ = std::min<std::int64_t>(4 * k_, cols + 1);
    const auto rows = static_cast<std::size_t>(std::max<std::int64_t>(max_rows, 1));
    // A shared row spills at most what keep_at_least keeps of a full buffer, and no more than
    // its columns.
    const auto kept = static_cast<std::size_t>(
        std::min(detail::keep_at_least_bound(capacity_, k_), std::max<std::int64_t>(cols, 1)));
    scratch_ = &lease_.get();
    if (static_cast<std::int64_t>(scratch_->tasks.size()) < tasks)
      scratch_->tasks.resize(static_cast<std::size_t>(tasks));
    for (std::int64_t t = 0; t < tasks; ++t) {
      detail::topk_task& s = scratch_->tasks[static_cast<std::size_t>(t)];
      s.row_begin = s.row_end = 0;
      s.spill.clear();
      s.spilled.clear();
      if (s.candidates.size() < rows * static_cast<std::size_t>(capacity_))
        s.candidates.resize(rows * static_cast<std::size_t>(capacity_));
      s.count.reserve(rows);
      s.floor.reserve(rows);
      s.floor_value.reserve(rows);
      // Only a task's first and last row blocks can be shared with a neighbour.
      s.spilled.reserve(2 * rows);
      s.spill.reserve(2 * rows * kept);
      if (s.sort_scratch.size() < static_cast<std::size_t>(capacity_))
        s.sort_scratch.resize(static_cast<std::size_t>(capacity_));
    }
    const auto out_rows = static_cast<std::size_t>(indices_.rows);
    if (scratch_->row_floor_rows < out_rows) {
      scratch_->row_floor.reset(new std::atomic<std::uint64_t>[out_rows]());
      scratch_->row_floor_rows = out_rows;
    }
    for (std::size_t r = 0; r < out_rows; ++r)
      scratch_->row_floor[r].store(0, std::memory_order_relaxed);
    const auto n = static_cast<std::size_t>(tasks);
    scratch_->parts.reserve(2 * rows * n);
    // The candidates merged for one row: at most k per task, and one per column in all.
    scratch_->merge.reserve(std::min(n * kept, static_cast<std::size_t>(cols)));
    scratch_->written.assign(out_rows, 0);
    scratch_->short_rows.clear();
    tasks_ = tasks;
    if (short_rows_) find_short_rows(plan);
  }

  // Task `task` starts scoring rows [row_begin, row_end); `shared`: a neighbouring task scores
  // some of their keys too.
  void open_rows(std::int64_t task, std::int64_t row_begin, std::int64_t row_end, bool shared) {
    detail::topk_task& s = scratch_->tasks[static_cast<std::size_t>(task)];
    close_rows(s);
    const auto rows = static_cast<std::size_t>(row_end - row_begin);
    s.row_begin = row_begin;
    s.row_end = row_end;
    s.shared = shared;
    // Within what begin() reserved: no allocation here.
    s.candidates.resize(std::max(s.candidates.size(), rows * static_cast<std::size_t>(capacity_)));
    s.count.assign(rows, 0);
    s.floor.assign(rows, 0);  // every key is > 0: NaN-free or not, its rank is >= 2^23
    s.floor_value.assign(rows, -std::numeric_limits<float>::infinity());
  }
  void close_task(std::int64_t task) {
    close_rows(scratch_->tasks[static_cast<std::size_t>(task)]);
  }

  void consume(std::int64_t task, std::int64_t row, std::int64_t col, const float* scores,
               const unsigned char* valid, std::int64_t n) {
    if (is_short(row)) return;
    detail::topk_task& s = scratch_->tasks[static_cast<std::size_t>(task)];
    const auto block_row = static_cast<std::size_t>(row - s.row_begin);
    if (s.shared) {  // adopt a higher threshold another task of this row has reached
      const std::uint64_t best =
          scratch_->row_floor[static_cast<std::size_t>(row)].load(std::memory_order_relaxed);
      if (best > s.floor[block_row]) {
        s.floor[block_row] = best;
        s.floor_value[block_row] = detail::topk_key::value(best);
      }
    }
    std::uint64_t* keys = s.candidates.data() + block_row * static_cast<std::size_t>(capacity_);
    std::int64_t held = s.count[block_row];
    std::uint64_t floor = s.floor[block_row];
    float floor_value = s.floor_value[block_row];
    // Slices no longer than the room left, so a slice never overfills the buffer; a full one
    // keeps at least its k best, the smallest of which becomes the new threshold.
    for (std::int64_t i = 0; i < n;) {
      const std::int64_t m = std::min(n - i, capacity_ - held);
      held += select_isa::admit_keys(scores + i, valid + i, m, col + i, floor, floor_value,
                                     keys + held);
      i += m;
      if (held < capacity_) continue;
      const detail::kept_keys kept = detail::keep_at_least<select_isa>(keys, held, k_);
      held = kept.count;
      // (Never lowered: keys held from before an adopted threshold may rank below it.)
      if (kept.least <= floor) continue;
      floor = kept.least;
      floor_value = detail::topk_key::value(floor);
      if (s.shared) {
        auto& best = scratch_->row_floor[static_cast<std::size_t>(row)];
        std::uint64_t seen = best.load(std::memory_order_relaxed);
        while (seen < floor &&
               !best.compare_exchange_weak(seen, floor, std::memory_order_relaxed)) {
        }
      }
    }
    s.count[block_row] = held;
    s.floor[block_row] = floor;
    s.floor_value[block_row] = floor_value;
  }

  // Rows scored by several tasks: each task's best k candidates of the row, merged once here
  // (in task order; the order does not change the result, the ranking is total), with `extra`
  // (keys of shared rows no task could finish alone, at most one per column; rows must also
  // have been open in a shared task). Then the rows no task scored (no valid column) padded
  // with -1 and -inf.
  void finish(const executor_ref& exec, std::span<const detail::extra_key> extra = {}) {
    auto& parts = scratch_->parts;
    parts.clear();
    for (std::int64_t t = 0; t < tasks_; ++t)
      for (const auto& sp : scratch_->tasks[static_cast<std::size_t>(t)].spilled)
        parts.push_back({sp.row, t, sp.begin, sp.count});
    std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) {
      return a.row != b.row ? a.row < b.row : a.task < b.task;
    });
    detail::vector<std::uint64_t>& merge = scratch_->merge;
    std::size_t next_extra = 0;
    for (std::size_t i = 0; i < parts.size();) {
      const std::int64_t row = parts[i].row;
      merge.clear();
      // Some task holds k keys at or above the row's threshold, so nothing below it is needed.
      const std::uint64_t bar =
          scratch_->row_floor[static_cast<std::size_t>(row)].load(std::memory_order_relaxed);
      for (; i < parts.size() && parts[i].row == row; ++i) {
        const auto& spill = scratch_->tasks[static_cast<std::size_t>(parts[i].task)].spill;
        std::copy_if(spill.begin() + parts[i].begin,
                     spill.begin() + parts[i].begin + parts[i].count, std::back_inserter(merge),
                     [bar](std::uint64_t key) { return key >= bar; });
      }
      // (extra is sorted by row, and every row in it is among the parts.)
      for (; next_extra < extra.size() && extra[next_extra].row <= row; ++next_extra)
        if (extra[next_extra].row == row && extra[next_extra].key >= bar)
          merge.push_back(extra[next_extra].key);
      auto n = static_cast<std::int64_t>(merge.size());
      if (n > k_) {
        detail::keep_best<select_isa>(merge.data(), n, k_);
        n = k_;
      }
      // (Every task has returned: task 0's sort scratch is free.)
      detail::sort_descending(merge.data(), n, scratch_->tasks.front().sort_scratch.data());
      write_row(row, merge.data(), n);
    }
    constexpr std::int64_t rows_per_task = 64;
    auto pad = [&](std::int64_t t) {
      const std::int64_t last = std::min(indices_.rows, (t + 1) * rows_per_task);
      for (std::int64_t r = t * rows_per_task; r < last; ++r)
        if (is_short(r))
          write_short_row(r);
        else if (!scratch_->written[static_cast<std::size_t>(r)])
          write_row(r, nullptr, 0);
    };
    detail::checked_parallel_for(exec, (indices_.rows + rows_per_task - 1) / rows_per_task, pad);
  }

  bool has_values() const { return values_.data != nullptr; }
  std::int64_t k() const { return indices_.cols; }
  // The bytes this output writes: indices and values are checked against the call's inputs and
  // against each other.
  std::array<detail::byte_range, 2> written_ranges() const {
    return {detail::range_of("top-k indices", indices_),
            has_values() ? detail::range_of("top-k values", values_) : detail::byte_range{}};
  }

 private:
  // The rows a task was on are done (for this task): written, or kept for the merge.
  void close_rows(detail::topk_task& s) {
    for (std::int64_t r = s.row_begin; r < s.row_end; ++r) {
      const auto block_row = static_cast<std::size_t>(r - s.row_begin);
      std::uint64_t* keys = s.candidates.data() + block_row * static_cast<std::size_t>(capacity_);
      std::int64_t n = s.count[block_row];
      if (s.shared) {
        // At least its k best (cut exactly, with the other tasks' candidates, in finish()),
        // those below the row's best threshold dropped first.
        const std::uint64_t bar =
            scratch_->row_floor[static_cast<std::size_t>(r)].load(std::memory_order_relaxed);
        n = select_isa::compact_at_least(keys, n, bar);
        if (n > k_) n = detail::keep_at_least<select_isa>(keys, n, k_).count;
        s.spilled.push_back({r, static_cast<std::int64_t>(s.spill.size()), n});
        s.spill.insert(s.spill.end(), keys, keys + n);
      } else {
        // A few more than k sorted costs less than an exact cut to k first.
        if (n > k_) n = detail::keep_at_least<select_isa>(keys, n, k_).count;
        detail::sort_descending(keys, n, s.sort_scratch.data());
        write_row(r, keys, std::min(n, k_));
      }
    }
    s.row_begin = s.row_end = 0;
  }

  // Row r from its m best keys in descending order, padded to k. (Rows are written once each,
  // by one task or by finish(): the flags are distinct bytes, so tasks set them without a race.)
  void write_row(std::int64_t r, const std::uint64_t* keys, std::int64_t m) const {
    if (is_short(r)) return;
    scratch_->written[static_cast<std::size_t>(r)] = 1;
    std::int32_t* idx = indices_.row(r);
    float* val = has_values() ? values_.row(r) : nullptr;
    if constexpr (requires { number_.write_row(r, keys, m, idx, val, indices_.cols); }) {
      number_.write_row(r, keys, m, idx, val, indices_.cols);
      return;
    }
    for (std::int64_t i = 0; i < m; ++i) {
      idx[i] = number_(r, detail::topk_key::column(keys[i]));
      if (val) val[i] = detail::topk_key::value(keys[i]);
    }
    std::fill(idx + m, idx + indices_.cols, -1);
    if (val) std::fill(val + m, val + indices_.cols, -std::numeric_limits<float>::infinity());
  }

  // Rows with no more valid columns than k, marked (finish() writes them, nothing else does).
  template <class Plan>
  void find_short_rows(const Plan& plan) {
    scratch_->short_rows.assign(static_cast<std::size_t>(indices_.rows), {});
    for (std::int64_t r = 0; r < indices_.rows; ++r) {
      const row_keys keys = plan.row(r);
      const std::int64_t len = std::max<std::int64_t>(keys.key_end - keys.key_begin, 0);
      if (len <= k_)
        scratch_->short_rows[static_cast<std::size_t>(r)] = {keys.key_begin - keys.col_offset, len};
    }
  }
  bool is_short(std::int64_t r) const {
    return !scratch_->short_rows.empty() &&
           scratch_->short_rows[static_cast<std::size_t>(r)].len >= 0;
  }
  // A short row: its valid columns ascending (numbered as any selected column), -1 after.
  void write_short_row(std::int64_t r) const {
    const detail::topk_scratch::short_row row = scratch_->short_rows[static_cast<std::size_t>(r)];
    std::int32_t* idx = indices_.row(r);
    for (std::int64_t i = 0; i < row.len; ++i)
      idx[i] = number_(r, static_cast<std::int32_t>(row.first + i));
    std::fill(idx + row.len, idx + k_, -1);
  }

  // The steps the selection runs on (the scores may come from either backend).
  using select_isa = Steps;

  matrix_view<std::int32_t> indices_;
  matrix_view<float> values_;
  Numbering number_;
  bool short_rows_ = false;
  detail::thread_scratch<detail::topk_scratch> lease_;  // taken in begin()
  detail::topk_scratch* scratch_ = nullptr;
  std::int64_t k_ = 0, capacity_ = 0, tasks_ = 0;
};

MQALOGITS_NAMESPACE_END
