// Kernel unit: the sparse kernel, fp8_fp4_sparse_mqa_logits (bf16 logits, as upstream, and
// top-k by column or request-local position).
#include "bindings_common.hpp"

namespace mqalogits_python {

void run_sparse(const ml::sparse_mqa_metadata& meta, const kernel_views<kv_input>& in,
                const output_view& out, const ml::options& opt) {
  dispatch_kernel<any_format, logits_types<ml::bf16>,
                  selections<false, ml::topk_index::column_t, ml::topk_index::position_t>>(
      in, out, [&](const auto& q, const auto& kv, auto w, auto o) {
        ml::fp8_fp4_sparse_mqa_logits(ml::backend::host{}, q, kv, w, meta, o, opt);
      });
}

}  // namespace mqalogits_python
