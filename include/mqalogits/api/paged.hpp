// get_paged_mqa_logits_metadata + fp8_fp4_paged_mqa_logits: decode over a paged KV cache.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <span>
#include <type_traits>

#include "../config.hpp"
#include "../output/kernel_outputs.hpp"
#include "../variant/paged.hpp"
#include "context_lens.hpp"
#include "dispatch.hpp"

MQALOGITS_NAMESPACE_BEGIN

namespace detail {

// The call with or without varlen indices (null: none); I is the type of every index array.
// `built_here`: the schedule was just built from these context_lens (from upstream's array), so
// it needs no check against them.
template <class Backend, class Format, class WT, index_value I, class Out>
void paged_mqa_logits(const rows_view<Format>& q, const paged_cache_view<Format>& cache,
                      matrix_view<WT> weights, matrix_view<const I> context_lens,
                      matrix_view<const I> block_table, const paged_mqa_schedule& schedule,
                      bool built_here, std::int64_t max_context_len, Out out,
                      const std::span<const I>* indices, const options& opt,
                      const byte_range& schedule_array = {}) {
  constexpr const char* where = "fp8_fp4_paged_mqa_logits";
  const matrix_view<const std::remove_const_t<WT>> w = weights;
  check_paged_inputs(where, cache, context_lens, block_table, max_context_len);
  if (!built_here) schedule.check_made_for(where, context_lens, cache.page_kv, indices);
  if (!opt.truncate_long_contexts)
    check_contexts_fit(where, context_lens, block_table.cols, cache.page_kv, max_context_len);
  const paged_plan<Format, I> plan(cache, block_table, context_lens, max_context_len, schedule);
  // A slot-translating top-k writes block_table[b, pos / page_kv] * page_kv + pos % page_kv.
  auto output = make_output(
      out, opt, paged_outputs<I>{block_table, cache.page_kv, context_lens.cols, cache.num_pages});
  check::logits_call(where, q, w, output, plan.num_rows(), max_context_len,
                     {"cache", cache.head_dim}, range_of("cache", cache),
                     range_of("context_lens", context_lens), range_of("block_table", block_table),
                     range_of("indices", indices ? *indices : std::span<const I>()),
                     schedule_array);
  plan.check_block_table(where);
  detail::dispatch<Backend>(q, plan, w, output, opt);
}

// The paged schedule as the object get_paged_mqa_logits_metadata returns, or as upstream's int32
// [num_workers + 1, 2] array (what engines pass as schedule_meta, see
// write_paged_mqa_schedule_array): the array must be the one get_paged_mqa_logits_metadata writes
// for these context_lens and this page size, or the call fails naming the first row that
// differs; it is checked in O(B + num_workers) and the output is untouched on error.
template <class S>
concept paged_schedule_argument =
    std::same_as<S, paged_mqa_schedule> || std::convertible_to<S, matrix_view<const std::int32_t>>;

// The call on the schedule object itself, or on the one the array stands for: rebuilt from
// context_lens into this thread's slot for it (a warm call allocates nothing) and checked
// against the array.
template <class Backend, class Format, class WT, index_value I, class Out, class S>
void paged_mqa_logits_with(const rows_view<Format>& q, const paged_cache_view<Format>& cache,
                           matrix_view<WT> weights, matrix_view<const I> context_lens,
                           matrix_view<const I> block_table, const S& schedule,
                           std::int64_t max_context_len, Out out, const std::span<const I>* indices,
                           const options& opt) {
  if constexpr (std::same_as<S, paged_mqa_schedule>) {
    paged_mqa_logits<Backend, Format, WT, I>(q, cache, weights, context_lens, block_table, schedule,
                                             false, max_context_len, out, indices, opt);
  } else {
    array_schedule_slot slot;
    const matrix_view<const std::int32_t> array(schedule);
    const paged_mqa_schedule& s = schedule_from_array_into<I>(
        slot.get(), "fp8_fp4_paged_mqa_logits", array, context_lens, cache.page_kv, indices);
    paged_mqa_logits<Backend, Format, WT, I>(q, cache, weights, context_lens, block_table, s, true,
                                             max_context_len, out, indices, opt,
                                             detail::range_of("schedule_meta", array));
  }
}

}  // namespace detail

