// get_paged_mqa_logits_metadata + fp8_fp4_paged_mqa_logits: decode over a paged KV cache.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <type_traits>

#include "../config.hpp"
#include "../output/topk.hpp"
#include "../variant/paged.hpp"
#include "dispatch.hpp"

MQALOGITS_NAMESPACE_BEGIN

namespace detail {

// The call with or without varlen indices (null: none); I is the type of every index array.
template <class Backend, class Format, class WT, index_value I, class Out>
void paged_mqa_logits(const rows_view<Format>& q, const paged_cache_view<Format>& cache,
                      matrix_view<WT> weights, matrix_view<const I> context_lens,
                      matrix_view<const I> block_table, const paged_mqa_schedule& schedule,
                      std::int64_t max_context_len, Out out, const std::span<const I>* indices,
                      const options& opt) {
  constexpr const char* where = "fp8_fp4_paged_mqa_logits";
  using detail::require;
  const matrix_view<const std::remove_const_t<WT>> w = weights;
  const std::int64_t B = context_lens.rows, next_n = context_lens.cols;
  require(next_n >= 1 && B >= 0, where, [&](auto& m) {
    m << "context_lens shape [" << B << ", " << next_n << "] must be [B, next_n >= 1]";
  });
  detail::check_matrix(where, "context_lens", context_lens, B, next_n);
  // The plan's capacity max_blocks * page_kv must not overflow int64.
  require(block_table.cols >= 1 && block_table.cols <= INT64_MAX / max_page_kv, where,
          [&](auto& m) { m << "block_table has " << block_table.cols << " columns"; });
  detail::check_matrix(where, "block_table", block_table, B, block_table.cols);
  require(max_context_len > 0, where,
          [&](auto& m) { m << "max_context_len = " << max_context_len << " must be > 0"; });
  detail::check_cache(where, cache);
  require(supported_page_kv(cache.page_kv), where, [&](auto& m) {
    m << "page_kv = " << cache.page_kv << " is not supported (1.." << max_page_kv << ")";
  });
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = 0; j < next_n; ++j)
      detail::check_paged_context_len(where, context_lens(b, j), b, j);
  // The schedule must describe these very lengths; a stale one would skip work.
  require(schedule.next_n() == next_n && schedule.num_rows() == B * next_n &&
              schedule.page_kv() == cache.page_kv,
          where, [&](auto& m) {
            m << "schedule was made for "
              << schedule.num_rows() / std::max<std::int64_t>(schedule.next_n(), 1) << " x "
              << schedule.next_n() << " rows with page_kv " << schedule.page_kv()
              << ", the call has " << B << " x " << next_n << " with page_kv " << cache.page_kv;
          });
  // Varlen: the call's indices must be the schedule's (its requests are their runs).
  require(schedule.varlen() == (indices != nullptr), where, [&](auto& m) {
    m << (indices ? "indices given but the schedule was made without them"
                  : "the schedule was made with indices, the call has none")
      << " (pass the same indices to get_paged_mqa_logits_metadata and the kernel)";
  });
  if (indices) {
    check_span(where, "indices", *indices, B);
    for (std::int64_t r = 0; r < B; ++r)
      require((*indices)[static_cast<std::size_t>(r)] ==
                  schedule.indices()[static_cast<std::size_t>(r)],
              where, [&](auto& m) {
                m << "indices[" << r << "] = " << (*indices)[static_cast<std::size_t>(r)]
                  << " but the schedule was made with "
                  << schedule.indices()[static_cast<std::size_t>(r)]
                  << " (regenerate it with get_paged_mqa_logits_metadata)";
              });
  }
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = 0; j < next_n; ++j)
      require(
          schedule.context_lens()[static_cast<std::size_t>(b * next_n + j)] == context_lens(b, j),
          where, [&](auto& m) {
            m << "schedule is stale: context_lens[" << b << "][" << j
              << "] = " << context_lens(b, j) << " but the schedule was made for "
              << schedule.context_lens()[static_cast<std::size_t>(b * next_n + j)]
              << " (regenerate it with get_paged_mqa_logits_metadata)";
          });
  if (!opt.truncate_long_contexts) {
    const std::int64_t capacity = block_table.cols * std::int64_t{cache.page_kv};
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t j = 0; j < next_n; ++j) {
        const std::int64_t len = context_lens(b, j);
        require(len <= capacity, where, [&](auto& m) {
          m << "context_lens[" << b << "][" << j << "] = " << len
            << " is longer than its block table, max_blocks * page_kv = " << block_table.cols
            << " * " << cache.page_kv << " = " << capacity
            << " (options::truncate_long_contexts masks the positions past it)";
        });
        require(len <= max_context_len, where, [&](auto& m) {
          m << "context_lens[" << b << "][" << j << "] = " << len
            << " is longer than max_context_len = " << max_context_len
            << " (options::truncate_long_contexts masks the positions past it)";
        });
      }
  }
  const paged_plan<Format, I> plan(cache, block_table, context_lens, max_context_len, schedule);
  // A slot-translating top-k writes block_table[b, pos / page_kv] * page_kv + pos % page_kv.
  auto output = detail::paged_output_policy(out, opt, block_table, cache.page_kv, next_n);
  detail::check_q_weights_out(where, q, w, output, B * next_n, max_context_len);
  detail::check_same_head_dim(where, "cache", cache.head_dim, q.head_dim);
  if constexpr (std::is_same_v<Out, topk_selection<topk_index::slot_t>>)
    require(cache.num_pages <= (std::int64_t{INT32_MAX} + 1) / cache.page_kv, where, [&](auto& m) {
      m << "top-k slots of " << cache.num_pages << " pages x page_kv " << cache.page_kv
        << " do not fit int32";
    });
  // Every block-table slot the kernel reads must name a page; slots past the context are not read.
  // A varlen request reads through its first row's table: the others must hold the same pages in
  // every slot it reads.
  for (std::int64_t g = 0; g < plan.num_groups(); ++g) {
    const std::int64_t slots = (plan.group_keys(g) + cache.page_kv - 1) / cache.page_kv;
    const std::int64_t b = plan.table_row(g);
    for (std::int64_t s = 0; s < slots; ++s) {
      const std::int64_t page = block_table(b, s);
      require(page >= 0 && page < cache.num_pages, where, [&](auto& m) {
        m << "block_table[" << b << "][" << s << "] = " << page
          << " is not a page (num_pages = " << cache.num_pages << ")";
      });
    }
    if (!indices) continue;
    const row_span rows = plan.group_rows(g);
    for (std::int64_t r = rows.begin + 1; r < rows.end; ++r)
      for (std::int64_t s = 0; s < slots; ++s)
        require(block_table(r, s) == block_table(b, s), where, [&](auto& m) {
          m << "block_table[" << r << "][" << s << "] = " << block_table(r, s)
            << " differs from block_table[" << b << "][" << s << "] = " << block_table(b, s)
            << ", but indices[" << r << "] = indices[" << b
            << "]: rows of one request need identical block-table rows";
        });
  }
  detail::check_no_overlap(
      where, output,
      {detail::data_range_of("q", q), detail::scale_range_of("q scales", q),
       detail::range_of("cache", cache), detail::range_of("weights", w),
       detail::range_of("context_lens", context_lens), detail::range_of("block_table", block_table),
       detail::range_of("indices", indices ? *indices : std::span<const I>())});
  detail::dispatch<Backend>(q, plan, w, output, opt);
}

}  // namespace detail

