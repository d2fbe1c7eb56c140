// Top-k selection of fp32 logits rows on the NeuronCore model: the indexer's selection step
// (DeepSeek-V3.2 keeps 2048 columns per query row), as AWS's sparse-attention indexer does it
// with nisa.topk on GpSimd, here made exact.
//
//   neuron_backend::topk<backend::trn3>(logits, valid, k, indices, values);
//
// Per row: indices [k] int32, the columns of the k largest valid logits in descending order of
// value, ties to the lower column, NaN above +inf (as torch.topk), -1 padding a row with fewer
// than k valid columns; values [k] (optional: data null) those logits, -inf where the index is
// -1. The selection equals a stable sort of the row's valid fp32 logits, exactly.
//
// The modelled schedule, per block of <= 128 rows (rows on partitions) and per segment of 8192
// columns: DMA of the fp32 segment into SBUF; VectorE rounds it to bf16 (monotone: the exact top
// k are among the bf16 top k and every column tying with the k-th bf16 value); nisa.topk on
// GpSimd (bf16, 8 rows per call, ~4n + k cycles) over the row's keys gives each row's bf16
// threshold (rows of more than 32768 columns: one call per segment keeps its k best, and a last
// one over the segments' candidates gives the threshold); VectorE marks the columns at or
// above it; GpSimd sorts those candidates exactly in fp32 (~c log2 c cycles for c candidates,
// derived) in runs of at most 4096 (value, index) pairs, 32 KiB per partition; more candidates
// than one run (a k of thousands, up to the whole row) go to HBM run by run and come back
// through a merge on GpSimd (~c log2(runs) cycles, derived); DMA writes indices and values. So
// SBUF holds one segment, one run and the keys of at most 32768 columns: any k up to the row
// length is taken.
// Inside a kernel (an output policy) the segments come from SBUF score tiles instead of HBM.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "../../check/extent.hpp"
#include "../../check/overlap.hpp"
#include "../../config.hpp"
#include "../../error.hpp"
#include "../../format/bf16.hpp"
#include "../../std_abi.hpp"
#include "../../view/matrix_view.hpp"
#include "core.hpp"
#include "report.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// Columns per top-k segment: 32 KiB of fp32 per partition.
inline constexpr std::int64_t topk_segment = 8192;
// Rows of up to this many columns keep their bf16 keys whole in SBUF (64 KiB per partition) and
// go through one nisa.topk (which takes up to 65535 elements [isa topk]); longer rows take one
// per segment and a merge over the segments' candidates.
inline constexpr std::int64_t topk_whole_row = 32768;
// Candidates per sorted run: 4096 fp32 values and their indices, 32 KiB per partition.
inline constexpr std::int64_t topk_run = 4096;

namespace detail_topk {
// Ranking order: NaN first, then by value descending, ties by the lower column.
inline bool ranks_before(float a, std::int64_t ia, float b, std::int64_t ib) {
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (na != nb) return na;
  if (!na && a != b) return a > b;
  return ia < ib;
}
// bf16 rounding as the threshold pass sees it (NaN stays NaN, ranked first).
inline float bf16_key(float v) {
  return bf16::from_float(v).to_float();
}
}  // namespace detail_topk

namespace detail_topk {
inline std::int64_t ceil_log2(std::int64_t n) {
  return static_cast<std::int64_t>(std::ceil(std::log2(std::max(2.0, static_cast<double>(n)))));
}
}  // namespace detail_topk

// The exact fp32 sort of `candidates` (value, index) pairs per row of R rows: runs of at most
// topk_run sorted on GpSimd in SBUF; with more than one run, each is written to HBM and a merge
// streams them back.
template <class Gen>
void sort_candidates(core<Gen>& c, int R, std::int64_t candidates) {
  const std::int64_t runs = (candidates + topk_run - 1) / topk_run;
  const std::int64_t run = std::min(candidates, topk_run);
  tile picked = c.sbuf("top-k sorted run (values, indices)", dtype::fp32, 128, 2 * run);
  for (std::int64_t i = 0; i < runs; ++i) {
    const std::int64_t m = std::min(run, candidates - i * run);
    c.gpsimd_elementwise(m * detail_topk::ceil_log2(m), 1);
    if (runs == 1) break;
    auto t = c.dma();  // the run out to HBM
    for (int r = 0; r < R; ++r) t.row(m * 8);
  }
  if (runs == 1) return;
  for (std::int64_t i = 0; i < runs; ++i) {  // the runs back, merged
    const std::int64_t m = std::min(run, candidates - i * run);
    {
      auto t = c.dma();
      for (int r = 0; r < R; ++r) t.row(m * 8);
    }
    c.gpsimd_elementwise(m * detail_topk::ceil_log2(runs), 1);
  }
}

