// The neuron backend's cost report for DeepSeek-V3.2's indexer shapes (H = 64, D = 128, page
// 64) on each NeuronCore generation: one line per generation and shape,
//   neuron <gen> <kernel> <shape> estimate <microseconds> us bound <engine> roofline <us> us
// (the roofline: the least time any schedule needs at the documented rates, see
// neuron_backend::report) then the full report of the 64 x 8192 MXFP8 decode, with its verdict. The
// numbers describe the modelled schedule (tiles, DMA transfers, engine instructions, documented
// rates); nothing here runs on a Neuron device.
#include <cstdio>

#include "shapes.hpp"
#include "what_if.hpp"

namespace ml = mqalogits;

template <class Gen>
void print() {
  const auto lines = neuron_shapes::lines<Gen>();
  for (const auto& l : lines) std::puts(l.line.c_str());
  std::printf("%s\n", lines.front().report.summary().c_str());
}

int main() {
  std::puts(
      "mqalogits neuron backend: cost of the modelled NeuronCore schedule (not a device run)\n");
  print<ml::backend::trn1>();
  print<ml::backend::trn2>();
  print<ml::backend::trn3>();
  // LNC = 2 on trn3: the two physical cores split the 64 requests.
  const auto lnc =
      neuron_shapes::paged_decode<ml::backend::trn3, ml::mxfp8>(64, 8192, {.logical_cores = 2});
  std::puts(lnc.line("paged-decode-mxfp8-lnc2", "64x8192/H64/page64").c_str());

  // The plausible alternatives for trn3's MXFP8 64 x 8192 decode, side by side.
  const auto gather = neuron_shapes::paged_decode<ml::backend::trn3, ml::mxfp8>(64, 8192);
  const auto native = neuron_shapes::paged_decode_native<ml::backend::trn3, ml::mxfp8>(64, 8192);
  const bool native_wins = native.estimated_seconds() < gather.estimated_seconds();
  std::printf(
      "\ntrn3 MXFP8 64x8192 cache layout: per-page gather %.2f us (bound by %s) vs native MX "
      "blocks %.2f us (bound by %s): the %s wins (DMA descriptors, gathered ones written by "
      "GpSimd: %lld vs "
      "%lld)\n",
      gather.estimated_seconds() * 1e6, gather.bound_by(), native.estimated_seconds() * 1e6,
      native.bound_by(), native_wins ? "native layout" : "per-page gather",
      static_cast<long long>(gather.dma_descriptors),
      static_cast<long long>(native.dma_descriptors));
  std::printf(
      "trn3 MXFP8 64x8192 logical cores: LNC = 1 %.2f us vs LNC = 2 %.2f us (the busier core, "
      "each taking half the requests; roofline %.2f vs %.2f us)\n",
      gather.estimated_seconds() * 1e6, lnc.estimated_seconds() * 1e6,
      gather.roofline_seconds() * 1e6, lnc.roofline_seconds() * 1e6);

  // The constants no document states, at the ends of their plausible range.
  std::printf(
      "\nderived constants at their low / model / high plausible value, and the lines each "
      "decides:\n%s%s%s",
      neuron_shapes::gpsimd_descriptor_lines().text.c_str(),
      neuron_shapes::dma_descriptor_lines().c_str(), neuron_shapes::dma_overlap_lines().c_str());

  // The decode head sum's two layouts for one chunk of one query row (H = 64), by chunk length:
  // TensorE + ScalarE + DMA time of the head sum and its epilogue.
  for (const std::int64_t keys : {16, 64, 96, 128, 1024, 8192}) {
    const auto t2 = ml::neuron_backend::head_sum_layouts<ml::backend::trn2>(keys, 1, 64);
    const auto t3 = ml::neuron_backend::head_sum_layouts<ml::backend::trn3>(keys, 1, 64);
    std::printf(
        "decode head sum of %lld keys x 1 row: keys on partitions %.3f us vs one partition per "
        "row %.3f us (trn2), %.3f vs %.3f us (trn3)\n",
        static_cast<long long>(keys), t2.keys_on_partitions_s * 1e6, t2.row_per_partition_s * 1e6,
        t3.keys_on_partitions_s * 1e6, t3.row_per_partition_s * 1e6);
  }
}