// q: [B * next_n * H] rows, row (b, j, h); cache: the paged cache; weights: [B * next_n, H];
// context_lens: [B, next_n] (DeepGEMM-Ascend's [num_q, 1]); block_table: [B, max_blocks], shared by
// the next_n rows of a request; schedule: from get_paged_mqa_logits_metadata on the same
// context_lens; out: [B * next_n, max_context_len]. Column j is context position j, valid iff
// j < context_lens[b][j']. A length past max_blocks * page_kv or max_context_len is an error,
// unless options::truncate_long_contexts, which masks the columns j >= max_blocks * page_kv. out
// may also be a top-k selection, ml::topk(indices, values, ml::topk_index::slot) to get cache
// slots. Block-table slots past the context are never read; every slot that is read must name a
// page. context_lens and block_table are both int32 (as DeepGEMM takes them) or both int64, read in
// place; a length must be in [0, max_paged_context_len].
template <backend_tag Backend, class Format, weight_input WT, index_matrix Lens,
          paged_output_argument Out>
void fp8_fp4_paged_mqa_logits(Backend, const rows_view<Format>& q,
                              const paged_cache_view<Format>& cache, matrix_view<WT> weights,
                              const Lens& context_lens,
                              matrix_view<const index_matrix_value_of<Lens>> block_table,
                              const paged_mqa_schedule& schedule, std::int64_t max_context_len,
                              Out out, const options& opt = {}) {
  using I = index_matrix_value_of<Lens>;
  detail::paged_mqa_logits<Backend, Format, WT, I>(q, cache, weights, context_lens, block_table,
                                                   schedule, max_context_len, out, nullptr, opt);
}

// Varlen (upstream's `indices`, next_n = 1): indices [B], the ones the schedule was made with
// (anything else is rejected), of the type of context_lens; rows with the same index must have
// identical block-table rows in every slot their request reads. Results equal the call without
// indices.
template <backend_tag Backend, class Format, weight_input WT, index_matrix Lens,
          paged_output_argument Out>
void fp8_fp4_paged_mqa_logits(Backend, const rows_view<Format>& q,
                              const paged_cache_view<Format>& cache, matrix_view<WT> weights,
                              const Lens& context_lens,
                              matrix_view<const index_matrix_value_of<Lens>> block_table,
                              const paged_mqa_schedule& schedule, std::int64_t max_context_len,
                              Out out, std::span<const index_matrix_value_of<Lens>> indices,
                              const options& opt = {}) {
  using I = index_matrix_value_of<Lens>;
  detail::paged_mqa_logits<Backend, Format, WT, I>(q, cache, weights, context_lens, block_table,
                                                   schedule, max_context_len, out, &indices, opt);
}

