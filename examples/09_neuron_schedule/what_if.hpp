// The model's derived constants (the ones no AWS document states, marked "derived" in
// neuron_backend::traits) at the low and high ends of their plausible range, with the lines each
// one decides: an engineer sees which verdicts hold whatever the true value is and which hang on
// it. Each value is a generation of its own (backend::what_if), costed exactly as the model's.
// Shared by example 09 and its test.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "shapes.hpp"

namespace neuron_shapes {

namespace nb = ml::neuron_backend;

// GpSimd cycles per descriptor of a software-DGE gather (model: 16).
template <class Gen, std::int64_t Cycles>
struct gpsimd_descriptor_cycles : nb::traits<Gen> {
  static constexpr std::int64_t gpsimd_cycles_per_descriptor = Cycles;
};
// Bytes of bandwidth one DMA descriptor costs (model: 512).
template <class Gen, std::int64_t Bytes>
struct dma_descriptor_bytes : nb::traits<Gen> {
  static constexpr std::int64_t dma_descriptor_overhead_bytes = Bytes;
};
// DMA transfers whose fixed cost overlaps (model: 16, one per DMA engine of a core).
template <class Gen, int Transfers>
struct dma_transfers_in_flight : nb::traits<Gen> {
  static constexpr int dma_queues = Transfers;
};

template <class Gen, std::int64_t Cycles>
using with_gpsimd_descriptor_cycles =
    ml::backend::what_if<Gen, gpsimd_descriptor_cycles<Gen, Cycles>>;
template <class Gen, std::int64_t Bytes>
using with_dma_descriptor_bytes = ml::backend::what_if<Gen, dma_descriptor_bytes<Gen, Bytes>>;
template <class Gen, int Transfers>
using with_dma_transfers_in_flight =
    ml::backend::what_if<Gen, dma_transfers_in_flight<Gen, Transfers>>;

inline std::string microseconds(double low, double model, double high) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.2f / %.2f / %.2f us", low * 1e6, model * 1e6, high * 1e6);
  return buf;
}

// One derived constant's lines, at its low / model / high value.
struct what_if_lines {
  std::string text;
  // The trn3 MXFP8 64 x 8192 cache-layout verdict at each value: true where the per-page gather
  // wins over the native MX layout.
  bool gather_wins[3] = {false, false, false};
};

inline what_if_lines gpsimd_descriptor_lines() {
  using ml::backend::trn2, ml::backend::trn3;
  what_if_lines out;
  const auto t2_lo = paged_decode<with_gpsimd_descriptor_cycles<trn2, 4>, ml::mxfp8>(64, 8192);
  const auto t2 = paged_decode<trn2, ml::mxfp8>(64, 8192);
  const auto t2_hi = paged_decode<with_gpsimd_descriptor_cycles<trn2, 64>, ml::mxfp8>(64, 8192);
  const auto g_lo = paged_decode<with_gpsimd_descriptor_cycles<trn3, 4>, ml::mxfp8>(64, 8192);
  const auto g = paged_decode<trn3, ml::mxfp8>(64, 8192);
  const auto g_hi = paged_decode<with_gpsimd_descriptor_cycles<trn3, 64>, ml::mxfp8>(64, 8192);
  const auto n_lo =
      paged_decode_native<with_gpsimd_descriptor_cycles<trn3, 4>, ml::mxfp8>(64, 8192);
  const auto n = paged_decode_native<trn3, ml::mxfp8>(64, 8192);
  const auto n_hi =
      paged_decode_native<with_gpsimd_descriptor_cycles<trn3, 64>, ml::mxfp8>(64, 8192);
  const nb::report* gather[3] = {&g_lo, &g, &g_hi};
  const nb::report* native[3] = {&n_lo, &n, &n_hi};
  for (int i = 0; i < 3; ++i)
    out.gather_wins[i] = gather[i]->estimated_seconds() < native[i]->estimated_seconds();
  auto verdict = [&](int i) { return out.gather_wins[i] ? "gather" : "native"; };
  out.text =
      "  gpsimd_cycles_per_descriptor 4 / 16 / 64 (GpSimd writing one software-DGE descriptor):\n"
      "    trn2 paged-decode-mxfp8 64x8192/H64/page64 estimate " +
      microseconds(t2_lo.estimated_seconds(), t2.estimated_seconds(), t2_hi.estimated_seconds()) +
      " (bound " + t2_lo.bound_by() + " / " + t2.bound_by() + " / " + t2_hi.bound_by() +
      ")\n"
      "    trn3 paged-decode-mxfp8 64x8192/H64/page64 per-page gather " +
      microseconds(g_lo.estimated_seconds(), g.estimated_seconds(), g_hi.estimated_seconds()) +
      ", native MX layout " +
      microseconds(n_lo.estimated_seconds(), n.estimated_seconds(), n_hi.estimated_seconds()) +
      ": the " + verdict(0) + " / " + verdict(1) + " / " + verdict(2) + " layout wins\n";
  return out;
}

inline std::string dma_descriptor_lines() {
  using ml::backend::trn2;
  const auto lo = paged_decode<with_dma_descriptor_bytes<trn2, 256>, ml::mxfp8>(64, 8192);
  const auto mid = paged_decode<trn2, ml::mxfp8>(64, 8192);
  const auto hi = paged_decode<with_dma_descriptor_bytes<trn2, 1024>, ml::mxfp8>(64, 8192);
  return "  dma_descriptor_overhead_bytes 256 / 512 / 1024 (bandwidth one DMA descriptor costs):\n"
         "    trn2 paged-decode-mxfp8 64x8192/H64/page64 DMA " +
         microseconds(lo.dma_seconds, mid.dma_seconds, hi.dma_seconds) + ", estimate " +
         microseconds(lo.estimated_seconds(), mid.estimated_seconds(), hi.estimated_seconds()) +
         " (bound " + lo.bound_by() + " / " + mid.bound_by() + " / " + hi.bound_by() + ")\n";
}

inline std::string dma_overlap_lines() {
  using ml::backend::trn1;
  const auto lo = paged_decode<with_dma_transfers_in_flight<trn1, 4>, ml::mxfp8>(64, 8192);
  const auto mid = paged_decode<trn1, ml::mxfp8>(64, 8192);
  return "  dma_queues as transfers in flight 4 / 16 / 16 (fixed costs that overlap; 16 DMA "
         "engines per core bound it):\n"
         "    trn1 paged-decode-mxfp8 64x8192/H64/page64 (a DMA per gathered block) DMA " +
         microseconds(lo.dma_seconds, mid.dma_seconds, mid.dma_seconds) + ", estimate " +
         microseconds(lo.estimated_seconds(), mid.estimated_seconds(), mid.estimated_seconds()) +
         " (bound " + lo.bound_by() + " / " + mid.bound_by() + " / " + mid.bound_by() + ")\n";
}

}  // namespace neuron_shapes
