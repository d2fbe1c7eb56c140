// Kernel unit: the paged kernel's selections, fp8_fp4_paged_mqa_logits(..., topk=k), by column
// or cache slot, its candidate blocks, or both (its logits are paged_kernels.cpp).
#include "bindings_common.hpp"

namespace mqalogits_python {

void run_paged_topk(const paged_args& a, const kernel_views<cache_input>& in,
                    const output_view& out, const ml::options& opt) {
  dispatch_kernel<any_format, logits_types<>,
                  selections<true, ml::topk_index::column_t, ml::topk_index::slot_t>>(
      in, out, [&](const auto& q, const auto& cache, auto w, auto o) {
        paged_call(a, q, cache, w, o, opt);
      });
}

}  // namespace mqalogits_python