// q: [B * next_n * H] rows, row (b, j, h); cache: the paged cache; weights: [B * next_n, H];
// context_lens: [B, next_n] (DeepGEMM-Ascend's [num_q, 1]); block_table: [B, max_blocks], shared by
// the next_n rows of a request; schedule: from get_paged_mqa_logits_metadata on the same
// context_lens, as its object or as upstream's int32 [num_workers + 1, 2] array (checked against
// context_lens in O(B + num_workers), a mismatch named by its first row); out: [B * next_n,
// max_context_len]. Column j is context position j, valid iff j < context_lens[b][j']. A length
// past max_blocks * page_kv or max_context_len is an error, unless options::truncate_long_contexts,
// which masks the columns j >= max_blocks * page_kv. out may also be a top-k selection,
// ml::topk(indices, values, ml::topk_index::slot) to get cache slots, the candidate blocks of
// each row (ml::candidate_blocks), or both from one pass (ml::topk_and_candidates). Block-table
// slots past the context are never read; every slot that is read must name a page. context_lens and
// block_table are both int32 (as DeepGEMM takes them) or both int64, read in place; a length must
// be in [0, max_paged_context_len].
template <backend_tag Backend, class Format, weight_input WT, index_matrix Lens,
          paged_output_argument Out, detail::paged_schedule_argument Schedule>
void fp8_fp4_paged_mqa_logits(Backend, const rows_view<Format>& q,
                              const paged_cache_view<Format>& cache, matrix_view<WT> weights,
                              const Lens& context_lens,
                              matrix_view<const index_matrix_value_of<Lens>> block_table,
                              const Schedule& schedule, std::int64_t max_context_len, Out out,
                              const options& opt = {}) {
  using I = index_matrix_value_of<Lens>;
  detail::paged_mqa_logits_with<Backend, Format, WT, I>(
      q, cache, weights, context_lens, block_table, schedule, max_context_len, out, nullptr, opt);
}

// Varlen (upstream's `indices`, next_n = 1): indices [B], the ones the schedule was made with
// (anything else is rejected), of the type of context_lens; rows with the same index must have
// identical block-table rows in every slot their request reads. Results equal the call without
// indices.
template <backend_tag Backend, class Format, weight_input WT, index_matrix Lens,
          paged_output_argument Out, detail::paged_schedule_argument Schedule>
void fp8_fp4_paged_mqa_logits(Backend, const rows_view<Format>& q,
                              const paged_cache_view<Format>& cache, matrix_view<WT> weights,
                              const Lens& context_lens,
                              matrix_view<const index_matrix_value_of<Lens>> block_table,
                              const Schedule& schedule, std::int64_t max_context_len, Out out,
                              std::span<const index_matrix_value_of<Lens>> indices,
                              const options& opt = {}) {
  using I = index_matrix_value_of<Lens>;
  detail::paged_mqa_logits_with<Backend, Format, WT, I>(
      q, cache, weights, context_lens, block_table, schedule, max_context_len, out, &indices, opt);
}

// The same call on the default backend.
MQALOGITS_DEFAULT_BACKEND_NAMESPACE_BEGIN
template <class Format, weight_input WT, index_matrix Lens, paged_output_argument Out,
          detail::paged_schedule_argument Schedule>
void fp8_fp4_paged_mqa_logits(const rows_view<Format>& q, const paged_cache_view<Format>& cache,
                              matrix_view<WT> weights, const Lens& context_lens,
                              matrix_view<const index_matrix_value_of<Lens>> block_table,
                              const Schedule& schedule, std::int64_t max_context_len, Out out,
                              const options& opt = {}) {
  fp8_fp4_paged_mqa_logits(default_backend{}, q, cache, weights, context_lens, block_table,
                           schedule, max_context_len, out, opt);
}
template <class Format, weight_input WT, index_matrix Lens, paged_output_argument Out,
          detail::paged_schedule_argument Schedule>
void fp8_fp4_paged_mqa_logits(const rows_view<Format>& q, const paged_cache_view<Format>& cache,
                              matrix_view<WT> weights, const Lens& context_lens,
                              matrix_view<const index_matrix_value_of<Lens>> block_table,
                              const Schedule& schedule, std::int64_t max_context_len, Out out,
                              std::span<const index_matrix_value_of<Lens>> indices,
                              const options& opt = {}) {
  fp8_fp4_paged_mqa_logits(default_backend{}, q, cache, weights, context_lens, block_table,
                           schedule, max_context_len, out, indices, opt);
}

MQALOGITS_DEFAULT_BACKEND_NAMESPACE_END
MQALOGITS_NAMESPACE_END
