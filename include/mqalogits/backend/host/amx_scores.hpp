// The score steps of the AMX path (isa/amx_path.hpp): for one query row and a call's 64 keys,
//   out[t] = sum_h relu(dot(q[h], k[t])) * w[h]
// with the dot products in tiles and the rest (scales, relu, weights, head sum) in I's vectors.
// Written against the tile interface (amx/tile_model.hpp), so the same code runs on the
// hardware (amx/tile_native.hpp) and on the model.
//
// A call configures the tiles once and releases them before it returns, so no tile state
// outlives it. Its keys go in pairs of groups of 16 (C, A and B below), each pair in passes over
// two head vectors at a time; a pass's products are issued before the previous pass's head sums,
// so the vectors sum while the tile unit multiplies. MXFP4 rows that do not fold take one tile
// step per 32-element block (i8_scores), with the block scales in the vectors.
//
// The results are the other paths' up to the order of fp32 additions inside a dot product
// (bf16: TDPBF16PS sums the even and odd products apart, then adds them) and are exact integer
// sums for MXFP4; everything after the dot products is the same operations in the same order as
// score_paths_float.hpp's bf16_path, score_path_i8.hpp's i8_path and
// score_paths_i8_compact.hpp's i8_fold_path (heads summed per lane in ascending vector order,
// then the lanes reduced in I::reduce's tree).
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
#include "score_path_i8.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// ISAs whose compact score steps run in tiles (isa/amx_path.hpp).
template <class I>
concept amx_tiles = requires {
  typename I::tiles;
};

