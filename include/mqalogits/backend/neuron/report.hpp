// The cost report of the neuron backend model, and how a caller receives it.
//
// The backend tag stays a zero-size type, so the report travels out of band: a caller opens a
// `neuron_backend::capture` on its thread and every neuron-backend kernel call made on that
// thread, while the capture lives, adds its counts to the report:
//
//   ml::neuron_backend::report rep;
//   {
//     ml::neuron_backend::capture cap(rep);
//     ml::fp8_fp4_paged_mqa_logits(ml::backend::neuron<ml::backend::trn2>{}, q, cache, ...);
//   }
//   std::puts(rep.summary().c_str());
//
// summary(), verdict() and line() return a std::basic_string with the library's allocator
// (detail::string, see std_abi.hpp: a std::string built here would be a standard instantiation
// shared with units built for other instruction sets): read it with c_str(), compare it, stream
// it, or make a std::string of it, std::string(rep.summary()).
//
// Captures nest (the innermost one receives the counts) and calls with no capture open cost
// nothing to report. The counts are of the modelled schedule, not of a device run.
//
// A capture may also ask for a cost-only run (`capture_options::cost_only`): the schedule is
// walked and counted exactly as in a normal call, but no engine computes a value and the output
// is left untouched, so large shapes can be costed quickly. And on trn2 / trn3 it may ask for
// two cores per logical core (`logical_cores = 2`, LNC = 2), which split the query rows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "../../config.hpp"
#include "../../std_abi.hpp"
#include "floor.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// Instructions of one engine and the cycles the model charges for them.
struct engine_count {
  std::int64_t instructions = 0;
  std::int64_t cycles = 0;
  double seconds = 0.0;  // cycles / the engine's clock
};

struct report {
  const char* generation = "";  // trn1, trn2 or trn3
  std::int64_t calls = 0;       // kernel calls added to this report
  int logical_cores = 1;        // physical cores the calls were split over (LNC)

  // DMA (HBM <-> SBUF): transfers (one DMA instruction each), one descriptor per partition row.
  std::int64_t dma_bytes = 0;
  std::int64_t dma_transfers = 0;
  std::int64_t dma_descriptors = 0;
  std::int64_t dma_small_descriptors = 0;        // rows below 256 B: overhead-bound
  std::int64_t dma_inefficient_descriptors = 0;  // rows below the efficient 4 KiB
  std::int64_t dma_gathers = 0;          // indirect transfers (block-table pages, sparse blocks)
  std::int64_t dma_gathered_blocks = 0;  // blocks (pages) those transfers read
  std::int64_t dma_gathered_rows = 0;  // their descriptors, one per partition row (runs of a page)
  // Per transfer: its fixed cost / the DMA queues in flight + (bytes + a per-descriptor
  // overhead) / the per-core DMA bandwidth.
  double dma_seconds = 0.0;

  // TensorE: score matmuls, head-sum matmuls (decode), transposes and broadcasts.
  std::int64_t matmul_score = 0;
  std::int64_t matmul_head_sum = 0;
  std::int64_t matmul_transpose = 0;
  std::int64_t matmul_broadcast = 0;   // 0/1 matmuls copying a row to many partitions
  std::int64_t matmul_flops = 0;       // 2 x K x M x N of score and head-sum matmuls
  std::int64_t vector_transposes = 0;  // 32 x 32 VectorE transposes (trn1: NaN-exact)
  std::int64_t topk_calls = 0;         // nisa.topk on GpSimd
  engine_count tensor, scalar, vector, gpsimd;
  // Of TensorE's cycles: the head-sum matmuls' and the transposes'.
  std::int64_t tensor_head_sum_cycles = 0, tensor_transpose_cycles = 0;
  // Of ScalarE's instructions and cycles: the copies out of PSUM it took from VectorE.
  std::int64_t scalar_copies = 0, scalar_copy_cycles = 0;
  // Time ScalarE and VectorE spend reading PSUM: on trn1 they cannot overlap.
  double scalar_psum_seconds = 0.0, vector_psum_seconds = 0.0;
  bool psum_read_exclusive = false;           // trn1
  bool sbuf_vector_gpsimd_exclusive = false;  // trn1

