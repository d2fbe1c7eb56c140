// Part of the Python module's unit bindings.cpp (its parts in order, each including the one
// before): the metadata objects (upstream's schedule and sparse metadata) and the functions that
// make them.
#pragma once

#include "kernel_call.hpp"

namespace mqalogits_python {
namespace {

// get_mqa_logits_metadata: upstream's SM100 dense schedule. Here the dense kernel needs none;
// the object records what it was made for so a call with other lengths is refused, as a stale
// upstream schedule would be wrong.
struct mqa_logits_metadata {
  std::vector<i32> ks, ke;
  i64 num_kv_tokens = 0, num_heads = 0;
};

struct sparse_mqa_logits_metadata {
  ml::sparse_mqa_metadata meta;
  bool fp4 = false, use_unaligned_ks = false;
};

// Upstream's paged-sparse metadata resolves blocks once and every kernel call reads the cache it
// is given (vLLM and sglang reuse one metadata across indexer layers, each with its own cache):
// the library's reread protocol.
struct paged_sparse_mqa_logits_metadata {
  ml::paged_sparse_mqa_metadata meta;
  bool fp4 = false;
};

bool qk_dtype_is_fp4(const char* where, const py::handle& obj) {
  const std::string s = py::str(obj).cast<std::string>();
  if (s == "torch.int8" || s == "int8" || s == "<class 'numpy.int8'>" || s == "float4_e2m1fn_x2" ||
      s == "torch.float4_e2m1fn_x2")
    return true;
  if (s == "torch.float8_e4m3fn" || s == "float8_e4m3fn" || s == "uint8" ||
      s == "<class 'numpy.uint8'>" || s == "torch.uint8")
    return false;
  fail(where, "qk_dtype = " + s +
                  " is not supported: torch.float8_e4m3fn / numpy.uint8 (FP8) or torch.int8 / "
                  "numpy.int8 (packed FP4)");
}

// ---- metadata objects' makers ----

mqa_logits_metadata get_mqa_logits_metadata(const py::object& cu_seq_len_k_start,
                                            const py::object& cu_seq_len_k_end, i64 num_kv_tokens,
                                            i64 num_heads) {
  constexpr const char* where = "get_mqa_logits_metadata";
  const auto ks = int_span(where, "cu_seq_len_k_start", cu_seq_len_k_start);
  const auto ke = int_span(where, "cu_seq_len_k_end", cu_seq_len_k_end);
  if (ks.size() != ke.size() || ks.empty())
    fail(where, "cu_seq_len_k_start has " + std::to_string(ks.size()) +
                    " entries and cu_seq_len_k_end " + std::to_string(ke.size()) +
                    " (both num_q > 0)");
  if (num_kv_tokens <= 0)
    fail(where, "num_kv_tokens = " + std::to_string(num_kv_tokens) + " must be > 0");
  if (num_heads < 1 || num_heads > 128)
    fail(where, "num_heads = " + std::to_string(num_heads) + " must be in 1..128");
  return {std::vector<i32>(ks.begin(), ks.end()), std::vector<i32>(ke.begin(), ke.end()),
          num_kv_tokens, num_heads};
}

std::optional<std::span<const i32>> indices_of(const char* where, const py::object& indices);

// get_paged_mqa_logits_metadata returns upstream's schedule table, int32 [num_workers + 1, 2]
// (the library's array form: row w is where worker w starts, (block-table row, unit of its
// context), the last row the end). The paged kernels take it back (or a copy of it in the
// engine's own buffer): the library rebuilds the schedule from the call's context_lens, indices,
// the cache's block_kv and the table's worker count, and refuses a table that differs (stale
// lengths, another block_kv, another call's table), naming the first differing row; the kernel
// runs the rebuilt schedule, so no table makes it read outside the call's contexts.
// With out= (an engine's scheduler_metadata_buffer, int32 [num_sms + 1, 2]) the table is written
// there and out returned.
py::array get_paged_mqa_logits_metadata(const py::object& context_lens, i32 block_kv, int num_sms,
                                        const py::object& indices, const py::object& out) {
  constexpr const char* where = "get_paged_mqa_logits_metadata";
  const auto lens = int_matrix(where, "context_lens", context_lens);
  const auto idx = indices_of(where, indices);
  const ml::paged_mqa_schedule s =
      idx ? ml::get_paged_mqa_logits_metadata(lens, block_kv, num_sms, *idx)
          : ml::get_paged_mqa_logits_metadata(lens, block_kv, num_sms);
  const i64 rows = ml::paged_mqa_schedule_array_rows(s.num_workers());
  py::array table;
  if (out.is_none()) {
    table = py::array_t<i32>({rows, ml::paged_mqa_schedule_array_cols});
  } else {
    const py::array a = as_array(where, "out", out);
    table = out_array(where, "out", out, rows, ml::paged_mqa_schedule_array_cols, has_dtype<i32>(a),
                      "int32");
  }
  ml::write_paged_mqa_schedule_array(
      s, ml::matrix_view<i32>(static_cast<i32*>(table.mutable_data()), rows,
                              ml::paged_mqa_schedule_array_cols,
                              dense_rows_stride(where, "out", table, 4)));
  return table;
}

// The schedule of a paged kernel call, from its schedule_meta table (see above).
ml::paged_mqa_schedule schedule_of(const char* where, const py::object& schedule_meta,
                                   ml::matrix_view<const i32> lens, i32 block_kv,
                                   std::optional<std::span<const i32>> indices) {
  if (!py::isinstance<py::array>(schedule_meta))
    fail(where,
         "schedule_meta must be the int32 [num_workers + 1, 2] array of "
         "get_paged_mqa_logits_metadata, not " +
             py::str(py::type::of(schedule_meta)).cast<std::string>());
  const py::array a = as_array(where, "schedule_meta", schedule_meta);
  require_dtype<i32>(where, "schedule_meta", a, "int32 (get_paged_mqa_logits_metadata's)");
  const auto table = matrix<i32>(where, "schedule_meta", a);
  if (in_kernel_call && table.rows > 0) {
    const auto begin = reinterpret_cast<std::uintptr_t>(table.data);
    unseen_inputs.push_back(
        {"schedule_meta", begin,
         begin + static_cast<std::uintptr_t>(((table.rows - 1) * table.stride + table.cols) * 4)});
  }
  try {
    if (indices) return ml::paged_mqa_schedule_from_array(table, lens, block_kv, *indices);
    return ml::paged_mqa_schedule_from_array(table, lens, block_kv);
  } catch (const std::invalid_argument& e) {
    fail(where, std::string("schedule_meta: ") + e.what());  // the library names its helper
  }
}

sparse_mqa_logits_metadata get_sparse_mqa_logits_metadata(
    const py::object& cu_seq_len_k_start, const py::object& cu_seq_len_k_end, i64 num_kv_tokens,
    const py::object& sparse_kv_block_indices, const py::object& qk_dtype, i64 sparse_block_kv,
    bool use_unaligned_ks) {
  constexpr const char* where = "get_sparse_mqa_logits_metadata";
  const bool fp4 = qk_dtype_is_fp4(where, qk_dtype);
  const auto ks = int_span(where, "cu_seq_len_k_start", cu_seq_len_k_start);
  const auto ke = int_span(where, "cu_seq_len_k_end", cu_seq_len_k_end);
  const auto idx = int_matrix(where, "sparse_kv_block_indices", sparse_kv_block_indices);
  return {ml::get_sparse_mqa_logits_metadata(ks, ke, num_kv_tokens, idx, sparse_block_kv,
                                             use_unaligned_ks),
          fp4, use_unaligned_ks};
}

paged_sparse_mqa_logits_metadata get_paged_sparse_mqa_logits_metadata(
    const py::object& context_lens, const py::object& block_table, const py::object& indices,
    i32 page_kv, const py::object& sparse_kv_block_indices, const py::object& qk_dtype,
    i64 sparse_block_kv) {
  constexpr const char* where = "get_paged_sparse_mqa_logits_metadata";
  paged_sparse_mqa_logits_metadata m;
  m.fp4 = qk_dtype_is_fp4(where, qk_dtype);
  const auto lens = int_span(where, "context_lens", context_lens);
  const auto table = int_matrix(where, "block_table", block_table);
  const auto idx = int_span(where, "indices", indices);
  const auto sel = int_matrix(where, "sparse_kv_block_indices", sparse_kv_block_indices);
  // The library checks indices against the table (consecutive runs, identical rows) after
  // checking the shapes, so it never reads past an array.
  m.meta =
      ml::get_paged_sparse_mqa_logits_metadata(lens, table, idx, page_kv, sel, sparse_block_kv);
  return m;
}

}  // namespace
}  // namespace mqalogits_python
