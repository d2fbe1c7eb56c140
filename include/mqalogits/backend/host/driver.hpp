// The one kernel driver of the host backend, shared by all four variants: it walks the plan's
// work items; per item it decodes the query rows (once per row and thread: consecutive items
// of the same rows reuse them), decodes each key tile once for every row of the item, scores
// key groups with the kernels of the path it is given (a table, kernel_abi.hpp: the unit's own
// path, or the one picked at run time, dispatch.hpp) and hands the fp32 scores to the call's
// output policy (output/), which decides what is kept of them.
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
#include "microkernel.hpp"
#include "prefetch.hpp"
#include "workspace.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

inline constexpr std::int64_t key_tile = 512;  // keys decoded together (one work item's worth)

// The buffers decode_rows fills for `rows` query rows of `padded` heads (padded_heads).
template <class Format>
void reserve_rows(workspace& ws, std::int64_t rows, int padded) {
  constexpr int head_dim = Format::head_dim;
  ws.w.reserve(static_cast<std::size_t>(rows * padded));
  if constexpr (int8_path<Format>) {
    constexpr int blocks = Format::blocks;
    ws.q_i8.reserve(static_cast<std::size_t>(rows * padded * head_dim / 4));
    ws.q_bias.reserve(static_cast<std::size_t>(rows * padded * blocks));
    ws.q_scale.reserve(static_cast<std::size_t>(rows * padded * blocks));
    ws.q_fold.reserve(static_cast<std::size_t>(rows * padded * head_dim / 4));
    ws.q_fold_start.reserve(static_cast<std::size_t>(rows * padded));
    ws.q_fold_scale.reserve(static_cast<std::size_t>(rows * padded));
    ws.q_compact.reserve(static_cast<std::size_t>(rows));
  } else {
    ws.q_f32.reserve(static_cast<std::size_t>(rows * padded * head_dim));
    ws.q_bf16.reserve(static_cast<std::size_t>(rows * padded * head_dim / 2));
    ws.q_bf16_scale.reserve(static_cast<std::size_t>(rows * padded));
    ws.q_compact.reserve(static_cast<std::size_t>(rows));
  }
}

// Heads rounded up to the path's vector width.
inline int padded_heads(const host_abi::format_kernels& kernels, int heads) {
  return (heads + kernels.lanes - 1) / kernels.lanes * kernels.lanes;
}

template <class Format>
host_abi::rows_ref rows_of(const rows_view<Format>& q) {
  return {q.data, q.scales, q.data_stride, q.scale_stride};
}

// Decoded query rows [first_row, end_row) of one item, in the workspace (kept when the
// workspace holds them already from an earlier item of this call).
template <class Format, class W>
void decode_rows(const host_abi::format_kernels& kernels, const rows_view<Format>& q,
                 const matrix_view<const W>& w, std::int64_t first_row, std::int64_t end_row,
                 std::uint64_t call, workspace& ws) {
  if (ws.call == call && ws.row_begin == first_row && ws.row_end == end_row) return;
  const int heads = static_cast<int>(w.cols);
  const int padded = padded_heads(kernels, heads);
  const std::int64_t rows = end_row - first_row;
  reserve_rows<Format>(ws, rows, padded);
  const host_abi::rows_ref q_rows = rows_of(q);
  constexpr int head_dim = Format::head_dim;
  if constexpr (int8_path<Format>) {
    constexpr int blocks = Format::blocks;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t q_row = (first_row + r) * heads;  // the row's first head
      kernels.decode_q_i8(q_rows, q_row, heads, padded, ws.q_i8.data() + r * padded * head_dim / 4,
                          ws.q_bias.data() + r * padded * blocks,
                          ws.q_scale.data() + r * padded * blocks);
      ws.q_compact.data()[r] =
          kernels.fold_rows &&
          kernels.decode_q_i8_fold(
              q_rows, q_row, heads, padded, ws.q_fold.data() + r * padded * head_dim / 4,
              ws.q_fold_start.data() + r * padded, ws.q_fold_scale.data() + r * padded);
    }
  } else {
    // Both forms of a row that has the bf16 one: its scores over keys without it take the fp32
    // kernel.
    for (std::int64_t r = 0; r < rows; ++r) {
      kernels.decode_q_f32(q_rows, (first_row + r) * heads, heads, padded,
                           ws.q_f32.data() + r * padded * head_dim);
      ws.q_compact.data()[r] = static_cast<unsigned char>(
          kernels.bf16_kernel
              ? kernels.decode_q_bf16(q_rows, (first_row + r) * heads, heads, padded,
                                      ws.q_bf16.data() + r * padded * head_dim / 2,
                                      ws.q_bf16_scale.data() + r * padded)
              : 0);
    }
  }
  float* weights = ws.w.data();  // [rows, padded], zero past the heads
  for (std::int64_t r = 0; r < rows; ++r)
    for (int h = 0; h < padded; ++h)
      weights[r * padded + h] = h < heads ? to_float(w(first_row + r, h)) : 0.0f;
  ws.call = call;
  ws.row_begin = first_row;
  ws.row_end = end_row;
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
  ws.next_refs.reserve(rows);
  if constexpr (int8_path<Format>) {
    ws.k_i8.reserve(rows * i8_key_bytes);
    ws.k_scale.reserve(rows * static_cast<std::size_t>(Format::blocks));
    ws.k_fold.reserve(rows * i8_key_bytes);
    ws.k_fold_scale.reserve(
        rows * static_cast<std::size_t>(host_backend::i8_compact_scale_words<head_dim>));
    ws.k_compact.reserve(rows);
  } else {
    ws.k_f32.reserve(rows * head_dim);
    ws.k_bf16.reserve(rows * head_dim / 2);
    ws.k_bf16_scale.reserve(rows);
    ws.k_compact.reserve(rows);
  }
  ws.scores.reserve(score_slots);
}

