// The score micro-kernels of the host backend, written once for every instruction set I
// (isa/*.hpp). For one query row (all its heads) and a group of decoded keys they compute
//   out[t] = sum_h relu(dot(q[h], k[t])) * w[h]
// with the heads in vector lanes (Q is stored transposed, [d][heads], decoded once per row) and
// each key broadcast, so the scores of head_vectors x keys live in registers for the whole dot
// product over the D elements of a row; relu, the weight and the head sum are fused right after
// it. Each path is compiled per head dim D (a template parameter): the loops over D stay
// compile-time.
//
// Determinism: a key's lane of work never mixes with another key's, the dot product runs d in
// ascending order, heads are summed per lane in ascending vector order and the lanes reduced in
// a fixed tree. So a logit depends only on its inputs, never on the key group, the tile, the
// work item or the thread that computed it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "../../config.hpp"
#include "isa/ladder.hpp"
#include "kernel_abi.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// ---- the register tile every path accumulates in ----
//
// acc[j][i] holds head vector j of a chunk against key i; the paths differ only in what they
// load per step and how a step updates an accumulator.

#if defined(__GNUC__) || defined(__clang__)
#define MQALOGITS_TILE_INLINE inline __attribute__((always_inline))
#else
#define MQALOGITS_TILE_INLINE inline
#endif

// acc[j][i] = start(j) for every key i.
template <class V, std::size_t HeadVectors, std::size_t Keys, class Start>
MQALOGITS_TILE_INLINE void fill_tile(V (&acc)[HeadVectors][Keys], Start start) {
  MQALOGITS_UNROLL
  for (std::size_t j = 0; j < HeadVectors; ++j) {
    const V v = start(static_cast<int>(j));
    MQALOGITS_UNROLL
    for (std::size_t i = 0; i < Keys; ++i) acc[j][i] = v;
  }
}

// Outer-product step s: loads key operand i as key_at(s, i) once, then for each head vector j
// the head operand head_at(s, j), and sets acc[j][i] = step(acc[j][i], head, key).
template <class V, std::size_t HeadVectors, std::size_t Keys, class HeadAt, class KeyAt, class Step>
MQALOGITS_TILE_INLINE void tile_step(V (&acc)[HeadVectors][Keys], int s, HeadAt head_at,
                                     KeyAt key_at, Step step) {
  using key_operand = decltype(key_at(0, 0));
  key_operand kb[Keys];
  MQALOGITS_UNROLL
  for (std::size_t i = 0; i < Keys; ++i) kb[i] = key_at(s, static_cast<int>(i));
  MQALOGITS_UNROLL
  for (std::size_t j = 0; j < HeadVectors; ++j) {
    const auto qv = head_at(s, static_cast<int>(j));
    MQALOGITS_UNROLL
    for (std::size_t i = 0; i < Keys; ++i) acc[j][i] = step(acc[j][i], qv, kb[i]);
  }
}

// `steps` outer-product steps, in ascending order.
template <class V, std::size_t HeadVectors, std::size_t Keys, class HeadAt, class KeyAt, class Step>
MQALOGITS_TILE_INLINE void accumulate_tile(V (&acc)[HeadVectors][Keys], int steps, HeadAt head_at,
                                           KeyAt key_at, Step step) {
  for (int s = 0; s < steps; ++s) tile_step(acc, s, head_at, key_at, step);
}

// The same with a compile-time step count, unrolled: GCC leaves a loop of 8 steps of 2 x 8 int8
// accumulators rolled, and then copies every accumulator to a new register once per step (two
// moves per vpdpbusd); unrolled, each accumulator stays in one register.
template <int Steps, class V, std::size_t HeadVectors, std::size_t Keys, class HeadAt, class KeyAt,
          class Step>
MQALOGITS_TILE_INLINE void accumulate_tile_unrolled(V (&acc)[HeadVectors][Keys], HeadAt head_at,
                                                    KeyAt key_at, Step step) {
  MQALOGITS_UNROLL
  for (int s = 0; s < Steps; ++s) tile_step(acc, s, head_at, key_at, step);
}

