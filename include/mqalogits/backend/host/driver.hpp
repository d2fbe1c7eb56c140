// The one kernel driver of the host backend, shared by all four variants: it walks the plan's
// work items; per item it decodes the query rows (once per row and thread: consecutive items
// of the same rows reuse them), decodes each key tile once for every row of the item, scores
// key groups with the micro-kernel of the chosen instruction set and hands the fp32 scores to
// the call's output policy (output/), which decides what is kept of them.
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
#include "isa/ladder.hpp"
#include "microkernel.hpp"
#include "workspace.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

inline constexpr std::int64_t key_tile = 512;  // keys decoded together (one work item's worth)

// The buffers decode_rows fills for `rows` query rows of hp (padded) heads.
template <class Format>
void reserve_rows(workspace& ws, std::int64_t rows, int hp) {
  constexpr int head_dim = Format::head_dim;
  ws.w.reserve(static_cast<std::size_t>(rows * hp));
  if constexpr (int8_path<Format>) {
    constexpr int blocks = Format::blocks;
    ws.q_i8.reserve(static_cast<std::size_t>(rows * hp * head_dim / 4));
    ws.q_bias.reserve(static_cast<std::size_t>(rows * hp * blocks));
    ws.q_scale.reserve(static_cast<std::size_t>(rows * hp * blocks));
    ws.q_fold.reserve(static_cast<std::size_t>(rows * hp * head_dim / 4));
    ws.q_fold_start.reserve(static_cast<std::size_t>(rows * hp));
    ws.q_fold_scale.reserve(static_cast<std::size_t>(rows * hp));
    ws.q_folds.reserve(static_cast<std::size_t>(rows));
  } else {
    ws.q_f32.reserve(static_cast<std::size_t>(rows * hp * head_dim));
  }
}

// Decoded query rows of one item, in the workspace.
template <class I, class Format, class W>
void decode_rows(const rows_view<Format>& q, const matrix_view<const W>& w, std::int64_t r0,
                 std::int64_t r1, std::uint64_t call, workspace& ws) {
  if (ws.call == call && ws.row_begin == r0 && ws.row_end == r1) return;
  const int heads = static_cast<int>(w.cols);
  const int hp = (heads + I::lanes - 1) / I::lanes * I::lanes;
  const std::int64_t rows = r1 - r0;
  reserve_rows<Format>(ws, rows, hp);
  float* wd = ws.w.data();
  constexpr int head_dim = Format::head_dim;
  if constexpr (int8_path<Format>) {
    constexpr int blocks = Format::blocks;
    std::int32_t* data = ws.q_i8.data();
    std::int32_t* bias = ws.q_bias.data();
    float* scale = ws.q_scale.data();
    std::int32_t* fold = ws.q_fold.data();
    std::int32_t* fold_start = ws.q_fold_start.data();
    float* fold_scale = ws.q_fold_scale.data();
    unsigned char* folds = ws.q_folds.data();
    for (std::int64_t r = 0; r < rows; ++r) {
      decode_q_i8<I>(q, (r0 + r) * heads, heads, hp, data + r * hp * head_dim / 4,
                     bias + r * hp * blocks, scale + r * hp * blocks);
      folds[r] = I::fold_rows &&
                 decode_q_i8_fold<I>(q, (r0 + r) * heads, heads, hp, fold + r * hp * head_dim / 4,
                                     fold_start + r * hp, fold_scale + r * hp);
    }
  } else {
    float* qt = ws.q_f32.data();
    for (std::int64_t r = 0; r < rows; ++r)
      decode_q_f32<I>(q, (r0 + r) * heads, heads, hp, qt + r * hp * head_dim);
  }
  for (std::int64_t r = 0; r < rows; ++r)
    for (int h = 0; h < hp; ++h) wd[r * hp + h] = h < heads ? to_float(w(r0 + r, h)) : 0.0f;
  ws.call = call;
  ws.row_begin = r0;
  ws.row_end = r1;
}

// Keys [k0, k0 + n) of group g into the workspace tile; masked keys decode as zeros. The key
// addresses are looked up first (plan.key once per key; paged keys sit wherever their pages
// are), then each key is decoded while the one `prefetch_keys` ahead is fetched, so the decode
// does not wait on memory.
inline constexpr std::int64_t prefetch_keys = 32;

