// One work item of the host driver: its query rows decoded, then per key tile the keys decoded
// once and every row's scores over them handed to the output.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../config.hpp"
#include "../../variant/plan.hpp"
#include "../../view/matrix_view.hpp"
#include "../../view/rows_view.hpp"
#include "decode.hpp"
#include "kernel_abi.hpp"
#include "key_tile.hpp"
#include "query_rows.hpp"
#include "score_row.hpp"
#include "workspace.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

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

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