// The addresses of keys [k0, k0 + n) of group g: the plan's own run lookup when it has one (a
// paged plan walks page by page rather than dividing per key), else plan.key per key.
template <class Plan>
void look_up_keys(const Plan& plan, std::int64_t g, std::int64_t k0, std::int64_t n,
                  host_abi::key_ptrs* refs) {
  auto put = [refs](std::int64_t i, key_ref key) { refs[i] = {key.data, key.scale}; };
  if constexpr (requires { plan.keys(g, k0, n, put); })
    plan.keys(g, k0, n, put);
  else
    for (std::int64_t i = 0; i < n; ++i) put(i, plan.key(g, k0 + i));
}

// The keys of the tile scored next, fetched into L2 a few at a time while the current tile is
// scored: its decode then reads L2 instead of waiting on memory, which matters where the keys
// are scattered over pages that the hardware prefetcher does not follow.
template <class Format>
struct next_tile_fetch {
  const host_abi::key_ptrs* keys = nullptr;
  std::int64_t n = 0, done = 0;
  std::uintptr_t scale_line = 0;  // the cache line of the last key's scales
  // After a key group is scored: as many keys as the group held. Keys of a page keep their
  // scales side by side, so a line of scales is fetched once, not once per key: each fetch that
  // misses holds one of the core's few miss buffers until memory answers.
  void step(std::int64_t count) {
    for (const std::int64_t end = std::min(n, done + count); done < end; ++done) {
      const host_abi::key_ptrs& key = keys[done];
      if (!key.data) continue;
      for (int b = 0; b < Format::data_bytes; b += 64) prefetch_line(key.data + b);
      const auto line = reinterpret_cast<std::uintptr_t>(key.scale) / 64;
      if (line != scale_line) prefetch_line(key.scale);
      scale_line = line;
    }
  }
  void finish() { step(n); }
};

// Whether a plan's keys are fetched a tile ahead: those of the paged plan, whose keys sit on
// pages spread through memory, runs of page_kv tokens that the hardware prefetcher does not
// follow from one to the next, on a CPU whose prefetch into L2 stays out of L1 (elsewhere the
// fetched tile, larger than L1, evicts what is being scored). Dense and sparse keys (rows of
// one KV, blocks of them, a gathered snapshot) are left to the decode's own prefetch: there the
// second lookup and the extra prefetches cost more than they save (sparse 64 x 2048 keys: 1-4%
// slower with them).
template <class Plan>
bool fetches_tile_ahead() {
  if constexpr (requires { requires Plan::keys_on_pages; })
    return !this_cpu_prefetch_fills_l1();
  else
    return false;
}

// Which of an item's query rows take the compact kernel (decode_rows decided per row).
inline host_abi::compact_rows item_compact_rows(const work_item& item, const workspace& ws) {
  const unsigned char* const compact = ws.q_compact.data();
  const std::int64_t rows = item.row_end - item.row_begin;
  const auto count = std::count_if(compact, compact + rows, [](unsigned char f) { return f != 0; });
  return count == 0      ? host_abi::compact_rows::none
         : count == rows ? host_abi::compact_rows::all
                         : host_abi::compact_rows::some;
}