// logits [rows, cols] fp32; valid: [rows, cols] 0/1 (data null: every column valid); k >= 1;
// indices [rows, k]; values [rows, k] or data null. Adds its cost to the thread's capture.
// Checks topk's arguments; a named error before anything is written.
inline void check_topk_arguments(const char* generation, matrix_view<const float> logits,
                                 matrix_view<const std::uint8_t> valid, std::int64_t k,
                                 matrix_view<std::int32_t> indices, matrix_view<float> values) {
  using mqalogits::detail::require;
  const mqalogits::detail::where3 where{"neuron_backend::topk (", generation, ")"};
  require(k >= 1, where, [&](auto& m) { m << "k = " << k << " must be >= 1"; });
  require(logits.rows >= 0 && logits.cols >= 1 && (logits.rows == 0 || logits.data) &&
              logits.stride >= logits.cols,
          where, [&](auto& m) {
            m << "logits [" << logits.rows << ", " << logits.cols << "] stride " << logits.stride
              << " is not a non-empty row-major matrix";
          });
  require(logits.cols <= std::numeric_limits<std::int32_t>::max(), where, [&](auto& m) {
    m << "logits has " << logits.cols << " columns, more than int32 indexes";
  });
  require(!valid.data || (valid.rows == logits.rows && valid.cols == logits.cols &&
                          valid.stride >= valid.cols),
          where, [&](auto& m) {
            m << "valid [" << valid.rows << ", " << valid.cols << "] must match logits ["
              << logits.rows << ", " << logits.cols << "]";
          });
  require(indices.rows == logits.rows && indices.cols == k && indices.stride >= k &&
              (logits.rows == 0 || indices.data),
          where, [&](auto& m) {
            m << "indices [" << indices.rows << ", " << indices.cols << "] must be [" << logits.rows
              << ", " << k << "]";
          });
  require(!values.data || (values.rows == logits.rows && values.cols == k && values.stride >= k),
          where, [&](auto& m) {
            m << "values [" << values.rows << ", " << values.cols << "] must be [" << logits.rows
              << ", " << k << "]";
          });
  // Extents that fit in the address space, then no output over an input or the other output:
  // rows are written while later rows of the logits are still read.
  namespace d = mqalogits::detail;
  constexpr const char* fn = "neuron_backend::topk";
  d::check_matrix_extent(fn, "logits", logits);
  if (valid.data) d::check_matrix_extent(fn, "valid", valid);
  d::check_matrix_extent(fn, "indices", indices);
  if (values.data) d::check_matrix_extent(fn, "values", values);
  d::check_outputs_disjoint(fn, {d::range_of("indices", indices), d::range_of("values", values)},
                            {d::range_of("logits", logits), d::range_of("valid", valid)});
}

// Row `row` of the selection, exactly (a stable sort of its valid logits, NaN first), into
// indices / values; returns how many columns reach the k-th best bf16 key (the candidates the
// exact sort on GpSimd takes).
inline std::int64_t select_row(matrix_view<const float> logits,
                               matrix_view<const std::uint8_t> valid, std::int64_t k,
                               std::int64_t row, matrix_view<std::int32_t> indices,
                               matrix_view<float> values, detail::vector<std::int64_t>& order) {
  const std::int64_t n = logits.cols;
  const float* x = logits.row(row);
  auto ok = [&](std::int64_t i) { return !valid.data || valid(row, i) != 0; };
  order.clear();
  for (std::int64_t i = 0; i < n; ++i)
    if (ok(i)) order.push_back(i);
  const std::int64_t take = std::min<std::int64_t>(k, static_cast<std::int64_t>(order.size()));
  std::int64_t cand = 0;
  // Candidates: at or above the k-th best bf16 key (NaN counts as the best).
  if (take > 0) {
    detail::vector<std::int64_t> by_key = order;
    auto key_before = [&](std::int64_t a, std::int64_t b) {
      return detail_topk::ranks_before(detail_topk::bf16_key(x[a]), 0, detail_topk::bf16_key(x[b]),
                                       0);
    };
    std::nth_element(by_key.begin(), by_key.begin() + (take - 1), by_key.end(), key_before);
    const float t = detail_topk::bf16_key(x[by_key[static_cast<std::size_t>(take - 1)]]);
    for (std::int64_t i : order)
      cand +=
          std::isnan(t) ? std::isnan(x[i]) : (std::isnan(x[i]) || detail_topk::bf16_key(x[i]) >= t);
  }
  std::partial_sort(
      order.begin(), order.begin() + take, order.end(),
      [&](std::int64_t a, std::int64_t b) { return detail_topk::ranks_before(x[a], a, x[b], b); });
  for (std::int64_t j = 0; j < k; ++j) {
    const bool has = j < take;
    indices(row, j) = has ? static_cast<std::int32_t>(order[static_cast<std::size_t>(j)]) : -1;
    if (values.data)
      values(row, j) =
          has ? x[order[static_cast<std::size_t>(j)]] : -std::numeric_limits<float>::infinity();
  }
  return cand;
}

