// The op library's registration: `torch.ops.<namespace>.<name>` for every op (namespace
// MQALOGITS_TORCH_NAMESPACE, default mqalogits), schemas in DeepGEMM's argument order. DeepGEMM's
// tuple arguments are lists here (a tuple passes): q = (codes, scales or None), kv = (codes,
// scales). Every kernel also takes a keyword-only `out=`, a preallocated logits tensor the result
// is written into (and returned); the dense and paged kernels take the fused top-k and the
// candidate-block keywords (kernel_keywords, candidate_keywords). The ops reading tensors are CPU
// kernels, with Meta kernels (meta_ops.cpp) that torch.compile and FakeTensor trace through.
#include "cache_ops.hpp"
#include "meta_ops.hpp"  // first: it includes torch's headers in an order Clang takes
#include "sparse_ops.hpp"

#include <torch/library.h>

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

// "__torch__.torch.classes.<namespace>.<name>", as schemas name a custom class.
std::string class_type(const char* name) {
  return std::string(
             "__torch__.torch.classes." MQALOGITS_TORCH_STR(MQALOGITS_TORCH_NAMESPACE) ".") +
         name;
}

}  // namespace
}  // namespace mqalogits_torch
// The keyword-only arguments the dense and paged ops share: the logits' buffer and the fused
// top-k (see kernel_keywords).
// The dense and paged ops' candidate blocks (see candidate_keywords).
#define CANDIDATE_KEYWORDS                                                   \
  ", int? candidate_topk_blocks=None, int candidate_block_size=8, "          \
  "str candidate_order=\"ascending\", str candidate_padding=\"minus_one\", " \
  "Tensor(d!)? candidate_out=None"
#define TOPK_KEYWORDS                                                                         \
  "Tensor(a!)? out=None, int? topk=None, bool topk_values=False, str topk_index=\"column\", " \
  "Tensor(b!)? topk_out=None, Tensor(c!)? topk_values_out=None"

MQALOGITS_TORCH_LIBRARY(MQALOGITS_TORCH_NAMESPACE, m) {
  namespace mt = mqalogits_torch;
  // ScalarType defaults are torch's codes: 6 = torch.float32.
  m.def(
      "fp8_fp4_mqa_logits(Tensor?[] q, Tensor[] kv, Tensor weights, Tensor cu_seq_len_k_start, "
      "Tensor cu_seq_len_k_end, bool clean_logits=True, int max_seqlen_k=0, "
      "ScalarType logits_dtype=6, Tensor? schedule_meta=None, *, "
      "bool truncate_long_contexts=False, " TOPK_KEYWORDS
      ", Tensor? topk_offset=None, bool topk_short_rows=False" CANDIDATE_KEYWORDS ") -> Tensor");
  m.def(
      "fp8_mqa_logits(Tensor q, Tensor[] kv, Tensor weights, Tensor cu_seq_len_k_start, "
      "Tensor cu_seq_len_k_end, bool clean_logits=True, int max_seqlen_k=0, *, "
      "bool truncate_long_contexts=False, " TOPK_KEYWORDS
      ", Tensor? topk_offset=None, bool topk_short_rows=False" CANDIDATE_KEYWORDS ") -> Tensor");
  m.def(
      "get_mqa_logits_metadata(Tensor cu_seq_len_k_start, Tensor cu_seq_len_k_end, "
      "int num_kv_tokens, int num_heads) -> Tensor");
  m.def(
      "get_paged_mqa_logits_metadata(Tensor context_lens, int block_kv, int num_sms, "
      "Tensor? indices=None, *, Tensor(a!)? out=None) -> Tensor");
  m.def("get_num_sms() -> int", &mt::get_num_sms);
  m.def("set_num_sms(int num_sms) -> ()", &mt::set_num_sms);
  m.def(
      "fp8_fp4_paged_mqa_logits(Tensor?[] q, Tensor kv_cache, Tensor weights, "
      "Tensor context_lens, Tensor block_table, Tensor schedule_meta, int max_context_len, "
      "bool clean_logits=False, ScalarType logits_dtype=6, Tensor? indices=None, *, "
      "bool truncate_long_contexts=False, " TOPK_KEYWORDS
      ", bool topk_short_rows=False" CANDIDATE_KEYWORDS ") -> Tensor");
  m.def(
      "fp8_paged_mqa_logits(Tensor q, Tensor kv_cache, Tensor weights, Tensor context_lens, "
      "Tensor block_table, Tensor schedule_meta, int max_context_len, bool clean_logits=False, "
      "Tensor? indices=None, *, bool truncate_long_contexts=False, " TOPK_KEYWORDS
      ", bool topk_short_rows=False" CANDIDATE_KEYWORDS ") -> Tensor");
  // The ops around the kernels (vLLM's names; the caches and dst tensors written in place).
  m.def(
      "indexer_k_quant_and_cache(Tensor k, Tensor(a!) kv_cache, Tensor slot_mapping, "
      "int quant_block_size, str? scale_fmt=None, *, bool hadamard=False) -> ()");
  m.def(
      "indexer_k_quant_and_cache_mxfp4(Tensor k, Tensor(a!) kv_cache, Tensor slot_mapping, *, "
      "bool hadamard=False) -> ()");
  m.def(
      "cp_gather_indexer_k_quant_cache(Tensor kv_cache, Tensor(a!) dst_k, Tensor(b!) dst_scale, "
      "Tensor block_table, Tensor cu_seq_lens) -> ()");
  m.def(
      "indexer_q_quant(Tensor q, Tensor weights, float softmax_scale, float head_scale, "
      "bool use_fp4=False, *, str? rule=None, str? scale_fmt=\"ue8m0\", bool hadamard=False) "
      "-> Tensor[]");
  // The sparse metadata are objects (custom classes): these ops run on any key.
  m.class_<mt::sparse_metadata>("SparseMetadata");
  m.class_<mt::paged_sparse_metadata>("PagedSparseMetadata");
  const std::string sparse = mt::class_type("SparseMetadata");
  const std::string paged_sparse = mt::class_type("PagedSparseMetadata");
  m.def(torch::schema(("get_sparse_mqa_logits_metadata(Tensor cu_seq_len_k_start, "
                       "Tensor cu_seq_len_k_end, int num_kv_tokens, "
                       "Tensor sparse_kv_block_indices, ScalarType qk_dtype, "
                       "int sparse_block_kv, bool use_unaligned_ks=False) -> " +
                       sparse)
                          .c_str()),
        &mt::get_sparse_mqa_logits_metadata);
  m.def(torch::schema(("get_paged_sparse_mqa_logits_metadata(Tensor context_lens, "
                       "Tensor block_table, Tensor indices, int page_kv, "
                       "Tensor sparse_kv_block_indices, ScalarType qk_dtype, "
                       "int sparse_block_kv) -> " +
                       paged_sparse)
                          .c_str()),
        &mt::get_paged_sparse_mqa_logits_metadata);
  m.def(torch::schema(("fp8_fp4_sparse_mqa_logits(Tensor?[] q, Tensor[] kv, Tensor weights, " +
                       sparse +
                       " metadata, int num_max_sparse_blocks, int sparse_block_kv, "
                       "bool use_unaligned_ks=False, *, " TOPK_KEYWORDS ") -> Tensor")
                          .c_str()),
        &mt::fp8_fp4_sparse_mqa_logits_op);
  m.def(
      torch::schema(("fp8_fp4_paged_sparse_mqa_logits(Tensor?[] q, Tensor kv_cache, "
                     "Tensor weights, " +
                     paged_sparse +
                     " metadata, int num_max_sparse_blocks, int sparse_block_kv, *, " TOPK_KEYWORDS
                     ") -> Tensor")
                        .c_str()),
      &mt::fp8_fp4_paged_sparse_mqa_logits_op);
}

