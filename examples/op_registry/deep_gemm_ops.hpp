// DeepGEMM's own schemas (torch.ops.deep_gemm.*, as vLLM's DeepGEMM registers them), for the
// opt-in library that takes upstream's call forms: q and its scales apart, no keyword-only
// arguments, the sparse metadata a tensor. Where upstream's arguments are the library's, their
// declarations are shared.
#pragma once

#include "kernel_ops.hpp"
#include "metadata_ops.hpp"

namespace mqalogits_bindings::deep_gemm {

// Upstream's Q and K: codes and scales apart.
inline constexpr param q_kv[] = {
    {"q", "Tensor"}, {"q_sf", "Tensor?"}, {"kv", "Tensor"}, {"kv_sf", "Tensor"}};
inline constexpr param fp8_q_kv[] = {{"q", "Tensor"}, {"kv", "Tensor"}, {"kv_sf", "Tensor"}};
inline constexpr param q[] = {{"q", "Tensor"}, {"q_sf", "Tensor?"}};
// The sparse metadata is a tensor there.
inline constexpr param sparse_head[] = {{"weights", "Tensor"}, {"metadata", "Tensor"}};
inline constexpr param paged_sparse_head[] = {
    {"kv_cache", "Tensor"}, {"weights", "Tensor"}, {"metadata", "Tensor"}};

inline constexpr op_declaration fp8_fp4_mqa_logits{
    "fp8_fp4_mqa_logits", {q_kv, dense_common, dense_schedule}, {}, "Tensor", {}, torch};
inline constexpr op_declaration fp8_mqa_logits{
    "fp8_mqa_logits", {fp8_q_kv, dense_common}, {}, "Tensor", {}, torch};
inline constexpr op_declaration fp8_fp4_paged_mqa_logits{
    "fp8_fp4_paged_mqa_logits",
    {q, paged_common, paged_logits_dtype, paged_indices},
    {},
    "Tensor",
    {},
    torch};
inline constexpr op_declaration fp8_paged_mqa_logits{
    "fp8_paged_mqa_logits", {fp8_q, paged_common, paged_indices}, {}, "Tensor", {}, torch};
inline constexpr op_declaration get_paged_mqa_logits_metadata{
    "get_paged_mqa_logits_metadata", {paged_metadata_args}, {}, "Tensor", {}, torch};
inline constexpr op_declaration get_sparse_mqa_logits_metadata{
    "get_sparse_mqa_logits_metadata", {sparse_metadata_args}, {}, "Tensor", {}, torch};
inline constexpr op_declaration get_paged_sparse_mqa_logits_metadata{
    "get_paged_sparse_mqa_logits_metadata", {paged_sparse_metadata_args}, {}, "Tensor", {}, torch};
inline constexpr op_declaration fp8_fp4_sparse_mqa_logits{
    "fp8_fp4_sparse_mqa_logits",
    {q_kv, sparse_head, sparse_blocks, unaligned_ks},
    {},
    "Tensor",
    {},
    torch};
inline constexpr op_declaration fp8_fp4_paged_sparse_mqa_logits{
    "fp8_fp4_paged_sparse_mqa_logits",
    {q, paged_sparse_head, sparse_blocks},
    {},
    "Tensor",
    {},
    torch};
// get_mqa_logits_metadata is the library's own declaration (the same arguments).

}  // namespace mqalogits_bindings::deep_gemm
