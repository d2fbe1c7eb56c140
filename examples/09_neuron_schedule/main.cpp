// The neuron backend's cost report for DeepSeek-V3.2's indexer shapes (H = 64, D = 128, page
// 64) on each NeuronCore generation: one line per generation and shape,
//   neuron <gen> <kernel> <shape> estimate <microseconds> us bound <engine> roofline <us> us
// (the roofline: the least time any schedule needs at the documented rates, see
// neuron_backend::report) then the full report of the 64 x 8192 MXFP8 decode, with its verdict. The
// numbers describe the modelled schedule (tiles, DMA transfers, engine instructions, documented
// rates); nothing here runs on a Neuron device.
#include <cstdio>

#include "shapes.hpp"

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
}
