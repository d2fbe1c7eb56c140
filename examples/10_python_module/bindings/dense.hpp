// Part of the Python module's unit bindings.cpp (its parts in order, each including the one
// before): the dense kernels (fp8_fp4_mqa_logits and the legacy fp8_mqa_logits).
#pragma once

#include "metadata.hpp"

namespace mqalogits_python {
namespace {

// A metadata object of the kernel's own kind (a wrong object is a named error, not pybind11's
// cast failure).
template <class M>
const M& metadata_of(const char* where, const char* name, const py::object& obj,
                     const char* maker) {
  if (!py::isinstance<M>(obj))
    fail(where, std::string(name) + " must be what " + maker + " returns, not " +
                    py::str(py::type::of(obj)).cast<std::string>());
  return obj.cast<const M&>();
}

// Dense.
// A get_mqa_logits_metadata result passed to the dense kernel must describe the call.
void check_dense_schedule(const char* where, const py::object& schedule_meta, const q_input& qi,
                          const kv_input& ki, std::span<const i32> ks, std::span<const i32> ke) {
  if (schedule_meta.is_none()) return;
  const auto& m = metadata_of<mqa_logits_metadata>(where, "schedule_meta", schedule_meta,
                                                   "get_mqa_logits_metadata");
  if (!std::equal(ks.begin(), ks.end(), m.ks.begin(), m.ks.end()) ||
      !std::equal(ke.begin(), ke.end(), m.ke.begin(), m.ke.end()) || m.num_kv_tokens != ki.rows ||
      (qi.dims.size() == 2 && m.num_heads != qi.dims[1]))
    fail(where,
         "schedule_meta was made for other cu_seq_len_k_start / cu_seq_len_k_end / "
         "num_kv_tokens / num_heads (regenerate it with get_mqa_logits_metadata)");
}

// Logits [num_q, max_seqlen_k or N] of type t, rows padded as upstream's.
output_request dense_output(const char* where, i64 rows, i64 num_kv, i64 max_seqlen_k,
                            logits_type t, bool clean_logits) {
  ml::check::max_seqlen_k(where, max_seqlen_k);  // the library's check, before sizing the array
  return {.rows = rows,
          .cols = max_seqlen_k == 0 ? num_kv : max_seqlen_k,
          .width_name = max_seqlen_k == 0 ? "num_kv" : "max_seqlen_k",
          .stride =
              max_seqlen_k == 0
                  ? upstream_stride(where, "num_kv",
                                    ml::checked_add(where, "num_kv", num_kv, upstream_block_kv), t)
                  : upstream_stride(
                        where, "max_seqlen_k",
                        align_up(where, "max_seqlen_k", max_seqlen_k, upstream_block_kv), t),
          .type = t,
          .clean_logits = clean_logits};
}

// The dense call of both names (the legacy one with a bare FP8 q, fp32 logits only).
template <class Args>
py::object dense_call(const char* where, q_input qi, const Args& a,
                      std::optional<logits_type> logits, const selection& sel,
                      const kernel_outputs& outs, bool legacy) {
  const i64 max_seqlen_k = arg<"max_seqlen_k">(a);
  const bool clean_logits = arg<"clean_logits">(a);
  const kernel_call_scope scope;
  const std::optional<topk_request>& t = sel.topk;
  const auto in = inputs_of<kv_input>(where, std::move(qi), arg<"kv">(a), arg<"weights">(a));
  const auto ks = int_span(where, "cu_seq_len_k_start", arg<"cu_seq_len_k_start">(a));
  const auto ke = int_span(where, "cu_seq_len_k_end", arg<"cu_seq_len_k_end">(a));
  const output_request out = requested_output(sel, in.q.dims[0], outs, [&] {
    return dense_output(where, in.q.dims[0], in.k.rows, max_seqlen_k,
                        logits.value_or(logits_type::f32), clean_logits);
  });
  // sglang's ragged prefill: each row's top-k columns plus its topk_indices_offset, -1 kept.
  // Added here after the selection (O(rows x k); a library output type of its own would compile
  // every dense kernel once more), from a copy taken before the kernel writes (the offsets may
  // share bytes with topk_out).
  thread_local std::vector<i32> offsets;
  offsets.clear();
  if (!outs.topk_offset.is_none()) {
    if (!t) fail(where, "topk_offset needs topk = k");
    const auto o = int_span(where, "topk_offset", outs.topk_offset);
    if (static_cast<i64>(o.size()) != out.rows)
      fail(where, "topk_offset has " + std::to_string(o.size()) + " entries for " +
                      std::to_string(out.rows) + " rows");
    const i64 cols = max_seqlen_k > 0 ? max_seqlen_k : in.k.rows;
    for (std::size_t r = 0; r < o.size(); ++r)
      if (o[r] < 0 || std::max<i64>(cols - 1, 0) > INT32_MAX - i64{o[r]})
        fail(where, "topk_offset[" + std::to_string(r) + "] = " + std::to_string(o[r]) +
                        ": must be >= 0, and column + offset must fit int32 (columns < " +
                        std::to_string(cols) + ")");
    offsets.assign(o.begin(), o.end());
  }
  // The legacy logits have their own compiled calls; its top-k is the per-token one of
  // fp8_fp4_mqa_logits (the same computation).
  py::object result = run_kernel(where, in, out, arg<"num_threads">(a),
                                 legacy && !sel.any() ? &run_legacy_dense : &run_dense,
                                 dense_args{ks, ke, max_seqlen_k, clean_logits});
  if (!offsets.empty()) {
    py::array idx = py::reinterpret_borrow<py::array>(
        py::isinstance<py::tuple>(result) ? py::object(result.cast<py::tuple>()[0]) : result);
    auto* base = static_cast<char*>(idx.mutable_data());
    for (py::ssize_t r = 0; r < idx.shape(0); ++r)
      for (py::ssize_t j = 0; j < idx.shape(1); ++j) {
        i32& v = *reinterpret_cast<i32*>(base + r * idx.strides(0) + j * idx.strides(1));
        if (v >= 0) v += offsets[static_cast<std::size_t>(r)];
      }
  }
  return result;
}

template <class Args>
py::object fp8_fp4_mqa_logits(const Args& a) {
  constexpr const char* where = "fp8_fp4_mqa_logits";
  const kernel_outputs outs = outputs_of(a);
  const selection sel = selection_of(where, kernel_kind::dense, outs, a);
  q_input qi = q_of(where, arg<"q">(a), 3);
  // The selections take no logits_dtype, and leave max_seqlen_k to the library.
  const logits_type lt =
      sel.any() ? logits_type::f32 : logits_dtype_of(where, arg<"logits_dtype">(a));
  if (!arg<"schedule_meta">(a).is_none()) {
    const auto k = kv_of(where, arg<"kv">(a), qi.format);
    check_dense_schedule(where, arg<"schedule_meta">(a), qi, k,
                         int_span(where, "cu_seq_len_k_start", arg<"cu_seq_len_k_start">(a)),
                         int_span(where, "cu_seq_len_k_end", arg<"cu_seq_len_k_end">(a)));
  }
  return dense_call(where, std::move(qi), a, lt, sel, outs, false);
}

// Legacy names, through the library's legacy wrappers: Q is a bare FP8 array [.., H, D] (no
// scales), K per-token FP8 (fp32 scales), fp32 logits; topk= as on the fp8_fp4_* names.
q_input bare_q(const char* where, const py::object& q, int ndim) {
  if (py::isinstance<py::tuple>(q) || py::isinstance<py::list>(q))
    fail(where, "q is a bare FP8 array here (no scales); the fp8_fp4_* names take (q, q_scales)");
  const py::array codes = as_array(where, "q", q);
  if (is_fp4_codes(where, "q", codes)) fail(where, "q must be FP8 codes (uint8), not packed FP4");
  return q_of(where, py::make_tuple(q, py::none()), ndim);
}

template <class Args>
py::object fp8_mqa_logits(const Args& a) {
  constexpr const char* where = "fp8_mqa_logits";
  const kernel_outputs outs = outputs_of(a);
  const selection sel = selection_of(where, kernel_kind::dense, outs, a);
  return dense_call(where, bare_q(where, arg<"q">(a), 3), a, std::nullopt, sel, outs, true);
}

}  // namespace
}  // namespace mqalogits_python
