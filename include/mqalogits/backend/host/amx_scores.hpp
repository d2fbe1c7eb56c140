// The score steps of the AMX path (isa/amx_path.hpp): for one query row and a group of 16 keys,
//   out[t] = sum_h relu(dot(q[h], k[t])) * w[h]
// with the dot products in tiles and the rest (scales, relu, weights, head sum) in I's vectors.
// Written against the tile interface (amx/tile_model.hpp), so the same code runs on the
// hardware (amx/tile_native.hpp) and on the model.
//
// Tiles: C, the 16 keys x L heads results of up to 4 head vectors, in tiles 0-3; A, the 16
// keys' operand, in tile 4; B, a head vector's operand, in tiles 5 and 6 by turns. A row of more
// than 4 head vectors takes several passes over the keys, each configuring and releasing the
// tiles, so no tile state outlives a call.
//
// The results are the other paths' up to the order of fp32 additions inside a dot product
// (bf16: TDPBF16PS sums the even and odd products apart, then adds them) and are exact integer
// sums for MXFP4; everything after the dot products is the same operations in the same order as
// score_paths_float.hpp's bf16_path and score_path_i8.hpp's i8_path.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "../../config.hpp"
#include "amx/tile_config.hpp"
#include "isa/base.hpp"
#include "kernel_abi.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// ISAs whose compact score steps run in tiles (isa/amx_path.hpp).
template <class I>
concept amx_tiles = requires {
  typename I::tiles;
};

namespace amx {

inline constexpr int group_keys = 16;   // keys per call: the rows of A and C
inline constexpr int accumulators = 4;  // head vectors per pass: C in tiles 0-3
inline constexpr int key_operand = 4;   // A's tile; B takes tiles 5 and 6

// The configuration of a pass over N head vectors of L heads: C (keys x heads, fp32 or int32),
// A (keys x a_bytes), B (b_rows x heads).
template <int N, int L>
constexpr tile_config pass_config(int a_bytes, int b_rows) {
  tile_config c;
  for (int j = 0; j < N; ++j) c.shape(j, group_keys, 4 * L);
  c.shape(key_operand, group_keys, a_bytes);
  c.shape(5, b_rows, 4 * L).shape(6, b_rows, 4 * L);
  return c;
}

// f(std::integral_constant<int, j>) for j = 0 .. N - 1, in order.
template <int N, class F>
inline void for_each_tile(F f) {
  [&]<int... j>(std::integer_sequence<int, j...>) {
    (f(std::integral_constant<int, j>{}), ...);
  }
  (std::make_integer_sequence<int, N>{});
}

// Runs pass<N>(v0, part) over the head vectors of a row in passes of up to 4.
template <class Pass>
inline void over_head_vectors(int head_vectors, Pass pass) {
  for (int v0 = 0; v0 < head_vectors; v0 += accumulators)
    switch (std::min(accumulators, head_vectors - v0)) {
      case 4:
        pass(std::integral_constant<int, 4>{}, v0);
        break;
      case 3:
        pass(std::integral_constant<int, 3>{}, v0);
        break;
      case 2:
        pass(std::integral_constant<int, 2>{}, v0);
        break;
      default:
        pass(std::integral_constant<int, 1>{}, v0);
    }
}

// ---- e4m3 rows in bf16 form (MXFP8, FP8 per-token): TDPBF16PS over 16 pairs per step ----
template <class I, int D, bool KeyScales>
struct bf16_scores {
  using vf = typename I::vf;
  using T = typename I::tiles;
  static constexpr int L = I::lanes, pairs = D / 2, steps = pairs / 16;
  static_assert(pairs % 16 == 0, "a step takes 16 pairs (64 bytes) of each row");

  static void score(const host_abi::bf16_query& q, const host_abi::bf16_keys& k, float* out) {
    vf part[group_keys];
    for (vf& p : part) p = I::zero();
    over_head_vectors(q.padded_heads / L, [&](auto n, int v0) { pass<n()>(q, k, v0, part); });
    for (int i = 0; i < group_keys; ++i) out[i] = I::reduce(part[i]);
  }