namespace amx {

inline constexpr int group_keys = 16;  // keys per tile: the rows of A and C
inline constexpr int call_keys = 64;   // keys per call: LDTILECFG costs about a group's work
// A pass multiplies 2 key groups by 2 head vectors: C tile 2i + j holds group i x vector j, A
// tiles 4-5 the groups and B tiles 6-7 the vectors, so each tile loaded feeds two products.
// Tiles are not renamed and tile instructions run in order: a load waits until the products
// before it have read its tile. So a step loads A 4, B 6, B 7, A 5, in the order the previous
// step's products free them, and the products come after the loads.
inline constexpr int pass_groups = 2, pass_vectors = 2;
inline constexpr int first_a = 4, first_b = 6;

// A call's configuration: C (keys x L heads, fp32 or int32) in tiles 0-3, A (keys x a_bytes)
// in tiles 4-5, B (b_rows x L heads) in tiles 6-7.
template <int L>
constexpr tile_config call_config(int a_bytes, int b_rows) {
  tile_config c;
  for (int t = 0; t < first_a; ++t) c.shape(t, group_keys, 4 * L);
  c.shape(first_a, group_keys, a_bytes).shape(first_a + 1, group_keys, a_bytes);
  c.shape(first_b, b_rows, 4 * L).shape(first_b + 1, b_rows, 4 * L);
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

// out[i] = I::reduce(part[i]) for a group's keys: I's 16-at-once form where it has one.
template <class I>
inline void reduce_group(const typename I::vf (&part)[group_keys], float* out) {
  if constexpr (requires { I::reduce16(part, out); })
    I::reduce16(part, out);
  else
    for (int i = 0; i < group_keys; ++i) out[i] = I::reduce(part[i]);
}

// ---- the loop of the one-sum kernels (bf16 pairs, folded MXFP4) ----
//
// Tile, one kernel's operands: its query and keys types, the C element type `result`, the
// configuration, `steps` tile steps over a row with the addresses and strides of their A (keys)
// and B (head vector) operands, its dot product, and `scaled`, a key's fp32 scores from its C
// row. The passes run in order, each one's tiles multiplied before the previous one's results
// are summed: the vectors sum while the tile unit multiplies.
template <class I, class Tile>
struct tile_kernel {
  using vf = typename I::vf;
  using T = typename I::tiles;
  using query = typename Tile::query;
  using keys = typename Tile::keys;
  static constexpr int L = I::lanes, pass_keys = pass_groups * group_keys;
  // A pass's C tiles, as stored for the vectors.
  using results = typename Tile::result[std::size_t{pass_groups}][std::size_t{pass_vectors}]
                                       [std::size_t{group_keys}][std::size_t{L}];
  // The head sums of a pass's keys so far, per lane, between passes over the same keys.
  using sums = vf[pass_groups][group_keys];

  static void score(const query& q, const keys& k, float* out) {
    const int head_vectors = q.padded_heads / L;
    const int passes = (head_vectors + pass_vectors - 1) / pass_vectors;  // per pass_keys keys
    const int count = call_keys / pass_keys * passes;
    alignas(64) results c[2];
    alignas(64) sums part;
    T::configure(Tile::config);
    for (int p = 0; p <= count; ++p) {
      const int key0 = p / passes * pass_keys, v0 = p % passes * pass_vectors;
      // f(std::integral_constant<int, n>) for this pass's n head vectors (none past the last).
      auto with_vectors = [&](auto f) {
        if (p == count) return;
        if (head_vectors - v0 >= 2)
          f(std::integral_constant<int, 2>{});
        else
          f(std::integral_constant<int, 1>{});
      };
      with_vectors([&](auto n) { multiply<n()>(q, k, key0, v0); });
      if (p > 0) {
        const int prev_key0 = (p - 1) / passes * pass_keys;
        const int prev_v0 = (p - 1) % passes * pass_vectors;
        sum_heads(q, k, prev_key0, prev_v0, c[(p - 1) % 2], part, out);
      }
      // After the sums: a load younger than a pending tile store waits for it, and this pass's
      // stores wait for its products.
      with_vectors([&](auto n) { store<n()>(c[p % 2]); });
    }
    T::release();
  }

  // C = the dot products of the 2 key groups from key0 with the NV head vectors from v0.
  template <int NV>
  static void multiply(const query& q, const keys& k, int key0, int v0) {
    for_each_tile<pass_groups>(
        [](auto i) { for_each_tile<NV>([&](auto j) { T::template zero<2 * i() + j()>(); }); });
    for_each_tile<Tile::steps>([&](auto s) {
      T::template load<first_a>(Tile::key_step(k, key0, s()), Tile::key_stride);
      for_each_tile<NV>([&](auto j) {
        T::template load<first_b + j()>(Tile::query_step(q, v0 + j(), s()), Tile::query_stride(q));
      });
      T::template load<first_a + 1>(Tile::key_step(k, key0 + group_keys, s()), Tile::key_stride);
      for_each_tile<pass_groups>([](auto i) {
        for_each_tile<NV>(
            [&](auto j) { Tile::template dot<2 * i() + j(), first_a + i(), first_b + j()>(); });
      });
    });
  }
  template <int NV>
  static void store(results& c) {
    for_each_tile<pass_groups>([&](auto i) {
      for_each_tile<NV>(
          [&](auto j) { T::template store<2 * i() + j()>(&c[i()][j()][0][0], 4 * L); });
    });
  }

  // The head sums of the pass's keys over its head vectors, after those of the passes before
  // (in part); the last pass reduces them into out.
  static void sum_heads(const query& q, const keys& k, int key0, int v0, const results& c,
                        sums& part, float* out) {
    const int n = std::min(pass_vectors, q.padded_heads / L - v0);
    const bool last = v0 + n == q.padded_heads / L;
    for (int i = 0; i < pass_groups; ++i) {
      vf sum[group_keys];
      MQALOGITS_UNROLL
      for (int m = 0; m < group_keys; ++m) sum[m] = v0 == 0 ? I::zero() : part[i][m];
      const int key = key0 + i * group_keys;
      for (int j = 0; j < n; ++j) {
        const int h0 = (v0 + j) * L;
        const auto live = I::live(q.heads - h0);
        const vf wv = I::load(q.w + h0);
        // Unrolled, so that sum[] stays in registers.
        MQALOGITS_UNROLL
        for (int m = 0; m < group_keys; ++m)
          sum[m] =
              I::fma(I::relu(Tile::scaled(q, k, key + m, h0, &c[i][j][m][0]), live), wv, sum[m]);
      }
      if (last) {
        reduce_group<I>(sum, out + key);
      } else {
        MQALOGITS_UNROLL
        for (int m = 0; m < group_keys; ++m) part[i][m] = sum[m];
      }
    }
  }
};

// ---- e4m3 rows in bf16 form (MXFP8, FP8 per-token): TDPBF16PS over 16 pairs per step ----
// As bf16_path: the dot products, times the key's and the head's row scales where they exist.
template <class I, int D, bool KeyScales>
struct bf16_tile {
  using query = host_abi::bf16_query;
  using keys = host_abi::bf16_keys;
  using result = float;
  using vf = typename I::vf;
  static constexpr int L = I::lanes, pairs = D / 2, steps = pairs / 16;
  static_assert(pairs % 16 == 0, "a step takes 16 pairs (64 bytes) of each row");
  static constexpr tile_config config = call_config<L>(64, 16);
  static constexpr std::int64_t key_stride = 4 * pairs;

  static const std::uint32_t* key_step(const keys& k, int key, int s) {
    return k.pairs + std::int64_t{key} * pairs + s * 16;
  }
  static const std::uint32_t* query_step(const query& q, int v, int s) {
    return q.pairs + std::int64_t{s} * 16 * q.padded_heads + v * L;
  }
  static std::int64_t query_stride(const query& q) { return std::int64_t{4} * q.padded_heads; }
  template <int C, int A, int B>
  static void dot() {
    I::tiles::template dot_bf16<C, A, B>();
  }
  static vf scaled(const query& q, const keys& k, int key, int h0, const float* c) {
    vf s = I::load(c);
    if constexpr (KeyScales) {
      s = I::mul(s, I::broadcast(k.scales + key));
      if (q.scales) s = I::mul(s, I::load(q.scales + h0));
    }
    return s;
  }
};
template <class I, int D, bool KeyScales>
using bf16_scores = tile_kernel<I, bf16_tile<I, D, KeyScales>>;

// ---- folded MXFP4 rows (decode.hpp's folded form): TDPBSSD over 64 bytes per step ----
// As i8_fold_path: the exact int32 sum of a row's shifted codes (signed keys: no start), times
// the product of the two row scales, capped.
template <class I, int D>
struct fold_tile {
  using query = host_abi::i8_query;
  using keys = host_abi::i8_keys;
  using result = std::int32_t;
  using vf = typename I::vf;
  static_assert(!I::int8::offset_keys, "TDPBSSD multiplies signed keys");
  static constexpr int L = I::lanes, step_bytes = D < 64 ? D : 64, steps = D / step_bytes;
  static constexpr int scale_words = i8_compact_scale_words<D>;
  static constexpr tile_config config = call_config<L>(step_bytes, step_bytes / 4);
  static constexpr std::int64_t key_stride = i8_key_bytes<D>;

  static const std::uint8_t* key_step(const keys& k, int key, int s) {
    return k.codes + std::int64_t{key} * i8_key_bytes<D> + s * step_bytes;
  }
  // i8_query_word's order: a head vector's D/4 words of L heads, back to back.
  static const std::int32_t* query_step(const query& q, int v, int s) {
    return q.data + (std::int64_t{v} * (D / 4) + s * (step_bytes / 4)) * L;
  }
  static std::int64_t query_stride(const query&) { return 4 * L; }
  template <int C, int A, int B>
  static void dot() {
    I::tiles::template dot_s8<C, A, B>();
  }
  static vf scaled(const query& q, const keys& k, int key, int h0, const std::int32_t* c) {
    const vf both =
        I::cap_infinity(I::mul(I::load(q.scale + h0), I::broadcast(k.scales + key * scale_words)));
    return I::mul(I::to_float(I::loadi(c)), both);
  }
};
template <class I, int D>
using fold_scores = tile_kernel<I, fold_tile<I, D>>;

// ---- MXFP4 (doubled e2m1 codes, per 32-element block): TDPBSSD, one step per block ----
// f(std::integral_constant<int, n>) for a pass over the head vectors from v0: n of them, at
// most 4.
template <class F>
inline void with_pass(int head_vectors, int v0, F f) {
  switch (std::min(4, head_vectors - v0)) {
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

// Its passes take up to 4 head vectors, in C tiles 0-3, and A tile 4 alone: the vectors' work per
// block, not the tiles, bounds it.
template <class I, int D>
struct i8_scores {
  using vf = typename I::vf;
  using T = typename I::tiles;
  static constexpr int L = I::lanes, blocks = D / mx_scale_block, words = mx_scale_block / 4;

  static constexpr int block_accumulators = 4;

  static void score(const host_abi::i8_query& q, const host_abi::i8_keys& k, float* out) {
    static constexpr tile_config config = call_config<L>(mx_scale_block, words);
    const int head_vectors = q.padded_heads / L;
    T::configure(config);
    for (int g = 0; g < call_keys / group_keys; ++g) {
      vf part[group_keys];
      for (vf& p : part) p = I::zero();
      const host_abi::i8_keys group{k.codes + std::int64_t{g} * group_keys * i8_key_bytes<D>,
                                    k.scales + std::int64_t{g} * group_keys * blocks};
      for (int v0 = 0; v0 < head_vectors; v0 += block_accumulators)
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
      T::template load<first_a>(k.codes + b * mx_scale_block, D);
      for_each_tile<N>([&](auto j) {
        constexpr int t = first_b + j() % 2;
        T::template load<t>(q.data + std::int64_t{b} * words * stride + (v0 + j()) * words * L,
                            4 * L);
        T::template dot_s8<j(), first_a, t>();
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
