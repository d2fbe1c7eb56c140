// What each engine's instruction costs under the rules of its generation (traits.hpp), and the
// report a core adds it to: the engines (dma_engine, tensor_engine, scalar_engine,
// vector_engine, code_decoding, gpsimd_engine) say what an instruction computes and charge it
// here.
#pragma once

#include <cmath>
#include <cstdint>

#include "../../config.hpp"
#include "engine_rules.hpp"
#include "report.hpp"
#include "traits.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// The engine of an elementwise instruction that more than one engine executes: a relu or
// identity evacuation (ScalarE's activation, or VectorE's tensor_scalar / tensor_copy), a
// weighted accumulation (VectorE's or GpSimd's scalar_tensor_tensor; GpSimd reads SBUF only).
enum class elementwise_engine : std::uint8_t { scalar, vector, gpsimd };

// One core's counts: whether it computes values (false: cost-only) and what its engines spent.
template <class Gen>
class instruction_ledger {
 public:
  using traits_type = traits<Gen>;

  explicit instruction_ledger(bool compute) : compute_(compute) {
    report_.generation = traits_type::name;
    report_.psum_read_exclusive = traits_type::psum_read_exclusive;
    report_.sbuf_vector_gpsimd_exclusive = traits_type::sbuf_vector_gpsimd_exclusive;
  }
  instruction_ledger(const instruction_ledger&) = delete;
  instruction_ledger& operator=(const instruction_ledger&) = delete;

  bool computes() const { return compute_; }
  report& counts() { return report_; }
  // Work the core runs after this kernel (the selection over its logits): a static schedule
  // balances the kernel's movable steps (sbuf_step) as if it were already queued. Not charged.
  void queue_after(double gpsimd_s, double vector_s) {
    later_gpsimd_s_ = gpsimd_s;
    later_vector_s_ = vector_s;
  }
  double later_gpsimd_seconds() const { return later_gpsimd_s_; }
  double later_vector_seconds() const { return later_vector_s_; }

  void tensor_instruction(std::int64_t cycles) {
    report_.tensor.instructions += 1;
    report_.tensor.cycles += cycles;
    report_.tensor.seconds = static_cast<double>(report_.tensor.cycles) / traits_type::tensor_hz;
  }
  void scalar_instruction(std::int64_t elements, double rate, bool reads_psum) {
    const std::int64_t c = engine_cycles(elements, 1, rate);
    add(report_.scalar, c, traits_type::scalar_hz);
    if (reads_psum) report_.scalar_psum_seconds += static_cast<double>(c) / traits_type::scalar_hz;
  }
  static std::int64_t vector_cycles(std::int64_t elements, int inputs, bool narrow,
                                    bool reads_psum) {
    // 16-bit: the fast mode for one-input instructions within SBUF, else the 16-bit width.
    const double rate = !narrow                      ? traits_type::vector_other_rate
                        : inputs == 1 && !reads_psum ? traits_type::vector_fast_16bit_rate
                                                     : traits_type::vector_16bit_rate;
    return engine_cycles(elements, inputs, rate);
  }
  void vector_instruction(std::int64_t elements, int inputs, bool narrow, bool reads_psum) {
    const std::int64_t c = vector_cycles(elements, inputs, narrow, reads_psum);
    add(report_.vector, c, traits_type::vector_hz);
    if (reads_psum) report_.vector_psum_seconds += static_cast<double>(c) / traits_type::vector_hz;
  }
  void gpsimd_instruction(std::int64_t cycles) {
    add(report_.gpsimd, traits_type::engine_fixed_cycles + cycles, traits_type::gpsimd_hz);
  }
  // A GpSimd instruction of `elements` per partition (one per lane per cycle), `inputs` inputs.
  void gpsimd_elementwise(std::int64_t elements, int inputs) {
    gpsimd_instruction(elements * (inputs > 1 ? traits_type::two_input_cycle_factor : 1));
  }
  // An evacuation of `elements` per partition: ScalarE's activation at its width, or VectorE's
  // one-input tensor_scalar / tensor_copy.
  void evacuation(std::int64_t elements, bool narrow, bool reads_psum, elementwise_engine on) {
    engine_rules<Gen>::check(on != elementwise_engine::gpsimd,
                             "GpSimd cannot read PSUM: evacuations run on ScalarE or VectorE");
    if (on == elementwise_engine::vector)
      vector_instruction(elements, 1, narrow, reads_psum);
    else
      scalar_instruction(elements,
                         narrow ? traits_type::scalar_16bit_rate : traits_type::scalar_other_rate,
                         reads_psum);
  }
  // An instruction over n elements per partition of `inputs` SBUF tiles (16-bit data when
  // narrow), writing SBUF: where GpSimd does not share VectorE's SBUF port (trn2 on), whichever
  // of the two would finish it first given what each has queued, else VectorE.
  void sbuf_step(std::int64_t n, int inputs, bool narrow) {
    if constexpr (!traits_type::sbuf_vector_gpsimd_exclusive) {
      const std::int64_t factor = inputs > 1 ? common_traits::two_input_cycle_factor : 1;
      const double on_gpsimd =
          later_gpsimd_s_ + report_.gpsimd.seconds +
          static_cast<double>(common_traits::engine_fixed_cycles + n * factor) /
              traits_type::gpsimd_hz;
      const double on_vector =
          later_vector_s_ + report_.vector.seconds +
          static_cast<double>(vector_cycles(n, inputs, narrow, false)) / traits_type::vector_hz;
      if (on_gpsimd <= on_vector) {
        gpsimd_elementwise(n, inputs);
        return;
      }
    }
    vector_instruction(n, inputs, narrow, false);
  }

 private:
  static std::int64_t engine_cycles(std::int64_t elements, int inputs, double rate) {
    const std::int64_t factor = inputs > 1 ? common_traits::two_input_cycle_factor : 1;
    return common_traits::engine_fixed_cycles +
           static_cast<std::int64_t>(std::ceil(static_cast<double>(elements * factor) / rate));
  }
  static void add(engine_count& e, std::int64_t cycles, double hz) {
    e.instructions += 1;
    e.cycles += cycles;
    e.seconds = static_cast<double>(e.cycles) / hz;
  }

  bool compute_;
  report report_;
  double later_gpsimd_s_ = 0, later_vector_s_ = 0;
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
