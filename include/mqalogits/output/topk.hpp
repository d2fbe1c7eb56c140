// The top-k selection: per output row, the k columns with the largest fp32 logits, written
// instead of the [rows, columns] logits (which are never materialised). This is what the
// DeepSeek-V3.2 indexer's logits are for: the engine attends only to the selected tokens.
//
//   ml::topk(indices)                               indices [rows, k] int32
//   ml::topk(indices, values)                       + values [rows, k] float
//   ml::topk(indices, values, ml::topk_index::slot) paged kernel only: cache slots
//
// passed where a kernel takes its logits view. k is the views' column count (any k >= 1).
// Row r of `indices` holds the columns (numbered as in the logits row) of the k largest valid
// logits of row r in descending order of value, ties broken by the lower column, NaN above
// +inf (as torch.topk); masked columns are never selected; a row with fewer than k valid
// columns is padded with -1 (values -inf). Ranking uses the fp32 logit, before any rounding to
// a logits type. The result equals a stable descending sort of the row's valid fp32 logits,
// for every executor and thread count.
//
// topk_index::slot (fp8_fp4_paged_mqa_logits only, what sglang's and vLLM's CPU topk_transform
// produce) writes block_table[request, pos / page_kv] * page_kv + pos % page_kv instead of the
// context position pos. Other kernels do not accept it (it does not compile).
//
// How it runs on the host: a row's keys are scored by one or several executor tasks; each task
// streams the scores of the rows it works on through a candidate buffer of 2k per row whose
// admission threshold rises to the k-th best key each time the buffer fills (the buffer is cut
// to its k best by a radix select), so memory never depends on the context length; a finished
// row's k best are radix sorted. A row scored by one task is written by that task; rows shared
// by neighbouring tasks are merged once in finish(), in task order. The per-task buffers belong to
// the calling thread and are reused by its later calls, so a warm call allocates nothing.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "../api/validate.hpp"
#include "../config.hpp"
#include "../error.hpp"
#include "../exec/executor.hpp"
#include "../exec/options.hpp"
#include "../view/matrix_view.hpp"
#include "output.hpp"

MQALOGITS_NAMESPACE_BEGIN

// What a top-k selection writes in `indices`: the logits row's column, or (paged kernel) the
// cache slot of that context position.
namespace topk_index {
struct column_t {
  explicit constexpr column_t() = default;
};
struct slot_t {
  explicit constexpr slot_t() = default;
};
inline constexpr column_t column{};
inline constexpr slot_t slot{};
}  // namespace topk_index

// A top-k request as the kernels take it: the caller's views and the index kind. values with
// no data and shape [0, 0] means "indices only".
template <class Index>
struct topk_selection {
  matrix_view<std::int32_t> indices;
  matrix_view<float> values;
};

inline topk_selection<topk_index::column_t> topk(matrix_view<std::int32_t> indices) {
  return {indices, {}};
}
inline topk_selection<topk_index::column_t> topk(matrix_view<std::int32_t> indices,
                                                 matrix_view<float> values,
                                                 topk_index::column_t = topk_index::column) {
  return {indices, values};
}
inline topk_selection<topk_index::slot_t> topk(matrix_view<std::int32_t> indices,
                                               matrix_view<float> values, topk_index::slot_t) {
  return {indices, values};
}
inline topk_selection<topk_index::slot_t> topk(matrix_view<std::int32_t> indices,
                                               topk_index::slot_t) {
  return {indices, {}};
}

namespace detail {

// A total order on (fp32 score, column) as one unsigned integer, larger = ranked first:
// the score's bits mapped so that unsigned order is numeric order (NaN of either sign above
// +inf, -0 equal to +0), then the column reversed (ties to the lower column), then one bit that
// keeps the sign of a zero or NaN so the value written back is the logit itself.
struct topk_key {
  static constexpr std::uint32_t nan_rank = 0xFFFFFFFFu, zero_rank = 0x80000000u;

