// Candidate blocks: per row, the N best blocks of B consecutive request-local positions, scored
// by the largest logit of the block, written instead of the logits. DeepSeek V4.1's
// candidate-source layer publishes these; the layers after it run the sparse kernels over them.
//
//   ml::candidate_blocks(blocks, B)                   blocks [rows, N] int32, ascending
//   ml::candidate_blocks(blocks, B, ml::candidate_order::score)
//   ml::candidate_blocks(blocks, B, order, ml::candidate_padding::repeat_last)
//
// passed where the dense or the paged kernel takes its logits view, or beside a top-k
// (ml::topk_and_candidates, two_selections.hpp). Block b of a row holds its request-local
// positions [b * B, (b + 1) * B): position = token - ks[row] on the dense kernel, the context
// position on the paged kernel; ids are request-local. Per row (as vLLM's select_candidate_blocks):
// - a block's score is the largest fp32 logit of its valid positions; NaN propagates (as
//   torch.amax); a block without a valid position is no candidate;
// - the row's newest block (the one holding its last valid position) scores +inf;
// - the N best blocks by score, ties to the lower block id (NaN above +inf);
// - a selected block that scores -inf, and every entry past the selection, is -1;
// - candidate_order::ascending (the default) sorts the selected ids ascending, -1s last (what the
//   sparse kernels' metadata takes); candidate_order::score keeps them best first;
// - candidate_padding::repeat_last pads with the row's last selected id instead of -1 (how
//   engines pad the sparse kernels' selection; -1 where the row selected nothing).
// B is a power of two up to 2^20 and, on the paged kernel, at most page_kv. Memory per row does
// not grow with the context: block maxima are streamed through a candidate buffer of 4N keys
// (topk_output.hpp), a 1M-position row never needs a 1M-wide buffer.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>

#include "../config.hpp"
#include "../error.hpp"
#include "../exec/options.hpp"
#include "../exec/thread_scratch.hpp"
#include "../std_abi.hpp"
#include "../variant/plan.hpp"
#include "../view/matrix_view.hpp"
#include "candidate_writer.hpp"
#include "topk_numbering.hpp"
#include "topk_output.hpp"

MQALOGITS_NAMESPACE_BEGIN

struct candidate_blocks_selection {
  matrix_view<std::int32_t> blocks;
  std::int64_t block_size = 8;
  candidate_order order = candidate_order::ascending;
  candidate_padding padding = candidate_padding::minus_one;
};

inline candidate_blocks_selection candidate_blocks(
    matrix_view<std::int32_t> blocks, std::int64_t block_size,
    candidate_order order = candidate_order::ascending,
    candidate_padding padding = candidate_padding::minus_one) {
  return {blocks, block_size, order, padding};
}

inline constexpr std::int64_t max_candidate_block_size = std::int64_t{1} << 20;

namespace detail {

// One executor task's blocks in progress: per open row the block its last slice ended in, and
// the pieces of blocks it could not finish (another task scores the rest of them).
struct candidate_task {
  struct open_block {
    std::int64_t block = -1;    // -1: none
    std::int64_t next_col = 0;  // the column that continues it
    float best = -std::numeric_limits<float>::infinity();
    bool any = false;  // a valid position seen
  };
  struct piece {
    std::int64_t row = 0, block = 0;
    float best = 0;
    bool any = false;
  };
  std::int64_t row_begin = 0, row_end = 0;
  bool shared = false;
  detail::vector<open_block> open;
  detail::vector<piece> pieces;
  detail::vector<float> batch_score;  // finished consecutive blocks, handed over together
  detail::vector<unsigned char> batch_valid;
};

struct candidate_scratch {
  detail::vector<candidate_task> tasks;
  detail::vector<std::int64_t> origin;  // per row: the column of request-local position 0
  detail::vector<std::int64_t> first_col, end_col, newest;
  detail::vector<candidate_task::piece> pieces;
  detail::vector<extra_key> extra;
};

// NaN-propagating max (torch.amax): once NaN, NaN.
inline float nan_max(float best, float x) {
  return (x > best || std::isnan(x)) && !std::isnan(best) ? x : best;
}

// The maxima of `blocks` whole blocks of B scores (NaN propagating, masked scores left out) and
// whether each has a valid score. Written as plain max and or passes so that they vectorise: this
// runs on every score of a candidate-source call.
template <int B>
void block_maxima(const float* scores, const unsigned char* valid, std::int64_t blocks, float* best,
                  unsigned char* any) {
  for (std::int64_t b = 0; b < blocks; ++b) {
    const float* s = scores + b * B;
    const unsigned char* v = valid + b * B;
    float m = -std::numeric_limits<float>::infinity();
    bool nan = false;
    unsigned char seen = 0;
    for (int i = 0; i < B; ++i) {
      const float x = v[i] ? s[i] : -std::numeric_limits<float>::infinity();
      m = x > m ? x : m;
      nan |= (x != x);
      seen |= v[i];
    }
    best[b] = nan ? std::numeric_limits<float>::quiet_NaN() : m;
    any[b] = seen != 0;
  }
}
inline void block_maxima(const float* scores, const unsigned char* valid, std::int64_t blocks,
                         std::int64_t B, float* best, unsigned char* any) {
  if (B == 8) return block_maxima<8>(scores, valid, blocks, best, any);
  if (B == 16) return block_maxima<16>(scores, valid, blocks, best, any);
  for (std::int64_t b = 0; b < blocks; ++b) {
    float m = -std::numeric_limits<float>::infinity();
    bool seen = false;
    for (std::int64_t i = b * B; i < (b + 1) * B; ++i)
      if (valid[i]) {
        m = nan_max(m, scores[i]);
        seen = true;
      }
    best[b] = m;
    any[b] = seen;
  }
}

// The plan as the block selection sees it: one column per block id.
struct block_columns {
  std::int64_t cols = 0;
  std::int64_t num_cols() const { return cols; }
  row_keys row(std::int64_t) const { return {}; }
};

}  // namespace detail

