// The neuron backend's entry point (backend_kernels<backend::neuron<Gen>>): the kernel of
// schedule.hpp run on one NeuronCore (two with LNC = 2), its cost added to the thread's capture
// with the call's roofline and floor; other outputs (top-k, grouped) fed from the model's fp32
// logits. This is the seam a device implementation replaces.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "../../config.hpp"
#include "../../error.hpp"
#include "../../exec/executor.hpp"
#include "../../exec/options.hpp"
#include "../../format/mx.hpp"
#include "../../output/logits_row.hpp"
#include "../../std_abi.hpp"
#include "../../variant/plan.hpp"
#include "../../view/matrix_view.hpp"
#include "../../view/rows_view.hpp"
#include "../backend.hpp"
#include "candidate_blocks.hpp"
#include "core.hpp"
#include "floor_work.hpp"
#include "report.hpp"
#include "schedule.hpp"
#include "topk.hpp"
#include "traits.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// logits_row_output<O> as the schedule's logits_sink: the only code compiled per logit type.
template <class Plan, class O>
class logits_row_sink final : public logits_sink {
 public:
  logits_row_sink(logits_row_output<O>& output, const Plan& plan)
      : logits_sink(std::is_same_v<O, float> ? dtype::fp32 : dtype::bf16,
                    static_cast<std::int64_t>(sizeof(O)), output.clean()),
        output_(output),
        plan_(plan) {}
  void begin() override { output_.begin(plan_, 1, executor_ref{}); }
  void consume(std::int64_t row, std::int64_t col, const float* scores, const unsigned char* valid,
               std::int64_t n) override {
    output_.consume(0, row, col, scores, valid, n);
  }

 private:
  logits_row_output<O>& output_;
  const Plan& plan_;
};

// The roofline of one call (report::roofline_*), from its work and the documented rates, for
// weights and logits of w_bytes and o_bytes per element.
template <class Gen, class Format>
void add_roofline(report& r, const call_work& work, std::int64_t heads, std::int64_t w_bytes,
                  std::int64_t o_bytes) {
  using tr = traits<Gen>;
  constexpr bool mx = tr::mx_matmul && is_mx_format_v<Format>;
  // No instruction takes the codes as they are: MX before trn3, e4m3fn before trn3.
  constexpr bool decode_codes = is_mx_format_v<Format> ? !tr::mx_matmul : !tr::native_e4m3fn;
  const std::int64_t keys = work.keys, scores = work.scores, logits = work.logits;
  const std::int64_t rows = work.rows;
  const std::int64_t token = Format::data_bytes + Format::scale_bytes;
  const double bytes =
      static_cast<double>(rows * heads * (token + w_bytes) + keys * token + logits * o_bytes);
  r.roofline_dma_s += bytes / tr::dma_bytes_per_s;
  const double macs_per_cycle = 128.0 * 128.0 * (mx ? mx_pack : 1);
  const double flops = 2.0 * static_cast<double>(scores * heads) * Format::head_dim;
  r.roofline_tensor_s += flops / (2 * macs_per_cycle * tr::tensor_hz);
  // Elements per second across the 128 partitions, at the widths for non-16-bit data.
  const double scalar = 128.0 * tr::scalar_other_rate * tr::scalar_hz;
  const double vector = 128.0 * tr::vector_other_rate * tr::vector_hz;
  double t = static_cast<double>(scores * heads + logits) / (scalar + vector);
  if constexpr (decode_codes)
    t += static_cast<double>(keys * Format::head_dim) / (vector + 128.0 * tr::gpsimd_hz);
  r.roofline_elementwise_s += t;
}

}  // namespace neuron_backend

template <class Gen>
struct backend_kernels<backend::neuron<Gen>> {
  // Arguments are validated by the caller. The model runs one NeuronCore's schedule (two with
  // LNC = 2) on the calling thread (options.executor is not used) and adds its cost to the
  // thread's open neuron_backend::capture, if any.
  // Values reach the caller through `output` (an output policy); cost-only captures skip it.
  template <class Format, class Plan, class W, class O>
  static void run(const rows_view<Format>& q, const Plan& plan, const matrix_view<const W>& w,
                  logits_row_output<O>& output, const options&) {
    run_logits(q, plan, w, output, {});
  }

  // GpSimd and VectorE seconds the core runs after the logits (the selection).
  struct work_after {
    double gpsimd_s = 0, vector_s = 0;
  };

