// get_sparse_mqa_logits_metadata + fp8_fp4_sparse_mqa_logits: selected blocks of a token-major KV.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../config.hpp"
#include "../output/kernel_outputs.hpp"
#include "../variant/sparse.hpp"
#include "dispatch.hpp"

MQALOGITS_NAMESPACE_BEGIN

// q: [num_q * H] rows; kv: at least metadata.num_kv_tokens() rows of q's head dim; weights: [num_q,
// H]; out: [num_q, cap * B], or a top-k selection (of columns, or of request-local positions
// with ml::topk_index::position). The selection, ks and ke come from the metadata. A top-k output
// selects each token at most once: where a row selects a block again (engines pad rows by
// repeating their last valid block), only its first entry's columns are candidates.
template <backend_tag Backend, class Format, weight_input WT, sparse_output_argument Out>
void fp8_fp4_sparse_mqa_logits(Backend, const rows_view<Format>& q, const rows_view<Format>& kv,
                               matrix_view<WT> weights, const sparse_mqa_metadata& metadata,
                               Out out, const options& opt = {}) {
  constexpr const char* where = "fp8_fp4_sparse_mqa_logits";
  using detail::require;
  const matrix_view<const std::remove_const_t<WT>> w = weights;
  require(metadata.num_kv_tokens() > 0, where,
          [](auto& m) { m << "metadata was not made by get_sparse_mqa_logits_metadata"; });
  require(kv.rows >= metadata.num_kv_tokens(), where, [&](auto& m) {
    m << "kv has " << kv.rows
      << " rows, the metadata says num_kv_tokens = " << metadata.num_kv_tokens();
  });
  detail::check_rows(where, "kv", kv, kv.rows);
  auto output = make_output(out, opt, sparse_outputs{&metadata});
  check::logits_call(where, q, w, output, metadata.num_rows(), metadata.num_cols(),
                     {"kv", kv.head_dim}, detail::data_range_of("kv", kv),
                     detail::scale_range_of("kv scales", kv));
  // The fused top-k never selects a token twice: a block that repeats an earlier entry of its
  // row counts as masked for it (the logits keep the repeated columns).
  constexpr bool selecting = is_topk_selection<Out>;
  detail::dispatch<Backend>(q, sparse_plan<Format>(kv, metadata, selecting), w, output, opt);
}

// The same call on the default backend.
MQALOGITS_DEFAULT_BACKEND_NAMESPACE_BEGIN
template <class Format, weight_input WT, sparse_output_argument Out>
void fp8_fp4_sparse_mqa_logits(const rows_view<Format>& q, const rows_view<Format>& kv,
                               matrix_view<WT> weights, const sparse_mqa_metadata& metadata,
                               Out out, const options& opt = {}) {
  fp8_fp4_sparse_mqa_logits(default_backend{}, q, kv, weights, metadata, out, opt);
}

MQALOGITS_DEFAULT_BACKEND_NAMESPACE_END
MQALOGITS_NAMESPACE_END
