// The one kernel driver of the host backend, shared by all four variants: it walks the plan's
// work items, decodes Q once per item and each key tile once for every row of the item, scores
// the tile with the micro-kernel and writes the epilogue (round, -inf mask).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "../../config.hpp"
#include "../../format/bf16.hpp"
#include "../../kernel/options.hpp"
#include "../../variant/plan.hpp"
#include "../../view/matrix_view.hpp"
#include "../../view/rows_view.hpp"
#include "../backend.hpp"
#include "microkernel.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

inline constexpr std::int64_t key_tile = 16;  // keys decoded and scored together

// Per-thread scratch, grown on first use and reused by every later item on that thread: the
// hot loop never allocates. Size: rows x H x 128 fp32 for Q plus one key tile.
struct workspace {
  std::vector<float> q, w, k, scores;
  std::vector<unsigned char> key_valid;
};
inline workspace& thread_workspace() {
  thread_local workspace ws;
  return ws;
}

template <class O>
constexpr O negative_infinity() {
  return from_float<O>(-std::numeric_limits<float>::infinity());
}

// Writes -inf into every column outside each row's candidate range.
template <class Plan, class O>
void fill_outside(const Plan& plan, const matrix_view<O>& out, const executor_ref& exec) {
  constexpr std::int64_t rows_per_task = 64;
  const std::int64_t tasks = (out.rows + rows_per_task - 1) / rows_per_task;
  auto task = [&](std::int64_t t) {
    const std::int64_t r1 = std::min(out.rows, (t + 1) * rows_per_task);
    for (std::int64_t r = t * rows_per_task; r < r1; ++r) {
      const row_keys k = plan.row(r);
      const std::int64_t c0 = k.empty() ? out.cols : k.key_begin - k.col_offset;
      const std::int64_t c1 = k.empty() ? out.cols : k.key_end - k.col_offset;
      O* row = out.row(r);
      std::fill(row, row + c0, negative_infinity<O>());
      std::fill(row + c1, row + out.cols, negative_infinity<O>());
    }
  };
  exec.parallel_for(tasks, task);
}

template <class Format, class Plan, class W, class O>
void run_item(const rows_view<Format>& q, const Plan& plan, const matrix_view<const W>& w,
              const matrix_view<O>& out, const work_item& item, bool clean, workspace& ws) {
  const std::int64_t heads = w.cols;
  const std::int64_t rows = item.row_end - item.row_begin;
  ws.q.resize(static_cast<std::size_t>(rows * heads * head_dim));
  ws.w.resize(static_cast<std::size_t>(rows * heads));
  ws.k.resize(static_cast<std::size_t>(key_tile * head_dim));
  ws.scores.resize(key_tile);
  ws.key_valid.resize(key_tile);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t qr = (item.row_begin + r) * heads + h;
      Format::decode_row(q.row(qr), q.scale(qr), ws.q.data() + (r * heads + h) * head_dim);
      ws.w[r * heads + h] = to_float(w(item.row_begin + r, h));
    }

  for (std::int64_t k0 = item.key_begin; k0 < item.key_end; k0 += key_tile) {
    const std::int64_t n = std::min(key_tile, item.key_end - k0);
    for (std::int64_t i = 0; i < n; ++i) {
      const key_ref key = plan.key(item.group, k0 + i);
      float* dst = ws.k.data() + i * head_dim;
      ws.key_valid[i] = key.valid();
      if (key.valid())
        Format::decode_row(key.data, key.scale, dst);
      else
        std::fill(dst, dst + head_dim, 0.0f);
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      const row_keys rk = plan.row(item.row_begin + r);
      const std::int64_t lo = std::max(k0, rk.key_begin), hi = std::min(k0 + n, rk.key_end);
      if (lo >= hi) continue;
      score_keys_portable(ws.q.data() + r * heads * head_dim, ws.w.data() + r * heads, heads,
                          ws.k.data() + (lo - k0) * head_dim, hi - lo, ws.scores.data());
      O* dst = out.row(item.row_begin + r) - rk.col_offset;
      for (std::int64_t k = lo; k < hi; ++k) {
        if (ws.key_valid[k - k0])
          dst[k] = from_float<O>(ws.scores[k - lo]);
        else if (clean)
          dst[k] = negative_infinity<O>();
      }
    }
  }
}

}  // namespace host_backend

template <>
struct backend_kernels<backend::host> {
  static constexpr tiling work_tiling{8, 512};

  // Arguments are validated by the caller; this only computes.
  template <class Format, class Plan, class W, class O>
  static void run(const rows_view<Format>& q, const Plan& plan, const matrix_view<const W>& w,
                  const matrix_view<O>& out, const options& opt) {
    if (opt.clean_logits) host_backend::fill_outside(plan, out, opt.executor);
    const work_list work = plan.work(work_tiling);
    auto task = [&](std::int64_t t) {
      host_backend::workspace& ws = host_backend::thread_workspace();
      for (std::int64_t i = work.task_begin[t]; i < work.task_begin[t + 1]; ++i)
        host_backend::run_item(q, plan, w, out, work.items[i], opt.clean_logits, ws);
    };
    opt.executor.parallel_for(work.num_tasks(), task);
  }
};

MQALOGITS_NAMESPACE_END