  template <int N>
  static void pass(const host_abi::bf16_query& q, const host_abi::bf16_keys& k, int v0,
                   vf (&part)[group_keys]) {
    static constexpr tile_config config = pass_config<N, L>(64, 16);
    T::configure(config);
    for_each_tile<N>([](auto j) { T::template zero<j()>(); });
    const std::int64_t q_stride = std::int64_t{4} * q.padded_heads;
    for (int s = 0; s < steps; ++s) {
      T::template load<key_operand>(k.pairs + s * 16, 4 * pairs);
      for_each_tile<N>([&](auto j) {
        constexpr int b = 5 + j() % 2;
        T::template load<b>(q.pairs + std::int64_t{s} * 16 * q.padded_heads + (v0 + j()) * L,
                            q_stride);
        T::template dot_bf16<j(), key_operand, b>();
      });
    }
    alignas(64) float c[std::size_t{N}][group_keys][std::size_t{L}];
    for_each_tile<N>([&](auto j) { T::template store<j()>(&c[j()][0][0], 4 * L); });
    T::release();
    for (int j = 0; j < N; ++j) {
      const int h0 = (v0 + j) * L;
      const auto live = I::live(q.heads - h0);
      const vf wv = I::load(q.w + h0);
      for (int m = 0; m < group_keys; ++m) {
        vf s = I::load(&c[j][m][0]);
        if constexpr (KeyScales) {
          s = I::mul(s, I::broadcast(k.scales + m));
          if (q.scales) s = I::mul(s, I::load(q.scales + h0));
        }
        part[m] = I::fma(I::relu(s, live), wv, part[m]);
      }
    }
  }
};

// ---- MXFP4 (doubled e2m1 codes, per 32-element block): TDPBSSD, one step per block ----
template <class I, int D>
struct i8_scores {
  using vf = typename I::vf;
  using T = typename I::tiles;
  static constexpr int L = I::lanes, blocks = D / mx_scale_block, words = mx_scale_block / 4;

  static void score(const host_abi::i8_query& q, const host_abi::i8_keys& k, float* out) {
    vf part[group_keys];
    for (vf& p : part) p = I::zero();
    over_head_vectors(q.padded_heads / L, [&](auto n, int v0) { pass<n()>(q, k, v0, part); });
    for (int i = 0; i < group_keys; ++i) out[i] = I::reduce(part[i]);
  }

  template <int N>
  static void pass(const host_abi::i8_query& q, const host_abi::i8_keys& k, int v0,
                   vf (&part)[group_keys]) {
    static constexpr tile_config config = pass_config<N, L>(mx_scale_block, words);
    const int stride = q.padded_heads;
    vf f[std::size_t{N}][group_keys];
    for (auto& row : f)
      for (vf& x : row) x = I::zero();
    T::configure(config);
    alignas(64) std::int32_t c[std::size_t{N}][group_keys][std::size_t{L}];
    for (int b = 0; b < blocks; ++b) {
      for_each_tile<N>([](auto j) { T::template zero<j()>(); });
      T::template load<key_operand>(k.codes + b * mx_scale_block, D);
      for_each_tile<N>([&](auto j) {
        constexpr int t = 5 + j() % 2;
        T::template load<t>(q.data + std::int64_t{b} * words * stride + (v0 + j()) * words * L,
                            4 * L);
        T::template dot_s8<j(), key_operand, t>();
      });
      for_each_tile<N>([&](auto j) { T::template store<j()>(&c[j()][0][0], 4 * L); });
      // As i8_path: the product of the two block scales (capped), times the exact block sum.
      for (int j = 0; j < N; ++j) {
        const vf qs = I::load(q.scale + b * stride + (v0 + j) * L);
        for (int m = 0; m < group_keys; ++m) {
          const vf both = I::cap_infinity(I::mul(qs, I::broadcast(k.scales + m * blocks + b)));
          f[j][m] = I::fma(I::to_float(I::loadi(&c[j][m][0])), both, f[j][m]);
        }
      }
    }
    T::release();
    for (int j = 0; j < N; ++j) {
      const int h0 = (v0 + j) * L;
      const auto live = I::live(q.heads - h0);
      const vf wv = I::load(q.w + h0);
      for (int m = 0; m < group_keys; ++m) part[m] = I::fma(I::relu(f[j][m], live), wv, part[m]);
    }
  }
};

}  // namespace amx
}  // namespace host_backend
MQALOGITS_NAMESPACE_END
