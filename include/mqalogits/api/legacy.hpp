// fp8_mqa_logits and fp8_paged_mqa_logits: DeepGEMM's older FP8-only entry points, kept by
// upstream as thin wrappers and called by engines written before the FP4 names existed.
// K is FP8 with one fp32 scale per token, Q is bare e4m3 codes (the engine folded Q's per-token
// scale into the weights), the logits are fp32. Arguments come in upstream's order, with
// clean_logits where upstream has it; the output view (upstream returns a new tensor) and the
// per-call options follow. The clean_logits argument replaces options::clean_logits.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <type_traits>

#include "../config.hpp"
#include "../format/fp8_per_token.hpp"
#include "dense.hpp"
#include "paged.hpp"

MQALOGITS_NAMESPACE_BEGIN

namespace detail {

// Upstream's legacy Q is a plain FP8 tensor: a view that carries scales would be scored with
// them, which is not what the caller of these names asked for.
inline void require_bare_q(const char* where, const rows_view<fp8_per_token>& q) {
  require(q.scales == nullptr, where, [](auto& m) {
    m << "q must be bare e4m3 codes without scales (fold Q's per-token scales into the "
         "weights with fold_q_scales), but the view has a scale pointer";
  });
}

inline options with_clean_logits(const options& opt, bool clean_logits) {
  options o = opt;
  o.clean_logits = clean_logits;
  return o;
}

}  // namespace detail

// Dense: upstream's fp8_mqa_logits(q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end,
// clean_logits = true, max_seqlen_k = 0). Columns and validity as fp8_fp4_mqa_logits.
template <backend_tag Backend, weight_input WT, index_array KS, index_array KE>
requires std::same_as<index_value_of<KS>, index_value_of<KE>>
void fp8_mqa_logits(Backend backend, const rows_view<fp8_per_token>& q,
                    const rows_view<fp8_per_token>& kv, matrix_view<WT> weights,
                    const KS& cu_seq_len_k_start, const KE& cu_seq_len_k_end, bool clean_logits,
                    std::int64_t max_seqlen_k, matrix_view<float> out, const options& opt = {}) {
  detail::require_bare_q("fp8_mqa_logits", q);
  fp8_fp4_mqa_logits(backend, q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, max_seqlen_k,
                     out, detail::with_clean_logits(opt, clean_logits));
}

// Paged decode: upstream's fp8_paged_mqa_logits(q, kv_cache, weights, context_lens,
// block_table, schedule_meta, max_context_len, clean_logits = false). Columns, validity and index
// types (int32 or int64) as fp8_fp4_paged_mqa_logits.
template <backend_tag Backend, weight_input WT, index_matrix Lens>
void fp8_paged_mqa_logits(Backend backend, const rows_view<fp8_per_token>& q,
                          const paged_cache_view<fp8_per_token>& kv_cache, matrix_view<WT> weights,
                          const Lens& context_lens,
                          matrix_view<const index_matrix_value_of<Lens>> block_table,
                          const paged_mqa_schedule& schedule_meta, std::int64_t max_context_len,
                          bool clean_logits, matrix_view<float> out, const options& opt = {}) {
  detail::require_bare_q("fp8_paged_mqa_logits", q);
  fp8_fp4_paged_mqa_logits(backend, q, kv_cache, weights, context_lens, block_table, schedule_meta,
                           max_context_len, out, detail::with_clean_logits(opt, clean_logits));
}
// With upstream's varlen `indices` (next_n = 1), as fp8_fp4_paged_mqa_logits takes them.
template <backend_tag Backend, weight_input WT, index_matrix Lens>
void fp8_paged_mqa_logits(Backend backend, const rows_view<fp8_per_token>& q,
                          const paged_cache_view<fp8_per_token>& kv_cache, matrix_view<WT> weights,
                          const Lens& context_lens,
                          matrix_view<const index_matrix_value_of<Lens>> block_table,
                          const paged_mqa_schedule& schedule_meta, std::int64_t max_context_len,
                          bool clean_logits, matrix_view<float> out,
                          std::span<const index_matrix_value_of<Lens>> indices,
                          const options& opt = {}) {
  detail::require_bare_q("fp8_paged_mqa_logits", q);
  fp8_fp4_paged_mqa_logits(backend, q, kv_cache, weights, context_lens, block_table, schedule_meta,
                           max_context_len, out, indices,
                           detail::with_clean_logits(opt, clean_logits));
}

// The same calls on the default backend.
MQALOGITS_DEFAULT_BACKEND_NAMESPACE_BEGIN
template <weight_input WT, index_array KS, index_array KE>
requires std::same_as<index_value_of<KS>, index_value_of<KE>>
void fp8_mqa_logits(const rows_view<fp8_per_token>& q, const rows_view<fp8_per_token>& kv,
                    matrix_view<WT> weights, const KS& cu_seq_len_k_start,
                    const KE& cu_seq_len_k_end, bool clean_logits, std::int64_t max_seqlen_k,
                    matrix_view<float> out, const options& opt = {}) {
  fp8_mqa_logits(default_backend{}, q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end,
                 clean_logits, max_seqlen_k, out, opt);
}

template <weight_input WT, index_matrix Lens>
void fp8_paged_mqa_logits(const rows_view<fp8_per_token>& q,
                          const paged_cache_view<fp8_per_token>& kv_cache, matrix_view<WT> weights,
                          const Lens& context_lens,
                          matrix_view<const index_matrix_value_of<Lens>> block_table,
                          const paged_mqa_schedule& schedule_meta, std::int64_t max_context_len,
                          bool clean_logits, matrix_view<float> out, const options& opt = {}) {
  fp8_paged_mqa_logits(default_backend{}, q, kv_cache, weights, context_lens, block_table,
                       schedule_meta, max_context_len, clean_logits, out, opt);
}
template <weight_input WT, index_matrix Lens>
void fp8_paged_mqa_logits(const rows_view<fp8_per_token>& q,
                          const paged_cache_view<fp8_per_token>& kv_cache, matrix_view<WT> weights,
                          const Lens& context_lens,
                          matrix_view<const index_matrix_value_of<Lens>> block_table,
                          const paged_mqa_schedule& schedule_meta, std::int64_t max_context_len,
                          bool clean_logits, matrix_view<float> out,
                          std::span<const index_matrix_value_of<Lens>> indices,
                          const options& opt = {}) {
  fp8_paged_mqa_logits(default_backend{}, q, kv_cache, weights, context_lens, block_table,
                       schedule_meta, max_context_len, clean_logits, out, indices, opt);
}

MQALOGITS_DEFAULT_BACKEND_NAMESPACE_END
MQALOGITS_NAMESPACE_END
