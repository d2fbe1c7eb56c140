// The opt-in library libmqalogits_deep_gemm_ops.so: DeepGEMM's indexer ops under DeepGEMM's own
// namespace and schemas (`torch.ops.deep_gemm.*`, as vLLM's DeepGEMM registers them), so an
// engine's existing calls run on CPU unchanged. Nothing registers unless this library is loaded
// (it loads libmqalogits_torch_ops.so, whose ops these call). Each op forwards to its
// `torch.ops.<MQALOGITS_TORCH_NAMESPACE>.*` twin through torch's dispatcher: DeepGEMM's separate
// (q, q_sf) / (kv, kv_sf) arguments become the twin's pairs. The ops are composite, so they run
// wherever the twins have kernels (CPU, and Meta for torch.compile / FakeTensor).
#include "deep_gemm_twin.hpp"

#include <torch/library.h>

#include "../op_registry/deep_gemm_ops.hpp"
#include "../op_registry/torch_schema.hpp"

#include <cstdint>

namespace {

using optional_tensor = c10::optional<at::Tensor>;
using mqalogits_deep_gemm::call_twin;

c10::List<optional_tensor> q_pair(const at::Tensor& q, const optional_tensor& q_sf) {
  return c10::List<optional_tensor>({q, q_sf});
}
c10::List<at::Tensor> kv_pair(const at::Tensor& kv, const at::Tensor& kv_sf) {
  return c10::List<at::Tensor>({kv, kv_sf});
}

at::Tensor fp8_fp4_mqa_logits(const at::Tensor& q, const optional_tensor& q_sf,
                              const at::Tensor& kv, const at::Tensor& kv_sf,
                              const at::Tensor& weights, const at::Tensor& cu_seq_len_k_start,
                              const at::Tensor& cu_seq_len_k_end, bool clean_logits,
                              std::int64_t max_seqlen_k, c10::ScalarType logits_dtype,
                              const optional_tensor& schedule_meta) {
  return call_twin("fp8_fp4_mqa_logits",
                   {q_pair(q, q_sf), kv_pair(kv, kv_sf), weights, cu_seq_len_k_start,
                    cu_seq_len_k_end, clean_logits, max_seqlen_k, logits_dtype, schedule_meta})
      .toTensor();
}

at::Tensor fp8_mqa_logits(const at::Tensor& q, const at::Tensor& kv, const at::Tensor& kv_sf,
                          const at::Tensor& weights, const at::Tensor& cu_seq_len_k_start,
                          const at::Tensor& cu_seq_len_k_end, bool clean_logits,
                          std::int64_t max_seqlen_k) {
  return call_twin("fp8_mqa_logits", {q, kv_pair(kv, kv_sf), weights, cu_seq_len_k_start,
                                      cu_seq_len_k_end, clean_logits, max_seqlen_k})
      .toTensor();
}

at::Tensor get_mqa_logits_metadata(const at::Tensor& cu_seq_len_k_start,
                                   const at::Tensor& cu_seq_len_k_end, std::int64_t num_kv_tokens,
                                   std::int64_t num_heads) {
  return call_twin("get_mqa_logits_metadata",
                   {cu_seq_len_k_start, cu_seq_len_k_end, num_kv_tokens, num_heads})
      .toTensor();
}

at::Tensor get_paged_mqa_logits_metadata(const at::Tensor& context_lens, std::int64_t block_kv,
                                         std::int64_t num_sms, const optional_tensor& indices) {
  return call_twin("get_paged_mqa_logits_metadata", {context_lens, block_kv, num_sms, indices})
      .toTensor();
}

at::Tensor fp8_fp4_paged_mqa_logits(const at::Tensor& q, const optional_tensor& q_sf,
                                    const at::Tensor& kv_cache, const at::Tensor& weights,
                                    const at::Tensor& context_lens, const at::Tensor& block_table,
                                    const at::Tensor& schedule_meta, std::int64_t max_context_len,
                                    bool clean_logits, c10::ScalarType logits_dtype,
                                    const optional_tensor& indices) {
  return call_twin("fp8_fp4_paged_mqa_logits",
                   {q_pair(q, q_sf), kv_cache, weights, context_lens, block_table, schedule_meta,
                    max_context_len, clean_logits, logits_dtype, indices})
      .toTensor();
}

at::Tensor fp8_paged_mqa_logits(const at::Tensor& q, const at::Tensor& kv_cache,
                                const at::Tensor& weights, const at::Tensor& context_lens,
                                const at::Tensor& block_table, const at::Tensor& schedule_meta,
                                std::int64_t max_context_len, bool clean_logits,
                                const optional_tensor& indices) {
  return call_twin("fp8_paged_mqa_logits", {q, kv_cache, weights, context_lens, block_table,
                                            schedule_meta, max_context_len, clean_logits, indices})
      .toTensor();
}

}  // namespace

// Upstream's schemas, written from their declarations (examples/op_registry/deep_gemm_ops.hpp).
TORCH_LIBRARY_FRAGMENT(deep_gemm, m) {
  namespace ops = mqalogits_bindings::deep_gemm;
  using mqalogits_bindings::torch_schema;
  m.def(torch::schema(torch_schema(ops::fp8_fp4_mqa_logits).c_str()), &fp8_fp4_mqa_logits);
  m.def(torch::schema(torch_schema(mqalogits_bindings::get_mqa_logits_metadata).c_str()),
        &get_mqa_logits_metadata);
  m.def(torch::schema(torch_schema(ops::get_paged_mqa_logits_metadata).c_str()),
        &get_paged_mqa_logits_metadata);
  m.def(torch::schema(torch_schema(ops::fp8_fp4_paged_mqa_logits).c_str()),
        &fp8_fp4_paged_mqa_logits);
  m.def(torch::schema(torch_schema(ops::fp8_mqa_logits).c_str()), &fp8_mqa_logits);
  m.def(torch::schema(torch_schema(ops::fp8_paged_mqa_logits).c_str()), &fp8_paged_mqa_logits);
}
