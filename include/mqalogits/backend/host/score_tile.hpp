// The register tile every score path accumulates in, and the epilogue they share: relu, the
// head weight and the sum over heads, fused right after the dot products.
#pragma once

#include <cstddef>

#include "../../config.hpp"
#include "isa/base.hpp"

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

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
