// The output axis: what happens to a row's scores once the driver has computed them.
//
// A backend computes fp32 scores for slices of output rows (a work item's rows x keys) and hands
// each slice to an output policy; the policy decides what is kept: today's logits row (rounded
// to the output type, -inf where a column is not valid) or the row's top-k selection. Backends
// never write the caller's buffers themselves, so a new output is one new policy, not a change
// to every backend.
//
// An output policy offers:
//   check(where, rows, cols)          its buffers against the call's [rows, cols] (before any
//                                     write; a bad shape is a named error)
//   begin(plan, tasks, executor)      once per call, before any scores: e.g. -inf outside each
//                                     row's candidate columns; `tasks` is the number of executor
//                                     tasks the backend will run
//   consume(task, row, col, scores, valid, n)
//                                     the fp32 scores of columns [col, col + n) of `row`, computed
//                                     by executor task `task`; valid[i] == 0 marks a masked
//                                     column. Every (row, column) arrives at most once; slices of
//                                     one row may come from several tasks, in any order.
//   finish(executor)                  once, after every task has returned; any pass it runs on
//                                     the executor goes through detail::checked_parallel_for
//   written_ranges()                  the byte ranges (detail::byte_range) of every buffer it
//                                     writes, so the entry point can check them against every
//                                     input and against each other before anything is written
#pragma once

#include <concepts>
#include <cstdint>

#include "../config.hpp"
#include "../exec/executor.hpp"
#include "../exec/options.hpp"
#include "../variant/plan.hpp"

MQALOGITS_NAMESPACE_BEGIN

// A stand-in plan, only to state the concept.
namespace detail {
struct any_plan {
  std::int64_t num_rows() const;
  std::int64_t num_cols() const;
  row_keys row(std::int64_t) const;
};
}  // namespace detail

template <class P>
concept output_policy = requires(P& p, const char* where, std::int64_t i, const float* scores,
                                 const unsigned char* valid, const executor_ref& exec) {
  p.check(where, i, i);
  p.begin(detail::any_plan{}, i, exec);
  p.consume(i, i, i, scores, valid, i);
  p.finish(exec);
  p.written_ranges();
};

// An output that keeps state per task (the top-k selection's candidates) sets
// groups_work_items: the host driver then runs consecutive work items as one task (a few per
// thread, not one per 512 keys) and tells the output which rows a task is on:
//   begin(plan, tasks, exec, max_rows)            as begin(plan, tasks, exec); a task never has
//                                                more than max_rows rows open at once (the
//                                                output reserves its scratch for that, before
//                                                it writes anything)
//   open_rows(task, row_begin, row_end, shared)  task starts on those rows (the previous ones
//                                                are done for it); shared: a neighbouring
//                                                task scores some of their columns too
//   close_task(task)                             the task has no more scores
template <class P>
concept grouped_output_policy = output_policy<P> && P::groups_work_items &&
    requires(P& p, std::int64_t i, bool shared, const executor_ref& exec) {
  p.begin(detail::any_plan{}, i, exec, i);
  p.open_rows(i, i, i, shared);
  p.close_task(i);
};

// What a kernel accepts in the position of its output: anything with a to_output_policy
// overload (a logits matrix_view, a top-k selection).
template <class T>
concept output_argument = requires(const T& t, const options& opt) {
  { to_output_policy(t, opt) } -> output_policy;
};

MQALOGITS_NAMESPACE_END
