// The op library's registration: `torch.ops.<namespace>.<name>` for every op (namespace
// MQALOGITS_TORCH_NAMESPACE, default mqalogits). The schemas are written from the ops'
// declarations (examples/op_registry: DeepGEMM's argument order, the Python module's names and
// defaults), so torch refuses at load an op function whose arguments differ from its declaration.
// The ops reading tensors are CPU kernels, with Meta kernels (meta_ops.cpp) that torch.compile
// and FakeTensor trace through; the wrappers below turn the schemas' flat keyword-only arguments
// into the ops' keyword structs (kernel_keywords, candidate_keywords).
#include "cache_ops.hpp"
#include "meta_ops.hpp"  // first: it includes torch's headers in an order Clang takes
#include "sparse_ops.hpp"

#include <torch/library.h>

#include "../op_registry/all_ops.hpp"
#include "../op_registry/torch_schema.hpp"

#include <string>

#define MQALOGITS_TORCH_STR2(x) #x
#define MQALOGITS_TORCH_STR(x) MQALOGITS_TORCH_STR2(x)
// TORCH_LIBRARY pastes its namespace argument: these expand MQALOGITS_TORCH_NAMESPACE first.
#define MQALOGITS_TORCH_LIBRARY(ns, m) TORCH_LIBRARY(ns, m)
#define MQALOGITS_TORCH_LIBRARY_IMPL(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)

