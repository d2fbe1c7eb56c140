// Part of the Python module's unit bindings.cpp (its parts in order, each including the one
// before): the paged kernels (fp8_fp4_paged_mqa_logits and the legacy fp8_paged_mqa_logits).
#pragma once

#include "dense.hpp"

namespace mqalogits_python {
namespace {

// Paged.
// The library checks the indices against the schedule and the block table.
// A paged call's context_lens: [batch_size, next_n], or upstream's 1-D [batch_size] with one
// length per request, whose next_n query rows are causal among themselves: row j sees the
// positions t <= context_lens[b] - next_n + j (ml::expand_context_lens writes that as the 2-D
// form, into a per-thread buffer the library reads in place of the caller's array). The
// schedule table get_paged_mqa_logits_metadata makes from the 1-D lengths is the one for the
// expanded lengths, so either form may make it.
ml::matrix_view<const i32> paged_lens(const char* where, const py::object& context_lens,
                                      const q_input& qi) {
  const py::array a = as_array(where, "context_lens", context_lens);
  const auto lens = int_matrix(where, "context_lens", context_lens);
  if (a.ndim() == 1 ? lens.rows != qi.dims[0] : lens.rows != qi.dims[0] || lens.cols != qi.dims[1])
    fail(where, "q is [" + std::to_string(qi.dims[0]) + ", " + std::to_string(qi.dims[1]) +
                    ", ...] but context_lens has shape " + shape_of(a) +
                    ": expected [batch_size, next_n] or [batch_size]");
  const i64 next_n = qi.dims[1];
  if (a.ndim() != 1 || next_n == 1) return lens;
  if (in_kernel_call && has_dtype<i32>(a) && lens.rows > 0) {  // int64: narrowed() recorded it
    const auto begin = reinterpret_cast<std::uintptr_t>(a.data());
    unseen_inputs.push_back(
        {"context_lens", begin, begin + static_cast<std::uintptr_t>(lens.rows * 4)});
  }
  thread_local std::vector<i32> expanded;
  expanded.resize(static_cast<std::size_t>(std::max<i64>(lens.rows * next_n, 1)));
  ml::expand_context_lens(std::span<const i32>(lens.data, static_cast<std::size_t>(lens.rows)),
                          ml::matrix_view<i32>(expanded.data(), lens.rows, next_n));
  return {expanded.data(), lens.rows, next_n};
}

std::optional<std::span<const i32>> indices_of(const char* where, const py::object& indices) {
  if (indices.is_none()) return std::nullopt;
  return int_span(where, "indices", indices);
}

// Logits [batch_size * next_n, max_context_len] of type t, rows padded as upstream's.
output_request paged_output(const char* where, ml::matrix_view<const i32> lens, i64 max_context_len,
                            logits_type t, bool clean_logits) {
  return {.rows = lens.rows * lens.cols,
          .cols = max_context_len,
          .width_name = "max_context_len",
          .stride = upstream_stride(
              where, "max_context_len",
              align_up(where, "max_context_len", max_context_len, upstream_block_kv), t),
          .type = t,
          .clean_logits = clean_logits};
}

// The paged call of both names (the legacy one with a bare FP8 q, fp32 logits only).
template <class Args>
py::object paged_call(const char* where, q_input qi, const Args& a, logits_type lt,
                      const selection& sel, const kernel_outputs& outs, bool legacy) {
  const i64 max_context_len = arg<"max_context_len">(a);
  const bool clean_logits = arg<"clean_logits">(a);
  const kernel_call_scope scope;
  const auto in =
      inputs_of<cache_input>(where, std::move(qi), arg<"kv_cache">(a), arg<"weights">(a));
  if (sel.candidates && sel.candidates->block_size > in.k.page_kv)
    fail(where, "candidate_block_size = " + std::to_string(sel.candidates->block_size) +
                    " is larger than kv_cache's block_kv " + std::to_string(in.k.page_kv));
  const auto lens = paged_lens(where, arg<"context_lens">(a), in.q);
  const auto table = int_matrix(where, "block_table", arg<"block_table">(a));
  ml::check::max_context_len(where, max_context_len);  // the library's, before sizing the array
  const auto idx = indices_of(where, arg<"indices">(a));
  const ml::paged_mqa_schedule schedule =
      schedule_of(where, arg<"schedule_meta">(a), lens, in.k.page_kv, idx);
  const output_request out = requested_output(sel, lens.rows * lens.cols, outs, [&] {
    return paged_output(where, lens, max_context_len, lt, clean_logits);
  });
  // The selections are a unit of their own (paged_topk_kernels.cpp), the legacy name's too.
  return run_kernel(where, in, out, arg<"num_threads">(a),
                    sel.any() ? &run_paged_topk
                    : legacy  ? &run_legacy_paged
                              : &run_paged,
                    paged_args{lens, table, schedule, max_context_len, idx, clean_logits});
}

template <class Args>
py::object fp8_fp4_paged_mqa_logits(const Args& a) {
  constexpr const char* where = "fp8_fp4_paged_mqa_logits";
  const kernel_outputs outs = outputs_of(a);
  const selection sel = selection_of(where, kernel_kind::paged, outs, a);
  q_input qi = q_of(where, arg<"q">(a), 4);
  // The selections take no logits_dtype.
  const logits_type lt =
      sel.any() ? logits_type::f32 : logits_dtype_of(where, arg<"logits_dtype">(a));
  return paged_call(where, std::move(qi), a, lt, sel, outs, false);
}

template <class Args>
py::object fp8_paged_mqa_logits(const Args& a) {
  constexpr const char* where = "fp8_paged_mqa_logits";
  const kernel_outputs outs = outputs_of(a);
  const selection sel = selection_of(where, kernel_kind::paged, outs, a);
  return paged_call(where, bare_q(where, arg<"q">(a), 4), a, logits_type::f32, sel, outs, true);
}

}  // namespace
}  // namespace mqalogits_python