  // Peaks of on-chip use, bytes per partition.
  std::int64_t peak_sbuf_bytes = 0;
  std::int64_t peak_psum_bytes = 0;

  // The roofline: what any schedule of these calls needs at the documented rates, summed over
  // the calls. DMA: the bytes the kernel must move (Q, each group's distinct valid keys once,
  // the weights, the output rows) over the per-core bandwidth, no fixed costs. TensorE: the
  // score matmuls' flops at the peak rate of their operands (bf16 / fp8 128 x 128 MACs per
  // cycle, MX 4x that). Elementwise: the relu of every fp32 score, the cast of every logit
  // and, where no instruction decodes the codes (trn1 / trn2), one pass over every key element,
  // spread over ScalarE and VectorE (and GpSimd for the decode) at their widths for non-16-bit
  // data. Two cores (LNC = 2) halve it.
  double roofline_dma_s = 0.0, roofline_tensor_s = 0.0, roofline_elementwise_s = 0.0;

  // The floor: each engine's work that no schedule meeting the accuracy contract avoids
  // (floor.hpp), summed over the calls. Two cores (LNC = 2) halve it.
  floor_terms floor;

  // The busiest core's estimate when the calls ran on two cores (LNC = 2); 0: one core.
  double lnc_core_seconds = 0.0;
  const char* lnc_core_bound = "";

  std::int64_t matmul_instructions() const {
    return matmul_score + matmul_head_sum + matmul_transpose + matmul_broadcast;
  }

  // The time of each limit on the call: every engine, and on trn1 the two shared ports.
  struct limit {
    const char* name;
    double seconds;
  };
  static constexpr int num_limits = 7;
  void limits(limit (&out)[num_limits]) const {
    out[0] = {"DMA", dma_seconds};
    out[1] = {"TensorE", tensor.seconds};
    out[2] = {"ScalarE", scalar.seconds};
    out[3] = {"VectorE", vector.seconds};
    out[4] = {"GpSimd", gpsimd.seconds};
    out[5] = {"PSUM-read(ScalarE+VectorE)",
              psum_read_exclusive ? scalar_psum_seconds + vector_psum_seconds : 0.0};
    out[6] = {"SBUF(VectorE+GpSimd)",
              sbuf_vector_gpsimd_exclusive ? vector.seconds + gpsimd.seconds : 0.0};
  }
  // One core, every engine overlapped (double-buffered tiles): the slowest limit bounds it.
  double single_core_seconds() const {
    limit l[num_limits];
    limits(l);
    double t = 0;
    for (const limit& x : l) t = std::max(t, x.seconds);
    return t;
  }
  const char* single_core_bound() const {
    limit l[num_limits];
    limits(l);
    const limit* best = &l[0];
    for (const limit& x : l)
      if (x.seconds > best->seconds) best = &x;
    return best->name;
  }
  double estimated_seconds() const {
    return logical_cores > 1 ? lnc_core_seconds : single_core_seconds();
  }
  const char* bound_by() const { return logical_cores > 1 ? lnc_core_bound : single_core_bound(); }
  double roofline_seconds() const {
    return std::max({roofline_dma_s, roofline_tensor_s, roofline_elementwise_s}) /
           std::max(logical_cores, 1);
  }
  const char* roofline_bound() const {
    return roofline_dma_s >= std::max(roofline_tensor_s, roofline_elementwise_s) ? "DMA"
           : roofline_tensor_s >= roofline_elementwise_s                         ? "TensorE"
                                                                                 : "elementwise";
  }

  double floor_seconds() const { return floor.seconds() / std::max(logical_cores, 1); }
  floor_terms::binding floor_bound() const { return floor.bound(); }

  // `neuron <gen> <kernel> <shape> estimate <us> us bound <engine> roofline <us> us`
  detail::string line(std::string_view kernel, std::string_view shape) const {
    char buf[320];
    std::snprintf(buf, sizeof buf, "neuron %s %.*s %.*s estimate %.2f us bound %s roofline %.2f us",
                  generation, static_cast<int>(kernel.size()), kernel.data(),
                  static_cast<int>(shape.size()), shape.data(), estimated_seconds() * 1e6,
                  bound_by(), roofline_seconds() * 1e6);
    return buf;
  }

