// Example 09's closing summary: per trn2 / trn3 line, each engine's busy time in the modelled
// schedule, the estimate over the floor, the floor's binding term, and for the lines more than
// `over` times their floor, the engine that bounds the estimate against its share of the floor.
// Shared by example 09 and its test.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "shapes.hpp"

namespace neuron_shapes {

// "neuron trn2 paged-decode-mxfp8 64x8192/H64/page64" of a line.
inline std::string line_name(const std::string& line) {
  std::size_t end = 0;
  for (int i = 0; i < 4 && end != std::string::npos; ++i) end = line.find(' ', end + 1);
  return line.substr(0, end);
}

// The engine that bounds the estimate (on one core), with its modelled busy time and its share
// of the floor: what a better schedule would have to shrink.
struct excess {
  const char* engine;
  double model_s, floor_share_s;
};
inline excess bound_excess(const ml::neuron_backend::report& r) {
  const auto& f = r.floor;
  const auto s = f.split_at(f.bracket().second);
  const excess all[] = {
      {"DMA", r.dma_seconds, s.dma},
      {"TensorE", r.tensor.seconds, s.tensor},
      {"ScalarE", r.scalar.seconds, s.scalar},
      {"VectorE", r.vector.seconds, s.vector},
      {"GpSimd", r.gpsimd.seconds, s.gpsimd},
      {"PSUM-read(ScalarE+VectorE)",
       r.psum_read_exclusive ? r.scalar_psum_seconds + r.vector_psum_seconds : 0, s.psum_port},
      {"SBUF(VectorE+GpSimd)",
       r.sbuf_vector_gpsimd_exclusive ? r.vector.seconds + r.gpsimd.seconds : 0, s.sbuf_port}};
  const std::string bound = r.single_core_bound();
  for (const excess& e : all)
    if (bound == e.engine) return e;
  return all[0];
}

// What the modelled schedule spends beyond the floor on the line's binding engine, where the
// model can tell: TensorE by matmul kind against the floor's TensorE terms.
inline std::string why(const shape_line& l) {
  const ml::neuron_backend::report& r = l.report;
  char buf[320];
  const std::string bound = r.single_core_bound();
  if (bound == "TensorE" && r.tensor.cycles > 0) {
    const double per_cycle = r.tensor.seconds / static_cast<double>(r.tensor.cycles) * 1e6;
    const double head = static_cast<double>(r.tensor_head_sum_cycles) * per_cycle;
    const double tr = static_cast<double>(r.tensor_transpose_cycles) * per_cycle;
    const auto& f = r.floor;
    const auto s = f.split_at(f.bracket().second);
    std::snprintf(
        buf, sizeof buf,
        "    TensorE: fp32 head sum %.1f, transposes %.1f, score and broadcast matmuls "
        "%.1f us; the floor: head sum %.1f (the rest on VectorE and GpSimd), transposes %.1f, "
        "score matmuls %.1f us\n",
        head, tr, r.tensor.seconds * 1e6 - head - tr,
        s.head_sum_on_tensor * f.head_sum_tensor_s * 1e6, f.tensor_transposes_s * 1e6,
        f.tensor_scores_s * 1e6);
    return buf;
  }
  return "";
}

inline std::string floor_summary(const std::vector<const shape_line*>& lines, double over) {
  std::string text =
      "estimate / floor per trn2 / trn3 line (engine busy times of the modelled "
      "schedule, us):\n";
  std::string flagged;
  char buf[400];
  for (const shape_line* l : lines) {
    const auto& r = l->report;
    const double ratio = r.estimated_seconds() / r.floor_seconds();
    const auto fb = r.floor_bound();
    std::snprintf(buf, sizeof buf,
                  "  %s: %.2fx (floor bound by %s %s%s%s; DMA %.1f TensorE %.1f ScalarE %.1f "
                  "VectorE %.1f GpSimd %.1f)\n",
                  line_name(l->line).c_str() + 7, ratio, fb.engine, fb.term,
                  fb.with[0] ? " with " : "", fb.with, r.dma_seconds * 1e6, r.tensor.seconds * 1e6,
                  r.scalar.seconds * 1e6, r.vector.seconds * 1e6, r.gpsimd.seconds * 1e6);
    text += buf;
    if (ratio > over) {
      const excess e = bound_excess(r);
      std::snprintf(
          buf, sizeof buf,
          "  %s %.2fx: bound by %s, modelled %.1f us where the floor's split leaves it %.1f us\n",
          line_name(l->line).c_str() + 7, ratio, e.engine, e.model_s * 1e6, e.floor_share_s * 1e6);
      flagged += buf;
      flagged += why(*l);
      if (l->line.find("trn3 dense-prefill-mxfp") != std::string::npos)
        flagged += std::string("    why: ") + ml::neuron_backend::trn3_mx_prefill_floor_rule + "\n";
    }
  }
  std::snprintf(buf, sizeof buf, "over %.2fx their floor, and the engine that makes them so:\n",
                over);
  return text + buf + (flagged.empty() ? std::string("  none\n") : flagged);
}

// trn1's lines against their own goal (`over` times the floor): each line's ratio and binding
// engine, and for those over it the rule that keeps the modelled schedule there.
inline std::string trn1_summary(const std::vector<shape_line>& lines, double over) {
  char buf[400];
  std::snprintf(buf, sizeof buf, "estimate / floor per trn1 line (goal %.2fx):\n", over);
  std::string text = buf;
  int past = 0;
  for (const shape_line& l : lines) {
    const auto& r = l.report;
    const double ratio = r.estimated_seconds() / r.floor_seconds();
    const auto fb = r.floor_bound();
    past += ratio > over;
    std::snprintf(buf, sizeof buf, "  %s: %.2fx (bound by %s; floor bound by %s %s)\n",
                  line_name(l.line).c_str() + 7, ratio, r.single_core_bound(), fb.engine, fb.term);
    text += buf;
  }
  if (past == 0) return text;
  std::snprintf(buf, sizeof buf, "%d trn1 lines over %.2fx their floor: ", past, over);
  return text + buf + ml::neuron_backend::trn1_floor_rule + "\n";
}

}  // namespace neuron_shapes
