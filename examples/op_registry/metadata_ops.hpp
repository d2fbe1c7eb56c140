// The schedule and metadata functions' declarations (DeepGEMM's names, arguments and defaults),
// and the Python module's host-path queries.
#pragma once

#include "declaration.hpp"

namespace mqalogits_bindings {

inline constexpr param mqa_metadata_args[] = {{"cu_seq_len_k_start", "Tensor"},
                                              {"cu_seq_len_k_end", "Tensor"},
                                              {"num_kv_tokens", "int"},
                                              {"num_heads", "int"}};
inline constexpr op_declaration get_mqa_logits_metadata{
    "get_mqa_logits_metadata",
    {mqa_metadata_args},
    {},
    "Tensor",
    {"DeepGEMM's dense schedule metadata, for fp8_fp4_mqa_logits(schedule_meta=...): the\n"
     "host needs none, so it records the call's rows and sizes and the kernel checks them\n"
     "against its own arguments (a metadata of another call is refused)."}};

inline constexpr param paged_metadata_args[] = {{"context_lens", "Tensor"},
                                                {"block_kv", "int"},
                                                {"num_sms", "int"},
                                                {"indices", "Tensor?", "None"}};
inline constexpr param metadata_out_keyword[] = {{"out", "Tensor(a!)?", "None"}};
inline constexpr op_declaration get_paged_mqa_logits_metadata{
    "get_paged_mqa_logits_metadata",
    {paged_metadata_args},
    {metadata_out_keyword},
    "Tensor",
    {"DeepGEMM's paged schedule table, int32 [num_sms + 1, 2]: row w is where work partition\n"
     "w starts (block-table row, unit of its context), the last row the end. Pass it as\n"
     "schedule_meta to fp8_fp4_paged_mqa_logits; the kernel rebuilds the schedule from its\n"
     "own context_lens and block_kv and refuses a table that differs (stale lengths, another\n"
     "block_kv), so no table makes it read outside the call's contexts. context_lens: [B]\n"
     "or [B, next_n]; indices: the row -> request map of a flattened batch. out= writes the\n"
     "table into an engine's buffer and returns it."}};

inline constexpr op_declaration get_num_sms{
    "get_num_sms",
    {},
    {},
    "int",
    {"The work-partition count engines pass as num_sms (DeepGEMM's device setting): the one\n"
     "set_num_sms gave, else the kernels' default thread count (OMP_NUM_THREADS, else the\n"
     "CPUs this process may run on; the torch ops: torch's thread count)."}};
inline constexpr param num_sms_arg[] = {{"num_sms", "int"}};
inline constexpr op_declaration set_num_sms{
    "set_num_sms",
    {num_sms_arg},
    {},
    "()",
    {"Sets what get_num_sms() returns (1 .. the paged schedule's most partitions). The kernels\n"
     "run a schedule of any partition count on any number of threads (num_threads), so this\n"
     "changes no kernel's threads."}};

inline constexpr param sparse_metadata_args[] = {{"cu_seq_len_k_start", "Tensor"},
                                                 {"cu_seq_len_k_end", "Tensor"},
                                                 {"num_kv_tokens", "int"},
                                                 {"sparse_kv_block_indices", "Tensor"},
                                                 {"qk_dtype", "ScalarType"},
                                                 {"sparse_block_kv", "int"},
                                                 {"use_unaligned_ks", "bool", "False"}};
inline constexpr op_declaration get_sparse_mqa_logits_metadata{
    "get_sparse_mqa_logits_metadata",
    {sparse_metadata_args},
    {},
    "class:SparseMetadata",
    {"The sparse kernel's metadata (SparseMqaLogitsMetadata): each row's selected KV blocks\n"
     "(sparse_kv_block_indices [num_q, cap]; block b is tokens b * sparse_block_kv onwards,\n"
     "-1 pads) resolved once against cu_seq_len_k_start / _end (tokens outside a row's\n"
     "range are -inf), for every fp8_fp4_sparse_mqa_logits call over those selections (each\n"
     "layer's). qk_dtype: float8_e4m3fn / uint8 (FP8) or int8 / float4_e2m1fn_x2 (packed FP4)."}};

inline constexpr param paged_sparse_metadata_args[] = {{"context_lens", "Tensor"},
                                                       {"block_table", "Tensor"},
                                                       {"indices", "Tensor"},
                                                       {"page_kv", "int"},
                                                       {"sparse_kv_block_indices", "Tensor"},
                                                       {"qk_dtype", "ScalarType"},
                                                       {"sparse_block_kv", "int"}};
inline constexpr op_declaration get_paged_sparse_mqa_logits_metadata{
    "get_paged_sparse_mqa_logits_metadata",
    {paged_sparse_metadata_args},
    {},
    "class:PagedSparseMetadata",
    {"The paged-sparse kernel's metadata (PagedSparseMqaLogitsMetadata): each row's selected\n"
     "KV blocks resolved once through block_table (pages of page_kv tokens; indices: the row\n"
     "-> request map) for every fp8_fp4_paged_sparse_mqa_logits call over those selections;\n"
     "each call reads the cache it is given, so one metadata serves every indexer layer.\n"
     "qk_dtype: float8_e4m3fn / uint8 (FP8) or int8 / float4_e2m1fn_x2 (packed FP4)."}};

// The Python module's host path (the torch ops run the same compiled kernels).
inline constexpr op_declaration host_isa_name{
    "host_isa_name",
    {},
    {},
    "str",
    {"The host path the kernels run on this CPU: 'avx512_bf16', 'avx512_vnni', 'avx512',\n"
     "'avx2_vnni', 'avx2', 'neon_dotprod', 'neon' or 'portable' (chosen at import from the\n"
     "CPU, MQALOGITS_HOST_ISA, and limit_host_isa)."},
    python};
inline constexpr param isa_path_arg[] = {{"path", "str"}};
inline constexpr op_declaration limit_host_isa{
    "limit_host_isa",
    {isa_path_arg},
    {},
    "str",
    {"Caps the host path at path ('native' lifts the cap) and returns the path now chosen:\n"
     "the fastest this CPU runs at or below the cap. Names host_isa_name() lists; a name the\n"
     "module does not know is an error and leaves the cap unchanged."},
    python};

}  // namespace mqalogits_bindings
