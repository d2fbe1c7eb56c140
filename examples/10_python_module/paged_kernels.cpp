// Kernel unit: the paged kernel's logits, fp8_fp4_paged_mqa_logits and the legacy
// fp8_paged_mqa_logits (whose calls are the per-token fp32 ones of the first: compiled once
// here). Its top-k is paged_topk_kernels.cpp: one unit for both would be the longest compile.
#include "bindings_common.hpp"

namespace mqalogits_python {

void run_paged(const paged_args& a, const kernel_views<cache_input>& in, const output_view& out,
               const ml::options& opt) {
  dispatch_kernel<any_format, logits_types<float, ml::bf16>, no_selection>(
      in, out, [&](const auto& q, const auto& cache, auto w, auto o) {
        paged_call(a, q, cache, w, o, opt);
      });
}

void run_legacy_paged(const paged_args& a, const kernel_views<cache_input>& in,
                      const output_view& out, const ml::options& opt) {
  dispatch_kernel<formats<ml::fp8_per_token>, logits_types<float>, no_selection>(
      in, out, [&](const auto& q, const auto& cache, auto w, auto o) {
        if (a.indices)
          ml::fp8_paged_mqa_logits(ml::backend::host{}, q, cache, w, a.lens, a.table, a.schedule,
                                   a.max_context_len, a.clean_logits, o, *a.indices, opt);
        else
          ml::fp8_paged_mqa_logits(ml::backend::host{}, q, cache, w, a.lens, a.table, a.schedule,
                                   a.max_context_len, a.clean_logits, o, opt);
      });
}

}  // namespace mqalogits_python
