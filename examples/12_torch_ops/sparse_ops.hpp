// The sparse ops and their metadata objects (torch custom classes), see sparse_ops.cpp.
#pragma once

#include "kernel_args.hpp"  // first: it includes torch's headers in an order Clang takes

#include <torch/custom_class.h>

#ifndef MQALOGITS_TORCH_NAMESPACE
#define MQALOGITS_TORCH_NAMESPACE mqalogits
#endif
#define MQALOGITS_TORCH_PASTE2(a, b) a##b
#define MQALOGITS_TORCH_PASTE(a, b) MQALOGITS_TORCH_PASTE2(a, b)
#define MQALOGITS_TORCH_CLASSES MQALOGITS_TORCH_PASTE(classes_, MQALOGITS_TORCH_NAMESPACE)

namespace mqalogits_torch {

// torch knows a custom class by its C++ type: each namespace's build has types of its own, so
// two builds load side by side.
inline namespace MQALOGITS_TORCH_CLASSES {
struct sparse_metadata : torch::CustomClassHolder {
  ml::sparse_mqa_metadata meta;
};
struct paged_sparse_metadata : torch::CustomClassHolder {
  ml::paged_sparse_mqa_metadata meta;
};
}  // namespace MQALOGITS_TORCH_CLASSES

c10::intrusive_ptr<sparse_metadata> get_sparse_mqa_logits_metadata(
    const at::Tensor& cu_seq_len_k_start, const at::Tensor& cu_seq_len_k_end,
    std::int64_t num_kv_tokens, const at::Tensor& sparse_kv_block_indices, c10::ScalarType qk_dtype,
    std::int64_t sparse_block_kv, bool use_unaligned_ks);
c10::intrusive_ptr<paged_sparse_metadata> get_paged_sparse_mqa_logits_metadata(
    const at::Tensor& context_lens, const at::Tensor& block_table, const at::Tensor& indices,
    std::int64_t page_kv, const at::Tensor& sparse_kv_block_indices, c10::ScalarType qk_dtype,
    std::int64_t sparse_block_kv);
at::Tensor fp8_fp4_sparse_mqa_logits(const c10::List<c10::optional<at::Tensor>>& q,
                                     const std::vector<at::Tensor>& kv, const at::Tensor& weights,
                                     const c10::intrusive_ptr<sparse_metadata>& metadata,
                                     std::int64_t num_max_sparse_blocks,
                                     std::int64_t sparse_block_kv, bool use_unaligned_ks,
                                     const c10::optional<at::Tensor>& out,
                                     const topk_keywords& topk);
at::Tensor fp8_fp4_paged_sparse_mqa_logits(
    const c10::List<c10::optional<at::Tensor>>& q, const at::Tensor& kv_cache,
    const at::Tensor& weights, const c10::intrusive_ptr<paged_sparse_metadata>& metadata,
    std::int64_t num_max_sparse_blocks, std::int64_t sparse_block_kv,
    const c10::optional<at::Tensor>& out, const topk_keywords& topk);

}  // namespace mqalogits_torch
