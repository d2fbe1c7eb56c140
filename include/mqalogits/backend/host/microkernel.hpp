// The score micro-kernels of the host backend. For one query row (all its heads) and a group of
// NK decoded keys they compute
//   out[t] = sum_h relu(dot(q[h], k[t])) * w[h]
// with the heads in vector lanes (Q is stored transposed, [d][heads], decoded once per row) and
// each key broadcast, so the scores of HC head vectors x NK keys live in registers for the whole
// 128-long dot product; relu, the weight and the head sum are fused right after it.
//
// Determinism: a key's lane of work never mixes with another key's, the dot product runs d in
// ascending order, heads are summed per lane in ascending vector order and the lanes reduced in
// a fixed tree. So a logit depends only on its inputs, never on the key group, the tile, the
// work item or the thread that computed it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../config.hpp"
#include "simd.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// ---- fp32 path (MXFP8 and any other format decoded to fp32) ----

// One decoded query row: qt[d * hp + h] (hp = heads rounded up to the vector width, padded
// heads hold zeros) and w[h] (zero on padding).
struct q_f32_row {
  const float* qt;
  const float* w;
  int heads, hp;
};

template <class I, int HC, int NK>
inline void f32_chunk(const q_f32_row& q, int v0, const float* k,
                      typename I::vf (&part)[static_cast<std::size_t>(NK)]) {
  using vf = typename I::vf;
  constexpr int L = I::lanes;
  vf acc[static_cast<std::size_t>(HC)][static_cast<std::size_t>(NK)];
  MQALOGITS_UNROLL
  for (int j = 0; j < HC; ++j) {
    MQALOGITS_UNROLL
    for (int i = 0; i < NK; ++i) acc[j][i] = I::zero();
  }
  const float* qd = q.qt + v0 * L;
  for (int d = 0; d < head_dim; ++d, qd += q.hp) {
    vf kb[static_cast<std::size_t>(NK)];
    MQALOGITS_UNROLL
    for (int i = 0; i < NK; ++i) kb[i] = I::broadcast(k + i * head_dim + d);
    MQALOGITS_UNROLL
    for (int j = 0; j < HC; ++j) {
      const vf qv = I::load(qd + j * L);
      MQALOGITS_UNROLL
      for (int i = 0; i < NK; ++i) acc[j][i] = I::fma(qv, kb[i], acc[j][i]);
    }
  }
  MQALOGITS_UNROLL
  for (int j = 0; j < HC; ++j) {
    const auto live = I::live(q.heads - (v0 + j) * L);
    const vf wv = I::load(q.w + (v0 + j) * L);
    MQALOGITS_UNROLL
    for (int i = 0; i < NK; ++i) part[i] = I::fma(I::relu(acc[j][i], live), wv, part[i]);
  }
}

// k: NK rows of 128 fp32 (rows past the caller's count may hold anything readable).
template <class I, int HC, int NK>
void f32_keys(const q_f32_row& q, const float* k, float* out) {
  using vf = typename I::vf;
  vf part[static_cast<std::size_t>(NK)];
  MQALOGITS_UNROLL
  for (int i = 0; i < NK; ++i) part[i] = I::zero();
  const int hv = q.hp / I::lanes;
  int v = 0;
  for (; v + HC <= hv; v += HC) f32_chunk<I, HC, NK>(q, v, k, part);
  if constexpr (HC > 1) {
    const int rest = hv - v;
    if (rest == 1) f32_chunk<I, 1, NK>(q, v, k, part);
    if constexpr (HC > 2)
      if (rest == 2) f32_chunk<I, 2, NK>(q, v, k, part);
    if constexpr (HC > 3)
      if (rest == 3) f32_chunk<I, 3, NK>(q, v, k, part);
  }
  MQALOGITS_UNROLL
  for (int i = 0; i < NK; ++i) out[i] = I::reduce(part[i]);
}

// ---- int8 path (MXFP4 x MXFP4) ----
//
// Doubled e2m1 values are integers in [-12, 12], so each 32-element block's dot product is exact
// in int32 (vpdpbusd), then scaled by both block scales in fp32. vpdpbusd multiplies unsigned
// by signed bytes: keys are stored biased, k + 12 in [0, 24], and the accumulator of each block
// starts at -12 * sum(q over the block), which the bias adds back. Inside a block the elements
// sit in any fixed order, the same for Q and K (integer sums do not care).

// One decoded query row: data[(b * 8 + s) * hp + h] is the 4 bytes (s8) of elements 4s..4s+3
// of block b of head h; bias[b * hp + h] = -12 * sum of that block; scale[b * hp + h] is the
// block scale over 4 (the doubling); w[h]. Padded heads hold zeros.
struct q_i8_row {
  const std::int32_t* data;
  const std::int32_t* bias;
  const float* scale;
  const float* w;
  int heads, hp;
};

inline constexpr int i8_key_bytes = head_dim;  // one decoded key: 128 biased u8 values