template <class Format>
inline void prefetch_key(const key_ref& key) {
#if defined(__GNUC__) || defined(__clang__)
  if (!key.valid()) return;
  // Into L2 (prefetcht1): L1 stays for the query row and the tile being written.
  for (int b = 0; b < Format::data_bytes; b += 64) __builtin_prefetch(key.data + b, 0, 2);
  __builtin_prefetch(key.scale, 0, 2);
#else
  (void)key;
#endif
}

// The buffers of one decoded key tile, and the scores of one row over it (plus a key group's
// worth of padding, and a group of per-block scores for rows that mix the two int8 paths).
inline constexpr std::size_t score_slots = key_tile + 2 * max_group_keys;
template <class Format>
void reserve_tile(workspace& ws) {
  constexpr int head_dim = Format::head_dim;
  constexpr auto i8_key_bytes = static_cast<std::size_t>(host_backend::i8_key_bytes<head_dim>);
  const auto rows = static_cast<std::size_t>(key_tile + max_group_keys);
  ws.key_valid.reserve(rows);
  ws.refs.reserve(rows);
  if constexpr (int8_path<Format>) {
    ws.k_i8.reserve(rows * i8_key_bytes);
    ws.k_scale.reserve(rows * static_cast<std::size_t>(Format::blocks));
    ws.k_fold.reserve(rows * i8_key_bytes);
    ws.k_fold_scale.reserve(rows);
    ws.k_folds.reserve(rows);
  } else {
    ws.k_f32.reserve(rows * head_dim);
  }
  ws.scores.reserve(score_slots);
}

// Which query rows of a work item take the folded MXFP4 kernel (decode_q_i8_fold).
enum class rows_folding { none, some, all };

// MXFP4 keys are decoded in the int8 forms the item's query rows read: the per-block form
// alone when no row folds; else both, except that a key that folds skips its per-block form
// when every row folds: it is then written as a masked key, which the per-block kernel may
// still read for a group that mixes both forms, and whose score there is dropped.
template <class I, class Format, class Plan>
void decode_tile(const Plan& plan, std::int64_t g, std::int64_t k0, std::int64_t n,
                 rows_folding folding, workspace& ws) {
  constexpr int head_dim = Format::head_dim, blocks = Format::blocks;
  constexpr int i8_key_bytes = host_backend::i8_key_bytes<head_dim>;
  reserve_tile<Format>(ws);
  unsigned char* valid = ws.key_valid.data();
  key_ref* refs = ws.refs.data();
  for (std::int64_t i = 0; i < n; ++i) refs[i] = plan.key(g, k0 + i);
  for (std::int64_t i = 0; i < std::min(n, prefetch_keys); ++i) prefetch_key<Format>(refs[i]);
  std::uint8_t* const k_i8 = ws.k_i8.data();
  float* const k_scale = ws.k_scale.data();
  float* const k_f32 = ws.k_f32.data();
  std::uint8_t* const k_fold = ws.k_fold.data();
  float* const k_fold_scale = ws.k_fold_scale.data();
  unsigned char* const k_folds = ws.k_folds.data();
  for (std::int64_t i = 0; i < n; ++i) {
    if (i + prefetch_keys < n) prefetch_key<Format>(refs[i + prefetch_keys]);
    const key_ref key = refs[i];
    valid[i] = key.valid();
    if constexpr (int8_path<Format>) {
      std::uint8_t* k = k_i8 + i * i8_key_bytes;
      float* ks = k_scale + i * blocks;
      std::uint8_t* kf = k_fold + i * i8_key_bytes;
      if (folding != rows_folding::none) {
        if (key.valid()) {
          k_folds[i] = decode_key_i8_fold<I, head_dim>(key.data, key.scale, kf, k_fold_scale + i);
        } else {
          masked_key_i8_fold<I, head_dim>(kf, k_fold_scale + i);
          k_folds[i] = 1;
        }
      }
      if (key.valid() && !(folding == rows_folding::all && k_folds[i]))
        decode_key_i8<I, head_dim>(key.data, key.scale, k, ks);
      else
        masked_key_i8<I, head_dim>(k, ks);
    } else {
      float* k = k_f32 + i * head_dim;
      if (key.valid())
        decode_key_f32<I, Format>(key.data, key.scale, k);
      else
        std::fill(k, k + head_dim, 0.0f);
    }
  }
}

