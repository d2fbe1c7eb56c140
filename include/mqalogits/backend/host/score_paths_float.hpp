// The score paths of the formats decoded to floating point: fp32 (MXFP8 and any other format
// decoded to fp32) and bf16 pairs (e4m3 formats on ISAs with bf16 pair dot products).
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../config.hpp"
#include "isa/base.hpp"
#include "kernel_abi.hpp"
#include "score_tile.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// ---- fp32 path (MXFP8 and any other format decoded to fp32) ----
template <int D>
struct f32_path {
  // One decoded query row: qt[panel_index(D, lanes, padded_heads / lanes, chunk, d, h)] (heads
  // rounded up to the vector width, padded heads hold zeros; chunk: the blocking's head
  // vectors, chunk_vectors<I::f32_blocks>) and w[h] (zero on padding).
  using query = host_abi::f32_query;
  // `keys` rows of D fp32 (rows past the caller's count may hold anything readable).
  using keys = host_abi::f32_keys;
  template <class I>
  static constexpr const auto& blocks() {
    return I::f32_blocks;
  }

  // Adds the weighted relu scores of head vectors v0 .. v0 + HeadVectors - 1 to part.
  template <class I, int HeadVectors, int Keys>
  static void chunk(const query& q, int v0, const keys& k,
                    typename I::vf (&part)[static_cast<std::size_t>(Keys)]) {
    using vf = typename I::vf;
    constexpr int L = I::lanes;
    vf acc[std::size_t{HeadVectors}][std::size_t{Keys}];
    fill_tile(acc, [](int) { return I::zero(); });
    // This chunk's panel: [d][HeadVectors x L].
    const float* qd = q.qt + std::int64_t{v0} * L * D;
    accumulate_tile(
        acc, D, [&](int d, int j) { return I::load(qd + (d * HeadVectors + j) * L); },
        [&](int d, int i) { return I::broadcast(k.values + i * D + d); },
        [](vf a, vf qv, vf kv) { return I::fma(qv, kv, a); });
    add_weighted_relu<I, HeadVectors, Keys>(
        q.heads, q.w, v0, [&](int j, int i) { return acc[j][i]; }, part);
  }
};

// ---- bf16 path (e4m3 formats on ISAs with bf16 pair dot products, isa/avx512_bf16.hpp) ----
//
// The fp32 path's tile over pairs of elements: each step adds the two products of a pair of d
// (I::dot_pairs), so a row takes D/2 steps. KeyScales: the keys' values come without their row
// scale (FP8 per-token), which multiplies each key's dot products before the relu, and so do
// the query rows' own scales when they have them (q.scales; after the key's).
template <int D, bool KeyScales>
struct bf16_path {
  using query = host_abi::bf16_query;
  using keys = host_abi::bf16_keys;
  template <class I>
  static constexpr const auto& blocks() {
    return I::bf16_blocks;
  }

  template <class I, int HeadVectors, int Keys>
  static void chunk(const query& q, int v0, const keys& k,
                    typename I::vf (&part)[static_cast<std::size_t>(Keys)]) {
    using vf = typename I::vf;
    constexpr int L = I::lanes, P = D / 2;
    vf acc[std::size_t{HeadVectors}][std::size_t{Keys}];
    fill_tile(acc, [](int) { return I::zero(); });
    const std::uint32_t* qp = q.pairs + v0 * L;
    accumulate_tile(
        acc, P, [&](int p, int j) { return I::load_pairs(qp + p * q.padded_heads + j * L); },
        [&](int p, int i) { return I::broadcast_pair(k.pairs + i * P + p); },
        [](vf a, vf qv, vf kv) { return I::dot_pairs(a, qv, kv); });
    if constexpr (KeyScales) {
      MQALOGITS_UNROLL
      for (int i = 0; i < Keys; ++i) {
        const vf s = I::broadcast(k.scales + i);
        MQALOGITS_UNROLL
        for (int j = 0; j < HeadVectors; ++j) acc[j][i] = I::mul(acc[j][i], s);
      }
      if (q.scales) {
        MQALOGITS_UNROLL
        for (int j = 0; j < HeadVectors; ++j) {
          const vf s = I::load(q.scales + (v0 + j) * L);
          MQALOGITS_UNROLL
          for (int i = 0; i < Keys; ++i) acc[j][i] = I::mul(acc[j][i], s);
        }
      }
    }
    add_weighted_relu<I, HeadVectors, Keys>(
        q.heads, q.w, v0, [&](int j, int i) { return acc[j][i]; }, part);
  }
};

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