  // What binds, in one sentence.
  detail::string verdict() const {
    const char* b = bound_by();
    const auto is = [&](const char* engine) { return std::strcmp(b, engine) == 0; };
    const char* why = is("DMA")       ? "moving the operands from HBM is the limit"
                      : is("TensorE") ? "the matmuls are the limit: the schedule is compute-bound"
                      : is("ScalarE") ? "evacuating PSUM through the relu is the limit"
                      : is("VectorE") ? "VectorE's decode, accumulations, copies and epilogue "
                                        "are the limit"
                      : is("GpSimd")  ? "GpSimd (gather descriptors, decode steps, "
                                        "accumulations, top-k) is the limit"
                                      : "two engines sharing one port on trn1 are the limit";
    char buf[320];
    std::snprintf(buf, sizeof buf, "%s: bound by %s, %s", generation, b, why);
    return buf;
  }

  detail::string summary() const {
    detail::string s;
    char line_buf[320];
    auto add = [&](auto... args) {
      std::snprintf(line_buf, sizeof line_buf, args...);
      s += line_buf;
    };
    auto ll = [](std::int64_t v) { return static_cast<long long>(v); };
    add("neuron model (%s), %lld call(s) -- a model of the NeuronCore schedule, not a device run\n",
        generation, ll(calls));
    add("  DMA      %12lld bytes  %lld transfers (%lld gathers of %lld blocks in %lld rows)  %lld "
        "descriptors (%lld below 4 KiB, %lld below 256 B)  %10.2f us\n",
        ll(dma_bytes), ll(dma_transfers), ll(dma_gathers), ll(dma_gathered_blocks),
        ll(dma_gathered_rows), ll(dma_descriptors), ll(dma_inefficient_descriptors),
        ll(dma_small_descriptors), dma_seconds * 1e6);
    add("  TensorE  %9lld matmuls (%lld score, %lld head-sum, %lld transpose, %lld broadcast)  "
        "%.3g flop  %12lld cycles  %10.2f us\n",
        ll(matmul_instructions()), ll(matmul_score), ll(matmul_head_sum), ll(matmul_transpose),
        ll(matmul_broadcast), static_cast<double>(matmul_flops), ll(tensor.cycles),
        tensor.seconds * 1e6);
    add("  ScalarE  %9lld instructions %12lld cycles  %10.2f us (%.2f us reading PSUM)\n",
        ll(scalar.instructions), ll(scalar.cycles), scalar.seconds * 1e6,
        scalar_psum_seconds * 1e6);
    add("  VectorE  %9lld instructions %12lld cycles  %10.2f us (%.2f us reading PSUM, %lld "
        "32x32 transposes)\n",
        ll(vector.instructions), ll(vector.cycles), vector.seconds * 1e6, vector_psum_seconds * 1e6,
        ll(vector_transposes));
    add("  GpSimd   %9lld instructions %12lld cycles  %10.2f us (%lld topk calls)\n",
        ll(gpsimd.instructions), ll(gpsimd.cycles), gpsimd.seconds * 1e6, ll(topk_calls));
    if (psum_read_exclusive)
      add("  trn1 ports: PSUM reads of ScalarE + VectorE %.2f us, SBUF of VectorE + GpSimd %.2f "
          "us (each pair cannot overlap)\n",
          (scalar_psum_seconds + vector_psum_seconds) * 1e6,
          (vector.seconds + gpsimd.seconds) * 1e6);
    add("  peak SBUF %lld B / partition, peak PSUM %lld B / partition\n", ll(peak_sbuf_bytes),
        ll(peak_psum_bytes));
    if (logical_cores > 1)
      add("  LNC = %d: the busiest core %.2f us (bound by %s); totals above are of both cores\n",
          logical_cores, lnc_core_seconds * 1e6, lnc_core_bound);
    add("  estimate %.2f us (bound by %s, engines overlapped)\n", estimated_seconds() * 1e6,
        bound_by());
    add("  roofline %.2f us (%s: DMA %.2f us, TensorE %.2f us, elementwise %.2f us)\n",
        roofline_seconds() * 1e6, roofline_bound(), roofline_dma_s * 1e6, roofline_tensor_s * 1e6,
        roofline_elementwise_s * 1e6);
    const floor_terms::binding fb = floor_bound();
    add("  floor %.2f us (bound by %s %s%s%s; estimate / floor %.2f)\n", floor_seconds() * 1e6,
        fb.engine, fb.term, fb.with[0] ? ", busy to it with " : "", fb.with,
        floor_seconds() > 0 ? estimated_seconds() / floor_seconds() : 0.0);
    add("  verdict: %s\n", verdict().c_str());
    return s;
  }
};

