// Kernel unit: the dense kernel, fp8_fp4_mqa_logits (logits, top-k, candidate blocks, or both) and
// the legacy fp8_mqa_logits (whose calls are the per-token fp32 ones of the first: compiled once
// here).
#include "bindings_common.hpp"

namespace mqalogits_python {

void run_dense(const dense_args& a, const kernel_views<kv_input>& in, const output_view& out,
               const ml::options& opt) {
  dispatch_kernel<any_format, logits_types<float, ml::bf16>,
                  selections<true, ml::topk_index::column_t>>(
      in, out, [&](const auto& q, const auto& kv, auto w, auto o) {
        ml::fp8_fp4_mqa_logits(ml::backend::host{}, q, kv, w, a.ks, a.ke, a.max_seqlen_k, o, opt);
      });
}

void run_legacy_dense(const dense_args& a, const kernel_views<kv_input>& in, const output_view& out,
                      const ml::options& opt) {
  dispatch_kernel<formats<ml::fp8_per_token>, logits_types<float>, no_selection>(
      in, out, [&](const auto& q, const auto& kv, auto w, auto o) {
        ml::fp8_mqa_logits(ml::backend::host{}, q, kv, w, a.ks, a.ke, a.clean_logits,
                           a.max_seqlen_k, o, opt);
      });
}

}  // namespace mqalogits_python
