// Part of the Python module's unit bindings.cpp (its parts in order, each including the one
// before): the Python half of every kernel call: its inputs and outputs checked, then the compiled
// kernel run without the GIL.
#pragma once

#include "selections.hpp"

namespace mqalogits_python {
namespace {

// A kernel's q, k (kv_input or cache_input) and weights, checked in that order.
template <class K>
struct kernel_inputs {
  q_input q;
  K k;
  weights_input w;
};

template <class K>
kernel_inputs<K> inputs_of(const char* where, q_input q, const py::handle& k,
                           const py::handle& weights) {
  const K ki = [&] {
    if constexpr (std::is_same_v<K, kv_input>)
      return kv_of(where, k, q.format);
    else
      return cache_of(where, k, q.format);
  }();
  weights_input wi = weights_of(where, weights);
  return {std::move(q), ki, std::move(wi)};
}

// What a kernel call returns: new logits [rows, cols] of `type` with rows `stride` elements
// apart, or with `topk` the top-k of each of the rows (cols, stride and type do not apply).
struct output_request {
  i64 rows = 0, cols = 0;
  const char* width_name = "the logits' width";  // the argument cols comes from, for errors
  i64 stride = 0;
  logits_type type = logits_type::f32;
  std::optional<topk_request> topk{};
  std::optional<candidate_request> candidates{};
  bool clean_logits = true;  // ml::options::clean_logits
  bool truncate = false;     // ml::options::truncate_long_contexts
  // The caller's buffers (None: new arrays): out for the logits, topk_out / topk_values_out for
  // the top-k's indices / values, candidate_out for the candidate blocks.
  py::object out = py::none(), topk_out = py::none(), topk_values_out = py::none(),
             candidate_out = py::none();
};

// r with the caller's buffers and truncation.
output_request with_outputs(output_request r, const kernel_outputs& o) {
  r.out = o.out;
  r.topk_out = o.topk_out;
  r.topk_values_out = o.topk_values_out;
  r.candidate_out = o.candidate_out;
  r.truncate = o.truncate;
  return r;
}

// What a dense or paged call of `rows` query rows returns: its selections where it asks for
// any, else its logits (logits(): their request, checked only then).
template <class Logits>
output_request requested_output(const selection& sel, i64 rows, const kernel_outputs& outs,
                                Logits logits) {
  return with_outputs(
      sel.any() ? output_request{.rows = rows, .topk = sel.topk, .candidates = sel.candidates}
                : logits(),
      outs);
}

// A caller's output buffer: a writeable 2-D array of `rows` x `cols` elements whose rows are
// dense and do not overlap (any row stride at or above the row, as a slice of a larger buffer
// has); the library checks that it shares no byte with an input or another output.
py::array out_array(const char* where, const char* name, const py::object& obj, i64 rows, i64 cols,
                    bool dtype_ok, const char* want) {
  const py::array a = as_array(where, name, obj);
  if (!dtype_ok)
    fail(where, std::string(name) + " has dtype " + dtype_name(a) + ", expected " + want);
  if (a.ndim() != 2 || a.shape(0) != rows || a.shape(1) != cols)
    fail(where, std::string(name) + " has shape " + shape_of(a) + ", expected [" +
                    std::to_string(rows) + ", " + std::to_string(cols) + "]");
  if (!a.writeable()) fail(where, std::string(name) + " is read-only");
  return a;
}

// A library error as Python callers read it: named after the function they called (the legacy
// names run through fp8_fp4_*, whose name the library reports), with the keyword for an option.
std::string python_message(const char* where, std::string m) {
  const std::string name(where), legacy = "fp8_";
  if (name.rfind("fp8_fp4_", 0) != 0 && name.rfind(legacy, 0) == 0) {
    const std::string lib = "fp8_fp4_" + name.substr(legacy.size()) + ": ";
    if (m.rfind(lib, 0) == 0) m = name + ": " + m.substr(lib.size());
  }
  const std::string option = "options::truncate_long_contexts";
  if (const auto at = m.find(option); at != std::string::npos)
    m.replace(at, option.size(), "truncate_long_contexts=True");
  const std::string blocks = "candidate blocks [";  // the library's overlap check
  for (auto at = m.find(blocks); at != std::string::npos; at = m.find(blocks, at))
    m.replace(at, blocks.size() - 2, "candidate_out");
  return m;
}

// The outputs against the inputs the library does not see (unseen_inputs): no shared byte.
// topk_offset is exempt: it is copied before the kernel writes, and may share topk_out's bytes.
// candidate_out against the other outputs too, by their names (the library checks every pair).
void check_outputs_clear_of_unseen(const char* where, const output_view& ov) {
  const auto extent = [](const void* p, i64 rows, i64 cols, i64 stride, i64 item) {
    const auto b = reinterpret_cast<std::uintptr_t>(p);
    const bool empty = !p || rows <= 0 || cols <= 0;
    return std::pair<std::uintptr_t, std::uintptr_t>(
        b, empty ? b : b + static_cast<std::uintptr_t>(((rows - 1) * stride + cols) * item));
  };
  const struct {
    const char* name;
    std::pair<std::uintptr_t, std::uintptr_t> bytes;
  } outputs[] = {
      {"out", extent(ov.logits, ov.rows, ov.cols, ov.stride, ov.type == logits_type::f32 ? 4 : 2)},
      {"topk_out", extent(ov.topk_indices, ov.rows, ov.k, ov.topk_stride, 4)},
      {"topk_values_out", extent(ov.topk_values, ov.rows, ov.k, ov.values_stride, 4)},
      {"candidate_out", extent(ov.candidates, ov.rows, ov.n, ov.candidates_stride, 4)}};
  const auto meet = [](const auto& a, const auto& b) {
    return a.first < a.second && b.first < b.second && a.first < b.second && b.first < a.second;
  };
  for (const auto& o : outputs)
    if (std::string_view(o.name) != "candidate_out" && meet(o.bytes, outputs[3].bytes))
      fail(where, std::string("candidate_out overlaps ") + o.name +
                      ": the outputs of a call must not share a byte");
  for (const auto& o : outputs)
    for (const unseen_input& in : unseen_inputs)
      if (o.bytes.first < o.bytes.second && o.bytes.first < in.end && in.begin < o.bytes.second &&
          std::string_view(in.name) != "topk_offset")
        fail(where, std::string(o.name) + " overlaps " + in.name +
                        ": an output must not share a byte with an input");
}

// The one skeleton of every kernel binding: with the inputs checked and the output decided by
// the binding, it takes the thread pool of `num_threads`, checks the weights' layout, takes the
// caller's output buffers or makes new arrays, and runs kernel(args, views, output, options) with
// the GIL released (the kernel units' run_* functions: bindings_common.hpp). A binding states
// only what differs: its arguments' checks, its output's size, its kernel. It returns the
// output arrays (the caller's own when given).
template <class K, class Args>
py::object run_kernel(const char* where, const kernel_inputs<K>& in, const output_request& out,
                      std::optional<int> num_threads,
                      void (*kernel)(const Args&, const kernel_views<K>&, const output_view&,
                                     const ml::options&),
                      const Args& args) {
  const std::shared_ptr<ml::thread_pool> pool = pool_of(threads_of(where, num_threads));
  const ml::options opt{
      .executor = *pool, .clean_logits = out.clean_logits, .truncate_long_contexts = out.truncate};
  const py::array& wa = in.w.array;
  const py::ssize_t item = in.w.type == weights_type::f32 ? 4 : 2;  // bf16 / fp16 as uint16
  const kernel_views<K> views{in.q,
                              in.k,
                              {wa.data(), wa.shape(0), wa.shape(1),
                               dense_rows_stride(where, "weights", wa, item), in.w.type}};
  output_view ov{.rows = out.rows, .cols = out.cols, .stride = out.stride, .type = out.type};
  py::object result;
  if (out.topk || out.candidates) {
    if (!out.out.is_none())
      fail(where, out.topk ? "out is the logits' buffer; with topk the buffers are topk_out / "
                             "topk_values_out"
                           : "out is the logits' buffer; with candidate_topk_blocks the buffer "
                             "is candidate_out");
    py::list parts;  // returned in this order: indices, values, blocks
    if (out.topk) {
      const topk_request& t = *out.topk;
      py::array indices, values;
      if (out.topk_out.is_none()) {
        indices = py::array_t<i32>({out.rows, t.k});
      } else {
        indices = out_array(where, "topk_out", out.topk_out, out.rows, t.k,
                            has_dtype<i32>(as_array(where, "topk_out", out.topk_out)), "int32");
      }
      ov.topk_indices = static_cast<i32*>(indices.mutable_data());
      ov.topk_stride = dense_rows_stride(where, "topk_out", indices, 4);
      parts.append(indices);
      if (t.values) {
        if (out.topk_values_out.is_none()) {
          values = py::array_t<float>({out.rows, t.k});
        } else {
          values = out_array(
              where, "topk_values_out", out.topk_values_out, out.rows, t.k,
              has_dtype<float>(as_array(where, "topk_values_out", out.topk_values_out)), "float32");
        }
        ov.topk_values = static_cast<float*>(values.mutable_data());
        ov.values_stride = dense_rows_stride(where, "topk_values_out", values, 4);
        parts.append(values);
      }
      ov.k = t.k;
      ov.index = t.index;
      ov.short_rows = t.short_rows;
    }
    if (out.candidates) {
      const candidate_request& c = *out.candidates;
      py::array blocks;
      if (out.candidate_out.is_none()) {
        blocks = py::array_t<i32>({out.rows, c.n});
      } else {
        blocks =
            out_array(where, "candidate_out", out.candidate_out, out.rows, c.n,
                      has_dtype<i32>(as_array(where, "candidate_out", out.candidate_out)), "int32");
      }
      ov.candidates = static_cast<i32*>(blocks.mutable_data());
      ov.candidates_stride = dense_rows_stride(where, "candidate_out", blocks, 4);
      ov.n = c.n;
      ov.block_size = c.block_size;
      ov.order = c.order;
      ov.padding = c.padding;
      parts.append(blocks);
    }
    result = parts.size() == 1 ? py::object(parts[0]) : py::object(py::tuple(parts));
  } else {
    if (!out.topk_out.is_none() || !out.topk_values_out.is_none())
      fail(where, "topk_out / topk_values_out need topk = k (out is the logits' buffer)");
    py::array logits;
    if (out.out.is_none()) {
      logits =
          out.type == logits_type::f32
              ? new_logits<float>(where, out.width_name, out.rows, out.cols, out.stride)
              : new_logits<std::uint16_t>(where, out.width_name, out.rows, out.cols, out.stride);
    } else {
      const py::array a = as_array(where, "out", out.out);
      const bool f32 = out.type == logits_type::f32;
      // bf16 logits are uint16 bits (a bf16 tensor's int16 view passes too).
      const bool ok =
          f32 ? has_dtype<float>(a) : has_dtype<std::uint16_t>(a) || has_dtype<std::int16_t>(a);
      logits = out_array(where, "out", out.out, out.rows, out.cols, ok,
                         f32 ? "float32 (logits_dtype float32)"
                             : "bfloat16 bits as uint16 / int16 (logits_dtype bfloat16)");
      ov.stride = dense_rows_stride(where, "out", logits, f32 ? 4 : 2);
    }
    ov.logits = logits.mutable_data();
    result = logits;
  }
  check_outputs_clear_of_unseen(where, ov);
  try {
    py::gil_scoped_release release;
    kernel(args, views, ov, opt);
  } catch (const std::invalid_argument& e) {
    throw py::value_error(python_message(where, e.what()));
  }
  return result;
}

}  // namespace
}  // namespace mqalogits_python