  // Branch-free (selects only): it runs on every score that passes the value threshold.
  static std::uint64_t make(float score, std::int64_t col) {
    const auto b = std::bit_cast<std::uint32_t>(score);
    const std::uint32_t mag = b & 0x7FFFFFFFu, sign = b >> 31;
    // Negative: all bits flipped; positive: the sign bit set.
    const std::uint32_t ordered = b ^ ((0u - sign) | 0x80000000u);
    const bool nan = mag > 0x7F800000u, zero = mag == 0;
    const std::uint32_t rank = nan ? nan_rank : zero ? zero_rank : ordered;
    const std::uint32_t keep = (nan || zero) ? sign : 0u;
    const auto reversed = static_cast<std::uint32_t>(0x7FFFFFFF - col);
    return (std::uint64_t{rank} << 32) | (std::uint64_t{reversed} << 1) | keep;
  }
  static std::int32_t column(std::uint64_t key) {
    return static_cast<std::int32_t>(0x7FFFFFFF -
                                     static_cast<std::int64_t>((key >> 1) & 0x7FFFFFFFu));
  }
  static float value(std::uint64_t key) {
    const auto rank = static_cast<std::uint32_t>(key >> 32);
    const std::uint32_t keep = static_cast<std::uint32_t>(key & 1u) << 31;
    if (rank == nan_rank) return std::bit_cast<float>(0x7FC00000u | keep);
    if (rank == zero_rank) return std::bit_cast<float>(keep);
    return std::bit_cast<float>((rank & 0x80000000u) ? (rank & 0x7FFFFFFFu) : ~rank);
  }
};

// keys[lo, n) reordered so that those for which pred holds come first. Branch-free (a swap per
// key): the outcome of pred is close to random here.
template <class Pred>
void partition_keys(std::uint64_t* keys, std::int64_t lo, std::int64_t n, Pred pred) {
  std::int64_t out = lo;
  for (std::int64_t i = lo; i < n; ++i) {
    const std::uint64_t x = keys[i];
    const bool take = pred(x);
    keys[i] = keys[out];
    keys[out] = x;
    out += take;
  }
}

// The k best of keys[0, n) (1 <= k <= n) moved to the front, the k-th best (the smallest of
// them) at keys[k - 1], which it returns. A radix select: a histogram of the keys' leading
// varying bits finds the bucket that holds the k-th best; the keys above it move to the front
// and only that bucket is searched further. A few linear passes, against nth_element's
// data-dependent branches, which mispredict on scores that arrive in random order.
inline std::uint64_t keep_best(std::uint64_t* keys, std::int64_t n, std::int64_t k) {
  constexpr int digit_bits = 8;
  constexpr std::int64_t small = 32;  // below this, nth_element
  std::int64_t lo = 0;                // keys[0, lo) are among the k best
  while (n - lo > small) {
    // (A plain min/max loop: it vectorises, std::minmax_element branches on every key.)
    std::uint64_t base = ~std::uint64_t{0}, highest = 0;
    for (std::int64_t i = lo; i < n; ++i) {
      base = std::min(base, keys[i]);
      highest = std::max(highest, keys[i]);
    }
    const std::uint64_t span = highest - base;
    const std::int64_t need = k - lo;
    if (span == 0 || need == n - lo) {
      // All equal, or all needed: any of them, the smallest at k - 1.
      std::iter_swap(std::find(keys + lo, keys + n, base), keys + (k - 1));
      return keys[k - 1];
    }
    const int shift = std::max(0, static_cast<int>(std::bit_width(span)) - digit_bits);
    std::int64_t count[std::int64_t{1} << digit_bits] = {};
    for (std::int64_t i = lo; i < n; ++i) ++count[(keys[i] - base) >> shift];
    // The bucket of the k-th best, counting from the top, and how many keys lie above it.
    auto bucket = static_cast<std::int64_t>(span >> shift);
    std::int64_t above = 0;
    while (above + count[bucket] < need) above += count[bucket--];
    const auto digit = [&](std::uint64_t x) {
      return static_cast<std::int64_t>((x - base) >> shift);
    };
    partition_keys(keys, lo, n, [&](std::uint64_t x) { return digit(x) > bucket; });
    lo += above;
    partition_keys(keys, lo, n, [&](std::uint64_t x) { return digit(x) == bucket; });
    n = lo + count[bucket];  // at least one key fewer than before: span has two buckets
  }
  std::nth_element(keys + lo, keys + (k - 1), keys + n, std::greater<>());
  return keys[k - 1];
}

// keys[0, n) in descending order, with tmp[0, n) as scratch. An LSD radix sort on bytes that
// skips a byte every key shares (the high bits of the column, usually the score's sign and
// exponent): five or six linear passes where a comparison sort of random-order scores spends
// most of its time in mispredicted branches (about 4x slower at k = 2048).
inline void sort_descending(std::uint64_t* keys, std::int64_t n, std::uint64_t* tmp) {
  if (n < 64) {
    std::sort(keys, keys + n, std::greater<>());
    return;
  }
  // Ascending order of ~key is descending order of key.
  std::uint32_t count[8][256] = {};
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint64_t x = ~keys[i];
    for (int d = 0; d < 8; ++d) ++count[d][(x >> (8 * d)) & 0xFFu];
  }
  std::uint64_t *from = keys, *to = tmp;
  for (int d = 0; d < 8; ++d) {
    std::uint32_t* c = count[d];
    if (c[(~from[0] >> (8 * d)) & 0xFFu] == static_cast<std::uint32_t>(n)) continue;
    std::uint32_t sum = 0;
    for (auto& b : std::span(c, 256)) sum += std::exchange(b, sum);
    for (std::int64_t i = 0; i < n; ++i) to[c[(~from[i] >> (8 * d)) & 0xFFu]++] = from[i];
    std::swap(from, to);
  }
  if (from != keys) std::copy(from, from + n, keys);
}