template <class I, class Format, class Plan, class W, class Output>
void run_item(const rows_view<Format>& q, const Plan& plan, const matrix_view<const W>& w,
              Output& output, std::int64_t task, const work_item& item, std::uint64_t call,
              workspace& ws) {
  constexpr int head_dim = Format::head_dim, blocks = Format::blocks;
  constexpr int i8_key_bytes = host_backend::i8_key_bytes<head_dim>;
  using f32_path = host_backend::f32_path<head_dim>;
  using i8_path = host_backend::i8_path<head_dim>;
  using i8_fold_path = host_backend::i8_fold_path<head_dim>;
  const int heads = static_cast<int>(w.cols);
  const int hp = (heads + I::lanes - 1) / I::lanes * I::lanes;
  decode_rows<I>(q, w, item.row_begin, item.row_end, call, ws);
  rows_folding folding = rows_folding::none;
  if constexpr (int8_path<Format>) {
    const unsigned char* const folds = ws.q_folds.data();
    const std::int64_t rows = item.row_end - item.row_begin;
    const auto folded = std::count_if(folds, folds + rows, [](unsigned char f) { return f != 0; });
    folding = folded == 0      ? rows_folding::none
              : folded == rows ? rows_folding::all
                               : rows_folding::some;
  }
  float* scores = ws.scores.reserve(score_slots);
  [[maybe_unused]] float* block_scores = scores + key_tile + max_group_keys;

  for (std::int64_t k0 = item.key_begin; k0 < item.key_end; k0 += key_tile) {
    const std::int64_t n = std::min(key_tile, item.key_end - k0);
    decode_tile<I, Format>(plan, item.group, k0, n, folding, ws);
    const unsigned char* valid = ws.key_valid.data();
    for (std::int64_t r = item.row_begin; r < item.row_end; ++r) {
      const row_keys rk = plan.row(r);
      const std::int64_t lo = std::max(k0, rk.key_begin), hi = std::min(k0 + n, rk.key_end);
      if (lo >= hi) continue;
      const std::int64_t ri = r - ws.row_begin;
      // The row's scores over the tile are gathered (key t at scores[t - lo]) and handed to the
      // output once: the scores of keys [lo, hi) are columns lo - col_offset on of row r. (Once
      // per key group would cost a selecting output its per-call work every 4-14 keys.)
      auto at = [&](std::int64_t t) { return scores + (t - lo); };
      if constexpr (int8_path<Format>) {
        const typename i8_path::query qr{ws.q_i8.data() + ri * hp * head_dim / 4,
                                         ws.q_bias.data() + ri * hp * blocks,
                                         ws.q_scale.data() + ri * hp * blocks,
                                         ws.w.data() + ri * hp,
                                         heads,
                                         hp};
        const auto kern = select_kernel<I, i8_path>(hp / I::lanes);
        auto per_block = [&](std::int64_t from, std::int64_t to) {
          for (std::int64_t t = from; t < to; t += kern.keys)
            kern.fn(
                qr,
                {ws.k_i8.data() + (t - k0) * i8_key_bytes, ws.k_scale.data() + (t - k0) * blocks},
                at(t));
        };
        if constexpr (!I::fold_rows) {
          per_block(lo, hi);  // (no row folds: the folded kernel is not compiled)
        } else if (!ws.q_folds.data()[ri]) {
          per_block(lo, hi);
        } else {
          // A folded query row: keys that fold take the one-sum kernel, the others the per-block
          // one. A group mixing both runs both and keeps each key's own, so which of the two a
          // logit comes from depends only on its query and key rows, never on its neighbours.
          const typename i8_fold_path::query qf{ws.q_fold.data() + ri * hp * head_dim / 4,
                                                ws.q_fold_start.data() + ri * hp,
                                                ws.q_fold_scale.data() + ri * hp,
                                                ws.w.data() + ri * hp,
                                                heads,
                                                hp};
          const auto fold_kern = select_kernel<I, i8_fold_path>(hp / I::lanes);
          const unsigned char* folds = ws.k_folds.data();
          for (std::int64_t t = lo; t < hi; t += fold_kern.keys) {
            const std::int64_t count = std::min<std::int64_t>(fold_kern.keys, hi - t);
            int folded = 0;
            for (std::int64_t i = 0; i < count; ++i) folded += folds[t - k0 + i];
            if (folded == 0) {
              per_block(t, t + count);
              continue;
            }
            fold_kern.fn(
                qf, {ws.k_fold.data() + (t - k0) * i8_key_bytes, ws.k_fold_scale.data() + (t - k0)},
                at(t));
            if (folded < count)
              for (std::int64_t u = t; u < t + count; u += kern.keys) {
                kern.fn(qr,
                        {ws.k_i8.data() + (u - k0) * i8_key_bytes,
                         ws.k_scale.data() + (u - k0) * blocks},
                        block_scores);
                for (std::int64_t i = u; i < std::min(u + kern.keys, t + count); ++i)
                  if (!folds[i - k0]) *at(i) = block_scores[i - u];
              }
          }
        }
      } else {
        const typename f32_path::query qr{ws.q_f32.data() + ri * hp * head_dim,
                                          ws.w.data() + ri * hp, heads, hp};
        const auto kern = select_kernel<I, f32_path>(hp / I::lanes);
        for (std::int64_t t = lo; t < hi; t += kern.keys)
          kern.fn(qr, {ws.k_f32.data() + (t - k0) * head_dim}, at(t));
      }
      output.consume(task, r, lo - rk.col_offset, scores, valid + (lo - k0), hi - lo);
    }
  }
}

