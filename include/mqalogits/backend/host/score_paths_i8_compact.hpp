// The compact int8 score paths of MXFP4: folded rows (one exact sum per row) and relative rows
// (int16 block sums widened against each key block's multiplier).
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../config.hpp"
#include "isa/base.hpp"
#include "kernel_abi.hpp"
#include "score_path_i8.hpp"
#include "score_tile.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

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
// Its chunk is i8_path's block loop with another epilogue, kept apart for i8_fold_path's reason.
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

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