template <class Gen>
void topk(matrix_view<const float> logits, matrix_view<const std::uint8_t> valid, std::int64_t k,
          matrix_view<std::int32_t> indices, matrix_view<float> values) {
  using tr = traits<Gen>;
  check_topk_arguments(tr::name, logits, valid, k, indices, values);
  const capture_state cap = current_capture();
  const bool compute = !(cap.target && cap.options.cost_only);
  core<Gen> c(compute);
  const std::int64_t n = logits.cols, segs = (n + topk_segment - 1) / topk_segment;
  const std::int64_t seg_cols = std::min(n, topk_segment);
  const bool whole = n <= topk_whole_row;
  tile seg = c.sbuf("top-k segment", dtype::fp32, 128, seg_cols);
  tile keys = c.sbuf("top-k bf16 keys", dtype::bf16, 128, whole ? n : seg_cols);
  detail::vector<std::int64_t> order;
  for (std::int64_t r0 = 0; r0 < logits.rows; r0 += 128) {
    const int R = static_cast<int>(std::min<std::int64_t>(128, logits.rows - r0));
    // The schedule's costs: segments in, bf16 keys, nisa.topk per segment and over candidates.
    for (std::int64_t s = 0; s < segs; ++s) {
      const std::int64_t c0 = s * topk_segment, m = std::min(topk_segment, n - c0);
      {
        auto t = c.dma();
        for (int r = 0; r < R; ++r)
          t.values_in(window(seg), r, 0, compute ? logits.row(r0 + r) + c0 : nullptr, m);
      }
      c.copy(window(keys, 0, R, whole ? c0 : 0, m), window(seg, 0, R, 0, m));
      if (!whole) c.topk_cost(R, m, std::min(k, m));
    }
    if (whole)
      c.topk_cost(R, n, std::min(k, n));
    else
      c.topk_cost(R, segs * std::min(k, seg_cols), k);
    std::int64_t most_candidates = k;
    for (int r = 0; r < R; ++r) {
      if (!compute) break;
      most_candidates =
          std::max(most_candidates, select_row(logits, valid, k, r0 + r, indices, values, order));
    }
    // Threshold compare over every column (VectorE), exact fp32 sort of the candidates
    // (GpSimd, sort_candidates), indices and values out. The selection itself is computed
    // above on the host: these instructions carry its cost.
    for (std::int64_t s = 0; s < segs; ++s)
      c.vector_elementwise(std::min(topk_segment, n - s * topk_segment), 1);
    sort_candidates(c, R, most_candidates);
    {
      auto t = c.dma();
      for (int r = 0; r < R; ++r) {
        t.row(k * 4);
        if (values.data) t.row(k * 4);
      }
    }
  }
  if (cap.target) {
    accumulate(*cap.target, c.counters());
    cap.target->calls += 1;
    // LNC = 2: the rows split over the cores, the selection after the logits.
    if (cap.target->logical_cores > 1)
      cap.target->lnc_core_seconds +=
          c.counters().single_core_seconds() / cap.target->logical_cores;
    // The floor's share: nisa.topk over every logit of every row, 8 rows per call.
    cap.target->floor.gpsimd_topk_s += static_cast<double>(logits.rows) / tr::topk_rows_per_call *
                                       static_cast<double>(tr::topk_cycles_per_element * n + k) /
                                       tr::gpsimd_hz;
  }
}

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
