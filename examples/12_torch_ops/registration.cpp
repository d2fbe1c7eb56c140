// The op library's registration: `torch.ops.<namespace>.<name>` for every op (namespace
// MQALOGITS_TORCH_NAMESPACE, default mqalogits). The schemas are written from the ops'
// declarations (examples/op_registry: DeepGEMM's argument order, the Python module's names and
// defaults), so torch refuses at load an op function whose arguments differ from its declaration.
// The ops reading tensors are CPU kernels, with Meta kernels (meta_ops.cpp) that torch.compile
// and FakeTensor trace through. The kernels' functions are written from their declarations too
// (declared_op.hpp): each reads its arguments by name, its keyword groups through one reader.
#include "cache_ops.hpp"
#include "declared_op.hpp"
#include "meta_ops.hpp"  // first: it includes torch's headers in an order Clang takes

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
  using ops::arg;
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
  m.impl(ops::fp8_fp4_sparse_mqa_logits.name,
         mt::declared_op<ops::fp8_fp4_sparse_mqa_logits>([](const auto& a) {
           return mt::fp8_fp4_sparse_mqa_logits(
               arg<"q">(a), arg<"kv">(a), arg<"weights">(a), arg<"metadata">(a),
               arg<"num_max_sparse_blocks">(a), arg<"sparse_block_kv">(a),
               arg<"use_unaligned_ks">(a), arg<"out">(a), mt::topk_keywords_of(a));
         }));
  m.impl(ops::fp8_fp4_paged_sparse_mqa_logits.name,
         mt::declared_op<ops::fp8_fp4_paged_sparse_mqa_logits>([](const auto& a) {
           return mt::fp8_fp4_paged_sparse_mqa_logits(
               arg<"q">(a), arg<"kv_cache">(a), arg<"weights">(a), arg<"metadata">(a),
               arg<"num_max_sparse_blocks">(a), arg<"sparse_block_kv">(a), arg<"out">(a),
               mt::topk_keywords_of(a));
         }));
}

MQALOGITS_TORCH_LIBRARY_IMPL(MQALOGITS_TORCH_NAMESPACE, CPU, m) {
  namespace mt = mqalogits_torch;
  namespace ops = mqalogits_bindings;
  using ops::arg;
  // The kernels read their arguments by name from their declarations.
  m.impl(ops::fp8_fp4_mqa_logits.name, mt::declared_op<ops::fp8_fp4_mqa_logits>([](const auto& a) {
           return mt::fp8_fp4_mqa_logits(
               arg<"q">(a), arg<"kv">(a), arg<"weights">(a), arg<"cu_seq_len_k_start">(a),
               arg<"cu_seq_len_k_end">(a), arg<"clean_logits">(a), arg<"max_seqlen_k">(a),
               arg<"logits_dtype">(a), arg<"schedule_meta">(a), mt::kernel_keywords_of(a));
         }));
  m.impl(ops::fp8_mqa_logits.name, mt::declared_op<ops::fp8_mqa_logits>([](const auto& a) {
           return mt::fp8_mqa_logits(arg<"q">(a), arg<"kv">(a), arg<"weights">(a),
                                     arg<"cu_seq_len_k_start">(a), arg<"cu_seq_len_k_end">(a),
                                     arg<"clean_logits">(a), arg<"max_seqlen_k">(a),
                                     mt::kernel_keywords_of(a));
         }));
  m.impl(ops::get_mqa_logits_metadata.name, &mt::get_mqa_logits_metadata);
  m.impl(ops::get_paged_mqa_logits_metadata.name, &mt::get_paged_mqa_logits_metadata);
  m.impl(ops::fp8_fp4_paged_mqa_logits.name,
         mt::declared_op<ops::fp8_fp4_paged_mqa_logits>([](const auto& a) {
           return mt::fp8_fp4_paged_mqa_logits(arg<"q">(a), arg<"kv_cache">(a), arg<"weights">(a),
                                               arg<"context_lens">(a), arg<"block_table">(a),
                                               arg<"schedule_meta">(a), arg<"max_context_len">(a),
                                               arg<"clean_logits">(a), arg<"logits_dtype">(a),
                                               arg<"indices">(a), mt::kernel_keywords_of(a));
         }));
  m.impl(ops::fp8_paged_mqa_logits.name,
         mt::declared_op<ops::fp8_paged_mqa_logits>([](const auto& a) {
           return mt::fp8_paged_mqa_logits(
               arg<"q">(a), arg<"kv_cache">(a), arg<"weights">(a), arg<"context_lens">(a),
               arg<"block_table">(a), arg<"schedule_meta">(a), arg<"max_context_len">(a),
               arg<"clean_logits">(a), arg<"indices">(a), mt::kernel_keywords_of(a));
         }));
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
