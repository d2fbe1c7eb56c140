// The Meta kernels of the ops that read tensors: outputs of the right shape, dtype and strides on
// the meta device, computing nothing, so torch.compile and FakeTensor trace the ops (what the CPU
// kernels return: the caller's buffer when given one). Their signatures are the schemas'
// (registration.cpp).
#pragma once

#include "ops.hpp"  // first: it includes torch's headers in an order Clang takes

#include <c10/util/string_view.h>

namespace mqalogits_torch {

at::Tensor fp8_fp4_mqa_logits_meta(
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
    const c10::optional<at::Tensor>& candidate_out);
at::Tensor fp8_mqa_logits_meta(
    const at::Tensor& q, const std::vector<at::Tensor>& kv, const at::Tensor& weights,
    const at::Tensor& cu_seq_len_k_start, const at::Tensor& cu_seq_len_k_end, bool clean_logits,
    std::int64_t max_seqlen_k, bool truncate_long_contexts, const c10::optional<at::Tensor>& out,
    c10::optional<std::int64_t> topk, bool topk_values, c10::string_view topk_index,
    const c10::optional<at::Tensor>& topk_out, const c10::optional<at::Tensor>& topk_values_out,
    const c10::optional<at::Tensor>& topk_offset, bool topk_short_rows,
    c10::optional<std::int64_t> candidate_topk_blocks, std::int64_t candidate_block_size,
    c10::string_view candidate_order, c10::string_view candidate_padding,
    const c10::optional<at::Tensor>& candidate_out);
at::Tensor fp8_fp4_paged_mqa_logits_meta(
    const c10::List<c10::optional<at::Tensor>>& q, const at::Tensor& kv_cache,
    const at::Tensor& weights, const at::Tensor& context_lens, const at::Tensor& block_table,
    const at::Tensor& schedule_meta, std::int64_t max_context_len, bool clean_logits,
    c10::ScalarType logits_dtype, const c10::optional<at::Tensor>& indices,
    bool truncate_long_contexts, const c10::optional<at::Tensor>& out,
    c10::optional<std::int64_t> topk, bool topk_values, c10::string_view topk_index,
    const c10::optional<at::Tensor>& topk_out, const c10::optional<at::Tensor>& topk_values_out,
    bool topk_short_rows, c10::optional<std::int64_t> candidate_topk_blocks,
    std::int64_t candidate_block_size, c10::string_view candidate_order,
    c10::string_view candidate_padding, const c10::optional<at::Tensor>& candidate_out);
at::Tensor fp8_paged_mqa_logits_meta(
    const at::Tensor& q, const at::Tensor& kv_cache, const at::Tensor& weights,
    const at::Tensor& context_lens, const at::Tensor& block_table, const at::Tensor& schedule_meta,
    std::int64_t max_context_len, bool clean_logits, const c10::optional<at::Tensor>& indices,
    bool truncate_long_contexts, const c10::optional<at::Tensor>& out,
    c10::optional<std::int64_t> topk, bool topk_values, c10::string_view topk_index,
    const c10::optional<at::Tensor>& topk_out, const c10::optional<at::Tensor>& topk_values_out,
    bool topk_short_rows, c10::optional<std::int64_t> candidate_topk_blocks,
    std::int64_t candidate_block_size, c10::string_view candidate_order,
    c10::string_view candidate_padding, const c10::optional<at::Tensor>& candidate_out);
at::Tensor get_mqa_logits_metadata_meta(const at::Tensor& cu_seq_len_k_start,
                                        const at::Tensor& cu_seq_len_k_end,
                                        std::int64_t num_kv_tokens, std::int64_t num_heads);
at::Tensor get_paged_mqa_logits_metadata_meta(const at::Tensor& context_lens, std::int64_t block_kv,
                                              std::int64_t num_sms,
                                              const c10::optional<at::Tensor>& indices,
                                              const c10::optional<at::Tensor>& out);

// The cache ops write in place: their Meta kernels check nothing and write nothing.
void indexer_k_quant_and_cache_meta(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                    std::int64_t, c10::optional<c10::string_view>, bool);
void indexer_k_quant_and_cache_mxfp4_meta(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                          bool);
void cp_gather_indexer_k_quant_cache_meta(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                          const at::Tensor&, const at::Tensor&);
std::vector<at::Tensor> indexer_q_quant_meta(const at::Tensor& q, const at::Tensor& weights,
                                             double softmax_scale, double head_scale, bool use_fp4,
                                             c10::optional<c10::string_view> rule,
                                             c10::optional<c10::string_view> scale_fmt,
                                             bool hadamard);

}  // namespace mqalogits_torch
