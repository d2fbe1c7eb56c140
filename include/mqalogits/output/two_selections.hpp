// Two selections from one pass over the keys: a top-k and the candidate blocks, from the same
// fp32 logits, as DeepSeek V4.1's candidate-source layer needs them (its own top-k and the blocks
// it publishes to the layers after it).
//
//   ml::topk_and_candidates(ml::topk(indices[, values]), ml::candidate_blocks(blocks, B))
//
// passed where the dense or the paged kernel takes its output. Each part is exactly what it
// would be alone (topk.hpp, candidate_blocks.hpp); the keys are read and scored once.
#pragma once

#include <array>
#include <cstdint>

#include "../config.hpp"
#include "../exec/executor.hpp"
#include "../exec/options.hpp"
#include "candidate_blocks.hpp"
#include "output.hpp"
#include "topk_numbering.hpp"

MQALOGITS_NAMESPACE_BEGIN

template <class TopK>
struct topk_and_candidates_selection {
  TopK topk;
  candidate_blocks_selection candidates;
};

template <class TopK>
topk_and_candidates_selection<TopK> topk_and_candidates(const TopK& topk,
                                                        const candidate_blocks_selection& blocks) {
  return {topk, blocks};
}

// Both policies fed the same scores.
template <grouped_output_policy A, grouped_output_policy B>
class two_selections {
 public:
  static constexpr bool groups_work_items = true;

  two_selections(A a, B b) : a_(std::move(a)), b_(std::move(b)) {}

  // The two policies, for a backend that costs each selection (the NeuronCore model).
  const A& first() const { return a_; }
  const B& second() const { return b_; }

  void check(const char* where, std::int64_t rows, std::int64_t cols) const {
    a_.check(where, rows, cols);
    b_.check(where, rows, cols);
  }
  template <class Plan>
  void begin(const Plan& plan, std::int64_t tasks, const executor_ref& exec,
             std::int64_t max_rows = 1) {
    a_.begin(plan, tasks, exec, max_rows);
    b_.begin(plan, tasks, exec, max_rows);
  }
  void open_rows(std::int64_t task, std::int64_t row_begin, std::int64_t row_end, bool shared) {
    a_.open_rows(task, row_begin, row_end, shared);
    b_.open_rows(task, row_begin, row_end, shared);
  }
  void close_task(std::int64_t task) {
    a_.close_task(task);
    b_.close_task(task);
  }
  void consume(std::int64_t task, std::int64_t row, std::int64_t col, const float* scores,
               const unsigned char* valid, std::int64_t n) {
    a_.consume(task, row, col, scores, valid, n);
    b_.consume(task, row, col, scores, valid, n);
  }
  void finish(const executor_ref& exec) {
    a_.finish(exec);
    b_.finish(exec);
  }
  auto written_ranges() const {
    const auto a = a_.written_ranges();
    const auto b = b_.written_ranges();
    std::array<detail::byte_range, a.size() + b.size()> all{};
    std::copy(a.begin(), a.end(), all.begin());
    std::copy(b.begin(), b.end(), all.begin() + static_cast<std::ptrdiff_t>(a.size()));
    return all;
  }

 private:
  A a_;
  B b_;
};

template <class TopK, class Context>
auto make_output(const topk_and_candidates_selection<TopK>& sel, const options& opt,
                 const Context& ctx)
    -> two_selections<decltype(make_output(sel.topk, opt, ctx)),
                      decltype(make_output(sel.candidates, opt, ctx))> {
  return {make_output(sel.topk, opt, ctx), make_output(sel.candidates, opt, ctx)};
}

namespace detail {
// The top-k offsets the dense kernel reads, inside a pair too.
template <class TopK>
byte_range topk_offsets_range(const topk_and_candidates_selection<TopK>& sel) {
  return topk_offsets_range(sel.topk);
}
template <class TopK>
void check_topk_offsets_of(const char* where, const topk_and_candidates_selection<TopK>& sel,
                           std::int64_t rows, std::int64_t cols) {
  check_topk_offsets_of(where, sel.topk, rows, cols);
}
}  // namespace detail

MQALOGITS_NAMESPACE_END