template <class Steps = detail::selection_steps>
class candidate_output {
 public:
  static constexpr bool groups_work_items = true;

  candidate_output(const candidate_blocks_selection& sel, const char* where)
      : sel_(sel),
        where_(where),
        inner_(sel.blocks, {}, detail::candidate_writer{sel.order, sel.padding}) {}

  // N, the blocks selected per row, and B, the positions per block: what a backend that costs
  // the selection (the NeuronCore model) reads.
  std::int64_t candidate_count() const { return sel_.blocks.cols; }
  std::int64_t candidate_block_size() const { return sel_.block_size; }

  void check(const char* where, std::int64_t rows, std::int64_t cols) const {
    using detail::require;
    const std::int64_t B = sel_.block_size;
    require(B >= 1 && B <= max_candidate_block_size && (B & (B - 1)) == 0, where, [&](auto& m) {
      m << "candidate block size " << B << " must be a power of two in [1, "
        << max_candidate_block_size << "]";
    });
    require(sel_.blocks.cols >= 1, where, [&](auto& m) {
      m << "candidate blocks has " << sel_.blocks.cols << " columns (N must be >= 1)";
    });
    detail::check_matrix(where, "candidate blocks", sel_.blocks, rows, sel_.blocks.cols);
    (void)cols;
  }

  template <class Plan>
  void begin(const Plan& plan, std::int64_t tasks, const executor_ref& exec,
             std::int64_t max_rows = 1) {
    static_assert(
        requires { plan.position_key(std::int64_t{}); },
        "mqalogits: candidate blocks are an output of the dense and paged kernels");
    const std::int64_t rows = plan.num_rows(), B = sel_.block_size;
    scratch_ = &lease_.get();
    auto& s = *scratch_;
    const auto n = static_cast<std::size_t>(rows);
    s.origin.resize(n);
    s.first_col.resize(n);
    s.end_col.resize(n);
    s.newest.resize(n);
    std::int64_t blocks = 1;
    for (std::int64_t r = 0; r < rows; ++r) {
      const row_keys k = plan.row(r);
      const auto i = static_cast<std::size_t>(r);
      s.origin[i] = plan.position_key(r) - k.col_offset;
      s.first_col[i] = k.key_begin - k.col_offset;
      s.end_col[i] = k.key_end - k.col_offset;
      s.newest[i] = k.empty() ? -1 : block_of(r, s.end_col[i] - 1);
      // Block ids are written as int32.
      detail::require(s.newest[i] <= std::numeric_limits<std::int32_t>::max(), where_,
                      [&](auto& m) {
                        m << "row " << r << ": candidate block ids up to " << s.newest[i]
                          << " do not fit int32";
                      });
      blocks = std::max(blocks, s.newest[i] + 1);
    }
    if (static_cast<std::int64_t>(s.tasks.size()) < tasks)
      s.tasks.resize(static_cast<std::size_t>(tasks));
    const auto open_rows = static_cast<std::size_t>(std::max<std::int64_t>(max_rows, 1));
    const auto most = static_cast<std::size_t>(
        std::min<std::int64_t>(std::max<std::int64_t>(plan.num_cols(), 1) / B + 2, 1 << 16));
    for (std::int64_t t = 0; t < tasks; ++t) {
      detail::candidate_task& ts = s.tasks[static_cast<std::size_t>(t)];
      ts.row_begin = ts.row_end = 0;
      ts.open.reserve(open_rows);
      ts.pieces.clear();
      ts.pieces.reserve(4 * open_rows);
      ts.batch_score.reserve(most);
      ts.batch_valid.reserve(most);
    }
    inner_.begin(detail::block_columns{blocks}, tasks, exec, max_rows);
    tasks_ = tasks;
  }