// Scratch of one executor task: the candidate buffers of the rows it is scoring now, and the
// sorted candidates of the rows it shares with a neighbouring task (merged in finish()).
struct alignas(64) topk_task {
  struct spilled_row {
    std::int64_t row = 0, begin = 0, count = 0;
  };
  std::int64_t row_begin = 0, row_end = 0;
  bool shared = false;
  std::vector<std::uint64_t> candidates;  // [rows of the block, capacity]
  std::vector<std::int64_t> count;        // candidates held per row
  std::vector<std::uint64_t> floor;       // per row: a key must exceed it to enter
  std::vector<float> floor_value;         // its score (-inf until the buffer first fills)
  std::vector<std::uint64_t> spill;
  std::vector<spilled_row> spilled;
  std::vector<std::uint64_t> sort_scratch;  // k keys (task 0's also serves finish())
};

struct topk_scratch {
  struct part {
    std::int64_t row = 0, task = 0, begin = 0, count = 0;
  };
  std::vector<topk_task> tasks;
  std::vector<part> parts;  // the spilled rows of every task, by row
  std::vector<std::uint64_t> merge;
  // Per output row, the highest threshold any task has reached on it: a task that holds k keys
  // above a key proves that key is not among the row's k best, so the other tasks of a row
  // split across tasks drop it too (a later task of a long decode row starts near the final
  // threshold instead of refilling its buffer from nothing). Only raised; only a hint: the
  // result is the exact top k whichever task publishes first.
  std::unique_ptr<std::atomic<std::uint64_t>[]> row_floor;
  std::size_t row_floor_rows = 0;
};

// The scratch of a call, taken from the calling thread's stack of them (one per nesting depth:
// a kernel called from inside another call's task gets its own) and reused by its later calls.
class topk_scratch_lease {
 public:
  topk_scratch_lease() = default;
  topk_scratch_lease(const topk_scratch_lease&) = delete;
  topk_scratch_lease& operator=(const topk_scratch_lease&) = delete;
  topk_scratch_lease(topk_scratch_lease&& o) noexcept
      : scratch_(std::exchange(o.scratch_, nullptr)) {}
  ~topk_scratch_lease() {
    if (scratch_) --stack().depth;
  }

  topk_scratch& get() {
    if (!scratch_) {
      auto& s = stack();
      if (s.depth == s.items.size()) s.items.push_back(std::make_unique<topk_scratch>());
      scratch_ = s.items[s.depth++].get();
    }
    return *scratch_;
  }

 private:
  struct in_use {
    std::vector<std::unique_ptr<topk_scratch>> items;
    std::size_t depth = 0;
  };
  static in_use& stack() {
    thread_local in_use s;
    return s;
  }
  topk_scratch* scratch_ = nullptr;
};

// Column -> what `indices` holds.
struct column_numbering {
  std::int32_t operator()(std::int64_t, std::int32_t col) const { return col; }
};
// Context position -> cache slot of the paged kernel; rows (b, j) of request b share its
// block-table row. Only selected positions are translated, and those lie inside the context,
// whose block-table entries the kernel has checked (int32 or int64, as the call passes them).
template <class I>
struct slot_numbering {
  matrix_view<const I> block_table;
  std::int32_t page_kv = 1;
  std::int64_t next_n = 1;
  std::int32_t operator()(std::int64_t row, std::int32_t pos) const {
    const std::int64_t page = block_table(row / next_n, pos / page_kv);
    return static_cast<std::int32_t>(page * page_kv + pos % page_kv);
  }
};

}  // namespace detail

template <class Numbering>
class topk_output {
 public:
  // The host driver groups consecutive work items into tasks for this output and says which
  // rows each task is on (open_rows / close_task), so candidate storage is per task, not per
  // 512-key work item.
  static constexpr bool groups_work_items = true;