namespace mqalogits_torch {
namespace {

// The schemas' flat keyword-only arguments, as the ops take them.
kernel_keywords keywords_of(bool truncate_long_contexts, const c10::optional<at::Tensor>& out,
                            c10::optional<std::int64_t> topk, bool topk_values,
                            c10::string_view topk_index, const c10::optional<at::Tensor>& topk_out,
                            const c10::optional<at::Tensor>& topk_values_out, bool topk_short_rows,
                            const c10::optional<at::Tensor>& topk_offset = c10::nullopt) {
  return {truncate_long_contexts,
          out,
          {topk, topk_values, std::string(topk_index.data(), topk_index.size()), topk_out,
           topk_values_out, topk_short_rows},
          topk_offset,
          {}};
}

// The candidate keywords, as the dense and paged ops take them.
kernel_keywords with_candidates(kernel_keywords kw, c10::optional<std::int64_t> n,
                                std::int64_t block_size, c10::string_view order,
                                c10::string_view padding, const c10::optional<at::Tensor>& out) {
  kw.candidates = {n, block_size, std::string(order.data(), order.size()),
                   std::string(padding.data(), padding.size()), out};
  return kw;
}

at::Tensor fp8_fp4_mqa_logits_op(
    const c10::List<c10::optional<at::Tensor>>& q, const std::vector<at::Tensor>& kv,
    const at::Tensor& weights, const at::Tensor& cu_seq_len_k_start,
    const at::Tensor& cu_seq_len_k_end, bool clean_logits, std::int64_t max_seqlen_k,
    c10::ScalarType logits_dtype, const c10::optional<at::Tensor>& schedule_meta,
    bool truncate_long_contexts, const c10::optional<at::Tensor>& out,
    c10::optional<std::int64_t> topk, bool topk_values, c10::string_view topk_index,
    const c10::optional<at::Tensor>& topk_out, const c10::optional<at::Tensor>& topk_values_out,
    const c10::optional<at::Tensor>& topk_offset, bool topk_short_rows,
    c10::optional<std::int64_t> candidate_topk_blocks, std::int64_t candidate_block_size,
    c10::string_view candidate_order, c10::string_view candidate_padding,
    const c10::optional<at::Tensor>& candidate_out) {
  return fp8_fp4_mqa_logits(
      q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits, max_seqlen_k,
      logits_dtype, schedule_meta,
      with_candidates(keywords_of(truncate_long_contexts, out, topk, topk_values, topk_index,
                                  topk_out, topk_values_out, topk_short_rows, topk_offset),
                      candidate_topk_blocks, candidate_block_size, candidate_order,
                      candidate_padding, candidate_out));
}

at::Tensor fp8_mqa_logits_op(
    const at::Tensor& q, const std::vector<at::Tensor>& kv, const at::Tensor& weights,
    const at::Tensor& cu_seq_len_k_start, const at::Tensor& cu_seq_len_k_end, bool clean_logits,
    std::int64_t max_seqlen_k, bool truncate_long_contexts, const c10::optional<at::Tensor>& out,
    c10::optional<std::int64_t> topk, bool topk_values, c10::string_view topk_index,
    const c10::optional<at::Tensor>& topk_out, const c10::optional<at::Tensor>& topk_values_out,
    const c10::optional<at::Tensor>& topk_offset, bool topk_short_rows,
    c10::optional<std::int64_t> candidate_topk_blocks, std::int64_t candidate_block_size,
    c10::string_view candidate_order, c10::string_view candidate_padding,
    const c10::optional<at::Tensor>& candidate_out) {
  return fp8_mqa_logits(
      q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits, max_seqlen_k,
      with_candidates(keywords_of(truncate_long_contexts, out, topk, topk_values, topk_index,
                                  topk_out, topk_values_out, topk_short_rows, topk_offset),
                      candidate_topk_blocks, candidate_block_size, candidate_order,
                      candidate_padding, candidate_out));
}

at::Tensor fp8_fp4_paged_mqa_logits_op(
    const c10::List<c10::optional<at::Tensor>>& q, const at::Tensor& kv_cache,
    const at::Tensor& weights, const at::Tensor& context_lens, const at::Tensor& block_table,
    const at::Tensor& schedule_meta, std::int64_t max_context_len, bool clean_logits,
    c10::ScalarType logits_dtype, const c10::optional<at::Tensor>& indices,
    bool truncate_long_contexts, const c10::optional<at::Tensor>& out,
    c10::optional<std::int64_t> topk, bool topk_values, c10::string_view topk_index,
    const c10::optional<at::Tensor>& topk_out, const c10::optional<at::Tensor>& topk_values_out,
    bool topk_short_rows, c10::optional<std::int64_t> candidate_topk_blocks,
    std::int64_t candidate_block_size, c10::string_view candidate_order,
    c10::string_view candidate_padding, const c10::optional<at::Tensor>& candidate_out) {
  return fp8_fp4_paged_mqa_logits(
      q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits,
      logits_dtype, indices,
      with_candidates(keywords_of(truncate_long_contexts, out, topk, topk_values, topk_index,
                                  topk_out, topk_values_out, topk_short_rows),
                      candidate_topk_blocks, candidate_block_size, candidate_order,
                      candidate_padding, candidate_out));
}

at::Tensor fp8_paged_mqa_logits_op(
    const at::Tensor& q, const at::Tensor& kv_cache, const at::Tensor& weights,
    const at::Tensor& context_lens, const at::Tensor& block_table, const at::Tensor& schedule_meta,
    std::int64_t max_context_len, bool clean_logits, const c10::optional<at::Tensor>& indices,
    bool truncate_long_contexts, const c10::optional<at::Tensor>& out,
    c10::optional<std::int64_t> topk, bool topk_values, c10::string_view topk_index,
    const c10::optional<at::Tensor>& topk_out, const c10::optional<at::Tensor>& topk_values_out,
    bool topk_short_rows, c10::optional<std::int64_t> candidate_topk_blocks,
    std::int64_t candidate_block_size, c10::string_view candidate_order,
    c10::string_view candidate_padding, const c10::optional<at::Tensor>& candidate_out) {
  return fp8_paged_mqa_logits(
      q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits,
      indices,
      with_candidates(keywords_of(truncate_long_contexts, out, topk, topk_values, topk_index,
                                  topk_out, topk_values_out, topk_short_rows),
                      candidate_topk_blocks, candidate_block_size, candidate_order,
                      candidate_padding, candidate_out));
}

at::Tensor fp8_fp4_sparse_mqa_logits_op(
    const c10::List<c10::optional<at::Tensor>>& q, const std::vector<at::Tensor>& kv,
    const at::Tensor& weights, const c10::intrusive_ptr<sparse_metadata>& metadata,
    std::int64_t num_max_sparse_blocks, std::int64_t sparse_block_kv, bool use_unaligned_ks,
    const c10::optional<at::Tensor>& out, c10::optional<std::int64_t> topk, bool topk_values,
    c10::string_view topk_index, const c10::optional<at::Tensor>& topk_out,
    const c10::optional<at::Tensor>& topk_values_out) {
  return fp8_fp4_sparse_mqa_logits(
      q, kv, weights, metadata, num_max_sparse_blocks, sparse_block_kv, use_unaligned_ks, out,
      keywords_of(false, out, topk, topk_values, topk_index, topk_out, topk_values_out, false)
          .topk);
}

at::Tensor fp8_fp4_paged_sparse_mqa_logits_op(
    const c10::List<c10::optional<at::Tensor>>& q, const at::Tensor& kv_cache,
    const at::Tensor& weights, const c10::intrusive_ptr<paged_sparse_metadata>& metadata,
    std::int64_t num_max_sparse_blocks, std::int64_t sparse_block_kv,
    const c10::optional<at::Tensor>& out, c10::optional<std::int64_t> topk, bool topk_values,
    c10::string_view topk_index, const c10::optional<at::Tensor>& topk_out,
    const c10::optional<at::Tensor>& topk_values_out) {
  return fp8_fp4_paged_sparse_mqa_logits(
      q, kv_cache, weights, metadata, num_max_sparse_blocks, sparse_block_kv, out,
      keywords_of(false, out, topk, topk_values, topk_index, topk_out, topk_values_out, false)
          .topk);
}

// "__torch__.torch.classes.<namespace>.<name>", as schemas name a custom class (with an empty
// name: the prefix the declarations' "class:" types take).
std::string class_type(const char* name) {
  return std::string(
             "__torch__.torch.classes." MQALOGITS_TORCH_STR(MQALOGITS_TORCH_NAMESPACE) ".") +
         name;
}

}  // namespace
}  // namespace mqalogits_torch
MQALOGITS_TORCH_LIBRARY(MQALOGITS_TORCH_NAMESPACE, m) {
  namespace mt = mqalogits_torch;
  namespace ops = mqalogits_bindings;
  // The sparse metadata are objects (custom classes), which the schemas name: registered first.
  m.class_<mt::sparse_metadata>("SparseMetadata");
  m.class_<mt::paged_sparse_metadata>("PagedSparseMetadata");
  const std::string classes = mt::class_type("");
  for (const ops::op_declaration* op : ops::all_ops)
    if ((op->on & ops::torch) != 0) m.def(torch::schema(ops::torch_schema(*op, classes).c_str()));
  // Kernels for every dispatch key: no tensor argument decides these ops' key (the metadata
  // objects are not tensors; the sms setting takes none).
  m.impl(ops::get_num_sms.name, &mt::get_num_sms);
  m.impl(ops::set_num_sms.name, &mt::set_num_sms);
  m.impl(ops::get_sparse_mqa_logits_metadata.name, &mt::get_sparse_mqa_logits_metadata);
  m.impl(ops::get_paged_sparse_mqa_logits_metadata.name, &mt::get_paged_sparse_mqa_logits_metadata);
  m.impl(ops::fp8_fp4_sparse_mqa_logits.name, &mt::fp8_fp4_sparse_mqa_logits_op);
  m.impl(ops::fp8_fp4_paged_sparse_mqa_logits.name, &mt::fp8_fp4_paged_sparse_mqa_logits_op);
}

