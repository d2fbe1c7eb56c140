// Part of the Python module's unit bindings.cpp (its parts in order, each including the one
// before): the sparse and paged-sparse kernels (bf16 logits, as upstream).
#pragma once

#include "paged.hpp"

namespace mqalogits_python {
namespace {

// Sparse and paged-sparse: bf16 logits, as upstream.
void check_cap(const char* where, i64 num_max_sparse_blocks, i64 sparse_block_kv, i64 cap,
               i64 block) {
  if (num_max_sparse_blocks != cap)
    fail(where, "num_max_sparse_blocks = " + std::to_string(num_max_sparse_blocks) +
                    " but the metadata has " + std::to_string(cap) + " blocks per row");
  if (sparse_block_kv != block)
    fail(where, "sparse_block_kv = " + std::to_string(sparse_block_kv) +
                    " but the metadata was made with " + std::to_string(block));
}

void check_fp4(const char* where, qk_format f, bool meta_fp4) {
  if ((f == qk_format::mxfp4) != meta_fp4)
    fail(where, std::string("q is ") + format_label(f) +
                    " but the metadata was made for qk_dtype " + (meta_fp4 ? "packed FP4" : "FP8"));
}

// The sparse kernel's arguments must agree with its metadata.
void check_sparse_call(const char* where, const q_input& qi,
                       const sparse_mqa_logits_metadata& metadata, i64 num_max_sparse_blocks,
                       i64 sparse_block_kv, bool use_unaligned_ks) {
  check_fp4(where, qi.format, metadata.fp4);
  check_cap(where, num_max_sparse_blocks, sparse_block_kv, metadata.meta.capacity(),
            metadata.meta.sparse_block_kv());
  if (use_unaligned_ks != metadata.use_unaligned_ks)
    fail(where, std::string("use_unaligned_ks = ") + (use_unaligned_ks ? "True" : "False") +
                    " but the metadata was made with " +
                    (metadata.use_unaligned_ks ? "True" : "False"));
}

// What both sparse kernels return: bf16 logits [rows, capacity x block] in upstream's padded
// rows, or with `topk` the top-k of each row.
template <class Meta>
output_request sparse_output(const char* where, const Meta& meta,
                             const std::optional<topk_request>& topk) {
  return {.rows = meta.num_rows(),
          .cols = meta.num_cols(),
          .width_name = "the metadata's columns",
          .stride =
              upstream_stride(where, "the metadata's columns", meta.num_cols(), logits_type::bf16),
          .type = logits_type::bf16,
          .topk = topk};
}

template <class Args>
py::object fp8_fp4_sparse_mqa_logits(const Args& a) {
  constexpr const char* where = "fp8_fp4_sparse_mqa_logits";
  const kernel_outputs outs = outputs_of(a);
  const auto t = topk_of(where, kernel_kind::sparse, outs, a);
  const auto& metadata = metadata_of<sparse_mqa_logits_metadata>(
      where, "metadata", arg<"metadata">(a), "get_sparse_mqa_logits_metadata");
  const auto in =
      inputs_of<kv_input>(where, q_of(where, arg<"q">(a), 3), arg<"kv">(a), arg<"weights">(a));
  check_sparse_call(where, in.q, metadata, arg<"num_max_sparse_blocks">(a),
                    arg<"sparse_block_kv">(a), arg<"use_unaligned_ks">(a));
  const auto& meta = metadata.meta;
  return run_kernel(where, in, with_outputs(sparse_output(where, meta, t), outs),
                    arg<"num_threads">(a), &run_sparse, meta);
}

// The paged-sparse Q: [num_q, H, D] or decode's [num_q, 1, H, D].
q_input paged_sparse_q(const char* where, const py::object& q) {
  const py::tuple t = py::isinstance<py::tuple>(q) ? py::tuple(q) : py::tuple();
  const bool four_d = t.size() == 2 && py::isinstance<py::array>(t[0]) &&
                      py::reinterpret_borrow<py::array>(t[0]).ndim() == 4;
  q_input qi = q_of(where, q, four_d ? 4 : 3);
  if (four_d) {
    if (qi.dims[1] != 1)
      fail(where, "q has next_n = " + std::to_string(qi.dims[1]) + ", expected 1");
    qi.dims.erase(qi.dims.begin() + 1);
  }
  return qi;
}

// The paged-sparse kernel's arguments must agree with its metadata.
void check_paged_sparse_call(const char* where, const q_input& qi, const cache_input& ci,
                             const paged_sparse_mqa_logits_metadata& metadata,
                             i64 num_max_sparse_blocks, i64 sparse_block_kv) {
  check_fp4(where, qi.format, metadata.fp4);
  const auto& meta = metadata.meta;
  check_cap(where, num_max_sparse_blocks, sparse_block_kv, meta.capacity(), meta.sparse_block_kv());
  if (ci.page_kv != meta.page_kv())
    fail(where, "kv_cache has block_kv = " + std::to_string(ci.page_kv) +
                    " but the metadata was made with page_kv = " + std::to_string(meta.page_kv()));
}

template <class Args>
py::object fp8_fp4_paged_sparse_mqa_logits(const Args& a) {
  constexpr const char* where = "fp8_fp4_paged_sparse_mqa_logits";
  const kernel_outputs outs = outputs_of(a);
  const auto t = topk_of(where, kernel_kind::paged_sparse, outs, a);
  const auto& metadata = metadata_of<paged_sparse_mqa_logits_metadata>(
      where, "metadata", arg<"metadata">(a), "get_paged_sparse_mqa_logits_metadata");
  const auto in = inputs_of<cache_input>(where, paged_sparse_q(where, arg<"q">(a)),
                                         arg<"kv_cache">(a), arg<"weights">(a));
  check_paged_sparse_call(where, in.q, in.k, metadata, arg<"num_max_sparse_blocks">(a),
                          arg<"sparse_block_kv">(a));
  const auto& meta = metadata.meta;
  return run_kernel(where, in, with_outputs(sparse_output(where, meta, t), outs),
                    arg<"num_threads">(a), &run_paged_sparse, meta);
}

}  // namespace
}  // namespace mqalogits_python
