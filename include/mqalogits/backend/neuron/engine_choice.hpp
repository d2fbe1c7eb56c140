// Which engine takes an elementwise pass that more than one engine can run: whichever would
// finish it first, given what each has queued (list scheduling; a static schedule balances them
// the same way), at their documented widths. trn1 keeps its passes where they are: its VectorE
// and ScalarE cannot read PSUM at once, nor VectorE and GpSimd SBUF.
#pragma once

#include <cmath>
#include <cstdint>

#include "../../config.hpp"
#include "core.hpp"
#include "dtype.hpp"
#include "report.hpp"
#include "traits.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

template <class Gen>
struct engine_choice {
  using tr = traits<Gen>;

  static double engine_seconds(std::int64_t elements, int inputs, double rate, double hz) {
    return static_cast<double>(common_traits::engine_fixed_cycles +
                               (inputs > 1 ? 2 : 1) * static_cast<std::int64_t>(std::ceil(
                                                          static_cast<double>(elements) / rate))) /
           hz;
  }
  // ScalarE or VectorE, whichever would finish a one-input pass over n elements first; `tie`
  // when both would finish together.
  static elementwise_engine scalar_or_vector(core<Gen>& c, std::int64_t n, elementwise_engine tie) {
    const report& r = c.counters();
    const double on_scalar =
        r.scalar.seconds + engine_seconds(n, 1, tr::scalar_other_rate, tr::scalar_hz);
    const double on_vector =
        r.vector.seconds + engine_seconds(n, 1, tr::vector_other_rate, tr::vector_hz);
    if (on_scalar == on_vector) return tie;
    return on_scalar < on_vector ? elementwise_engine::scalar : elementwise_engine::vector;
  }
  // Prefill's relu evacuation of n scores per partition: ScalarE or VectorE.
  static elementwise_engine relu(core<Gen>& c, std::int64_t n) {
    if constexpr (tr::psum_read_exclusive) return elementwise_engine::scalar;
    return scalar_or_vector(c, n, elementwise_engine::scalar);
  }
  // The copies of transposed codes, exponents and scale bytes out of PSUM (fp32 there, integers
  // below 256: exact through ScalarE's fp32 data path) likewise: ScalarE's identity activation
  // or VectorE's tensor_copy, as AWS's kernels alternate their evacuations. (The x4 words of
  // trn3's MX operands stay on VectorE: ScalarE carries one value per element.)
  static elementwise_engine copy(core<Gen>& c, std::int64_t n) {
    if constexpr (tr::psum_read_exclusive) return elementwise_engine::vector;
    return scalar_or_vector(c, n, elementwise_engine::vector);
  }
  // A copy of n elements between SBUF tiles (a select without a mask): VectorE or GpSimd,
  // counting the work queued after the kernel (the selection: core::queue_after) as theirs.
  static elementwise_engine sbuf_copy(core<Gen>& c, std::int64_t n) {
    if constexpr (tr::sbuf_vector_gpsimd_exclusive) return elementwise_engine::vector;
    const report& r = c.counters();
    const double on_vector = r.vector.seconds + c.later_vector_seconds() +
                             engine_seconds(n, 1, tr::vector_other_rate, tr::vector_hz);
    const double on_gpsimd =
        r.gpsimd.seconds + c.later_gpsimd_seconds() + engine_seconds(n, 1, 1.0, tr::gpsimd_hz);
    return on_gpsimd < on_vector ? elementwise_engine::gpsimd : elementwise_engine::vector;
  }
  // Prefill's weighted accumulation of n elements: VectorE or GpSimd.
  static elementwise_engine accumulate(core<Gen>& c, std::int64_t n, write_mode mode) {
    if constexpr (tr::sbuf_vector_gpsimd_exclusive) return elementwise_engine::vector;
    const int inputs = mode == write_mode::overwrite ? 1 : 2;
    const report& r = c.counters();
    const double on_vector =
        r.vector.seconds + engine_seconds(n, inputs, tr::vector_other_rate, tr::vector_hz);
    const double on_gpsimd = r.gpsimd.seconds + engine_seconds(n, inputs, 1.0, tr::gpsimd_hz);
    return on_gpsimd < on_vector ? elementwise_engine::gpsimd : elementwise_engine::vector;
  }
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
