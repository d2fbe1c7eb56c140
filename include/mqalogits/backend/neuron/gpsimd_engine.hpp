// GpSimd: the general-purpose engine, here the top-k calls and the elementwise passes it takes
// from VectorE where it has its own SBUF port (trn2 on).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "../../config.hpp"
#include "../../format/bf16.hpp"
#include "../../format/mx.hpp"
#include "../../std_abi.hpp"
#include "dtype.hpp"
#include "engine_rules.hpp"
#include "instruction_ledger.hpp"
#include "memory.hpp"
#include "traits.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

template <class Gen>
class gpsimd_engine {
  using traits_type = traits<Gen>;

 public:
  explicit gpsimd_engine(instruction_ledger<Gen>& ledger) : ledger_(ledger) {}

  // nisa.topk cost: one call per 8 rows, ~4n + K cycles for n candidates and K outputs.
  void topk_cost(std::int64_t rows, std::int64_t n, std::int64_t k) {
    const std::int64_t calls =
        (rows + traits_type::topk_rows_per_call - 1) / traits_type::topk_rows_per_call;
    for (std::int64_t c = 0; c < calls; ++c)
      ledger_.gpsimd_instruction(traits_type::topk_cycles_per_element * n + k);
    ledger_.counts().topk_calls += calls;
  }
  // A GpSimd instruction of `elements` per partition (one per lane per cycle), `inputs` inputs.
  void gpsimd_elementwise(std::int64_t elements, int inputs) {
    ledger_.gpsimd_elementwise(elements, inputs);
  }

 private:
  instruction_ledger<Gen>& ledger_;
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
