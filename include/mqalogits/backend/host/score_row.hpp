// One query row's scores over a decoded key tile, with the kernel each of its keys takes: fp32
// or bf16 pairs, int8 per block, folded or relative.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../config.hpp"
#include "../../variant/plan.hpp"
#include "decode.hpp"
#include "isa/base.hpp"
#include "kernel_abi.hpp"
#include "key_tile.hpp"
#include "query_rows.hpp"
#include "score_paths_i8_compact.hpp"
#include "workspace.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

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

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