// Where a row's scores over a tile go: the score of key t at scores[t - first_key].
struct row_scores {
  float* scores;
  std::int64_t first_key;
  float* at(std::int64_t t) const { return scores + (t - first_key); }
};

// Scores of keys [lo, hi) for a row in bf16 form (every key of the tile has that form; those
// that do not fit hold zeros there, and score_row_f32 replaces their scores).
template <class Format>
void score_row_bf16(const host_abi::format_kernels& kernels, const workspace& ws, std::int64_t row,
                    int heads, std::int64_t tile_begin, std::int64_t lo, std::int64_t hi,
                    row_scores out, next_tile_fetch<Format>& fetch) {
  constexpr int pairs = Format::head_dim / 2;
  const int padded = padded_heads(kernels, heads);
  const bool scaled = ws.q_compact.data()[row] == host_abi::bf16_scaled_pairs;
  const host_abi::bf16_query query{ws.q_bf16.data() + row * padded * pairs,
                                   scaled ? ws.q_bf16_scale.data() + row * padded : nullptr,
                                   ws.w.data() + row * padded, heads, padded};
  const auto kernel = kernels.bf16_kernel(padded / kernels.lanes);
  for (std::int64_t t = lo; t < hi; t += kernel.keys) {
    kernel.fn(
        query,
        {ws.k_bf16.data() + (t - tile_begin) * pairs, ws.k_bf16_scale.data() + (t - tile_begin)},
        out.at(t));
    fetch.step(kernel.keys);
  }
}

// Scores of keys [lo, hi) of the decoded tile that starts at key tile_begin, for the fp32
// path's query row `row` (its index among the workspace's decoded rows): the bf16 kernel for a
// row that has that form (and the fp32 one for the tile_general_keys keys that do not).
template <class Format>
void score_row_f32(const host_abi::format_kernels& kernels, const workspace& ws, std::int64_t row,
                   int heads, std::int64_t tile_begin, std::int64_t lo, std::int64_t hi,
                   std::int64_t tile_general_keys, row_scores out, next_tile_fetch<Format>& fetch) {
  constexpr int head_dim = Format::head_dim;
  const int padded = padded_heads(kernels, heads);
  const host_abi::f32_query query{ws.q_f32.data() + row * padded * head_dim,
                                  ws.w.data() + row * padded, heads, padded};
  const auto kernel = kernels.f32_kernel(padded / kernels.lanes);
  if (ws.q_compact.data()[row]) {
    score_row_bf16<Format>(kernels, ws, row, heads, tile_begin, lo, hi, out, fetch);
    // Keys without the bf16 form: the fp32 kernel, one key at a time (its group's other keys
    // are whatever the fp32 tile holds there, and their scores dropped).
    if (tile_general_keys == 0) return;
    const unsigned char* compact = ws.k_compact.data();
    float* const single = out.scores + key_tile + max_group_keys;
    for (std::int64_t t = lo; t < hi; ++t)
      if (!compact[t - tile_begin]) {
        kernel.fn(query, {ws.k_f32.data() + (t - tile_begin) * head_dim}, single);
        *out.at(t) = single[0];
      }
    return;
  }
  for (std::int64_t t = lo; t < hi; t += kernel.keys) {
    kernel.fn(query, {ws.k_f32.data() + (t - tile_begin) * head_dim}, out.at(t));
    fetch.step(kernel.keys);
  }
}

// The int8 path's query row `row` in its per-block form (codes, per-block bias and scale).
template <class Format>
host_abi::i8_query block_query_of(const workspace& ws, std::int64_t row, int heads, int padded) {
  constexpr int head_dim = Format::head_dim, blocks = Format::blocks;
  return {ws.q_i8.data() + row * padded * head_dim / 4,
          ws.q_bias.data() + row * padded * blocks,
          ws.q_scale.data() + row * padded * blocks,
          ws.w.data() + row * padded,
          heads,
          padded};
}
// ... and in its folded form (MXFP4 rows whose blocks fold into one scale).
template <class Format>
host_abi::i8_query folded_query_of(const workspace& ws, std::int64_t row, int heads, int padded) {
  constexpr int head_dim = Format::head_dim;
  return {ws.q_fold.data() + row * padded * head_dim / 4,
          ws.q_fold_start.data() + row * padded,
          ws.q_fold_scale.data() + row * padded,
          ws.w.data() + row * padded,
          heads,
          padded};
}

