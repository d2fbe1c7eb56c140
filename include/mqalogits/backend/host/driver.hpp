// The one kernel driver of the host backend, shared by all four variants: it walks the plan's
// work items; per item it decodes the query rows (once per row and thread: consecutive items
// of the same rows reuse them), decodes each key tile once for every row of the item, scores
// key groups with the kernels of the path it is given (a table, kernel_abi.hpp: the unit's own
// path, or the one picked at run time, dispatch.hpp) and hands the fp32 scores to the call's
// output policy (output/), which decides what is kept of them.
//
// Its parts: query_rows.hpp (decoded query rows), key_tile.hpp (a decoded tile of keys and the
// fetch of the next), score_row.hpp (a row's scores over a tile) and work_item.hpp (the tile loop
// of one item); this header cuts the plan's items into tasks for the executor's threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "../../config.hpp"
#include "../../exec/options.hpp"
#include "../../format/bf16.hpp"
#include "../../output/output.hpp"
#include "../../variant/plan.hpp"
#include "../../view/matrix_view.hpp"
#include "../../view/rows_view.hpp"
#include "../backend.hpp"
#include "decode.hpp"
#include "dispatch.hpp"
#include "kernel_abi.hpp"
#include "kernel_table.hpp"
#include "key_tile.hpp"
#include "microkernel.hpp"
#include "prefetch.hpp"
#include "query_rows.hpp"
#include "score_row.hpp"
#include "work_item.hpp"
#include "workspace.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// Tasks of an output that keeps per-task state: contiguous runs of the plan's items, about
// tasks_per_thread per executor thread (enough for a dynamic pool to balance, few enough that
// the per-task state stays small). run_with puts the items of one row block back to back, so
// a block is scored by one task or by neighbouring ones: only a task's first and last block
// can be shared.
inline constexpr std::int64_t tasks_per_thread = 4;
// Tasks per executor thread of an output without per-task state (runs of consecutive items).
inline constexpr std::int64_t runs_per_thread = 16;

// Reserves one workspace per task that runs at once, for items of up to max_rows rows.
template <class Format, class W>
void reserve_workspaces(const host_abi::format_kernels& kernels, const scoped_call_scratch& scratch,
                        const matrix_view<const W>& w, std::int64_t tasks, std::int64_t max_rows,
                        const options& opt) {
  const int padded = padded_heads(kernels, static_cast<int>(w.cols));
  const std::int64_t running =
      std::min<std::int64_t>(tasks, std::max(1, opt.executor.concurrency()));
  scratch.reserve(static_cast<std::size_t>(running), [&](workspace& ws) {
    reserve_rows<Format>(ws, max_rows, padded);
    reserve_tile<Format>(ws);
  });
}

template <class Format, class Plan, class W, class Output>
void run_grouped(const host_abi::format_kernels& kernels, const rows_view<Format>& q,
                 const Plan& plan, const matrix_view<const W>& w, Output& output,
                 const options& opt, const scoped_call_scratch& scratch, std::int64_t max_rows,
                 std::uint64_t call) {
  const work_list& work = scratch.work();
  const auto items = static_cast<std::int64_t>(work.items.size());
  const std::int64_t tasks =
      std::min(items, tasks_per_thread * std::max(1, opt.executor.concurrency()));
  // Every allocation of the call before its first output write.
  reserve_workspaces<Format>(kernels, scratch, w, tasks, max_rows, opt);
  output.begin(plan, tasks, opt.executor, max_rows);
  auto item = [&](std::int64_t i) -> const work_item& {
    return work.items[static_cast<std::size_t>(i)];
  };
  auto same_rows = [&](std::int64_t a, std::int64_t b) {
    return item(a).row_begin == item(b).row_begin && item(a).row_end == item(b).row_end;
  };
  auto task = [&](std::int64_t t) {
    const std::int64_t first = items * t / tasks, last = items * (t + 1) / tasks;
    const scoped_call_scratch::lease leased(scratch);
    workspace& ws = leased.get();
    for (std::int64_t i = first; i < last; ++i) {
      if (i == first || !same_rows(i, i - 1)) {
        const bool shared = (i == first && first > 0 && same_rows(first - 1, first)) ||
                            (last < items && same_rows(i, last - 1) && same_rows(last - 1, last));
        output.open_rows(t, item(i).row_begin, item(i).row_end, shared);
      }
      run_item(kernels, q, plan, w, output, t, item(i), i + 1 < last ? &item(i + 1) : nullptr, call,
               ws);
    }
    output.close_task(t);
  };
  detail::checked_parallel_for(opt.executor, tasks, task);
}