// part[i] += sum over the chunk's head vectors j of relu(score(j, i)) * w, padding heads
// (past `heads`) masked; score(j, i) is the fp32 dot product of head vector v0 + j and key i.
template <class I, int HeadVectors, int Keys, class Score>
MQALOGITS_TILE_INLINE void add_weighted_relu(
    int heads, const float* w, int v0, Score score,
    typename I::vf (&part)[static_cast<std::size_t>(Keys)]) {
  constexpr int L = I::lanes;
  MQALOGITS_UNROLL
  for (int j = 0; j < HeadVectors; ++j) {
    const auto live = I::live(heads - (v0 + j) * L);
    const typename I::vf wv = I::load(w + (v0 + j) * L);
    MQALOGITS_UNROLL
    for (int i = 0; i < Keys; ++i) part[i] = I::fma(I::relu(score(j, i), live), wv, part[i]);
  }
}

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

// ---- the int8 paths' operands ----
//
// Both int8 paths take a query row and a key group in these shapes (each path says its layout).
using i8_query = host_abi::i8_query;
using i8_keys = host_abi::i8_keys;

// Where word `step` (elements 4 step .. 4 step + 3) of head h sits among a run of `steps` words
// of every head: head vectors of Lanes heads, each with its steps back to back. The kernels then
// read every step of a head vector at a compile-time offset from one pointer; with heads
// innermost (a runtime stride between steps) each step needs its own address register, and the
// register pressure makes GCC's Zen tuning spill general registers into vector ones and back.
template <int Lanes>
constexpr int i8_query_word(int steps, int step, int h) {
  return ((h / Lanes) * steps + step) * Lanes + h % Lanes;
}

// ISAs whose per-block kernel sums a block's steps in int16 (I::dot4_int16) and widens them to
// int32 once per block (I::widen_int16), instead of one int32 dot4 per step. The block's start
// then begins the low int16 half of each lane (i8_int16_start).
template <class I>
concept int16_block_sums = requires {
  requires I::int16_block_sums;
};

// A block start as int16 kernels read it: the low half of the lane holds the start (at most
// 12 x 384 = 4608 in magnitude; with the block's pair sums, at most 9216), the high half 0, so
// widening the two halves gives the start plus the block's sum.
constexpr std::int32_t i8_int16_start(std::int32_t start) {
  return static_cast<std::int32_t>(static_cast<std::uint16_t>(start));
}

// Block b's integer sums, for the per-block int8 kernels (i8_path's query and key layouts, keys
// of D bytes): acc[j][i] of head vector v0 + j and key i starts at the block's start (when the
// encoding offsets keys) and adds the block's 8 steps with `step` (I::dot4, or I::dot4_int16 on
// int16_block_sums ISAs).
template <int D, class I, class Vi, std::size_t HeadVectors, std::size_t Keys, class Step>
MQALOGITS_TILE_INLINE void block_sums(const i8_query& q, int v0, const i8_keys& k, int b,
                                      Vi (&acc)[HeadVectors][Keys], Step step) {
  constexpr int L = I::lanes, steps = mx_scale_block / 4;
  const int stride = q.padded_heads;
  const std::int32_t* qd = q.data + b * steps * stride + v0 * steps * L;
  const std::uint8_t* kd = k.codes + b * mx_scale_block;
  fill_tile(acc, [&](int j) {
    if constexpr (I::int8::offset_keys)
      return I::loadi(q.start + b * stride + (v0 + j) * L);
    else
      return I::zeroi();
  });
  accumulate_tile(
      acc, steps, [&](int s, int j) { return I::loadi(qd + (j * steps + s) * L); },
      [&](int s, int i) { return I::broadcast4(kd + i * D + 4 * s); }, step);
}