  template <class Format, class Plan, class W, class O>
  static void run_logits(const rows_view<Format>& q, const Plan& plan,
                         const matrix_view<const W>& w, logits_row_output<O>& output,
                         work_after after) {
    using tr = neuron_backend::traits<Gen>;
    const neuron_backend::capture_state cap = neuron_backend::current_capture();
    const int cores = cap.target ? cap.options.logical_cores : 1;
    detail::require(cores >= 1 && cores <= tr::max_logical_cores,
                    detail::where3{"neuron model (", tr::name, ")"}, [&](auto& m) {
                      m << "capture_options::logical_cores = " << cores << " is not supported (1.."
                        << tr::max_logical_cores << " on " << tr::name << ")";
                    });
    const bool compute = !(cap.target && cap.options.cost_only);
    const neuron_backend::weights_ref weights(w);
    neuron_backend::logits_row_sink<Plan, O> sink(output, plan);
    neuron_backend::report call;
    double busiest = 0;
    const char* bound = "";
    for (int part = 0; part < cores; ++part) {
      neuron_backend::core<Gen> c(compute);
      c.queue_after(after.gpsimd_s, after.vector_s);
      {
        neuron_backend::kernel<Gen, Format, Plan> k(c, q, plan, weights, sink, part, cores);
        k.run();
      }
      const neuron_backend::report& one = c.counters();
      if (one.single_core_seconds() >= busiest) {
        busiest = one.single_core_seconds();
        bound = one.single_core_bound();
      }
      neuron_backend::accumulate(call, one);
    }
    if (compute) output.finish(executor_ref{});
    if (cap.target) {
      const auto wb = static_cast<std::int64_t>(sizeof(W)),
                 ob = static_cast<std::int64_t>(sizeof(O));
      const neuron_backend::call_work work = neuron_backend::count_work(plan);
      neuron_backend::add_roofline<Gen, Format>(call, work, w.cols, wb, ob);
      neuron_backend::add_floor<Gen, Format, Plan>(call.floor, work, w.cols, wb, ob);
      neuron_backend::report& r = *cap.target;
      neuron_backend::accumulate(r, call);
      r.calls += 1;
      r.logical_cores = cores;
      if (cores > 1) {
        r.lnc_core_seconds += busiest;
        r.lnc_core_bound = bound;
      }
    }
  }

  // The k of a top-k output (alone or beside candidate blocks), 0 without one; N and B of
  // candidate blocks (alone or beside a top-k), {0, 0} without them.
  template <class Output>
  static std::int64_t topk_k(const Output& o) {
    if constexpr (requires { o.k(); })
      return o.k();
    else if constexpr (requires { o.first().k(); })
      return o.first().k();
    else
      return 0;
  }
  template <class Output>
  static std::pair<std::int64_t, std::int64_t> candidates_of(const Output& o) {
    if constexpr (requires { o.candidate_count(); })
      return {o.candidate_count(), o.candidate_block_size()};
    else if constexpr (requires { o.second().candidate_count(); })
      return {o.second().candidate_count(), o.second().candidate_block_size()};
    else
      return {0, 0};
  }
  // The cost of the selections in the current capture: the top k (neuron_backend::topk, k
  // candidates for the exact sort) and the candidate blocks (block max, then the top N blocks).
  static void charge_selection(std::int64_t k, std::pair<std::int64_t, std::int64_t> blocks,
                               const detail::vector<float>& logits, std::int64_t rows,
                               std::int64_t cols) {
    if (k > 0) {
      detail::vector<std::int32_t> picked(static_cast<std::size_t>(rows * k));
      neuron_backend::topk<Gen>(matrix_view<const float>(logits.data(), rows, cols), {}, k,
                                matrix_view<std::int32_t>(picked.data(), rows, k), {});
    }
    if (blocks.first > 0)
      neuron_backend::candidate_blocks_cost<Gen>(rows, cols, blocks.second, blocks.first);
  }