  void open_rows(std::int64_t task, std::int64_t row_begin, std::int64_t row_end, bool shared) {
    detail::candidate_task& t = scratch_->tasks[static_cast<std::size_t>(task)];
    close_rows(task, t);
    t.row_begin = row_begin;
    t.row_end = row_end;
    t.shared = shared;
    t.open.assign(static_cast<std::size_t>(row_end - row_begin), {});
    inner_.open_rows(task, row_begin, row_end, shared);
  }
  void close_task(std::int64_t task) {
    close_rows(task, scratch_->tasks[static_cast<std::size_t>(task)]);
    inner_.close_task(task);
  }

  // Columns [col, col + n) of `row`: each block they finish is handed to the selection; the
  // block they end in stays open for the task's next slice of the row.
  void consume(std::int64_t task, std::int64_t row, std::int64_t col, const float* scores,
               const unsigned char* valid, std::int64_t n) {
    detail::candidate_task& t = scratch_->tasks[static_cast<std::size_t>(task)];
    const auto r = static_cast<std::size_t>(row);
    const std::int64_t B = sel_.block_size, origin = scratch_->origin[r];
    const std::int64_t first = scratch_->first_col[r], end = scratch_->end_col[r];
    detail::candidate_task::open_block& open = t.open[static_cast<std::size_t>(row - t.row_begin)];
    t.batch_score.clear();
    t.batch_valid.clear();
    std::int64_t batch_first = 0;
    for (std::int64_t c = col; c < col + n;) {
      const std::int64_t b = block_of(row, c);
      const std::int64_t block_begin = std::max(origin + b * B, first);
      const std::int64_t block_end = std::min(origin + (b + 1) * B, end);
      // Whole blocks from here on, none open: their maxima in one vector pass.
      const std::int64_t whole =
          c == origin + b * B && open.block < 0 ? (std::min(col + n, end) - c) / B : 0;
      if (whole > 0) {
        if (!t.batch_score.empty() &&
            batch_first + static_cast<std::int64_t>(t.batch_score.size()) != b)
          flush_batch(task, t, row, batch_first);
        if (t.batch_score.empty()) batch_first = b;
        const std::size_t at = t.batch_score.size();
        t.batch_score.resize(at + static_cast<std::size_t>(whole));
        t.batch_valid.resize(at + static_cast<std::size_t>(whole));
        detail::block_maxima(scores + (c - col), valid + (c - col), whole, B,
                             t.batch_score.data() + at, t.batch_valid.data() + at);
        const std::int64_t newest = scratch_->newest[r];
        if (newest >= b && newest < b + whole) {
          t.batch_score[at + static_cast<std::size_t>(newest - b)] =
              std::numeric_limits<float>::infinity();
          t.batch_valid[at + static_cast<std::size_t>(newest - b)] = 1;
        }
        c += whole * B;
        continue;
      }
      const std::int64_t stop = std::min(block_end, col + n);
      float best = -std::numeric_limits<float>::infinity();
      bool any = false;
      for (std::int64_t i = c - col; i < stop - col; ++i)
        if (valid[i]) {
          best = detail::nan_max(best, scores[i]);
          any = true;
        }
      if (open.block == b && open.next_col == c) {  // continues the open block
        open.best = detail::nan_max(open.best, best);
        open.any = open.any || any;
      } else {
        if (open.block >= 0) park(t, row, open);
        if (c == block_begin) {
          open = {b, c, best, any};
        } else {  // its first columns came from elsewhere
          t.pieces.push_back({row, b, best, any});
          open = {};
        }
      }
      if (open.block == b) {
        open.next_col = stop;
        if (stop == block_end) {  // finished: into the batch of consecutive blocks
          if (!t.batch_score.empty() &&
              batch_first + static_cast<std::int64_t>(t.batch_score.size()) != b) {
            flush_batch(task, t, row, batch_first);
          }
          if (t.batch_score.empty()) batch_first = b;
          t.batch_score.push_back(block_score(row, b, open.best));
          t.batch_valid.push_back(open.any || b == scratch_->newest[r]);
          open = {};
        }
      }
      c = stop;
    }
    flush_batch(task, t, row, batch_first);
  }