// ---- int8 path (MXFP4 x MXFP4) ----
//
// Doubled e2m1 values are integers in [-12, 12], so each 32-element block's dot product is exact
// in int32 (I::dot4, in the ISA's own int8 encoding: I::int8), then scaled in fp32 by the
// product of the two block scales. Both scales are powers of two, so that product is exact
// whenever the block's scaled sum can be a normal float, and one multiply-add applies it:
// scaling by one scale first could overflow (a query scale of 2^118 times a block sum of 4608)
// where the scaled sum itself is an ordinary number. A product past the float range is capped
// at the largest float, so an all-zero block stays 0 instead of 0 x inf = NaN; a nonzero sum
// still overflows to infinity, except a sum of +-1, which gives +-the largest float (its exact
// value, at least 2^128, is past the range too).
template <int D>
struct i8_path {
  // One decoded query row: data[b * 8 * padded_heads + i8_query_word<lanes>(8, s, h)] is the 4
  // bytes (s8) of elements 4s..4s+3 of block b of head h, in the stored block order;
  // start[b * padded_heads + h] the accumulator start of that block (I::int8::block_start, as
  // i8_int16_start on int16_block_sums ISAs; only read when the encoding offsets keys); scale[b *
  // padded_heads + h] the block scale over 4 (the doubling); w[h]. Padded heads hold zeros.
  using query = i8_query;
  // `keys` decoded keys of i8_key_bytes<D> (I::int8::key_code bytes) and their keys x D/32 block
  // scales.
  using keys = i8_keys;
  static constexpr int key_bytes = D;
  template <class I>
  static constexpr const auto& blocks() {
    return I::i8_blocks;
  }

  template <class I, int HeadVectors, int Keys>
  static void chunk(const query& q, int v0, const keys& k,
                    typename I::vf (&part)[static_cast<std::size_t>(Keys)]) {
    using vf = typename I::vf;
    using vi = typename I::vi;
    constexpr int L = I::lanes;
    constexpr int blocks = D / mx_scale_block;
    const int stride = q.padded_heads;
    vf f[std::size_t{HeadVectors}][std::size_t{Keys}];
    fill_tile(f, [](int) { return I::zero(); });
    for (int b = 0; b < blocks; ++b) {
      vi acc[std::size_t{HeadVectors}][std::size_t{Keys}];
      if constexpr (int16_block_sums<I>) {
        block_sums<D, I>(q, v0, k, b, acc,
                         [](vi a, vi qv, vi kv) { return I::dot4_int16(a, kv, qv); });
        MQALOGITS_UNROLL
        for (int j = 0; j < HeadVectors; ++j) {
          MQALOGITS_UNROLL
          for (int i = 0; i < Keys; ++i) acc[j][i] = I::widen_int16(acc[j][i]);
        }
      } else {
        block_sums<D, I>(q, v0, k, b, acc, [](vi a, vi qv, vi kv) { return I::dot4(a, kv, qv); });
      }
      MQALOGITS_UNROLL
      for (int j = 0; j < HeadVectors; ++j) {
        const vf qs = I::load(q.scale + b * stride + (v0 + j) * L);
        MQALOGITS_UNROLL
        for (int i = 0; i < Keys; ++i) {
          const vf both = I::cap_infinity(I::mul(qs, I::broadcast(k.scales + i * blocks + b)));
          f[j][i] = I::fma(I::to_float(acc[j][i]), both, f[j][i]);
        }
      }
    }
    add_weighted_relu<I, HeadVectors, Keys>(
        q.heads, q.w, v0, [&](int j, int i) { return f[j][i]; }, part);
  }
};

// Words per key of the compact int8 forms' key scales (tile_buffers::fold_scales): a folded
// key uses the first (its row scale), a relative key all of them (its block multipliers, then
// its base scale).
template <int D>
inline constexpr int i8_compact_scale_words = D / mx_scale_block + 1;

