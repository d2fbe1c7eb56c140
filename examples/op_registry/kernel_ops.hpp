// The kernels' declarations: DeepGEMM's names, argument names, order and defaults, then the
// keyword-only arguments of this library (each group declared once, for every kernel taking it).
// Upstream's tuple arguments are lists in the torch schemas (a tuple passes): q = (codes, scales
// or None), kv = (codes, scales).
#pragma once

#include "declaration.hpp"
#include "kernel_docs.hpp"

namespace mqalogits_bindings {

// The Python module's thread count (the torch ops take torch's, at::get_num_threads()).
inline constexpr param threads_keyword[] = {{"num_threads", "int?", "None", python}};
// False (the default): a row longer than its columns, its kv or its block table is a named
// error; True keeps its first columns.
inline constexpr param truncate_keyword[] = {{"truncate_long_contexts", "bool", "False"}};
inline constexpr param python_truncate_keyword[] = {only_on(python, truncate_keyword[0])};
// The logits' buffer and the fused top-k.
inline constexpr param topk_keywords[] = {
    {"out", "Tensor(a!)?", "None"},      {"topk", "int?", "None"},
    {"topk_values", "bool", "False"},    {"topk_index", "str", "\"column\""},
    {"topk_out", "Tensor(b!)?", "None"}, {"topk_values_out", "Tensor(c!)?", "None"}};
// The dense kernels' offset added to each selected column.
inline constexpr param offset_keyword[] = {{"topk_offset", "Tensor?", "None"}};
// The dense and paged kernels' selections besides the top-k: short rows and candidate blocks.
inline constexpr param selection_keywords[] = {
    {"topk_short_rows", "bool", "False"},          {"candidate_topk_blocks", "int?", "None"},
    {"candidate_block_size", "int", "8"},          {"candidate_order", "str", "\"ascending\""},
    {"candidate_padding", "str", "\"minus_one\""}, {"candidate_out", "Tensor(d!)?", "None"}};

// torch's ScalarType defaults are its codes: 6 is torch.float32; Python takes the name.
inline constexpr param float32_logits = {"logits_dtype", "ScalarType", "6", both, "\"float32\""};

// The positional arguments, in groups the library's names and upstream's call forms share.
inline constexpr param mx_q_kv[] = {{"q", "Tensor?[]"}, {"kv", "Tensor[]"}};
inline constexpr param fp8_q_kv[] = {{"q", "Tensor"}, {"kv", "Tensor[]"}};
inline constexpr param mx_q[] = {{"q", "Tensor?[]"}};
inline constexpr param fp8_q[] = {{"q", "Tensor"}};
inline constexpr param dense_common[] = {{"weights", "Tensor"},
                                         {"cu_seq_len_k_start", "Tensor"},
                                         {"cu_seq_len_k_end", "Tensor"},
                                         {"clean_logits", "bool", "True"},
                                         {"max_seqlen_k", "int", "0"}};
inline constexpr param dense_schedule[] = {float32_logits, {"schedule_meta", "Tensor?", "None"}};
inline constexpr param paged_common[] = {
    {"kv_cache", "Tensor"},           {"weights", "Tensor"},       {"context_lens", "Tensor"},
    {"block_table", "Tensor"},        {"schedule_meta", "Tensor"}, {"max_context_len", "int"},
    {"clean_logits", "bool", "False"}};
inline constexpr param paged_logits_dtype[] = {float32_logits};
inline constexpr param paged_indices[] = {{"indices", "Tensor?", "None"}};
inline constexpr param sparse_blocks[] = {{"num_max_sparse_blocks", "int"},
                                          {"sparse_block_kv", "int"}};
inline constexpr param unaligned_ks[] = {{"use_unaligned_ks", "bool", "False"}};
inline constexpr param sparse_head[] = {{"q", "Tensor?[]"},
                                        {"kv", "Tensor[]"},
                                        {"weights", "Tensor"},
                                        {"metadata", "class:SparseMetadata"}};
inline constexpr param paged_sparse_head[] = {{"q", "Tensor?[]"},
                                              {"kv_cache", "Tensor"},
                                              {"weights", "Tensor"},
                                              {"metadata", "class:PagedSparseMetadata"}};

inline constexpr op_declaration fp8_fp4_mqa_logits{
    "fp8_fp4_mqa_logits",
    {mx_q_kv, dense_common, dense_schedule},
    {threads_keyword, truncate_keyword, topk_keywords, offset_keyword, selection_keywords},
    "Tensor",
    {docs::fp8_fp4_mqa_logits, docs::selections, docs::dense_tail}};
inline constexpr op_declaration fp8_mqa_logits{
    "fp8_mqa_logits",
    {fp8_q_kv, dense_common},
    {threads_keyword, truncate_keyword, topk_keywords, offset_keyword, selection_keywords},
    "Tensor",
    {docs::fp8_mqa_logits, docs::selections, docs::dense_tail}};
inline constexpr op_declaration fp8_fp4_paged_mqa_logits{
    "fp8_fp4_paged_mqa_logits",
    {mx_q, paged_common, paged_logits_dtype, paged_indices},
    {threads_keyword, truncate_keyword, topk_keywords, selection_keywords},
    "Tensor",
    {docs::fp8_fp4_paged_mqa_logits, docs::selections, docs::paged_tail}};
inline constexpr op_declaration fp8_paged_mqa_logits{
    "fp8_paged_mqa_logits",
    {fp8_q, paged_common, paged_indices},
    {threads_keyword, truncate_keyword, topk_keywords, selection_keywords},
    "Tensor",
    {docs::fp8_paged_mqa_logits, docs::selections, docs::paged_tail}};
inline constexpr op_declaration fp8_fp4_sparse_mqa_logits{
    "fp8_fp4_sparse_mqa_logits",
    {sparse_head, sparse_blocks, unaligned_ks},
    {threads_keyword, topk_keywords},
    "Tensor",
    {docs::fp8_fp4_sparse_mqa_logits, docs::sparse_topk}};
// truncate_long_contexts is the Python module's only here: the torch op refuses a context
// longer than its block table.
inline constexpr op_declaration fp8_fp4_paged_sparse_mqa_logits{
    "fp8_fp4_paged_sparse_mqa_logits",
    {paged_sparse_head, sparse_blocks},
    {threads_keyword, python_truncate_keyword, topk_keywords},
    "Tensor",
    {docs::fp8_fp4_paged_sparse_mqa_logits, docs::sparse_topk}};

}  // namespace mqalogits_bindings