  // The selections' GpSimd and VectorE seconds, from a cost-only run of them, so the logits
  // kernel balances its movable steps (the code decode's SBUF steps, VectorE or GpSimd) around
  // them, as a static schedule of the whole call would.
  template <class Output>
  static work_after selection_after(Output& output, const detail::vector<float>& logits,
                                    std::int64_t rows, std::int64_t cols) {
    const std::int64_t k = topk_k(output);
    const auto blocks = candidates_of(output);
    if (k == 0 && blocks.first == 0) return {};
    const neuron_backend::capture_state cap = neuron_backend::current_capture();
    // With LNC = 2 the report counts each core's selection after its logits: nothing overlaps.
    if (rows <= 0 || cols <= 0 || (cap.target && cap.options.logical_cores > 1)) return {};
    neuron_backend::report dry;
    {
      neuron_backend::capture c(dry, {.cost_only = true});
      charge_selection(k, blocks, logits, rows, cols);
    }
    return {dry.gpsimd.seconds, dry.vector.seconds};
  }

  // Any other output: the model's fp32 logits, row by row, handed to the output as one task;
  // masked columns are the plan's, not the -inf the schedule writes (a logit can be -inf itself).
  // The top-k selection runs as a second pass of the model (neuron_backend::topk: nisa.topk on
  // GpSimd, counted in the report) over those logits, and only the k columns it picks reach the
  // output, which numbers them (columns or cache slots).
  template <class Format, class Plan, class W, output_policy Output>
  static void run(const rows_view<Format>& q, const Plan& plan, const matrix_view<const W>& w,
                  Output& output, const options&) {
    const std::int64_t rows = plan.num_rows(), cols = plan.num_cols();
    detail::vector<float> logits(static_cast<std::size_t>(std::max<std::int64_t>(rows * cols, 1)));
    logits_row_output<float> full(matrix_view<float>(logits.data(), rows, cols), true);
    run_logits(q, plan, w, full, selection_after(output, logits, rows, cols));
    const neuron_backend::capture_state cap = neuron_backend::current_capture();
    const bool compute = !(cap.target && cap.options.cost_only);
    // valid[r][c]: whether column c of row r is a key of the plan.
    detail::vector<std::uint8_t> valid(
        static_cast<std::size_t>(std::max<std::int64_t>(rows * cols, 1)));
    for (std::int64_t g = 0; g < plan.num_groups() && compute; ++g) {
      const row_span span = plan.group_rows(g);
      for (std::int64_t r = span.begin; r < span.end; ++r) {
        const row_keys rk = plan.row(r);
        for (std::int64_t k = rk.key_begin; k < rk.key_end; ++k)
          valid[static_cast<std::size_t>(r * cols + k - rk.col_offset)] = plan.key(g, k).valid();
      }
    }
    const executor_ref serial;
    output.begin(plan, 1, serial);
    const auto feed = [&](std::int64_t r, std::int64_t c, const float* score) {
      const unsigned char one = 1;
      output.consume(0, r, c, score, &one, 1);
    };
    if constexpr (requires { output.k(); }) {
      const std::int64_t k = output.k();
      if (rows > 0 && cols > 0) {
        detail::vector<std::int32_t> picked(static_cast<std::size_t>(rows * k));
        neuron_backend::topk<Gen>(matrix_view<const float>(logits.data(), rows, cols),
                                  matrix_view<const std::uint8_t>(valid.data(), rows, cols), k,
                                  matrix_view<std::int32_t>(picked.data(), rows, k), {});
        for (std::int64_t r = 0; r < rows && compute; ++r) {
          if constexpr (grouped_output_policy<Output>) output.open_rows(0, r, r + 1, false);
          for (std::int64_t j = 0; j < k; ++j) {
            const std::int32_t c = picked[static_cast<std::size_t>(r * k + j)];
            if (c >= 0) feed(r, c, logits.data() + r * cols + c);
          }
        }
      }
    } else {
      for (std::int64_t r = 0; r < rows && compute; ++r) {
        if constexpr (grouped_output_policy<Output>) output.open_rows(0, r, r + 1, false);
        for (std::int64_t c = 0; c < cols; ++c)
          if (valid[static_cast<std::size_t>(r * cols + c)])
            feed(r, c, logits.data() + r * cols + c);
      }
      // Candidate blocks, alone or beside a top-k, take every logit: the output computes them
      // (bit-exact with the host), the call's report counts their selection.
      if (cap.target && rows > 0 && cols > 0)
        charge_selection(topk_k(output), candidates_of(output), logits, rows, cols);
    }
    if constexpr (grouped_output_policy<Output>) output.close_task(0);
    output.finish(serial);
  }
};

MQALOGITS_NAMESPACE_END