  // The pieces of blocks split between tasks, merged per block and handed to the selection's
  // merge of the rows those tasks shared; then the selection's own finish.
  void finish(const executor_ref& exec) {
    auto& pieces = scratch_->pieces;
    pieces.clear();
    for (std::int64_t t = 0; t < tasks_; ++t) {
      const auto& p = scratch_->tasks[static_cast<std::size_t>(t)].pieces;
      pieces.insert(pieces.end(), p.begin(), p.end());
    }
    std::sort(pieces.begin(), pieces.end(), [](const auto& a, const auto& b) {
      return a.row != b.row ? a.row < b.row : a.block < b.block;
    });
    auto& extra = scratch_->extra;
    extra.clear();
    for (std::size_t i = 0; i < pieces.size();) {
      detail::candidate_task::piece merged = pieces[i];
      for (++i; i < pieces.size() && pieces[i].row == merged.row && pieces[i].block == merged.block;
           ++i) {
        merged.best = detail::nan_max(merged.best, pieces[i].best);
        merged.any = merged.any || pieces[i].any;
      }
      if (merged.any || merged.block == scratch_->newest[static_cast<std::size_t>(merged.row)])
        extra.push_back(
            {merged.row, detail::topk_key::make(block_score(merged.row, merged.block, merged.best),
                                                merged.block)});
    }
    inner_.finish(exec, extra);
  }

  std::array<detail::byte_range, 2> written_ranges() const {
    return {detail::range_of("candidate blocks", sel_.blocks), detail::byte_range{}};
  }

 private:
  // The request-local block of column c of row r.
  std::int64_t block_of(std::int64_t r, std::int64_t c) const {
    return detail::floor_div(c - scratch_->origin[static_cast<std::size_t>(r)], sel_.block_size);
  }
  float block_score(std::int64_t r, std::int64_t b, float best) const {
    return b == scratch_->newest[static_cast<std::size_t>(r)]
               ? std::numeric_limits<float>::infinity()
               : best;
  }
  void flush_batch(std::int64_t task, detail::candidate_task& t, std::int64_t row,
                   std::int64_t first) {
    if (t.batch_score.empty()) return;
    inner_.consume(task, row, first, t.batch_score.data(), t.batch_valid.data(),
                   static_cast<std::int64_t>(t.batch_score.size()));
    t.batch_score.clear();
    t.batch_valid.clear();
  }
  // An unfinished block of the task's row, kept for finish().
  static void park(detail::candidate_task& t, std::int64_t row,
                   const detail::candidate_task::open_block& open) {
    t.pieces.push_back({row, open.block, open.best, open.any});
  }
  // The task is done with its rows: blocks still open become pieces. A row no other task scores
  // has all of its blocks here, so its pieces are final and join its selection now; a shared
  // row's wait for finish().
  void close_rows(std::int64_t task, detail::candidate_task& t) {
    for (std::int64_t r = t.row_begin; r < t.row_end; ++r) {
      auto& open = t.open[static_cast<std::size_t>(r - t.row_begin)];
      if (open.block >= 0) park(t, r, open);
      open = {};
    }
    if (t.shared) return;
    std::size_t kept = 0;
    for (const detail::candidate_task::piece& p : t.pieces) {
      if (p.row < t.row_begin || p.row >= t.row_end) {
        t.pieces[kept++] = p;
        continue;
      }
      if (!p.any && p.block != scratch_->newest[static_cast<std::size_t>(p.row)]) continue;
      const float score = block_score(p.row, p.block, p.best);
      const unsigned char one = 1;
      inner_.consume(task, p.row, p.block, &score, &one, 1);
    }
    t.pieces.resize(kept);
    t.row_begin = t.row_end = 0;
  }

  candidate_blocks_selection sel_;
  const char* where_;
  topk_output<detail::candidate_writer, Steps> inner_;
  detail::thread_scratch<detail::candidate_scratch> lease_;  // taken in begin()
  detail::candidate_scratch* scratch_ = nullptr;
  std::int64_t tasks_ = 0;
};

static_assert(grouped_output_policy<candidate_output<>>);

namespace detail {
inline void check_candidate_page(const char* where, std::int64_t block_size, std::int32_t page_kv) {
  require(block_size <= page_kv, where, [&](auto& m) {
    m << "candidate block size " << block_size << " is larger than the cache's page_kv " << page_kv;
  });
}
}  // namespace detail

inline candidate_output<> make_output(const candidate_blocks_selection& sel, const options&,
                                      const dense_outputs&) {
  return candidate_output<>(sel, "fp8_fp4_mqa_logits");
}
template <class I>
candidate_output<> make_output(const candidate_blocks_selection& sel, const options&,
                               const paged_outputs<I>& ctx) {
  detail::check_candidate_page("fp8_fp4_paged_mqa_logits", sel.block_size, ctx.page_kv);
  return candidate_output<>(sel, "fp8_fp4_paged_mqa_logits");
}

MQALOGITS_NAMESPACE_END
