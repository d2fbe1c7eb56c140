// Part of the Python module's unit bindings.cpp (its parts in order, each including the one
// before): the fused selections: the kernels' keyword-only topk= and candidate_topk_blocks= as one
// request, and the buffers they are written into.
#pragma once

#include "../../op_registry/declared_args.hpp"
#include "threads.hpp"

namespace mqalogits_python {
namespace {

//
// kernel(..., topk=k) returns, instead of the logits, the int32 [rows, k] columns of each row's
// k largest valid logits (ranked by the fp32 logit, descending, ties to the lower column, -1
// padding: ml::topk), and with topk_values=True the tuple (indices, float32 values [rows, k]).
// topk_index numbers what is written: "column" (the default), "slot" on the paged and
// paged-sparse kernels (cache slots, block_table[b, pos // block_kv] * block_kv + pos % block_kv,
// what vLLM's and sglang's topk_transform make of the positions), "position" on the sparse
// kernels (the request-local position: token - ks on the sparse kernel, the context position on
// the paged-sparse one). topk_short_rows=True (dense and paged) writes a row with len <= k
// valid columns as those columns ascending, -1 after (no values).
// The dense and paged kernels' candidate_topk_blocks=N returns each row's N best blocks of
// candidate_block_size request-local positions, int32 [rows, N] (ml::candidate_blocks); with
// topk=k both come from one pass, as the tuple (indices[, values], blocks).
// The [rows, cols] logits are never materialised; logits_dtype and clean_logits do not apply.

struct topk_request {
  i64 k = 0;
  bool values = false;
  topk_numbering index = topk_numbering::column;
  bool short_rows = false;
};

// The kernels, for what their selections may be.
enum class kernel_kind { dense, paged, sparse, paged_sparse };

// The request of a call's topk / topk_values / topk_index / topk_short_rows keywords; nullopt
// when topk is None.
// topk_out / topk_values_out (the caller's buffers) imply the selection: k is topk_out's
// width when topk is None, and topk_values_out asks for the values.
struct kernel_outputs {
  py::object out, topk_out, topk_values_out;
  bool truncate = false;                  // truncate_long_contexts
  py::object topk_offset = py::none();    // the dense kernels' per-row top-k offset
  py::object candidate_out = py::none();  // the dense and paged kernels' candidate blocks
};

// A positive int32 count from a Python int keyword (topk, candidate_topk_blocks).
i64 count_of(const char* where, const char* name, const char* what, const py::object& v) {
  if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v))
    fail(where, std::string(name) + " must be an int (" + what + "), not " +
                    py::str(py::type::of(v)).cast<std::string>());
  int overflow = 0;
  const long long n = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  if (overflow < 0 || (overflow == 0 && n < 1))
    fail(where, std::string(name) + " = " + py::str(v).cast<std::string>() + " must be >= 1");
  if (overflow > 0 || n > INT32_MAX)
    fail(where,
         std::string(name) + " = " + py::str(v).cast<std::string>() + " must be at most 2^31 - 1");
  return n;
}

// The width of a caller's 2-D buffer that implies its selection's size.
py::int_ width_of(const char* where, const char* name, const py::object& buffer,
                  const char* shape) {
  const py::array a = as_array(where, name, buffer);
  if (a.ndim() != 2)
    fail(where, std::string(name) + " has shape " + shape_of(a) + ", expected " + shape);
  return py::int_(a.shape(1));
}

std::optional<topk_request> topk_of(const char* where, py::object topk, bool topk_values,
                                    const std::string& topk_index, kernel_kind kind,
                                    const kernel_outputs& outs, bool short_rows = false) {
  if (topk.is_none() && !outs.topk_out.is_none())
    topk = width_of(where, "topk_out", outs.topk_out, "[rows, k]");
  topk_values = topk_values || !outs.topk_values_out.is_none();
  const bool position = kind == kernel_kind::sparse || kind == kernel_kind::paged_sparse;
  const bool slot = kind == kernel_kind::paged || kind == kernel_kind::paged_sparse;
  if (topk_index != "column" && !(position && topk_index == "position") &&
      !(slot && topk_index == "slot"))
    fail(where, "topk_index = '" + topk_index + "' is not supported (" +
                    (kind == kernel_kind::dense    ? "'column'; 'slot' is the paged kernel's, "
                                                     "'position' the sparse kernels'"
                     : kind == kernel_kind::paged  ? "'column' or 'slot'"
                     : kind == kernel_kind::sparse ? "'column' or 'position'"
                                                   : "'column', 'position' or 'slot'") +
                    ")");
  if (topk.is_none()) {
    if (topk_values || topk_index != "column")
      fail(where, "topk_values / topk_index need topk = k");
    if (short_rows) fail(where, "topk_short_rows needs topk = k");
    return std::nullopt;
  }
  const i64 k = count_of(where, "topk", "the k of the selection", topk);
  if (short_rows && topk_values)
    fail(where,
         "topk_short_rows writes no values (a short row is not ranked): drop topk_values / "
         "topk_values_out");
  return topk_request{k, topk_values,
                      topk_index == "slot"       ? topk_numbering::slot
                      : topk_index == "position" ? topk_numbering::position
                                                 : topk_numbering::column,
                      short_rows};
}