// The whole call on the given kernels.
template <class Format, class Plan, class W, class Output>
void run_call(const host_abi::format_kernels& kernels, const rows_view<Format>& q, const Plan& plan,
              const matrix_view<const W>& w, Output& output, const options& opt,
              const tiling& cut) {
  const scoped_call_scratch scratch;
  work_list& work = scratch.work();
  plan.fill_work(cut, work);
  const auto items = static_cast<std::int64_t>(work.items.size());
  std::int64_t max_rows = 1;
  for (const work_item& item : work.items)
    max_rows = std::max(max_rows, item.row_end - item.row_begin);
  const std::uint64_t call = next_call_id();
  if constexpr (grouped_output_policy<Output>) {
    // A row block's items back to back, so that only a task's first and last block can be
    // shared with another task. Plans emit them so, except a varlen request with more rows than
    // one item holds, whose blocks a schedule split over several workers interleaves. (In
    // place: a warm call still allocates nothing.)
    auto by_block = [](const work_item& a, const work_item& b) {
      return a.row_begin != b.row_begin ? a.row_begin < b.row_begin : a.key_begin < b.key_begin;
    };
    if (!std::is_sorted(work.items.begin(), work.items.end(), by_block))
      std::sort(work.items.begin(), work.items.end(), by_block);
    run_grouped(kernels, q, plan, w, output, opt, scratch, max_rows, call);
  } else {
    // Tasks of consecutive items, in the plan's order (the paged schedule's balanced runs,
    // back to back): a thread's consecutive items mostly share their query rows (decoded once)
    // and each item's keys are fetched while the one before is scored; many tasks per thread,
    // so that a pool handing out tasks dynamically still balances when a core is shared. Each
    // item is its own task for the output.
    const std::int64_t tasks =
        std::min(items, runs_per_thread * std::max(1, opt.executor.concurrency()));
    // Every allocation of the call before its first output write.
    reserve_workspaces<Format>(kernels, scratch, w, tasks, max_rows, opt);
    output.begin(plan, items, opt.executor);
    auto task = [&](std::int64_t t) {
      const std::int64_t first = items * t / tasks, last = items * (t + 1) / tasks;
      const scoped_call_scratch::lease leased(scratch);
      for (std::int64_t i = first; i < last; ++i)
        run_item(kernels, q, plan, w, output, i, work.items[static_cast<std::size_t>(i)],
                 i + 1 < last ? &work.items[static_cast<std::size_t>(i + 1)] : nullptr, call,
                 leased.get());
    };
    detail::checked_parallel_for(opt.executor, tasks, task);
  }
  output.finish(opt.executor);
}

// The whole call on instruction set I (the tests run every compiled one).
template <class I, class Format, class Plan, class W, class Output>
void run_with(const rows_view<Format>& q, const Plan& plan, const matrix_view<const W>& w,
              Output& output, const options& opt, const tiling& cut) {
  run_call(kernels_of<I, Format>, q, plan, w, output, opt, cut);
}

}  // namespace host_backend

template <>
struct backend_kernels<backend::host> {
  static constexpr tiling work_tiling{8, 512};

  // Arguments are validated by the caller; this only computes.
  template <class Format, class Plan, class W, output_policy Output>
  static void run(const rows_view<Format>& q, const Plan& plan, const matrix_view<const W>& w,
                  Output& output, const options& opt) {
    static_assert(host_backend::runs_scale_codec_v<typename Format::scale_type>,
                  "mqalogits host backend: no kernel for this scale codec (its scales must read "
                  "as fp32 values, see format/scale_codec.hpp)");
    host_backend::run_call(host_backend::host_kernels<Format>(), q, plan, w, output, opt,
                           work_tiling);
  }
};

MQALOGITS_NAMESPACE_END
