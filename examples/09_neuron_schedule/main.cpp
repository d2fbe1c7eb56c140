// The neuron backend's cost report for DeepSeek-V3.2's indexer shapes (H = 64, D = 128, page
// 64) on each NeuronCore generation: one line per generation and shape,
//   neuron <gen> <kernel> <shape> estimate <us> us bound <engine> roofline <us> us floor <us> us
// and on trn2 / trn3 `lnc2 <us> us`, the busier core when two cores split the requests (LNC = 2).
// The roofline: what any schedule needs at the documented rates for the bytes, flops and one
// elementwise pass (neuron_backend::report); the floor: the work per engine no schedule meeting
// the accuracy contract avoids, engines overlapped (neuron_backend::floor_terms). Then the full
// report of the 64 x 8192 MXFP8 decode, with its verdict, and at the end each trn2 / trn3
// line's estimate over its floor, and the alternatives the model leaves out. The decode lines
// are also given with the selection engines call the indexer for (top-k), and DeepSeek V4.1's two
// calls at 32768 positions: the candidate source's decode with its top-512 and 2048 candidate
// blocks of 8, and a consumer layer's paged-sparse kernel over those 16384 columns with its
// top-512. The numbers describe the modelled schedule (tiles, DMA transfers, engine
// instructions, documented rates); nothing here runs on a Neuron device.
#include <cstdio>
#include <vector>

#include "floor_summary.hpp"
#include "shapes.hpp"
#include "what_if.hpp"

namespace ml = mqalogits;

template <class Gen>
std::vector<neuron_shapes::shape_line> print() {
  auto lines = neuron_shapes::lines<Gen>();
  for (const auto& l : lines) std::puts(l.printed.c_str());
  auto topk = neuron_shapes::topk_lines<Gen>();
  for (const auto& l : topk) std::puts(l.printed.c_str());
  std::printf("%s\n", lines.front().report.summary().c_str());
  lines.insert(lines.end(), topk.begin(), topk.end());
  return lines;
}

int main() {
  std::puts(
      "mqalogits neuron backend: cost of the modelled NeuronCore schedule (not a device run)\n");
  const auto lines1 = print<ml::backend::trn1>();
  const auto lines2 = print<ml::backend::trn2>();
  const auto lines3 = print<ml::backend::trn3>();
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

  // The floor of each trn2 / trn3 line against its estimate.
  std::vector<const neuron_shapes::shape_line*> all;
  for (const auto* g : {&lines2, &lines3})
    for (const auto& l : *g) all.push_back(&l);
  std::printf("\n%s", neuron_shapes::floor_summary(all, 1.25).c_str());
  std::printf("%s", neuron_shapes::trn1_summary(lines1, 2.0).c_str());

  // What neither the estimates nor the floors include.
  std::puts(
      "\nnot modelled:\n"
      "  DMA transposes of K (AWS's indexer transposes its bf16 K tile by DMA to keep TensorE "
      "free): documented for 2-byte types, and the cache holds 1-byte or 4-bit codes with no "
      "documented rate; they would move the K transposes, part of trn3's floor, off TensorE\n"
      "  an fp8-native trn2 cache layout (K stored head dim major): trn2 has no e4m3fn matmul "
      "(EVRF051), so the codes are decoded wherever they sit; it would remove only the K "
      "transposes, and TensorE does not bind trn2\n"
      "  trn3 transposes in the background of the matmuls: TensorE runs one instruction at a "
      "time, so its transposes add to its busy time whenever they run; only a DMA transpose "
      "(above) would hide them\n"
      "  a split head sum (relu scores and weights as bf16 high and low parts, 3 bf16 passes "
      "instead of fp32's 4): its error bound against the contract's 2^-14 M is not derived "
      "here, so the floor keeps the fp32 passes");
}
