// Kernel unit: the paged-sparse kernel, fp8_fp4_paged_sparse_mqa_logits (bf16 logits, as
// upstream, and top-k by column, position or cache slot).
#include "bindings_common.hpp"

namespace mqalogits_python {

void run_paged_sparse(const ml::paged_sparse_mqa_metadata& meta,
                      const kernel_views<cache_input>& in, const output_view& out,
                      const ml::options& opt) {
  dispatch_kernel<any_format, logits_types<ml::bf16>,
                  selections<false, ml::topk_index::column_t, ml::topk_index::position_t,
                             ml::topk_index::slot_t>>(
      in, out, [&](const auto& q, const auto& cache, auto w, auto o) {
        ml::fp8_fp4_paged_sparse_mqa_logits(ml::backend::host{}, q, cache, w, meta, o, opt);
      });
}

}  // namespace mqalogits_python