// Scores of keys [lo, hi) of the decoded tile with the per-block kernel.
template <class Format>
void score_keys_per_block(
    const host_abi::keys_kernel<host_abi::i8_query, host_abi::i8_keys>& kernel,
    const host_abi::i8_query& query, const workspace& ws, std::int64_t tile_begin, std::int64_t lo,
    std::int64_t hi, row_scores out, next_tile_fetch<Format>& fetch) {
  constexpr int key_bytes = host_backend::i8_key_bytes<Format::head_dim>;
  constexpr int blocks = Format::blocks;
  for (std::int64_t t = lo; t < hi; t += kernel.keys) {
    kernel.fn(query,
              {ws.k_i8.data() + (t - tile_begin) * key_bytes,
               ws.k_scale.data() + (t - tile_begin) * blocks},
              out.at(t));
    fetch.step(kernel.keys);
  }
}

// The same for a row that folds: the folded kernel on each key group of keys that fold, the
// per-block one on a group of keys that do not. A group mixing both runs both and keeps each
// key's own, so which of the two a logit comes from depends only on its query and key rows,
// never on its neighbours.
template <class Format>
void score_row_folded(const host_abi::format_kernels& kernels, const workspace& ws,
                      std::int64_t row, int heads, std::int64_t tile_begin, std::int64_t lo,
                      std::int64_t hi, std::int64_t tile_general_keys, row_scores out,
                      next_tile_fetch<Format>& fetch) {
  constexpr int key_bytes = host_backend::i8_key_bytes<Format::head_dim>;
  constexpr int scale_words = host_backend::i8_compact_scale_words<Format::head_dim>;
  const int padded = padded_heads(kernels, heads);
  const host_abi::i8_query block_query = block_query_of<Format>(ws, row, heads, padded);
  // The compact kernel's operands: the folded form, or the per-block one (relative form).
  const bool per_block_form = kernels.compact_reads_per_block;
  const host_abi::i8_query fold_query =
      per_block_form ? block_query : folded_query_of<Format>(ws, row, heads, padded);
  const auto block_kernel = kernels.i8_kernel(padded / kernels.lanes);
  const auto fold_kernel = kernels.fold_kernel(padded / kernels.lanes);
  const unsigned char* key_folds = ws.k_compact.data();
  const std::uint8_t* compact_codes = per_block_form ? ws.k_i8.data() : ws.k_fold.data();
  // The compact kernel on the group of keys from t.
  auto score_compact = [&](std::int64_t t, std::int64_t count) {
    fold_kernel.fn(fold_query,
                   {compact_codes + (t - tile_begin) * key_bytes,
                    ws.k_fold_scale.data() + (t - tile_begin) * scale_words},
                   out.at(t));
    fetch.step(count);
  };
  // Every key of the tile in the compact form (the common case): nothing else to look at.
  if (tile_general_keys == 0) {
    for (std::int64_t t = lo; t < hi; t += fold_kernel.keys) score_compact(t, fold_kernel.keys);
    return;
  }
  // Per-block scores of a group that mixes both forms: after the row's tile and its padding.
  float* const mixed = out.scores + key_tile + max_group_keys;
  for (std::int64_t t = lo; t < hi; t += fold_kernel.keys) {
    const std::int64_t count = std::min<std::int64_t>(fold_kernel.keys, hi - t);
    int folded = 0;
    for (std::int64_t i = 0; i < count; ++i) folded += key_folds[t - tile_begin + i];
    if (folded == 0) {
      score_keys_per_block<Format>(block_kernel, block_query, ws, tile_begin, t, t + count, out,
                                   fetch);
      continue;
    }
    score_compact(t, count);
    if (folded < count)
      for (std::int64_t u = t; u < t + count; u += block_kernel.keys) {
        score_keys_per_block<Format>(block_kernel, block_query, ws, tile_begin, u, u + 1,
                                     {mixed, u}, fetch);
        for (std::int64_t i = u; i < std::min(u + block_kernel.keys, t + count); ++i)
          if (!key_folds[i - tile_begin]) *out.at(i) = mixed[i - u];
      }
  }
}

// The int8 path's row: per-block kernel, or for a row that folds, score_row_folded.
template <class Format>
void score_row_i8(const host_abi::format_kernels& kernels, const workspace& ws, std::int64_t row,
                  int heads, std::int64_t tile_begin, std::int64_t lo, std::int64_t hi,
                  std::int64_t tile_general_keys, row_scores out, next_tile_fetch<Format>& fetch) {
  if (kernels.fold_rows && ws.q_compact.data()[row]) {
    score_row_folded<Format>(kernels, ws, row, heads, tile_begin, lo, hi, tile_general_keys, out,
                             fetch);
    return;
  }
  const int padded = padded_heads(kernels, heads);
  score_keys_per_block<Format>(kernels.i8_kernel(padded / kernels.lanes),
                               block_query_of<Format>(ws, row, heads, padded), ws, tile_begin, lo,
                               hi, out, fetch);
}

