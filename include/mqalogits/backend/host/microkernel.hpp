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
//
// Its parts: score_tile.hpp (the register tile and the head-sum epilogue), score_paths_float.hpp
// (fp32, bf16), score_path_i8.hpp (per-block int8) and score_paths_i8_compact.hpp (folded and
// relative int8); this header runs a path over a row's head vectors and picks its blocking.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "../../config.hpp"
#include "isa/ladder.hpp"
#include "kernel_abi.hpp"
#include "score_path_i8.hpp"
#include "score_paths_float.hpp"
#include "score_paths_i8_compact.hpp"
#include "score_tile.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

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