  topk_output(const matrix_view<std::int32_t>& indices, const matrix_view<float>& values,
              Numbering numbering = {})
      : indices_(indices), values_(values), number_(numbering) {}

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
  }

  // The scratch of `tasks` tasks with up to max_rows rows open at once, all of it reserved
  // first (so no task or finish() allocates, and a failed allocation leaves the output as it
  // was); then every row padded (-1, -inf): rows no task scores stay so.
  template <class Plan>
  void begin(const Plan& plan, std::int64_t tasks, const executor_ref& exec,
             std::int64_t max_rows = 1) {
    k_ = indices_.cols;
    const std::int64_t cols = std::max<std::int64_t>(plan.num_cols(), 0);
    // 2k per row, or more than the row can hold (never full, never cut) when that is less.
    capacity_ = std::min<std::int64_t>(2 * k_, cols + 1);
    const auto rows = static_cast<std::size_t>(std::max<std::int64_t>(max_rows, 1));
    // A row keeps at most k candidates, and no more than its columns.
    const auto kept = static_cast<std::size_t>(std::min(k_, cols));
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
      if (s.sort_scratch.size() < kept) s.sort_scratch.resize(kept);
    }
    const auto out_rows = static_cast<std::size_t>(indices_.rows);
    if (scratch_->row_floor_rows < out_rows) {
      scratch_->row_floor = std::make_unique<std::atomic<std::uint64_t>[]>(out_rows);
      scratch_->row_floor_rows = out_rows;
    }
    for (std::size_t r = 0; r < out_rows; ++r)
      scratch_->row_floor[r].store(0, std::memory_order_relaxed);
    const auto n = static_cast<std::size_t>(tasks);
    scratch_->parts.reserve(2 * rows * n);
    // The candidates merged for one row: at most k per task, and one per column in all.
    scratch_->merge.reserve(std::min(n * kept, static_cast<std::size_t>(cols)));
    tasks_ = tasks;
    constexpr std::int64_t rows_per_task = 64;
    auto pad = [&](std::int64_t t) {
      const std::int64_t last = std::min(indices_.rows, (t + 1) * rows_per_task);
      for (std::int64_t r = t * rows_per_task; r < last; ++r) write_row(r, nullptr, 0);
    };
    exec.parallel_for((indices_.rows + rows_per_task - 1) / rows_per_task, pad);
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
    detail::topk_task& s = scratch_->tasks[static_cast<std::size_t>(task)];
    const auto ri = static_cast<std::size_t>(row - s.row_begin);
    if (s.shared) {  // adopt a higher threshold another task of this row has reached
      const std::uint64_t best =
          scratch_->row_floor[static_cast<std::size_t>(row)].load(std::memory_order_relaxed);
      if (best > s.floor[ri]) {
        s.floor[ri] = best;
        s.floor_value[ri] = detail::topk_key::value(best);
      }
    }
    // Once the threshold has risen, most slices hold few candidates or none: one branch-free
    // pass (it vectorises) counts them, NaN, which never compares below, included.
    std::int64_t passing = 0;
    {
      const float bar = s.floor_value[ri];
      for (std::int64_t i = 0; i < n; ++i) passing += (valid[i] != 0) & !(scores[i] < bar);
      if (passing == 0) return;
    }
    std::uint64_t* keys = s.candidates.data() + ri * static_cast<std::size_t>(capacity_);
    std::int64_t held = s.count[ri];
    std::uint64_t floor = s.floor[ri];
    float floor_value = s.floor_value[ri];
    // Full: keep the k best; the k-th is the new threshold.
    auto cut_when_full = [&] {
      if (held < capacity_) return;
      // (Never lowered: keys held from before an adopted threshold may rank below it.)
      floor = std::max(floor, detail::keep_best(keys, held, k_));
      floor_value = detail::topk_key::value(floor);
      held = k_;
      if (s.shared) {
        auto& best = scratch_->row_floor[static_cast<std::size_t>(row)];
        std::uint64_t seen = best.load(std::memory_order_relaxed);
        while (seen < floor &&
               !best.compare_exchange_weak(seen, floor, std::memory_order_relaxed)) {
        }
      }
    };
    // Below, held < capacity_ at the top of each step, so the slot keys[held] exists.
    if (passing * 8 < n) {
      // Few pass: a branch that is nearly always "no" is the cheapest filter.
      for (std::int64_t i = 0; i < n; ++i) {
        if (!valid[i] || scores[i] < floor_value) continue;
        const std::uint64_t key = detail::topk_key::make(scores[i], col + i);
        if (key <= floor) continue;
        keys[held++] = key;
        cut_when_full();
      }
    } else {
      // Many pass (a row's first keys, or a threshold near the median): branch-free, since a
      // branch on the outcome would mispredict about every other key.
      for (std::int64_t i = 0; i < n; ++i) {
        const std::uint64_t key = detail::topk_key::make(scores[i], col + i);
        keys[held] = key;
        held += (valid[i] != 0) & (key > floor);
        cut_when_full();
      }
    }
    s.count[ri] = held;
    s.floor[ri] = floor;
    s.floor_value[ri] = floor_value;
  }

  // Rows scored by several tasks: each task's best k candidates of the row, merged once here
  // (in task order; the order does not change the result, the ranking is total).
  void finish(const executor_ref&) {
    auto& parts = scratch_->parts;
    parts.clear();
    for (std::int64_t t = 0; t < tasks_; ++t)
      for (const auto& sp : scratch_->tasks[static_cast<std::size_t>(t)].spilled)
        parts.push_back({sp.row, t, sp.begin, sp.count});
    std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) {
      return a.row != b.row ? a.row < b.row : a.task < b.task;
    });
    std::vector<std::uint64_t>& merge = scratch_->merge;
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
      auto n = static_cast<std::int64_t>(merge.size());
      if (n > k_) {
        detail::keep_best(merge.data(), n, k_);
        n = k_;
      }
      // (Every task has returned: task 0's sort scratch is free.)
      detail::sort_descending(merge.data(), n, scratch_->tasks.front().sort_scratch.data());
      write_row(row, merge.data(), n);
    }
  }

  bool has_values() const { return values_.data != nullptr; }
  std::int64_t k() const { return indices_.cols; }

 private:
  // The rows a task was on are done (for this task): written, or kept for the merge.
  void close_rows(detail::topk_task& s) {
    for (std::int64_t r = s.row_begin; r < s.row_end; ++r) {
      const auto ri = static_cast<std::size_t>(r - s.row_begin);
      std::uint64_t* keys = s.candidates.data() + ri * static_cast<std::size_t>(capacity_);
      std::int64_t n = s.count[ri];
      if (n > k_) {
        detail::keep_best(keys, n, k_);
        n = k_;
      }
      if (s.shared) {  // cut and sorted again with the other tasks' candidates in finish()
        s.spilled.push_back({r, static_cast<std::int64_t>(s.spill.size()), n});
        s.spill.insert(s.spill.end(), keys, keys + n);
      } else {
        detail::sort_descending(keys, n, s.sort_scratch.data());
        write_row(r, keys, n);
      }
    }
    s.row_begin = s.row_end = 0;
  }

  // Row r from its m best keys in descending order, padded to k.
  void write_row(std::int64_t r, const std::uint64_t* keys, std::int64_t m) const {
    std::int32_t* idx = indices_.row(r);
    float* val = has_values() ? values_.row(r) : nullptr;
    for (std::int64_t i = 0; i < m; ++i) {
      idx[i] = number_(r, detail::topk_key::column(keys[i]));
      if (val) val[i] = detail::topk_key::value(keys[i]);
    }
    std::fill(idx + m, idx + indices_.cols, -1);
    if (val) std::fill(val + m, val + indices_.cols, -std::numeric_limits<float>::infinity());
  }

  matrix_view<std::int32_t> indices_;
  matrix_view<float> values_;
  Numbering number_;
  detail::topk_scratch_lease lease_;
  detail::topk_scratch* scratch_ = nullptr;
  std::int64_t k_ = 0, capacity_ = 0, tasks_ = 0;
};

