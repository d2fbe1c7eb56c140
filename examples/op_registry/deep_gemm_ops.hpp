// DeepGEMM's own schemas (torch.ops.deep_gemm.*, as vLLM's DeepGEMM registers them), for the
// opt-in library that takes upstream's call forms: q and its scales apart, no keyword-only
// arguments, the sparse metadata a tensor. Where upstream's arguments are the library's, their
// declarations are shared.
#pragma once

#include "kernel_ops.hpp"
#include "metadata_ops.hpp"

namespace mqalogits_bindings::deep_gemm {

inline constexpr param dense_args[] = {{"q", "Tensor"},
                                       {"q_sf", "Tensor?"},
                                       {"kv", "Tensor"},
                                       {"kv_sf", "Tensor"},
                                       {"weights", "Tensor"},
                                       {"cu_seq_len_k_start", "Tensor"},
                                       {"cu_seq_len_k_end", "Tensor"},
                                       {"clean_logits", "bool", "True"},
                                       {"max_seqlen_k", "int", "0"},
                                       float32_logits,
                                       {"schedule_meta", "Tensor?", "None"}};
inline constexpr param legacy_dense_args[] = {{"q", "Tensor"},
                                              {"kv", "Tensor"},
                                              {"kv_sf", "Tensor"},
                                              {"weights", "Tensor"},
                                              {"cu_seq_len_k_start", "Tensor"},
                                              {"cu_seq_len_k_end", "Tensor"},
                                              {"clean_logits", "bool", "True"},
                                              {"max_seqlen_k", "int", "0"}};
inline constexpr param paged_args[] = {{"q", "Tensor"},
                                       {"q_sf", "Tensor?"},
                                       {"kv_cache", "Tensor"},
                                       {"weights", "Tensor"},
                                       {"context_lens", "Tensor"},
                                       {"block_table", "Tensor"},
                                       {"schedule_meta", "Tensor"},
                                       {"max_context_len", "int"},
                                       {"clean_logits", "bool", "False"},
                                       float32_logits,
                                       {"indices", "Tensor?", "None"}};
inline constexpr param sparse_args[] = {{"q", "Tensor"},
                                        {"q_sf", "Tensor?"},
                                        {"kv", "Tensor"},
                                        {"kv_sf", "Tensor"},
                                        {"weights", "Tensor"},
                                        {"metadata", "Tensor"},
                                        {"num_max_sparse_blocks", "int"},
                                        {"sparse_block_kv", "int"},
                                        {"use_unaligned_ks", "bool", "False"}};
inline constexpr param paged_sparse_args[] = {
    {"q", "Tensor"},           {"q_sf", "Tensor?"},    {"kv_cache", "Tensor"},
    {"weights", "Tensor"},     {"metadata", "Tensor"}, {"num_max_sparse_blocks", "int"},
    {"sparse_block_kv", "int"}};

inline constexpr op_declaration fp8_fp4_mqa_logits{
    "fp8_fp4_mqa_logits", dense_args, {}, "Tensor", {}, torch};
inline constexpr op_declaration fp8_mqa_logits{
    "fp8_mqa_logits", legacy_dense_args, {}, "Tensor", {}, torch};
inline constexpr op_declaration fp8_fp4_paged_mqa_logits{
    "fp8_fp4_paged_mqa_logits", paged_args, {}, "Tensor", {}, torch};
inline constexpr op_declaration fp8_paged_mqa_logits{
    "fp8_paged_mqa_logits", legacy_paged_args, {}, "Tensor", {}, torch};
inline constexpr op_declaration get_paged_mqa_logits_metadata{
    "get_paged_mqa_logits_metadata", paged_metadata_args, {}, "Tensor", {}, torch};
inline constexpr op_declaration get_sparse_mqa_logits_metadata{
    "get_sparse_mqa_logits_metadata", sparse_metadata_args, {}, "Tensor", {}, torch};
inline constexpr op_declaration get_paged_sparse_mqa_logits_metadata{
    "get_paged_sparse_mqa_logits_metadata", paged_sparse_metadata_args, {}, "Tensor", {}, torch};
inline constexpr op_declaration fp8_fp4_sparse_mqa_logits{
    "fp8_fp4_sparse_mqa_logits", sparse_args, {}, "Tensor", {}, torch};
inline constexpr op_declaration fp8_fp4_paged_sparse_mqa_logits{
    "fp8_fp4_paged_sparse_mqa_logits", paged_sparse_args, {}, "Tensor", {}, torch};
// get_mqa_logits_metadata is the library's own declaration (the same arguments).

}  // namespace mqalogits_bindings::deep_gemm