MQALOGITS_TORCH_LIBRARY_IMPL(MQALOGITS_TORCH_NAMESPACE, CPU, m) {
  namespace mt = mqalogits_torch;
  namespace ops = mqalogits_bindings;
  m.impl(ops::fp8_fp4_mqa_logits.name, &mt::fp8_fp4_mqa_logits_op);
  m.impl(ops::fp8_mqa_logits.name, &mt::fp8_mqa_logits_op);
  m.impl(ops::get_mqa_logits_metadata.name, &mt::get_mqa_logits_metadata);
  m.impl(ops::get_paged_mqa_logits_metadata.name, &mt::get_paged_mqa_logits_metadata);
  m.impl(ops::fp8_fp4_paged_mqa_logits.name, &mt::fp8_fp4_paged_mqa_logits_op);
  m.impl(ops::fp8_paged_mqa_logits.name, &mt::fp8_paged_mqa_logits_op);
  m.impl(ops::indexer_k_quant_and_cache.name, &mt::indexer_k_quant_and_cache);
  m.impl(ops::indexer_k_quant_and_cache_mxfp4.name, &mt::indexer_k_quant_and_cache_mxfp4);
  m.impl(ops::cp_gather_indexer_k_quant_cache.name, &mt::cp_gather_indexer_k_quant_cache);
  m.impl(ops::indexer_q_quant.name, &mt::indexer_q_quant);
}