// ---- folded int8 path (MXFP4 rows whose block exponents fold, decode.hpp) ----
//
// Query and key rows with their block codes shifted to each row's smallest exponent: the whole
// dot product is one exact int32 sum (|sum| <= 128 x 96 x 96 < 2^24, so its conversion
// to fp32 is exact too), scaled once by the product of the two rows' scales (capped like the
// per-block path's, so an all-zero sum stays 0).
// Its members follow i8_path's (the interface score_keys takes) and its chunk reads the same
// words, but kept apart: tiles built from shared lambdas were scheduled differently by GCC.
template <int D>
struct i8_fold_path {
  // data[i8_query_word<lanes>(D / 4, s, h)]: the 4 bytes of elements 4s..4s+3 of head h (stored
  // block order); start[h] the accumulator start (I::int8::fold_start); scale[h] the row scale
  // over 4.
  using query = i8_query;
  // `keys` folded keys of i8_key_bytes<D> bytes and their row scales (the first of each key's
  // i8_compact_scale_words<D>).
  using keys = i8_keys;
  static constexpr int key_bytes = D;
  template <class I>
  static constexpr const auto& blocks() {
    return I::i8_fold_blocks;
  }

  template <class I, int HeadVectors, int Keys>
  static void chunk(const query& q, int v0, const keys& k,
                    typename I::vf (&part)[static_cast<std::size_t>(Keys)]) {
    using vf = typename I::vf;
    using vi = typename I::vi;
    constexpr int L = I::lanes, scale_words = i8_compact_scale_words<D>;
    vi acc[std::size_t{HeadVectors}][std::size_t{Keys}];
    fill_tile(acc, [&](int j) { return I::loadi(q.start + (v0 + j) * L); });
    // One block's 8 steps unrolled at a time.
    constexpr int steps = mx_scale_block / 4;
    for (int b = 0; b < D / mx_scale_block; ++b) {
      const std::int32_t* qd = q.data + (v0 * (D / 4) + b * steps) * L;
      const std::uint8_t* kd = k.codes + b * mx_scale_block;
      accumulate_tile_unrolled<steps>(
          acc, [&](int s, int j) { return I::loadi(qd + (j * (D / 4) + s) * L); },
          [&](int s, int i) { return I::broadcast4(kd + i * key_bytes + 4 * s); },
          [](vi a, vi qv, vi kv) { return I::dot4(a, kv, qv); });
    }
    vf f[std::size_t{HeadVectors}][std::size_t{Keys}];
    MQALOGITS_UNROLL
    for (int j = 0; j < HeadVectors; ++j) {
      const vf qs = I::load(q.scale + (v0 + j) * L);
      MQALOGITS_UNROLL
      for (int i = 0; i < Keys; ++i)
        f[j][i] = I::mul(I::to_float(acc[j][i]),
                         I::cap_infinity(I::mul(qs, I::broadcast(k.scales + i * scale_words))));
    }
    add_weighted_relu<I, HeadVectors, Keys>(
        q.heads, q.w, v0, [&](int j, int i) { return f[j][i]; }, part);
  }
};

// ---- relative int8 path (MXFP4 on ISAs that sum blocks in int16: isa/base.hpp's rel_spread) ----
//
// ISAs with I::relative_rows: the per-block kernel (int16 block sums, I::dot4_int16) with a
// shorter epilogue. Per key and block, its sums widen against the key block's multiplier
// 2^(e_b - e_min) (I::widen_int16_by) and take one multiply-add by the query block scale, where
// i8_path widens, converts, multiplies the two scales, caps and multiplies-adds; the key's base
// scale 2^(e_min - 127) multiplies each head's sum once, before the relu. The same logits as
// i8_path, bit for bit, for rows within the form's range (decode.hpp takes the others there).
template <class I>
concept relative_rows = requires {
  requires I::relative_rows;
};

template <int D>
struct i8_rel_path {
  // The per-block query (i8_path's), of a row whose block exponents lie in the form's range.
  using query = i8_query;
  // `keys` keys of i8_path's codes; scales: per key i8_compact_scale_words<D> words, the D/32
  // block multipliers (int32: 2^(e_b - e_min) in both int16 halves), then the base scale.
  using keys = i8_keys;
  static constexpr int key_bytes = D;
  template <class I>
  static constexpr const auto& blocks() {
    return I::i8_rel_blocks;
  }

