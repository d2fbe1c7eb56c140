// fp8_fp4_mqa_logits: dense logits over token-major KV (prefill).
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <type_traits>

#include "../check/dense_ranges.hpp"
#include "../config.hpp"
#include "../output/kernel_outputs.hpp"
#include "../variant/dense.hpp"
#include "dispatch.hpp"

MQALOGITS_NAMESPACE_BEGIN

// q: [num_q * H] rows; kv: [N] rows of q's head dim; weights: [num_q, H]; ks, ke: [num_q].
// max_seqlen_k > 0: out is [num_q, max_seqlen_k], column j = token ks[q] + j.
// max_seqlen_k == 0 (upstream's full-width mode): out is [num_q, N], column j = token j.
// A column is valid iff its token t satisfies max(ks, 0) <= t < ke; others are -inf.
// A row whose tokens do not all have a column (ke > N, or ke - ks > max_seqlen_k > 0, with
// ke > ks) is an error, unless options::truncate_long_contexts: then ke is clamped to N and the row
// keeps the tokens of its first max_seqlen_k columns (a fused top-k selects among those only). ks
// and ke (upstream's cu_seq_len_k_start / cu_seq_len_k_end, the names errors use): int32 or int64
// arrays of one type (std::vector, std::span, ...), read in place. out may also be a top-k
// selection, with ml::topk_offset(offsets) to add offsets[row] to each selected column (sglang's
// ragged prefill), the candidate blocks of each row (ml::candidate_blocks), or both from one pass
// (ml::topk_and_candidates).
template <backend_tag Backend, class Format, weight_input WT, index_array KS, index_array KE,
          dense_output_argument Out>
requires std::same_as<index_value_of<KS>, index_value_of<KE>>
void fp8_fp4_mqa_logits(Backend, const rows_view<Format>& q, const rows_view<Format>& kv,
                        matrix_view<WT> weights, const KS& ks_array, const KE& ke_array,
                        std::int64_t max_seqlen_k, Out out, const options& opt = {}) {
  constexpr const char* where = "fp8_fp4_mqa_logits";
  const auto ks = index_span(ks_array), ke = index_span(ke_array);
  using detail::require;
  const matrix_view<const std::remove_const_t<WT>> w = weights;
  const std::int64_t rows = w.rows;
  check::max_seqlen_k(where, max_seqlen_k);
  require(kv.rows >= 0, where, [&](auto& m) { m << "kv has " << kv.rows << " rows"; });
  detail::check_rows(where, "kv", kv, kv.rows);
  detail::check_span(where, "cu_seq_len_k_start", ks, rows);
  detail::check_span(where, "cu_seq_len_k_end", ke, rows);
  const dense_plan<Format, index_value_of<KS>> plan(kv, ks, ke, max_seqlen_k);
  auto output = make_output(out, opt, dense_outputs{});
  check::logits_call(where, q, w, output, rows, plan.num_cols(), {"kv", kv.head_dim},
                     detail::data_range_of("kv", kv), detail::scale_range_of("kv scales", kv),
                     detail::range_of("cu_seq_len_k_start", ks),
                     detail::range_of("cu_seq_len_k_end", ke), detail::topk_offsets_range(out));
  detail::check_topk_offsets_of(where, out, rows, plan.num_cols());
  // After the shapes: a row's tokens must all have a column, unless the call opts in to truncation.
  if (!opt.truncate_long_contexts)
    detail::check_dense_ranges_fit(where, ks, ke, kv.rows, max_seqlen_k);
  detail::dispatch<Backend>(q, plan, w, output, opt);
}

// The same call on the default backend.
MQALOGITS_DEFAULT_BACKEND_NAMESPACE_BEGIN
template <class Format, weight_input WT, index_array KS, index_array KE, dense_output_argument Out>
requires std::same_as<index_value_of<KS>, index_value_of<KE>>
void fp8_fp4_mqa_logits(const rows_view<Format>& q, const rows_view<Format>& kv,
                        matrix_view<WT> weights, const KS& ks, const KE& ke,
                        std::int64_t max_seqlen_k, Out out, const options& opt = {}) {
  fp8_fp4_mqa_logits(default_backend{}, q, kv, weights, ks, ke, max_seqlen_k, out, opt);
}

MQALOGITS_DEFAULT_BACKEND_NAMESPACE_END
MQALOGITS_NAMESPACE_END