// With the schedule as upstream's int32 [num_workers + 1, 2] array (see
// write_paged_mqa_schedule_array): the array must be the one get_paged_mqa_logits_metadata
// writes for these context_lens and this page size, or the call fails naming the first row that
// differs; it is checked in O(B + num_workers) and the output is untouched on error.
template <backend_tag Backend, class Format, weight_input WT, index_matrix Lens,
          paged_output_argument Out>
void fp8_fp4_paged_mqa_logits(Backend backend, const rows_view<Format>& q,
                              const paged_cache_view<Format>& cache, matrix_view<WT> weights,
                              const Lens& context_lens,
                              matrix_view<const index_matrix_value_of<Lens>> block_table,
                              matrix_view<const std::int32_t> schedule,
                              std::int64_t max_context_len, Out out, const options& opt = {}) {
  using I = index_matrix_value_of<Lens>;
  const paged_mqa_schedule s = detail::schedule_from_array<I>("fp8_fp4_paged_mqa_logits", schedule,
                                                              context_lens, cache.page_kv, nullptr);
  fp8_fp4_paged_mqa_logits(backend, q, cache, weights, context_lens, block_table, s,
                           max_context_len, out, opt);
}
template <backend_tag Backend, class Format, weight_input WT, index_matrix Lens,
          paged_output_argument Out>
void fp8_fp4_paged_mqa_logits(Backend backend, const rows_view<Format>& q,
                              const paged_cache_view<Format>& cache, matrix_view<WT> weights,
                              const Lens& context_lens,
                              matrix_view<const index_matrix_value_of<Lens>> block_table,
                              matrix_view<const std::int32_t> schedule,
                              std::int64_t max_context_len, Out out,
                              std::span<const index_matrix_value_of<Lens>> indices,
                              const options& opt = {}) {
  using I = index_matrix_value_of<Lens>;
  const paged_mqa_schedule s = detail::schedule_from_array<I>(
      "fp8_fp4_paged_mqa_logits", schedule, context_lens, cache.page_kv, &indices);
  fp8_fp4_paged_mqa_logits(backend, q, cache, weights, context_lens, block_table, s,
                           max_context_len, out, indices, opt);
}

// The same call on the default backend.
MQALOGITS_DEFAULT_BACKEND_NAMESPACE_BEGIN
template <class Format, weight_input WT, index_matrix Lens, paged_output_argument Out>
void fp8_fp4_paged_mqa_logits(const rows_view<Format>& q, const paged_cache_view<Format>& cache,
                              matrix_view<WT> weights, const Lens& context_lens,
                              matrix_view<const index_matrix_value_of<Lens>> block_table,
                              const paged_mqa_schedule& schedule, std::int64_t max_context_len,
                              Out out, const options& opt = {}) {
  fp8_fp4_paged_mqa_logits(default_backend{}, q, cache, weights, context_lens, block_table,
                           schedule, max_context_len, out, opt);
}
template <class Format, weight_input WT, index_matrix Lens, paged_output_argument Out>
void fp8_fp4_paged_mqa_logits(const rows_view<Format>& q, const paged_cache_view<Format>& cache,
                              matrix_view<WT> weights, const Lens& context_lens,
                              matrix_view<const index_matrix_value_of<Lens>> block_table,
                              const paged_mqa_schedule& schedule, std::int64_t max_context_len,
                              Out out, std::span<const index_matrix_value_of<Lens>> indices,
                              const options& opt = {}) {
  fp8_fp4_paged_mqa_logits(default_backend{}, q, cache, weights, context_lens, block_table,
                           schedule, max_context_len, out, indices, opt);
}

template <class Format, weight_input WT, index_matrix Lens, paged_output_argument Out>
void fp8_fp4_paged_mqa_logits(const rows_view<Format>& q, const paged_cache_view<Format>& cache,
                              matrix_view<WT> weights, const Lens& context_lens,
                              matrix_view<const index_matrix_value_of<Lens>> block_table,
                              matrix_view<const std::int32_t> schedule,
                              std::int64_t max_context_len, Out out, const options& opt = {}) {
  fp8_fp4_paged_mqa_logits(default_backend{}, q, cache, weights, context_lens, block_table,
                           schedule, max_context_len, out, opt);
}
template <class Format, weight_input WT, index_matrix Lens, paged_output_argument Out>
void fp8_fp4_paged_mqa_logits(const rows_view<Format>& q, const paged_cache_view<Format>& cache,
                              matrix_view<WT> weights, const Lens& context_lens,
                              matrix_view<const index_matrix_value_of<Lens>> block_table,
                              matrix_view<const std::int32_t> schedule,
                              std::int64_t max_context_len, Out out,
                              std::span<const index_matrix_value_of<Lens>> indices,
                              const options& opt = {}) {
  fp8_fp4_paged_mqa_logits(default_backend{}, q, cache, weights, context_lens, block_table,
                           schedule, max_context_len, out, indices, opt);
}

MQALOGITS_DEFAULT_BACKEND_NAMESPACE_END
MQALOGITS_NAMESPACE_END
