// The ops around the kernels (cache_ops.cpp): vLLM's indexer K cache inserts and gather, and Q
// quantisation.
#pragma once

#include "ops.hpp"  // first: it includes torch's headers in an order Clang takes

#include <c10/util/string_view.h>

namespace mqalogits_torch {

void indexer_k_quant_and_cache(const at::Tensor& k, const at::Tensor& kv_cache,
                               const at::Tensor& slot_mapping, std::int64_t quant_block_size,
                               c10::optional<c10::string_view> scale_fmt, bool hadamard);
void indexer_k_quant_and_cache_mxfp4(const at::Tensor& k, const at::Tensor& kv_cache,
                                     const at::Tensor& slot_mapping, bool hadamard);
void cp_gather_indexer_k_quant_cache(const at::Tensor& kv_cache, const at::Tensor& dst_k,
                                     const at::Tensor& dst_scale, const at::Tensor& block_table,
                                     const at::Tensor& cu_seq_lens);
// FP8: [q_fp8 uint8 [T, H, D], weights_out float32 [T, H]]; MXFP4 (use_fp4): [q_packed uint8
// [T, H, D / 2], q_scale int32 [T, H], weights_out].
std::vector<at::Tensor> indexer_q_quant(const at::Tensor& q, const at::Tensor& weights,
                                        double softmax_scale, double head_scale, bool use_fp4,
                                        c10::optional<c10::string_view> rule,
                                        c10::optional<c10::string_view> scale_fmt, bool hadamard);

}  // namespace mqalogits_torch
