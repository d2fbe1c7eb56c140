// fp8_mqa_logits and fp8_paged_mqa_logits: DeepGEMM's older FP8-only entry points, kept by
// upstream as thin wrappers and called by engines written before the FP4 names existed.
// K is FP8 with one fp32 scale per token, Q is bare e4m3 codes (the engine folded Q's per-token
// scale into the weights), the logits are fp32. Arguments come in upstream's order, with
// clean_logits where upstream has it; the output view (upstream returns a new tensor) and the
// per-call options follow. The clean_logits argument replaces options::clean_logits.
// In the output's position the names also take the top-k selection of the fp8_fp4 kernels
// (ml::topk(indices[, values]); on fp8_mqa_logits also with ml::topk_offset(offsets), on
// fp8_paged_mqa_logits with ml::topk_index::slot), which clean_logits does not affect.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <type_traits>

#include "../config.hpp"
#include "../format/fp8_per_token.hpp"
#include "../output/topk.hpp"
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

// The fp32 logits view (or anything that converts to one), or a selection.
template <class T>
concept legacy_output = std::convertible_to<T, matrix_view<float>> ||
    std::same_as<T, topk_selection<topk_index::column_t>>;
template <class T>
concept legacy_dense_output = legacy_output<T> || is_topk_offset_selection<T>;
template <class T>
concept legacy_paged_output =
    legacy_output<T> || std::same_as<T, topk_selection<topk_index::slot_t>>;

template <class Out>
auto legacy_out(const Out& out) {
  if constexpr (std::convertible_to<Out, matrix_view<float>>)
    return matrix_view<float>(out);
  else
    return out;
}

inline options with_clean_logits(const options& opt, bool clean_logits) {
  options o = opt;
  o.clean_logits = clean_logits;
  return o;
}

}  // namespace detail

// Dense: upstream's fp8_mqa_logits(q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end,
// clean_logits = true, max_seqlen_k = 0). Columns and validity as fp8_fp4_mqa_logits.
template <backend_tag Backend, weight_input WT, index_array KS, index_array KE,
          detail::legacy_dense_output Out>
requires std::same_as<index_value_of<KS>, index_value_of<KE>>
void fp8_mqa_logits(Backend backend, const rows_view<fp8_per_token>& q,
                    const rows_view<fp8_per_token>& kv, matrix_view<WT> weights,
                    const KS& cu_seq_len_k_start, const KE& cu_seq_len_k_end, bool clean_logits,
                    std::int64_t max_seqlen_k, Out out, const options& opt = {}) {
  detail::require_bare_q("fp8_mqa_logits", q);
  fp8_fp4_mqa_logits(backend, q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, max_seqlen_k,
                     detail::legacy_out(out), detail::with_clean_logits(opt, clean_logits));
}

// Paged decode: upstream's fp8_paged_mqa_logits(q, kv_cache, weights, context_lens,
// block_table, schedule_meta, max_context_len, clean_logits = false). Columns, validity and index
// types (int32 or int64) as fp8_fp4_paged_mqa_logits. It and the form with indices below (here
// and on the default backend) each forward to fp8_fp4_paged_mqa_logits's matching form.
template <backend_tag Backend, weight_input WT, index_matrix Lens, detail::legacy_paged_output Out,
          detail::paged_schedule_argument Schedule>
void fp8_paged_mqa_logits(Backend backend, const rows_view<fp8_per_token>& q,
                          const paged_cache_view<fp8_per_token>& kv_cache, matrix_view<WT> weights,
                          const Lens& context_lens,
                          matrix_view<const index_matrix_value_of<Lens>> block_table,
                          const Schedule& schedule_meta, std::int64_t max_context_len,
                          bool clean_logits, Out out, const options& opt = {}) {
  detail::require_bare_q("fp8_paged_mqa_logits", q);
  fp8_fp4_paged_mqa_logits(backend, q, kv_cache, weights, context_lens, block_table, schedule_meta,
                           max_context_len, detail::legacy_out(out),
                           detail::with_clean_logits(opt, clean_logits));
}
// With upstream's varlen `indices` (next_n = 1), as fp8_fp4_paged_mqa_logits takes them.
template <backend_tag Backend, weight_input WT, index_matrix Lens, detail::legacy_paged_output Out,
          detail::paged_schedule_argument Schedule>
void fp8_paged_mqa_logits(Backend backend, const rows_view<fp8_per_token>& q,
                          const paged_cache_view<fp8_per_token>& kv_cache, matrix_view<WT> weights,
                          const Lens& context_lens,
                          matrix_view<const index_matrix_value_of<Lens>> block_table,
                          const Schedule& schedule_meta, std::int64_t max_context_len,
                          bool clean_logits, Out out,
                          std::span<const index_matrix_value_of<Lens>> indices,
                          const options& opt = {}) {
  detail::require_bare_q("fp8_paged_mqa_logits", q);
  fp8_fp4_paged_mqa_logits(backend, q, kv_cache, weights, context_lens, block_table, schedule_meta,
                           max_context_len, detail::legacy_out(out), indices,
                           detail::with_clean_logits(opt, clean_logits));
}

// The same calls on the default backend.
MQALOGITS_DEFAULT_BACKEND_NAMESPACE_BEGIN
template <weight_input WT, index_array KS, index_array KE, detail::legacy_dense_output Out>
requires std::same_as<index_value_of<KS>, index_value_of<KE>>
void fp8_mqa_logits(const rows_view<fp8_per_token>& q, const rows_view<fp8_per_token>& kv,
                    matrix_view<WT> weights, const KS& cu_seq_len_k_start,
                    const KE& cu_seq_len_k_end, bool clean_logits, std::int64_t max_seqlen_k,
                    Out out, const options& opt = {}) {
  fp8_mqa_logits(default_backend{}, q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end,
                 clean_logits, max_seqlen_k, out, opt);
}

template <weight_input WT, index_matrix Lens, detail::legacy_paged_output Out,
          detail::paged_schedule_argument Schedule>
void fp8_paged_mqa_logits(const rows_view<fp8_per_token>& q,
                          const paged_cache_view<fp8_per_token>& kv_cache, matrix_view<WT> weights,
                          const Lens& context_lens,
                          matrix_view<const index_matrix_value_of<Lens>> block_table,
                          const Schedule& schedule_meta, std::int64_t max_context_len,
                          bool clean_logits, Out out, const options& opt = {}) {
  fp8_paged_mqa_logits(default_backend{}, q, kv_cache, weights, context_lens, block_table,
                       schedule_meta, max_context_len, clean_logits, out, opt);
}
template <weight_input WT, index_matrix Lens, detail::legacy_paged_output Out,
          detail::paged_schedule_argument Schedule>
void fp8_paged_mqa_logits(const rows_view<fp8_per_token>& q,
                          const paged_cache_view<fp8_per_token>& kv_cache, matrix_view<WT> weights,
                          const Lens& context_lens,
                          matrix_view<const index_matrix_value_of<Lens>> block_table,
                          const Schedule& schedule_meta, std::int64_t max_context_len,
                          bool clean_logits, Out out,
                          std::span<const index_matrix_value_of<Lens>> indices,
                          const options& opt = {}) {
  fp8_paged_mqa_logits(default_backend{}, q, kv_cache, weights, context_lens, block_table,
                       schedule_meta, max_context_len, clean_logits, out, indices, opt);
}

MQALOGITS_DEFAULT_BACKEND_NAMESPACE_END
MQALOGITS_NAMESPACE_END
