// A tile of keys decoded together: its buffers, the lookup of its keys' addresses and the
// fetch of the next tile's keys while this one is scored.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "../../config.hpp"
#include "../../variant/plan.hpp"
#include "decode.hpp"
#include "isa/base.hpp"
#include "kernel_abi.hpp"
#include "prefetch.hpp"
#include "score_paths_i8_compact.hpp"
#include "workspace.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

inline constexpr std::int64_t key_tile = 512;  // keys decoded together (one work item's worth)

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

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