// Tasks of an output that keeps per-task state: contiguous runs of the plan's items, about
// tasks_per_thread per executor thread (enough for a dynamic pool to balance, few enough that
// the per-task state stays small). run_with puts the items of one row block back to back, so
// a block is scored by one task or by neighbouring ones: only a task's first and last block
// can be shared.
inline constexpr std::int64_t tasks_per_thread = 4;

// Reserves one workspace per task that runs at once, for items of up to max_rows rows.
template <class I, class Format, class W>
void reserve_workspaces(const scoped_call_scratch& scratch, const matrix_view<const W>& w,
                        std::int64_t tasks, std::int64_t max_rows, const options& opt) {
  const int heads = static_cast<int>(w.cols);
  const int hp = (heads + I::lanes - 1) / I::lanes * I::lanes;
  const std::int64_t running =
      std::min<std::int64_t>(tasks, std::max(1, opt.executor.concurrency()));
  scratch.reserve(static_cast<std::size_t>(running), [&](workspace& ws) {
    reserve_rows<Format>(ws, max_rows, hp);
    reserve_tile<Format>(ws);
  });
}

template <class I, class Format, class Plan, class W, class Output>
void run_grouped(const rows_view<Format>& q, const Plan& plan, const matrix_view<const W>& w,
                 Output& output, const options& opt, const scoped_call_scratch& scratch,
                 std::int64_t max_rows, std::uint64_t call) {
  const work_list& work = scratch.work();
  const auto items = static_cast<std::int64_t>(work.items.size());
  const std::int64_t tasks =
      std::min(items, tasks_per_thread * std::max(1, opt.executor.concurrency()));
  // Every allocation of the call before its first output write.
  reserve_workspaces<I, Format>(scratch, w, tasks, max_rows, opt);
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
      run_item<I>(q, plan, w, output, t, item(i), call, ws);
    }
    output.close_task(t);
  };
  detail::checked_parallel_for(opt.executor, tasks, task);
}

// The whole call on instruction set I (tests run every compiled one; the backend the best).
template <class I, class Format, class Plan, class W, class Output>
void run_with(const rows_view<Format>& q, const Plan& plan, const matrix_view<const W>& w,
              Output& output, const options& opt, const tiling& cut) {
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
    run_grouped<I>(q, plan, w, output, opt, scratch, max_rows, call);
  } else {
    // Every allocation of the call before its first output write.
    reserve_workspaces<I, Format>(scratch, w, items, max_rows, opt);
    output.begin(plan, items, opt.executor);
    // One executor task per work item, in the plan's order (the paged schedule's balanced runs,
    // back to back): a pool handing out indices dynamically then balances even when a core is
    // shared, and a thread's consecutive items mostly share their query rows (decoded once).
    auto task = [&](std::int64_t i) {
      const scoped_call_scratch::lease leased(scratch);
      run_item<I>(q, plan, w, output, i, work.items[static_cast<std::size_t>(i)], call,
                  leased.get());
    };
    detail::checked_parallel_for(opt.executor, items, task);
  }
  output.finish(opt.executor);
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
    host_backend::run_with<host_backend::isa_best>(q, plan, w, output, opt, work_tiling);
  }
};

MQALOGITS_NAMESPACE_END