namespace mqalogits_torch {
// The ops with Meta kernels: torch.compile and FakeTensor trace through them.
constexpr const mqalogits_bindings::op_declaration* traced_ops[] = {
    &mqalogits_bindings::fp8_fp4_mqa_logits,
    &mqalogits_bindings::fp8_mqa_logits,
    &mqalogits_bindings::get_mqa_logits_metadata,
    &mqalogits_bindings::get_paged_mqa_logits_metadata,
    &mqalogits_bindings::fp8_fp4_paged_mqa_logits,
    &mqalogits_bindings::fp8_paged_mqa_logits};
}  // namespace mqalogits_torch

MQALOGITS_TORCH_LIBRARY_IMPL(MQALOGITS_TORCH_NAMESPACE, Meta, m) {
  namespace mt = mqalogits_torch;
  namespace ops = mqalogits_bindings;
  m.impl(ops::fp8_fp4_mqa_logits.name, &mt::fp8_fp4_mqa_logits_meta);
  m.impl(ops::fp8_mqa_logits.name, &mt::fp8_mqa_logits_meta);
  m.impl(ops::get_mqa_logits_metadata.name, &mt::get_mqa_logits_metadata_meta);
  m.impl(ops::get_paged_mqa_logits_metadata.name, &mt::get_paged_mqa_logits_metadata_meta);
  m.impl(ops::fp8_fp4_paged_mqa_logits.name, &mt::fp8_fp4_paged_mqa_logits_meta);
  m.impl(ops::fp8_paged_mqa_logits.name, &mt::fp8_paged_mqa_logits_meta);
  m.impl(ops::indexer_k_quant_and_cache.name, &mt::indexer_k_quant_and_cache_meta);
  m.impl(ops::indexer_k_quant_and_cache_mxfp4.name, &mt::indexer_k_quant_and_cache_mxfp4_meta);
  m.impl(ops::cp_gather_indexer_k_quant_cache.name, &mt::cp_gather_indexer_k_quant_cache_meta);
  m.impl(ops::indexer_q_quant.name, &mt::indexer_q_quant_meta);
}

// Meta tensors reach the Meta kernels past autograd (torch 1.13 has no AutogradMeta fallthrough
// of its own).
MQALOGITS_TORCH_LIBRARY_IMPL(MQALOGITS_TORCH_NAMESPACE, AutogradMeta, m) {
  for (const mqalogits_bindings::op_declaration* op : mqalogits_torch::traced_ops)
    m.impl(op->name, torch::CppFunction::makeFallthrough());
}