template <class I, int HC, int NK>
inline void i8_chunk(const q_i8_row& q, int v0, const std::uint8_t* k, const float* ks,
                     typename I::vf (&part)[static_cast<std::size_t>(NK)]) {
  using vf = typename I::vf;
  using vi = typename I::vi;
  constexpr int L = I::lanes;
  constexpr int blocks = head_dim / scale_block, steps = scale_block / 4;
  vf f[static_cast<std::size_t>(HC)][static_cast<std::size_t>(NK)];
  MQALOGITS_UNROLL
  for (int j = 0; j < HC; ++j) {
    MQALOGITS_UNROLL
    for (int i = 0; i < NK; ++i) f[j][i] = I::zero();
  }
  for (int b = 0; b < blocks; ++b) {
    vi acc[static_cast<std::size_t>(HC)][static_cast<std::size_t>(NK)];
    MQALOGITS_UNROLL
    for (int j = 0; j < HC; ++j) {
      const vi bias = I::loadi(q.bias + b * q.hp + (v0 + j) * L);
      MQALOGITS_UNROLL
      for (int i = 0; i < NK; ++i) acc[j][i] = bias;
    }
    const std::int32_t* qd = q.data + b * steps * q.hp + v0 * L;
    for (int s = 0; s < steps; ++s, qd += q.hp) {
      vi kb[static_cast<std::size_t>(NK)];
      MQALOGITS_UNROLL
      for (int i = 0; i < NK; ++i)
        kb[i] = I::broadcast4(k + i * i8_key_bytes + b * scale_block + 4 * s);
      MQALOGITS_UNROLL
      for (int j = 0; j < HC; ++j) {
        const vi qv = I::loadi(qd + j * L);
        MQALOGITS_UNROLL
        for (int i = 0; i < NK; ++i) acc[j][i] = I::dot4(acc[j][i], kb[i], qv);
      }
    }
    MQALOGITS_UNROLL
    for (int j = 0; j < HC; ++j) {
      const vf qs = I::load(q.scale + b * q.hp + (v0 + j) * L);
      MQALOGITS_UNROLL
      for (int i = 0; i < NK; ++i)
        f[j][i] =
            I::fma(I::mul(I::to_float(acc[j][i]), qs), I::broadcast(ks + i * blocks + b), f[j][i]);
    }
  }
  MQALOGITS_UNROLL
  for (int j = 0; j < HC; ++j) {
    const auto live = I::live(q.heads - (v0 + j) * L);
    const vf wv = I::load(q.w + (v0 + j) * L);
    MQALOGITS_UNROLL
    for (int i = 0; i < NK; ++i) part[i] = I::fma(I::relu(f[j][i], live), wv, part[i]);
  }
}

// k: NK decoded keys of i8_key_bytes; ks: NK x 4 block scales.
template <class I, int HC, int NK>
void i8_keys(const q_i8_row& q, const std::uint8_t* k, const float* ks, float* out) {
  using vf = typename I::vf;
  vf part[static_cast<std::size_t>(NK)];
  MQALOGITS_UNROLL
  for (int i = 0; i < NK; ++i) part[i] = I::zero();
  const int hv = q.hp / I::lanes;
  int v = 0;
  for (; v + HC <= hv; v += HC) i8_chunk<I, HC, NK>(q, v, k, ks, part);
  if constexpr (HC > 1) {
    const int rest = hv - v;
    if (rest == 1) i8_chunk<I, 1, NK>(q, v, k, ks, part);
    if constexpr (HC > 2)
      if (rest == 2) i8_chunk<I, 2, NK>(q, v, k, ks, part);
    if constexpr (HC > 3)
      if (rest == 3) i8_chunk<I, 3, NK>(q, v, k, ks, part);
  }
  MQALOGITS_UNROLL
  for (int i = 0; i < NK; ++i) out[i] = I::reduce(part[i]);
}

// ---- register blocking per instruction set ----
//
// HC head vectors x NK keys of accumulators, plus NK broadcast keys and one Q vector, fill the
// register file without spilling: 32 registers with AVX-512, 16 with AVX2.

inline constexpr int max_group_keys = 16;  // the largest NK below; key tiles are padded by it

template <class F>
struct keys_kernel {
  F fn;
  int nk;  // keys per call
};

using f32_fn = void (*)(const q_f32_row&, const float*, float*);
using i8_fn = void (*)(const q_i8_row&, const std::uint8_t*, const float*, float*);

// hv: head vectors of the row (heads rounded up to the vector width, over the width).
template <class I>
keys_kernel<f32_fn> select_f32(int hv) {
  if constexpr (I::lanes == 16) {
    if (hv >= 4) return {&f32_keys<I, 4, 6>, 6};
    if (hv == 3) return {&f32_keys<I, 3, 7>, 7};
    if (hv == 2) return {&f32_keys<I, 2, 10>, 10};
    return {&f32_keys<I, 1, 14>, 14};
  } else {
    if (hv >= 2) return {&f32_keys<I, 2, 4>, 4};
    return {&f32_keys<I, 1, 6>, 6};
  }
}

// The int8 path also keeps HC x NK fp32 block-scaled sums live across the 4 blocks.
template <class I>
keys_kernel<i8_fn> select_i8(int hv) {
  if constexpr (I::lanes == 16) {
    if (hv >= 2) return {&i8_keys<I, 2, 6>, 6};
    return {&i8_keys<I, 1, 10>, 10};
  } else {
    if (hv >= 2) return {&i8_keys<I, 2, 4>, 4};
    return {&i8_keys<I, 1, 6>, 6};
  }
}

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