  template <class I, int HeadVectors, int Keys>
  static void chunk(const query& q, int v0, const keys& k,
                    typename I::vf (&part)[static_cast<std::size_t>(Keys)]) {
    using vf = typename I::vf;
    using vi = typename I::vi;
    constexpr int L = I::lanes;
    constexpr int blocks = D / mx_scale_block, words = i8_compact_scale_words<D>;
    const int stride = q.padded_heads;
    // Word n of key i's scales, as bytes (the multipliers are integers).
    auto word = [&](int i, int n) {
      return reinterpret_cast<const std::uint8_t*>(k.scales + i * words + n);
    };
    vf f[std::size_t{HeadVectors}][std::size_t{Keys}];
    fill_tile(f, [](int) { return I::zero(); });
    for (int b = 0; b < blocks; ++b) {
      vi acc[std::size_t{HeadVectors}][std::size_t{Keys}];
      block_sums<D, I>(q, v0, k, b, acc,
                       [](vi a, vi qv, vi kv) { return I::dot4_int16(a, kv, qv); });
      MQALOGITS_UNROLL
      for (int j = 0; j < HeadVectors; ++j) {
        const vf qs = I::load(q.scale + b * stride + (v0 + j) * L);
        MQALOGITS_UNROLL
        for (int i = 0; i < Keys; ++i)
          f[j][i] = I::fma(I::to_float(I::widen_int16_by(acc[j][i], I::broadcast4(word(i, b)))), qs,
                           f[j][i]);
      }
    }
    MQALOGITS_UNROLL
    for (int i = 0; i < Keys; ++i) {
      const vf base = I::broadcast(k.scales + i * words + blocks);
      MQALOGITS_UNROLL
      for (int j = 0; j < HeadVectors; ++j) f[j][i] = I::mul(f[j][i], base);
    }
    add_weighted_relu<I, HeadVectors, Keys>(
        q.heads, q.w, v0, [&](int j, int i) { return f[j][i]; }, part);
  }
};

// ---- the loop over a row's head vectors, shared by every path ----

// Scores Keys keys against every head of the row: chunks of HeadVectors head vectors, then one
// narrower chunk for the rest.
template <class I, class Path, int HeadVectors, int Keys>
void score_keys(const typename Path::query& q, const typename Path::keys& k, float* out) {
  using vf = typename I::vf;
  vf part[static_cast<std::size_t>(Keys)];
  MQALOGITS_UNROLL
  for (int i = 0; i < Keys; ++i) part[i] = I::zero();
  const int head_vectors = q.padded_heads / I::lanes;
  int v = 0;
  for (; v + HeadVectors <= head_vectors; v += HeadVectors)
    Path::template chunk<I, HeadVectors, Keys>(q, v, k, part);
  [&]<int... rest>(std::integer_sequence<int, rest...>) {
    ((head_vectors - v == rest + 1 ? Path::template chunk<I, rest + 1, Keys>(q, v, k, part)
                                   : void()),
     ...);
  }
  (std::make_integer_sequence<int, HeadVectors - 1>{});
  MQALOGITS_UNROLL
  for (int i = 0; i < Keys; ++i) out[i] = I::reduce(part[i]);
}

template <class Path>
using keys_kernel = host_abi::keys_kernel<typename Path::query, typename Path::keys>;

// The kernel of ISA I's first blocking that takes rows of `head_vectors` head vectors (heads
// rounded up to the vector width, over the width).
template <class I, class Path>
keys_kernel<Path> select_kernel(int head_vectors) {
  constexpr const auto& blocks = Path::template blocks<I>();
  constexpr int count = static_cast<int>(sizeof blocks / sizeof blocks[0]);
  static_assert(blocks[count - 1].min_head_vectors == 1, "the last blocking must take any row");
  return [&]<int... n>(std::integer_sequence<int, n...>) {
    static_assert(((blocks[n].keys <= max_group_keys) && ...), "key tiles are padded less");
    const int chosen = chosen_block<blocks>(head_vectors);
    keys_kernel<Path> kernel{nullptr, 0};
    (void)((n == chosen ? (kernel = {&score_keys<I, Path, blocks[n].head_vectors, blocks[n].keys>,
                                     blocks[n].keys},
                           true)
                        : false) ||
           ...);
    return kernel;
  }
  (std::make_integer_sequence<int, count>{});
}

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