MQALOGITS_TORCH_LIBRARY_IMPL(MQALOGITS_TORCH_NAMESPACE, CPU, m) {
  namespace mt = mqalogits_torch;
  m.impl("fp8_fp4_mqa_logits", &mt::fp8_fp4_mqa_logits_op);
  m.impl("fp8_mqa_logits", &mt::fp8_mqa_logits_op);
  m.impl("get_mqa_logits_metadata", &mt::get_mqa_logits_metadata);
  m.impl("get_paged_mqa_logits_metadata", &mt::get_paged_mqa_logits_metadata);
  m.impl("fp8_fp4_paged_mqa_logits", &mt::fp8_fp4_paged_mqa_logits_op);
  m.impl("fp8_paged_mqa_logits", &mt::fp8_paged_mqa_logits_op);
  m.impl("indexer_k_quant_and_cache", &mt::indexer_k_quant_and_cache);
  m.impl("indexer_k_quant_and_cache_mxfp4", &mt::indexer_k_quant_and_cache_mxfp4);
  m.impl("cp_gather_indexer_k_quant_cache", &mt::cp_gather_indexer_k_quant_cache);
  m.impl("indexer_q_quant", &mt::indexer_q_quant);
}

MQALOGITS_TORCH_LIBRARY_IMPL(MQALOGITS_TORCH_NAMESPACE, Meta, m) {
  namespace mt = mqalogits_torch;
  m.impl("fp8_fp4_mqa_logits", &mt::fp8_fp4_mqa_logits_meta);
  m.impl("fp8_mqa_logits", &mt::fp8_mqa_logits_meta);
  m.impl("get_mqa_logits_metadata", &mt::get_mqa_logits_metadata_meta);
  m.impl("get_paged_mqa_logits_metadata", &mt::get_paged_mqa_logits_metadata_meta);
  m.impl("fp8_fp4_paged_mqa_logits", &mt::fp8_fp4_paged_mqa_logits_meta);
  m.impl("fp8_paged_mqa_logits", &mt::fp8_paged_mqa_logits_meta);
  m.impl("indexer_k_quant_and_cache", &mt::indexer_k_quant_and_cache_meta);
  m.impl("indexer_k_quant_and_cache_mxfp4", &mt::indexer_k_quant_and_cache_mxfp4_meta);
  m.impl("cp_gather_indexer_k_quant_cache", &mt::cp_gather_indexer_k_quant_cache_meta);
  m.impl("indexer_q_quant", &mt::indexer_q_quant_meta);
}

// Meta tensors reach the Meta kernels past autograd (torch 1.13 has no AutogradMeta fallthrough
// of its own).
MQALOGITS_TORCH_LIBRARY_IMPL(MQALOGITS_TORCH_NAMESPACE, AutogradMeta, m) {
  for (const char* name :
       {"fp8_fp4_mqa_logits", "fp8_mqa_logits", "get_mqa_logits_metadata",
        "get_paged_mqa_logits_metadata", "fp8_fp4_paged_mqa_logits", "fp8_paged_mqa_logits"})
    m.impl(name, torch::CppFunction::makeFallthrough());
}
