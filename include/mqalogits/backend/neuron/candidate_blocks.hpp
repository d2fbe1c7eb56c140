// The cost of DeepSeek V4.1's candidate blocks on the NeuronCore model: per row the N blocks of
// B columns with the largest block-max logit (ml::candidate_blocks), selected after the logits
// as the schedule would: VectorE reduces each block of B fp32 logits to its max (one pass over
// the row), then the block maxima go through the exact top-k of topk.hpp (bf16 keys and the
// threshold compare on VectorE, nisa.topk and the exact fp32 sort of the candidates on GpSimd).
//
//   neuron_backend::candidate_blocks_cost<backend::trn2>(rows, cols, B, N);
//
// adds that cost to the thread's capture (nothing without one). A logits kernel called with
// ml::candidate_blocks (alone or beside a top-k: ml::topk_and_candidates) charges it in the
// call's report; the blocks themselves come from the output policy, fed the model's fp32 logits,
// so they equal the host's bit for bit.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../config.hpp"
#include "core.hpp"
#include "report.hpp"
#include "topk.hpp"
#include "traits.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

template <class Gen>
void candidate_blocks_cost(std::int64_t rows, std::int64_t cols, std::int64_t block,
                           std::int64_t n) {
  using tr = traits<Gen>;
  const capture_state cap = current_capture();
  if (!cap.target || rows <= 0 || cols <= 0 || block <= 0 || n <= 0) return;
  core<Gen> c(false);
  const std::int64_t blocks = (cols + block - 1) / block, k = std::min(n, blocks);
  const std::int64_t segs = (blocks + topk_segment - 1) / topk_segment;
  const bool whole = blocks <= topk_whole_row;  // one nisa.topk over the row's block maxima
  for (std::int64_t r0 = 0; r0 < rows; r0 += 128) {
    const int R = static_cast<int>(std::min<std::int64_t>(128, rows - r0));
    for (std::int64_t s = 0; s < segs; ++s) {
      const std::int64_t m = std::min(topk_segment, blocks - s * topk_segment);
      {
        auto t = c.dma();  // the segment's fp32 logits in
        for (int r = 0; r < R; ++r) t.row(m * block * 4);
      }
      c.vector_elementwise(m * block, 1);  // block max (tensor_reduce over B)
      c.vector_elementwise(m, 1);          // bf16 keys of the maxima
      if (!whole) c.topk_cost(R, m, std::min(k, m));
    }
    if (whole)
      c.topk_cost(R, blocks, k);
    else
      c.topk_cost(R, segs * std::min(k, topk_segment), k);
    for (std::int64_t s = 0; s < segs; ++s)  // threshold compare
      c.vector_elementwise(std::min(topk_segment, blocks - s * topk_segment), 1);
    sort_candidates(c, R, k);
    auto t = c.dma();  // block ids out
    for (int r = 0; r < R; ++r) t.row(n * 4);
  }
  report& r = *cap.target;
  accumulate(r, c.counters());
  r.calls += 1;
  if (r.logical_cores > 1)
    r.lnc_core_seconds += c.counters().single_core_seconds() / r.logical_cores;
  r.floor.gpsimd_topk_s += static_cast<double>(rows) / tr::topk_rows_per_call *
                           static_cast<double>(tr::topk_cycles_per_element * blocks + k) /
                           tr::gpsimd_hz;
}

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