// A column selection passed where a kernel takes its output (every kernel).
inline topk_output<detail::column_numbering> to_output_policy(
    const topk_selection<topk_index::column_t>& sel, const options&) {
  return topk_output<detail::column_numbering>(sel.indices, sel.values);
}

static_assert(output_policy<topk_output<detail::column_numbering>>);
static_assert(grouped_output_policy<topk_output<detail::column_numbering>>);

// What fp8_fp4_paged_mqa_logits accepts in the position of its output: any output, or a
// slot-translating selection (which needs the block table it is given).
template <class T>
concept paged_output_argument =
    output_argument<T> || std::is_same_v<T, topk_selection<topk_index::slot_t>>;

namespace detail {
template <class Out, class I>
auto paged_output_policy(const Out& out, const options& opt, matrix_view<const I>, std::int32_t,
                         std::int64_t) {
  return to_output_policy(out, opt);
}
template <class I>
topk_output<slot_numbering<I>> paged_output_policy(const topk_selection<topk_index::slot_t>& sel,
                                                   const options&, matrix_view<const I> block_table,
                                                   std::int32_t page_kv, std::int64_t next_n) {
  return topk_output<slot_numbering<I>>(sel.indices, sel.values,
                                        slot_numbering<I>{block_table, page_kv, next_n});
}
}  // namespace detail

MQALOGITS_NAMESPACE_END
