// Every declared op, for the code that walks them all (the torch library's definitions, the
// registry's own checks).
#pragma once

#include <array>

#include "kernel_ops.hpp"
#include "metadata_ops.hpp"
#include "quantize_ops.hpp"

namespace mqalogits_bindings {

inline constexpr std::array<const op_declaration*, 18> all_ops = {
    &host_isa_name,
    &limit_host_isa,
    &fp8_fp4_mqa_logits,
    &fp8_mqa_logits,
    &get_mqa_logits_metadata,
    &get_paged_mqa_logits_metadata,
    &get_num_sms,
    &set_num_sms,
    &fp8_fp4_paged_mqa_logits,
    &fp8_paged_mqa_logits,
    &indexer_k_quant_and_cache,
    &indexer_k_quant_and_cache_mxfp4,
    &cp_gather_indexer_k_quant_cache,
    &indexer_q_quant,
    &get_sparse_mqa_logits_metadata,
    &get_paged_sparse_mqa_logits_metadata,
    &fp8_fp4_sparse_mqa_logits,
    &fp8_fp4_paged_sparse_mqa_logits};

}  // namespace mqalogits_bindings