// The candidate blocks of a dense or paged kernel call (ml::candidate_blocks).
struct candidate_request {
  i64 n = 0, block_size = 8;
  ml::candidate_order order = ml::candidate_order::ascending;
  ml::candidate_padding padding = ml::candidate_padding::minus_one;
};

// The request of a call's candidate_* keywords; nullopt when neither candidate_topk_blocks nor
// candidate_out is given (candidate_out alone: N is its width).
std::optional<candidate_request> candidates_of(const char* where, py::object topk_blocks,
                                               i64 block_size, const std::string& order,
                                               const std::string& padding,
                                               const py::object& candidate_out) {
  if (order != "ascending" && order != "score")
    fail(where, "candidate_order = '" + order + "' is not supported ('ascending' or 'score')");
  if (padding != "minus_one" && padding != "repeat_last")
    fail(where,
         "candidate_padding = '" + padding + "' is not supported ('minus_one' or 'repeat_last')");
  if (topk_blocks.is_none() && !candidate_out.is_none())
    topk_blocks = width_of(where, "candidate_out", candidate_out, "[rows, N]");
  if (topk_blocks.is_none()) {
    if (block_size != 8 || order != "ascending" || padding != "minus_one")
      fail(where,
           "candidate_block_size / candidate_order / candidate_padding need "
           "candidate_topk_blocks = N");
    return std::nullopt;
  }
  const i64 n = count_of(where, "candidate_topk_blocks", "the N of the blocks", topk_blocks);
  if (block_size < 1 || block_size > ml::max_candidate_block_size ||
      (block_size & (block_size - 1)) != 0)
    fail(where, "candidate_block_size = " + std::to_string(block_size) +
                    " must be a power of two in [1, 2^20]");
  return candidate_request{
      n, block_size, order == "score" ? ml::candidate_order::score : ml::candidate_order::ascending,
      padding == "repeat_last" ? ml::candidate_padding::repeat_last
                               : ml::candidate_padding::minus_one};
}

// What a dense or paged kernel call selects instead of its logits (neither: the logits).
struct selection {
  std::optional<topk_request> topk;
  std::optional<candidate_request> candidates;
  bool any() const { return topk || candidates; }
};

// The keywords of the dense and paged kernels' selections (see above), checked.
struct selection_keywords {
  const py::object& topk;
  bool topk_values;
  const std::string& topk_index;
  bool topk_short_rows;
  const py::object& candidate_topk_blocks;
  i64 candidate_block_size;
  const std::string& candidate_order;
  const std::string& candidate_padding;
};
selection selection_of(const char* where, kernel_kind kind, const kernel_outputs& outs,
                       const selection_keywords& k) {
  selection s;
  s.topk = topk_of(where, k.topk, k.topk_values, k.topk_index, kind, outs, k.topk_short_rows);
  s.candidates = candidates_of(where, k.candidate_topk_blocks, k.candidate_block_size,
                               k.candidate_order, k.candidate_padding, outs.candidate_out);
  return s;
}

// The readers of the kernels' declared keyword groups (examples/op_registry/kernel_ops.hpp),
// written once for every kernel that declares them.
using mqalogits_bindings::arg;

// The buffers and the truncation a kernel declares.
template <class Args>
kernel_outputs outputs_of(const Args& a) {
  kernel_outputs o{arg<"out">(a), arg<"topk_out">(a), arg<"topk_values_out">(a)};
  if constexpr (Args::template has<"truncate_long_contexts">())
    o.truncate = arg<"truncate_long_contexts">(a);
  if constexpr (Args::template has<"topk_offset">()) o.topk_offset = arg<"topk_offset">(a);
  if constexpr (Args::template has<"candidate_out">()) o.candidate_out = arg<"candidate_out">(a);
  return o;
}

// The dense and paged kernels' selections.
template <class Args>
selection selection_of(const char* where, kernel_kind kind, const kernel_outputs& outs,
                       const Args& a) {
  return selection_of(
      where, kind, outs,
      selection_keywords{arg<"topk">(a), arg<"topk_values">(a), arg<"topk_index">(a),
                         arg<"topk_short_rows">(a), arg<"candidate_topk_blocks">(a),
                         arg<"candidate_block_size">(a), arg<"candidate_order">(a),
                         arg<"candidate_padding">(a)});
}

// The sparse kernels' top-k.
template <class Args>
std::optional<topk_request> topk_of(const char* where, kernel_kind kind, const kernel_outputs& outs,
                                    const Args& a) {
  return topk_of(where, arg<"topk">(a), arg<"topk_values">(a), arg<"topk_index">(a), kind, outs);
}

}  // namespace
}  // namespace mqalogits_python
