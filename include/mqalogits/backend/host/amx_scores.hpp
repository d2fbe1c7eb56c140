// The score steps of the AMX path (isa/amx_path.hpp): for one query row and a call's 64 keys,
//   out[t] = sum_h relu(dot(q[h], k[t])) * w[h]
// with the dot products in tiles and the rest (scales, relu, weights, head sum) in I's vectors.
// Written against the tile interface (amx/tile_model.hpp), so the same code runs on the
// hardware (amx/tile_native.hpp) and on the model.
//
// Tiles: C, the 16 keys x L heads results of up to 4 head vectors, in tiles 0-3; A, the 16
// keys' operand, in tile 4; B, a head vector's operand, in tiles 5 and 6 by turns. A call
// configures the tiles once and releases them before it returns, so no tile state outlives it;
// its keys go in groups of 16, each group in passes of up to 4 head vectors.
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
#include "decode.hpp"
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

inline constexpr int group_keys = 16;   // keys per tile step: the rows of A and C
inline constexpr int call_keys = 64;    // keys per call: LDTILECFG costs about a group's work
inline constexpr int accumulators = 4;  // head vectors per pass: C in tiles 0-3
inline constexpr int key_operand = 4;   // A's tile; B takes tiles 5 and 6

// A call's configuration: C (keys x L heads, fp32 or int32) four times, A (keys x a_bytes),
// B (b_rows x L heads) twice. A pass over fewer head vectors leaves some C tiles unused.
template <int L>
constexpr tile_config call_config(int a_bytes, int b_rows) {
  tile_config c;
  for (int j = 0; j < accumulators; ++j) c.shape(j, group_keys, 4 * L);
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

// f(std::integral_constant<int, n>) for the pass over the head vectors from v0: n of them, at
// most 4.
template <class F>
inline void with_pass(int head_vectors, int v0, F f) {
  switch (std::min(accumulators, head_vectors - v0)) {
    case 4:
      return f(std::integral_constant<int, 4>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    default:
      return f(std::integral_constant<int, 1>{});
  }
}

// out[i] = I::reduce(part[i]) for a group's keys: I's 16-at-once form where it has one.
template <class I>
inline void reduce_group(const typename I::vf (&part)[group_keys], float* out) {
  if constexpr (requires { I::reduce16(part, out); })
    I::reduce16(part, out);
  else
    for (int i = 0; i < group_keys; ++i) out[i] = I::reduce(part[i]);
}

// ---- e4m3 rows in bf16 form (MXFP8, FP8 per-token): TDPBF16PS over 16 pairs per step ----
template <class I, int D, bool KeyScales>
struct bf16_scores {
  using vf = typename I::vf;
  using T = typename I::tiles;
  static constexpr int L = I::lanes, pairs = D / 2, steps = pairs / 16;
  static_assert(pairs % 16 == 0, "a step takes 16 pairs (64 bytes) of each row");
  // A pass's C tiles, as stored for the vectors.
  using results = float[accumulators][group_keys][L];

  // The passes in order, each one's tiles multiplied before the previous one's results are
  // summed: the vectors sum while the tile unit multiplies.
  static void score(const host_abi::bf16_query& q, const host_abi::bf16_keys& k, float* out) {
    static constexpr tile_config config = call_config<L>(64, 16);
    const int head_vectors = q.padded_heads / L;
    const int passes = (head_vectors + accumulators - 1) / accumulators;
    const int count = call_keys / group_keys * passes;
    alignas(64) results c[2];
    vf part[group_keys];
    T::configure(config);
    for (int p = 0; p <= count; ++p) {
      if (p < count) multiply(q, k, p / passes, p % passes * accumulators, c[p % 2]);
      if (p > 0) {
        const int g = (p - 1) / passes, v0 = (p - 1) % passes * accumulators;
        sum_heads(q, k, g, v0, c[(p - 1) % 2], part);
        if (v0 + accumulators >= head_vectors) reduce_group<I>(part, out + g * group_keys);
      }
    }
    T::release();
  }

  // C = the dot products of key group g with the head vectors from v0.
  static void multiply(const host_abi::bf16_query& q, const host_abi::bf16_keys& k, int g, int v0,
                       results& c) {
    with_pass(q.padded_heads / L, v0, [&](auto n) {
      for_each_tile<n()>([](auto j) { T::template zero<j()>(); });
      const std::uint32_t* keys = k.pairs + std::int64_t{g} * group_keys * pairs;
      const std::int64_t q_stride = std::int64_t{4} * q.padded_heads;
      for (int s = 0; s < steps; ++s) {
        T::template load<key_operand>(keys + s * 16, 4 * pairs);
        for_each_tile<n()>([&](auto j) {
          constexpr int b = 5 + j() % 2;
          T::template load<b>(q.pairs + std::int64_t{s} * 16 * q.padded_heads + (v0 + j()) * L,
                              q_stride);
          T::template dot_bf16<j(), key_operand, b>();
        });
      }
      for_each_tile<n()>([&](auto j) { T::template store<j()>(&c[j()][0][0], 4 * L); });
    });
  }

  // part[m] (zeroed by the first pass) += relu(scaled C) * w over the pass's heads.
  static void sum_heads(const host_abi::bf16_query& q, const host_abi::bf16_keys& k, int g, int v0,
                        const results& c, vf (&part)[group_keys]) {
    if (v0 == 0)
      for (vf& p : part) p = I::zero();
    const int n = std::min(accumulators, q.padded_heads / L - v0);
    for (int j = 0; j < n; ++j) {
      const int h0 = (v0 + j) * L;
      const auto live = I::live(q.heads - h0);
      const vf wv = I::load(q.w + h0);
      for (int m = 0; m < group_keys; ++m) {
        vf s = I::load(&c[j][m][0]);
        if constexpr (KeyScales) {
          s = I::mul(s, I::broadcast(k.scales + g * group_keys + m));
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
    static constexpr tile_config config = call_config<L>(mx_scale_block, words);
    const int head_vectors = q.padded_heads / L;
    T::configure(config);
    for (int g = 0; g < call_keys / group_keys; ++g) {
      vf part[group_keys];
      for (vf& p : part) p = I::zero();
      const host_abi::i8_keys group{k.codes + std::int64_t{g} * group_keys * i8_key_bytes<D>,
                                    k.scales + std::int64_t{g} * group_keys * blocks};
      for (int v0 = 0; v0 < head_vectors; v0 += accumulators)
        with_pass(head_vectors, v0, [&](auto n) { pass<n()>(q, group, v0, part); });
      reduce_group<I>(part, out + g * group_keys);
    }
    T::release();
  }

  template <int N>
  static void pass(const host_abi::i8_query& q, const host_abi::i8_keys& k, int v0,
                   vf (&part)[group_keys]) {
    const int stride = q.padded_heads;
    vf f[std::size_t{N}][group_keys];
    for (auto& row : f)
      for (vf& x : row) x = I::zero();
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