// How the calls of a capture run.
struct capture_options {
  bool cost_only = false;  // count the schedule, compute nothing, leave the output untouched
  int logical_cores = 1;   // 2: LNC = 2 on trn2 / trn3, the query rows split over two cores
  // Tokens per partition row of a decode's gathered pages (or selected blocks), a divisor of
  // the page; 0: the schedule chooses (runs of 64 tokens, or 128, 32, 16 or 8, whichever ends
  // the call sooner). A what-if for one layout; dense, prefill and native-layout calls ignore it.
  std::int64_t page_run = 0;
};

struct capture_state {
  report* target = nullptr;
  capture_options options;
};

// The report the calls of this thread add to (target null: none).
inline capture_state& current_capture() {
  thread_local capture_state s;
  return s;
}
inline report* current_report() {
  return current_capture().target;
}

// Routes the cost of neuron-backend calls made on this thread to `r` while it lives.
class capture {
 public:
  explicit capture(report& r, capture_options opt = {}) : previous_(current_capture()) {
    current_capture() = {&r, opt};
  }
  ~capture() { current_capture() = previous_; }
  capture(const capture&) = delete;
  capture& operator=(const capture&) = delete;

 private:
  capture_state previous_;
};

// Adds one core's counters into an accumulated report (peaks are maxima, the rest sums).
inline void accumulate(report& into, const report& call) {
  into.generation = call.generation;
  into.psum_read_exclusive = call.psum_read_exclusive;
  into.sbuf_vector_gpsimd_exclusive = call.sbuf_vector_gpsimd_exclusive;
  into.dma_bytes += call.dma_bytes;
  into.dma_transfers += call.dma_transfers;
  into.dma_descriptors += call.dma_descriptors;
  into.dma_small_descriptors += call.dma_small_descriptors;
  into.dma_inefficient_descriptors += call.dma_inefficient_descriptors;
  into.dma_gathers += call.dma_gathers;
  into.dma_gathered_blocks += call.dma_gathered_blocks;
  into.dma_gathered_rows += call.dma_gathered_rows;
  into.dma_seconds += call.dma_seconds;
  into.matmul_score += call.matmul_score;
  into.matmul_head_sum += call.matmul_head_sum;
  into.matmul_transpose += call.matmul_transpose;
  into.matmul_broadcast += call.matmul_broadcast;
  into.matmul_flops += call.matmul_flops;
  into.vector_transposes += call.vector_transposes;
  into.topk_calls += call.topk_calls;
  into.tensor_head_sum_cycles += call.tensor_head_sum_cycles;
  into.tensor_transpose_cycles += call.tensor_transpose_cycles;
  into.scalar_copies += call.scalar_copies;
  into.scalar_copy_cycles += call.scalar_copy_cycles;
  into.scalar_psum_seconds += call.scalar_psum_seconds;
  into.vector_psum_seconds += call.vector_psum_seconds;
  for (auto [a, b] :
       {std::pair{&into.tensor, &call.tensor}, std::pair{&into.scalar, &call.scalar},
        std::pair{&into.vector, &call.vector}, std::pair{&into.gpsimd, &call.gpsimd}}) {
    a->instructions += b->instructions;
    a->cycles += b->cycles;
    a->seconds += b->seconds;
  }
  into.roofline_dma_s += call.roofline_dma_s;
  into.roofline_tensor_s += call.roofline_tensor_s;
  into.roofline_elementwise_s += call.roofline_elementwise_s;
  into.floor += call.floor;
  into.peak_sbuf_bytes = std::max(into.peak_sbuf_bytes, call.peak_sbuf_bytes);
  into.peak_psum_bytes = std::max(into.peak_psum_bytes, call.peak_psum_bytes);
}

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
