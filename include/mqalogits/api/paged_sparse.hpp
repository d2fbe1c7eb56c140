// get_paged_sparse_mqa_logits_metadata + fp8_fp4_paged_sparse_mqa_logits: selected blocks of a
// paged cache, with the reread (default) or the snapshot protocol.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../config.hpp"
#include "../output/kernel_outputs.hpp"
#include "../variant/paged_sparse.hpp"
#include "dispatch.hpp"

MQALOGITS_NAMESPACE_BEGIN

// q: [num_q * H] rows (of the cache's head dim); weights: [num_q, H]; out: [num_q, cap * B]. With
// the reread protocol each call reads the selected tokens of `cache` (which must have the
// metadata's page_kv and a page for every block-table entry the selection reads); with the snapshot
// protocol the first call gathers them into the metadata and later calls reuse that snapshot
// without reading `cache`. out may be a top-k selection of columns, context positions
// (ml::topk_index::position) or cache slots (ml::topk_index::slot). A top-k output selects each
// position at most once (a block selected
// again in a row is not a candidate again). A context longer than its block table is an error
// unless options::truncate_long_contexts.
template <backend_tag Backend, class Format, weight_input WT, paged_sparse_output_argument Out>
void fp8_fp4_paged_sparse_mqa_logits(Backend, const rows_view<Format>& q,
                                     const paged_cache_view<Format>& cache, matrix_view<WT> weights,
                                     const paged_sparse_mqa_metadata& metadata, Out out,
                                     const options& opt = {}) {
  constexpr const char* where = "fp8_fp4_paged_sparse_mqa_logits";
  const matrix_view<const std::remove_const_t<WT>> w = weights;
  // First, so a default-constructed metadata is named as such, not as a shape mismatch.
  detail::require(metadata.capacity() > 0, where, [](auto& m) {
    m << "metadata was not made by get_paged_sparse_mqa_logits_metadata";
  });
  const std::int64_t long_row = metadata.long_context_row();
  detail::require(long_row < 0 || opt.truncate_long_contexts, where, [&](auto& m) {
    m << "context_lens[" << long_row << "] = " << metadata.context_len(long_row)
      << " is longer than its block table, max_blocks * page_kv = " << metadata.max_blocks()
      << " * " << metadata.page_kv() << " = " << metadata.max_blocks() * metadata.page_kv()
      << " (options::truncate_long_contexts masks the positions past it)";
  });
  detail::check_cache(where, cache);
  auto output = make_output(out, opt, paged_sparse_outputs{&metadata, cache.num_pages});
  check::logits_call(where, q, w, output, metadata.num_rows(), metadata.num_cols(),
                     {"cache", cache.head_dim}, detail::range_of("cache", cache));
  // The fused top-k never selects a position twice (see fp8_fp4_sparse_mqa_logits).
  constexpr bool selecting = is_topk_selection<Out>;
  if (metadata.protocol() == paged_sparse_protocol::snapshot) {
    metadata.ensure_snapshot(where, cache);
    detail::dispatch<Backend>(q, paged_sparse_snapshot_plan<Format>(metadata, selecting), w, output,
                              opt);
  } else {
    metadata.check_cache(where, cache);
    detail::dispatch<Backend>(q, paged_sparse_plan<Format>(cache, metadata, selecting), w, output,
                              opt);
  }
}

// The same call on the default backend.
MQALOGITS_DEFAULT_BACKEND_NAMESPACE_BEGIN
template <class Format, weight_input WT, paged_sparse_output_argument Out>
void fp8_fp4_paged_sparse_mqa_logits(const rows_view<Format>& q,
                                     const paged_cache_view<Format>& cache, matrix_view<WT> weights,
                                     const paged_sparse_mqa_metadata& metadata, Out out,
                                     const options& opt = {}) {
  fp8_fp4_paged_sparse_mqa_logits(default_backend{}, q, cache, weights, metadata, out, opt);
}

MQALOGITS_DEFAULT_BACKEND_NAMESPACE_END
MQALOGITS_NAMESPACE_END