// One work item: its query rows decoded (or reused), then per key tile the keys decoded once
// and each row's scores over them handed to the output. While a tile is scored, the next one's
// keys are fetched: the item's own next tile, or after its last the first tile of `next` (the
// item this thread runs next, if known).
template <class Format, class Plan, class W, class Output>
void run_item(const host_abi::format_kernels& kernels, const rows_view<Format>& q, const Plan& plan,
              const matrix_view<const W>& w, Output& output, std::int64_t task,
              const work_item& item, const work_item* next, std::uint64_t call, workspace& ws) {
  const int heads = static_cast<int>(w.cols);
  decode_rows(kernels, q, w, item.row_begin, item.row_end, call, ws);
  const host_abi::compact_rows compact = item_compact_rows(item, ws);
  float* scores = ws.scores.reserve(score_slots);
  reserve_tile<Format>(ws);
  host_abi::key_ptrs *refs = ws.refs.data(), *next_refs = ws.next_refs.data();
  const bool fetch_ahead = fetches_tile_ahead<Plan>();
  look_up_keys(plan, item.group, item.key_begin, std::min(key_tile, item.key_end - item.key_begin),
               refs);
  for (std::int64_t tile_begin = item.key_begin; tile_begin < item.key_end;
       tile_begin += key_tile) {
    const std::int64_t tile_end = std::min(tile_begin + key_tile, item.key_end);
    // The next tile's keys: the item's own (looked up here for every plan), or the next item's
    // first tile (only to be fetched).
    std::int64_t next_keys = 0;
    if (tile_end < item.key_end) {
      next_keys = std::min(key_tile, item.key_end - tile_end);
      look_up_keys(plan, item.group, tile_end, next_keys, next_refs);
    } else if (fetch_ahead && next) {
      next_keys = std::min(key_tile, next->key_end - next->key_begin);
      look_up_keys(plan, next->group, next->key_begin, next_keys, next_refs);
    }
    next_tile_fetch<Format> fetch{next_refs, fetch_ahead ? next_keys : 0};
    kernels.decode_keys(
        refs, tile_end - tile_begin, compact,
        {ws.key_valid.data(), ws.k_f32.data(), ws.k_i8.data(), ws.k_scale.data(), ws.k_fold.data(),
         ws.k_fold_scale.data(), ws.k_bf16.data(), ws.k_bf16_scale.data(), ws.k_compact.data()});
    const unsigned char* valid = ws.key_valid.data();
    // Keys of the tile without the compact form (the compact rows' general-kernel fallbacks).
    std::int64_t general_keys = 0;
    if (compact != host_abi::compact_rows::none)
      general_keys = std::count(ws.k_compact.data(), ws.k_compact.data() + (tile_end - tile_begin),
                                static_cast<unsigned char>(0));
    for (std::int64_t r = item.row_begin; r < item.row_end; ++r) {
      const row_keys keys = plan.row(r);
      // The row's keys in this tile.
      const std::int64_t lo = std::max(tile_begin, keys.key_begin);
      const std::int64_t hi = std::min(tile_end, keys.key_end);
      if (lo >= hi) continue;
      // The row's scores over the tile are gathered and handed to the output once: the scores
      // of keys [lo, hi) are columns lo - col_offset on of row r. (Once per key group would
      // cost a selecting output its per-call work every 4-14 keys.)
      const std::int64_t decoded_row = r - ws.row_begin;
      if constexpr (int8_path<Format>)
        score_row_i8<Format>(kernels, ws, decoded_row, heads, tile_begin, lo, hi, general_keys,
                             {scores, lo}, fetch);
      else
        score_row_f32<Format>(kernels, ws, decoded_row, heads, tile_begin, lo, hi, general_keys,
                              {scores, lo}, fetch);
      output.consume(task, r, lo - keys.col_offset, scores, valid + (lo - tile_begin), hi - lo);
    }
    fetch.finish();
    // Swapped by hand: no standard template is instantiated on the kernel ABI's types.
    host_abi::key_ptrs* const scored = refs;
    refs = next_refs;
    next_refs = scored;
  }
}

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
