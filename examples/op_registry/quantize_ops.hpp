// The ops around the kernels, with vLLM's names: the K cache writers, the prefill gather and the
// Q quantizer (the caches and destinations written in place).
#pragma once

#include "declaration.hpp"

namespace mqalogits_bindings {

inline constexpr param hadamard_keyword[] = {{"hadamard", "bool", "False"}};

inline constexpr param k_cache_args[] = {{"k", "Tensor"},
                                         {"kv_cache", "Tensor(a!)"},
                                         {"slot_mapping", "Tensor"},
                                         {"quant_block_size", "int"},
                                         {"scale_fmt", "str?", "None"}};
inline constexpr op_declaration indexer_k_quant_and_cache{
    "indexer_k_quant_and_cache",
    {k_cache_args},
    {hadamard_keyword},
    "()",
    {"vLLM's indexer K cache insert, in place: k [num_tokens, 128] (float32 or bfloat16)\n"
     "quantised to FP8 with one fp32 scale per token as vLLM computes it (amax floored at\n"
     "1e-4, / 448; a power of two with scale_fmt 'ue8m0') and stored at slot\n"
     "slot_mapping[t] of kv_cache (uint8 [num_blocks, block_size, 132]); a negative slot\n"
     "skips its token. hadamard=True stores each token's Walsh-Hadamard rotation."}};

inline constexpr param mxfp4_k_cache_args[] = {
    {"k", "Tensor"}, {"kv_cache", "Tensor(a!)"}, {"slot_mapping", "Tensor"}};
inline constexpr op_declaration indexer_k_quant_and_cache_mxfp4{
    "indexer_k_quant_and_cache_mxfp4",
    {mxfp4_k_cache_args},
    {hadamard_keyword},
    "()",
    {"DeepSeek-V4's MXFP4 indexer K cache insert, in place: k [num_tokens, D] (float32 or\n"
     "bfloat16, the roped K) quantised to MXFP4 and stored at slot slot_mapping[t] of\n"
     "kv_cache (uint8 [num_blocks, block_size, D / 2 + 4]); a negative slot skips its\n"
     "token. hadamard=True stores each token's Walsh-Hadamard rotation."}};

inline constexpr param gather_args[] = {{"kv_cache", "Tensor"},
                                        {"dst_k", "Tensor(a!)"},
                                        {"dst_scale", "Tensor(b!)"},
                                        {"block_table", "Tensor"},
                                        {"cu_seq_lens", "Tensor"}};
inline constexpr op_declaration cp_gather_indexer_k_quant_cache{
    "cp_gather_indexer_k_quant_cache",
    {gather_args},
    {},
    "()",
    {"vLLM's prefill gather of the paged indexer K cache, in place: sequence b's tokens\n"
     "(rows cu_seq_lens[b] .. cu_seq_lens[b + 1]) read through block_table row b into dst_k\n"
     "(codes: [tokens, 128] FP8 or [tokens, 64] packed MXFP4) and dst_scale ([tokens, 4]\n"
     "uint8 bytes, or [tokens] float32 / int32). kv_cache: uint8 [num_blocks, block_size,\n"
     "D + 4]. Rows past cu_seq_lens[-1] are left as they are."}};

inline constexpr param q_quant_args[] = {{"q", "Tensor"},
                                         {"weights", "Tensor"},
                                         {"softmax_scale", "float"},
                                         {"head_scale", "float"},
                                         {"use_fp4", "bool", "False"}};
// out= (the Python module's): arrays of the result's structure, written in place.
inline constexpr param q_quant_keywords[] = {{"rule", "str?", "None"},
                                             {"scale_fmt", "str?", "\"ue8m0\""},
                                             {"out", "Tensor?", "None", python},
                                             {"hadamard", "bool", "False"}};
inline constexpr op_declaration indexer_q_quant{
    "indexer_q_quant",
    {q_quant_args},
    {q_quant_keywords},
    "Tensor[]",
    {"Quantises the roped Q [T, H, D] (float32 or bfloat16) for the indexer and folds its\n"
     "scale into the weights [T, H], as vLLM's fused_indexer_q_rope_quant does after its\n"
     "RoPE. FP8: returns (q_fp8 uint8 [T, H, D], weights * s * softmax_scale * head_scale),\n"
     "s each row's scale (rule 'deepseek_v32' or 'deepseek_v4'; scale_fmt 'ue8m0' rounds s\n"
     "up to a power of two, None keeps amax / 448). use_fp4: returns ((q_packed uint8\n"
     "[T, H, D / 2], q_scale int32 [T, H]), weights * softmax_scale * head_scale).\n"
     "hadamard=True quantises each row's Walsh-Hadamard rotation (DeepSeek-V4). out: the\n"
     "same structure of arrays, written in place."}};

}  // namespace mqalogits_bindings
