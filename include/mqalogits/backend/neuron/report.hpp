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
// Captures nest (the innermost one receives the counts) and calls with no capture open cost
// nothing to report. The counts are of the modelled schedule, not of a device run.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "../../config.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// Instructions of one engine and the cycles the model charges for them.
struct engine_count {
  std::int64_t instructions = 0;
  std::int64_t cycles = 0;
  double seconds = 0.0;  // cycles / the engine's clock (NEURON.md rates)
};

struct report {
  const char* generation = "";  // trn1, trn2 or trn3
  std::int64_t calls = 0;       // kernel calls added to this report

  // DMA (HBM <-> SBUF): one descriptor per partition row of each transfer.
  std::int64_t dma_bytes = 0;
  std::int64_t dma_descriptors = 0;
  std::int64_t dma_small_descriptors = 0;  // rows below the efficient 4 KiB
  std::int64_t dma_gathers = 0;  // indirect reads: paged block-table entries, sparse blocks
  double dma_seconds = 0.0;      // dma_bytes / the per-core HBM share (a lower bound)

  // TensorE: score matmuls, head-sum matmuls (decode) and transposes (identity matmuls).
  std::int64_t matmul_score = 0;
  std::int64_t matmul_head_sum = 0;
  std::int64_t matmul_transpose = 0;
  std::int64_t matmul_flops = 0;  // 2 x K x M x N of score and head-sum matmuls
  engine_count tensor, scalar, vector;

  // Peaks of on-chip use, bytes per partition.
  std::int64_t peak_sbuf_bytes = 0;
  std::int64_t peak_psum_bytes = 0;

  std::int64_t matmul_instructions() const {
    return matmul_score + matmul_head_sum + matmul_transpose;
  }
  // With every engine overlapped (double-buffered tiles), the slowest one bounds the call.
  double estimated_seconds() const {
    return std::max({dma_seconds, tensor.seconds, scalar.seconds, vector.seconds});
  }
  const char* bound_by() const {
    const double t = estimated_seconds();
    return t == dma_seconds      ? "DMA"
           : t == tensor.seconds ? "TensorE"
           : t == scalar.seconds ? "ScalarE"
                                 : "VectorE";
  }

  std::string summary() const {
    std::string s;
    char line[256];
    auto add = [&](auto... args) {
      std::snprintf(line, sizeof line, args...);
      s += line;
    };
    add("neuron model (%s), %lld call(s) -- a model of the NeuronCore schedule, not a device run\n",
        generation, static_cast<long long>(calls));
    add("  DMA      %12lld bytes  %9lld descriptors (%lld below 4 KiB)  %lld gathers  %10.2f us\n",
        static_cast<long long>(dma_bytes), static_cast<long long>(dma_descriptors),
        static_cast<long long>(dma_small_descriptors), static_cast<long long>(dma_gathers),
        dma_seconds * 1e6);
    add("  TensorE  %9lld matmuls (%lld score, %lld head-sum, %lld transpose)  %.3g flop  %10.2f "
        "us\n",
        static_cast<long long>(matmul_instructions()), static_cast<long long>(matmul_score),
        static_cast<long long>(matmul_head_sum), static_cast<long long>(matmul_transpose),
        static_cast<double>(matmul_flops), tensor.seconds * 1e6);
    add("  ScalarE  %9lld instructions %12lld cycles  %10.2f us\n",
        static_cast<long long>(scalar.instructions), static_cast<long long>(scalar.cycles),
        scalar.seconds * 1e6);
    add("  VectorE  %9lld instructions %12lld cycles  %10.2f us\n",
        static_cast<long long>(vector.instructions), static_cast<long long>(vector.cycles),
        vector.seconds * 1e6);
    add("  peak SBUF %lld B / partition, peak PSUM %lld B / partition\n",
        static_cast<long long>(peak_sbuf_bytes), static_cast<long long>(peak_psum_bytes));
    add("  estimate %.2f us (bound by %s, engines overlapped)\n", estimated_seconds() * 1e6,
        bound_by());
    return s;
  }
};

// The report the calls of this thread add to (null: none).
inline report*& current_report() {
  thread_local report* r = nullptr;
  return r;
}

// Routes the cost of neuron-backend calls made on this thread to `r` while it lives.
class capture {
 public:
  explicit capture(report& r) : previous_(current_report()) { current_report() = &r; }
  ~capture() { current_report() = previous_; }
  capture(const capture&) = delete;
  capture& operator=(const capture&) = delete;

 private:
  report* previous_;
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
