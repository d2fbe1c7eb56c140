// The kernels' docstrings (the Python module shows them after the signature line).
#pragma once

namespace mqalogits_bindings::docs {

inline constexpr const char* fp8_fp4_mqa_logits =
    "DeepGEMM's fp8_fp4_mqa_logits: logits [num_q, max_seqlen_k or num_kv] of (q, q_scales) "
    "against\n(kv, kv_scales) for kv tokens [cu_seq_len_k_start, cu_seq_len_k_end) of each "
    "row.\n\n";
inline constexpr const char* fp8_mqa_logits =
    "DeepGEMM's fp8_mqa_logits: fp8_fp4_mqa_logits with a bare FP8 q and per-token FP8 kv, "
    "fp32 logits.\n\n";
inline constexpr const char* fp8_fp4_paged_mqa_logits =
    "DeepGEMM's fp8_fp4_paged_mqa_logits: decode logits [batch_size * next_n, "
    "max_context_len] of q\nagainst the paged kv_cache through block_table.\n\n";
inline constexpr const char* fp8_paged_mqa_logits =
    "DeepGEMM's fp8_paged_mqa_logits: fp8_fp4_paged_mqa_logits with a bare FP8 q and a "
    "per-token FP8\ncache, fp32 logits.\n\n";
inline constexpr const char* fp8_fp4_sparse_mqa_logits =
    "DeepGEMM's fp8_fp4_sparse_mqa_logits: bf16 logits [num_q, num_max_sparse_blocks * "
    "sparse_block_kv]\nover each row's selected kv blocks (the metadata's).\n\n";
inline constexpr const char* fp8_fp4_paged_sparse_mqa_logits =
    "DeepGEMM's fp8_fp4_paged_sparse_mqa_logits: bf16 logits [num_q, num_max_sparse_blocks * "
    "sparse_block_kv]\nover each row's selected blocks of the paged kv_cache (the "
    "metadata's).\n\n";

// The dense and paged kernels' selections.
inline constexpr const char* selections =
    "topk=k returns, instead of the logits, the int32 [rows, k] columns of each row's k largest\n"
    "valid fp32 logits (descending, ties to the lower column, NaN above +inf, -1 padding);\n"
    "topk_values=True returns (indices, float32 values). topk_short_rows=True writes a row with\n"
    "len <= k valid columns as those columns ascending, -1 after (not ranked; no values).\n"
    "candidate_topk_blocks=N (DeepSeek V4.1's candidate source) returns int32 [rows, N]: each\n"
    "row's N best blocks of candidate_block_size=B (default 8, a power of two) request-local\n"
    "positions, block b holding positions [b*B, (b+1)*B), scored by the block's largest fp32\n"
    "logit (NaN propagates), the row's newest block pinned +inf, ties to the lower id; a -inf\n"
    "block and every entry past the selection is -1. candidate_order='ascending' (default) sorts\n"
    "the ids ascending, -1s last (what get_sparse_mqa_logits_metadata takes), 'score' keeps them\n"
    "best first; candidate_padding='repeat_last' pads with the row's last selected id instead\n"
    "of -1. With topk=k as well, both come from one pass: (indices[, values], blocks).\n"
    "topk_out=, topk_values_out=, candidate_out= are the caller's buffers (int32 / float32 /\n"
    "int32, written and returned; given alone they imply k and N).";
inline constexpr const char* dense_tail =
    "\nPositions are token - cu_seq_len_k_start[row]; topk_offset (int32 / int64 [rows]) is\n"
    "added to each selected column, -1 kept. A row with tokens past the kv\n"
    "(cu_seq_len_k_end > num_kv) or more than max_seqlen_k > 0 of them is an error unless\n"
    "truncate_long_contexts=True, which keeps the tokens below num_kv in its first max_seqlen_k\n"
    "columns (the top-k then selects among those).";
inline constexpr const char* paged_tail =
    "\nPositions are the context positions; topk_index='slot' writes cache slots\n"
    "(block_table[b, pos // block_kv] * block_kv + pos % block_kv). candidate_block_size must\n"
    "be at most the cache's block_kv. context_lens is [batch_size, next_n] (row j of request b\n"
    "sees positions < context_lens[b, j]) or DeepGEMM's 1-D [batch_size] (row j sees positions\n"
    "<= context_lens[b] - next_n + j); get_paged_mqa_logits_metadata takes either form.";
// The sparse and paged-sparse kernels' top-k.
inline constexpr const char* sparse_topk =
    "topk=k returns, instead of the bf16 logits, the int32 [rows, k] columns of each row's k\n"
    "largest valid fp32 logits (descending, ties to the lower column, -1 padding; a block\n"
    "selected twice counts once); topk_values=True returns (indices, float32 values).\n"
    "topk_index='position' writes the selected token's request-local position instead of the\n"
    "column: token - cu_seq_len_k_start[row] on fp8_fp4_sparse_mqa_logits, the context position\n"
    "on fp8_fp4_paged_sparse_mqa_logits, whose topk_index='slot' writes the position's cache\n"
    "slot. topk_out=, topk_values_out= are the caller's buffers.";

}  // namespace mqalogits_bindings::docs
