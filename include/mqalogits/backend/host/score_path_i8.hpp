// The int8 score path of MXFP4 (per 32-element block, exact integer sums) and the operand
// layouts every int8 path shares.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../config.hpp"
#include "isa/base.hpp"
#include "kernel_abi.hpp"
#include "score_tile.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

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

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
