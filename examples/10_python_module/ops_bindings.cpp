// The module's ops around the kernels, with vLLM's names and argument orders, over numpy arrays
// viewed in place (never copied): the prefill gather of the paged indexer K cache
// (cp_gather_indexer_k_quant_cache), Q quantisation with its scale folded into the weights as
// vLLM's fused_indexer_q_rope_quant does after its RoPE, and the MXFP4 indexer K cache insert
// of DeepSeek-V4. Outputs the engine's op writes into caller-given tensors are written in place
// here too. Only the library's quantize headers are compiled in this unit (no kernels).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>

#include <mqalogits/check/sizes.hpp>
#include <mqalogits/format/bf16.hpp>
#include <mqalogits/format/fp16.hpp>
#include <mqalogits/quantize.hpp>

#include "../op_registry/pybind_def.hpp"
#include "../op_registry/quantize_ops.hpp"

#include "bindings.hpp"
#include "py_arrays.hpp"

namespace mqalogits_python {

namespace py = pybind11;
namespace ml = mqalogits;

namespace {

using i32 = std::int32_t;
using i64 = std::int64_t;

py::array writable(const char* where, const char* name, const py::handle& obj) {
  py::array a = as_array(where, name, obj);
  if (!a.writeable()) fail(where, std::string(name) + " is read-only (the op writes into it)");
  return a;
}

void require_shape(const char* where, const char* name, const py::array& a, bool ok,
                   const std::string& expected) {
  if (!ok) fail(where, std::string(name) + " has shape " + shape_of(a) + ", expected " + expected);
}

// The byte stride between the rows of a's first dimension when everything after it is one dense
// row (the library takes any stride of whole elements that keeps rows apart).
i64 row_stride(const char* where, const char* name, const py::array& a) {
  i64 row = a.itemsize();
  for (py::ssize_t i = a.ndim() - 1; i >= 1; --i) {
    if (a.shape(i) != 1 && a.strides(i) != row)
      fail(where, std::string(name) + " must be dense after its first dimension (strides " +
                      "of a C-contiguous array there); np.ascontiguousarray copies it");
    row *= a.shape(i);
  }
  if (a.ndim() == 0 || a.shape(0) <= 1) return row;
  if (a.strides(0) < row || a.strides(0) % a.itemsize() != 0)
    fail(where, std::string(name) + " has row stride " + std::to_string(a.strides(0)) +
                    " bytes for rows of " + std::to_string(row) +
                    " bytes: rows must not overlap or run backwards, in whole elements");
  return a.strides(0);
}

// The element stride between the rows of a [T, H, D] array read as [T * H, D] (or of a 2-D
// array): the heads of a token dense, and tokens H rows apart unless H is 1.
i64 flat_row_stride(const char* where, const char* name, const py::array& a) {
  const i64 stride = row_stride(where, name, a) / a.itemsize();
  const i64 last = a.shape(a.ndim() - 1);
  if (a.ndim() == 2 || a.shape(1) == 1) return a.shape(0) > 1 ? stride : last;
  if (a.shape(0) > 1 && stride != a.shape(1) * last)
    fail(where, std::string(name) + " has token stride " + std::to_string(a.strides(0)) +
                    " bytes: its (token, head) rows must be evenly spaced (tokens " +
                    std::to_string(a.shape(1) * last * a.itemsize()) + " bytes apart)");
  return last;
}

// A 1-D int32 / int64 array, as a span of its type (call(span)).
template <class Call>
void with_index_span(const char* where, const char* name, const py::handle& obj, Call&& call) {
  const py::array a = as_array(where, name, obj);
  require_shape(where, name, a, a.ndim() == 1, "1-D");
  if (a.shape(0) > 1 && a.strides(0) != a.itemsize())
    fail(where, std::string(name) + " must be contiguous");
  const auto n = static_cast<std::size_t>(a.shape(0));
  if (has_dtype<i32>(a))
    call(std::span<const i32>(static_cast<const i32*>(a.data()), n));
  else if (has_dtype<i64>(a))
    call(std::span<const i64>(static_cast<const i64*>(a.data()), n));
  else
    fail(where, std::string(name) + " has dtype " + dtype_name(a) + ", expected int32 or int64");
}

// A paged cache uint8 [num_blocks, block_size, token_bytes] (or [..., 1, token_bytes]): each
// block page_kv data rows then page_kv scale rows; any block stride that keeps blocks apart.
struct cache_arg {
  std::uint8_t* data;
  i64 num_blocks, block_stride;
  i32 block_size;
  i64 token_bytes;
};
cache_arg cache_of(const char* where, const py::array& c) {
  if (!has_dtype<std::uint8_t>(c))
    fail(where, "kv_cache has dtype " + dtype_name(c) + ", expected uint8");
  const bool four = c.ndim() == 4;
  require_shape(where, "kv_cache", c, (c.ndim() == 3 || four) && (!four || c.shape(2) == 1),
                "[num_blocks, block_size, token_bytes] or [num_blocks, block_size, 1, "
                "token_bytes]");
  const i64 token_bytes = c.shape(c.ndim() - 1);
  if (c.strides(c.ndim() - 1) != 1 || (c.shape(1) > 1 && c.strides(1) != token_bytes))
    fail(where, "kv_cache blocks must be dense (stride(1) == token_bytes, stride(-1) == 1)");
  const i64 block_bytes = c.shape(1) * token_bytes;
  if (c.shape(0) > 1 && c.strides(0) < block_bytes)
    fail(where, "kv_cache has block stride " + std::to_string(c.strides(0)) +
                    " bytes for blocks of " + std::to_string(block_bytes) +
                    " bytes: blocks must not overlap or run backwards");
  if (c.shape(1) < 1) fail(where, "kv_cache has block_size 0");
  return {static_cast<std::uint8_t*>(const_cast<void*>(c.data())), c.shape(0),
          c.shape(0) > 1 ? i64{c.strides(0)} : block_bytes,
          ml::checked_int32(where, "kv_cache's block size (dimension 1)", c.shape(1)), token_bytes};
}

// ---- cp_gather_indexer_k_quant_cache ----

// vLLM's cp_gather_indexer_k_quant_cache(kv_cache, dst_k, dst_scale, block_table, cu_seq_lens):
// kv_cache uint8 [num_blocks, block_size, D + 4] (FP8: D = 128 code bytes and the fp32 scale;
// MXFP4: 64 packed bytes and 4 UE8M0 bytes), dst_k [tokens, D] uint8 / int8 and dst_scale
// [tokens, 4] uint8 (or [tokens] / [tokens, 1] float32 or int32) written in place: sequence b's
// tokens into rows [cu_seq_lens[b], cu_seq_lens[b + 1]) through block_table row b. Rows past
// cu_seq_lens[-1] are left as they are.
void cp_gather_indexer_k_quant_cache(const py::object& kv_cache, const py::object& dst_k,
                                     const py::object& dst_scale, const py::object& block_table,
                                     const py::object& cu_seq_lens) {
  constexpr const char* where = "cp_gather_indexer_k_quant_cache";
  const cache_arg c = cache_of(where, as_array(where, "kv_cache", kv_cache));
  py::array k = writable(where, "dst_k", dst_k);
  if (!has_dtype<std::uint8_t>(k) && !has_dtype<std::int8_t>(k))
    fail(where, "dst_k has dtype " + dtype_name(k) + ", expected uint8 or int8 (the codes' bytes)");
  require_shape(where, "dst_k", k, k.ndim() == 2 && (k.shape(1) == 128 || k.shape(1) == 64),
                "[num_tokens, 128] (FP8 codes) or [num_tokens, 64] (packed MXFP4)");
  const i64 data_bytes = k.shape(1);
  if (c.token_bytes != data_bytes + 4)
    fail(where, "kv_cache has " + std::to_string(c.token_bytes) +
                    " bytes per token; dst_k rows of " + std::to_string(data_bytes) +
                    " bytes need " + std::to_string(data_bytes + 4));
  py::array s = writable(where, "dst_scale", dst_scale);
  const bool words = has_dtype<float>(s) || has_dtype<i32>(s);
  if (!words && !has_dtype<std::uint8_t>(s) && !has_dtype<std::int8_t>(s))
    fail(where, "dst_scale has dtype " + dtype_name(s) + ", expected uint8 [num_tokens, 4] (or " +
                    "float32 / int32 [num_tokens])");
  const bool shape_ok = words ? (s.ndim() == 1 || (s.ndim() == 2 && s.shape(1) == 1))
                              : s.ndim() == 2 && s.shape(1) == 4;
  require_shape(where, "dst_scale", s, shape_ok && s.shape(0) == k.shape(0),
                "[" + std::to_string(k.shape(0)) + (words ? "]" : ", 4] bytes") +
                    " (4 scale bytes per row of dst_k)");
  const i64 k_stride = row_stride(where, "dst_k", k), s_stride = row_stride(where, "dst_scale", s);
  const py::array table = as_array(where, "block_table", block_table);
  require_shape(where, "block_table", table, table.ndim() == 2, "[batch_size, max_blocks]");
  const i64 t_stride = row_stride(where, "block_table", table);
  const auto run = [&]<class Format>(auto table_view, auto cu) {
    const ml::paged_cache_view<Format> view(c.data, c.num_blocks, c.block_size, c.block_stride);
    ml::gather_from_pages(view, table_view, cu, static_cast<std::uint8_t*>(k.mutable_data()),
                          static_cast<std::uint8_t*>(s.mutable_data()), k.shape(0), k_stride,
                          s_stride);
  };
  const auto with_table = [&]<class T>(T*) {
    const ml::matrix_view<const T> tv(
        static_cast<const T*>(table.data()), table.shape(0), table.shape(1),
        table.shape(0) > 1 ? t_stride / i64{sizeof(T)} : table.shape(1));
    with_index_span(where, "cu_seq_lens", cu_seq_lens, [&](auto cu) {
      py::gil_scoped_release release;
      if (data_bytes == 128)
        run.template operator()<ml::fp8_per_token>(tv, cu);
      else
        run.template operator()<ml::mxfp4>(tv, cu);
    });
  };
  if (has_dtype<i32>(table))
    with_table(static_cast<i32*>(nullptr));
  else if (has_dtype<i64>(table))
    with_table(static_cast<i64*>(nullptr));
  else
    fail(where, "block_table has dtype " + dtype_name(table) + ", expected int32 or int64");
}

// ---- Q quantisation, scale folded into the weights ----

// q [T, H, D] float32 or bfloat16 bits (uint16 / int16) as a matrix of T * H rows.
template <class Call>
void with_rows(const char* where, const char* name, const py::array& a, i64 rows, Call&& call) {
  const i64 stride = flat_row_stride(where, name, a), cols = a.shape(a.ndim() - 1);
  if (has_dtype<float>(a))
    call(ml::matrix_view<const float>(static_cast<const float*>(a.data()), rows, cols, stride));
  else if (has_dtype<std::uint16_t>(a) || has_dtype<std::int16_t>(a))
    call(ml::matrix_view<const ml::bf16>(static_cast<const ml::bf16*>(a.data()), rows, cols,
                                         stride));
  else
    fail(where, std::string(name) + " has dtype " + dtype_name(a) +
                    ", expected float32 or bfloat16 bits as uint16 / int16");
}

// Weights [T, H]: float32, float16, or bfloat16 bits as uint16 / int16.
template <class Call>
void with_weights(const char* where, const py::array& w, Call&& call) {
  require_shape(where, "weights", w, w.ndim() == 2, "[num_tokens, num_heads]");
  const i64 stride = row_stride(where, "weights", w) / w.itemsize();
  if (has_dtype<float>(w))
    call(ml::matrix_view<const float>(static_cast<const float*>(w.data()), w.shape(0), w.shape(1),
                                      stride));
  else if (has_dtype<std::uint16_t>(w) || has_dtype<std::int16_t>(w))
    call(ml::matrix_view<const ml::bf16>(static_cast<const ml::bf16*>(w.data()), w.shape(0),
                                         w.shape(1), stride));
  else if (w.dtype().is(py::dtype("float16")))
    call(ml::matrix_view<const ml::fp16>(static_cast<const ml::fp16*>(w.data()), w.shape(0),
                                         w.shape(1), stride));
  else
    fail(where, "weights has dtype " + dtype_name(w) +
                    ", expected float32, float16 or bfloat16 bits as uint16 / int16");
}

// An output array: the given one (checked: dtype, shape, writable, dense rows) or a new one.
py::array output(const char* where, const char* name, const py::handle& given, py::dtype dtype,
                 std::vector<py::ssize_t> shape) {
  if (given.is_none()) return py::array(dtype, shape);
  py::array a = writable(where, name, given);
  if (!a.dtype().is(dtype))
    fail(where, std::string(name) + " has dtype " + dtype_name(a) + ", expected " +
                    py::str(dtype).cast<std::string>());
  bool same = a.ndim() == static_cast<py::ssize_t>(shape.size());
  for (std::size_t i = 0; same && i < shape.size(); ++i)
    same = a.shape(static_cast<py::ssize_t>(i)) == shape[i];
  std::string want = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) want += (i ? ", " : "") + std::to_string(shape[i]);
  require_shape(where, name, a, same, want + "]");
  return a;
}

// vLLM's fused_indexer_q_rope_quant after its RoPE: q [T, H, D] (the roped Q: bfloat16 bits as
// the RoPE leaves it, or float32), weights [T, H]. FP8 (use_fp4 False): returns (q_fp8 uint8
// [T, H, D], weights_out float32 [T, H]) with each (token, head) row's scale s folded in:
// weights_out = weights * s * softmax_scale * head_scale. rule "deepseek_v32" is
// sparse_attn_indexer.py's kernel (amax floor 1e-10, times 1/448), "deepseek_v4" is
// fused_indexer_q.py's (floor 1e-4, divided by 448); scale_fmt "ue8m0" (both kernels) rounds s
// up to a power of two, None keeps amax / 448. MXFP4 (use_fp4 True, DeepSeek-V4): returns
// ((q_packed uint8 [T, H, D / 2], q_scale int32 [T, H]), weights * softmax_scale * head_scale).
// rule None: "deepseek_v4" with use_fp4, else "deepseek_v32". vLLM's kernels also apply the RoPE
// (and round its output to bfloat16): pass the roped Q. hadamard=True quantises each row's
// Walsh-Hadamard rotation H_D x / sqrt(D) (DeepSeek-V4 rotates Q after RoPE), computed in
// float32 in the same pass (FP8 and MXFP4 alike).
// out: the same structure of arrays, written in place instead of new ones.
py::object indexer_q_quant(const py::object& q, const py::object& weights, double softmax_scale,
                           double head_scale, bool use_fp4, const py::object& rule_arg,
                           const py::object& scale_fmt, const py::object& out, bool hadamard) {
  constexpr const char* where = "indexer_q_quant";
  const py::array qa = as_array(where, "q", q);
  require_shape(where, "q", qa, qa.ndim() == 3, "[num_tokens, num_heads, head_dim]");
  const py::array wa = as_array(where, "weights", weights);
  require_shape(where, "weights", wa,
                wa.ndim() == 2 && wa.shape(0) == qa.shape(0) && wa.shape(1) == qa.shape(1),
                "[" + std::to_string(qa.shape(0)) + ", " + std::to_string(qa.shape(1)) +
                    "] (q's tokens and heads)");
  const std::string fmt = scale_fmt.is_none() ? "" : py::str(scale_fmt).cast<std::string>();
  if (fmt != "" && fmt != "ue8m0")
    fail(where, "scale_fmt = " + fmt + " is not supported (\"ue8m0\" or None)");
  const std::string rule = rule_arg.is_none() ? (use_fp4 ? "deepseek_v4" : "deepseek_v32")
                                              : py::str(rule_arg).cast<std::string>();
  ml::q_fold_scaling scaling;
  if (rule == "deepseek_v32")
    scaling = ml::vllm_v32_q_scaling();
  else if (rule == "deepseek_v4")
    scaling = ml::vllm_v4_q_scaling();
  else
    fail(where, "rule = " + rule + " is not supported (\"deepseek_v32\" or \"deepseek_v4\")");
  scaling.power_of_two = fmt == "ue8m0";
  const ml::row_rotation rotation = hadamard ? ml::row_rotation::hadamard : ml::row_rotation::none;
  scaling.rotation = rotation;
  const i64 tokens = qa.shape(0), heads = qa.shape(1), d = qa.shape(2);
  const i64 rows = tokens * heads;
  py::object q_out = py::none(), s_out = py::none(), w_out = py::none();
  if (!out.is_none()) {
    const auto t = out.cast<py::tuple>();
    if (t.size() != 2)
      fail(where, use_fp4 ? "out must be ((q_packed, q_scale), weights_out)"
                          : "out must be (q_fp8, weights_out)");
    w_out = t[1];
    if (use_fp4) {
      const auto qs = py::reinterpret_borrow<py::object>(t[0]).cast<py::tuple>();
      if (qs.size() != 2) fail(where, "out must be ((q_packed, q_scale), weights_out)");
      q_out = qs[0];
      s_out = qs[1];
    } else {
      q_out = t[0];
    }
  }
  const py::array wo = output(where, "weights_out", w_out, py::dtype::of<float>(), {tokens, heads});
  const ml::matrix_view<float> wv(static_cast<float*>(const_cast<void*>(wo.data())), tokens, heads,
                                  row_stride(where, "weights_out", wo) / i64{sizeof(float)});
  const float sm = static_cast<float>(softmax_scale), hs = static_cast<float>(head_scale);
  if (!use_fp4) {
    const py::array codes =
        output(where, "q_fp8", q_out, py::dtype::of<std::uint8_t>(), {tokens, heads, d});
    const i64 code_stride = flat_row_stride(where, "q_fp8", codes);
    with_rows(where, "q", qa, rows, [&](auto qv) {
      with_weights(where, wa, [&](auto w) {
        py::gil_scoped_release release;
        ml::quantize_q_fold_weights(qv, w,
                                    static_cast<std::uint8_t*>(const_cast<void*>(codes.data())),
                                    code_stride, wv, sm, hs, scaling);
      });
    });
    return py::make_tuple(codes, wo);
  }
  if (rule != "deepseek_v4" || fmt != "ue8m0")
    fail(where, "use_fp4 is DeepSeek-V4's MXFP4 Q: rule \"deepseek_v4\", scale_fmt \"ue8m0\"");
  const py::array packed =
      output(where, "q_packed", q_out, py::dtype::of<std::uint8_t>(), {tokens, heads, d / 2});
  const py::array sf = output(where, "q_scale", s_out, py::dtype::of<i32>(), {tokens, heads});
  const i64 p_stride = flat_row_stride(where, "q_packed", packed), s_stride = sizeof(i32);
  if (row_stride(where, "q_scale", sf) != heads * s_stride && tokens > 1)
    fail(where, "q_scale must be C-contiguous (one int32 per (token, head) row)");
  with_rows(where, "q", qa, rows, [&](auto qv) {
    with_weights(where, wa, [&](auto w) {
      py::gil_scoped_release release;
      // Checks every output against every input and the others, then writes (the unused bytes
      // of a row's 4-byte scale field, head dim 64, as 0).
      ml::quantize_q_mxfp4_scale_weights(
          qv, w, static_cast<std::uint8_t*>(const_cast<void*>(packed.data())), p_stride,
          static_cast<std::uint8_t*>(const_cast<void*>(sf.data())), s_stride, wv, sm, hs, rotation);
    });
  });
  return py::make_tuple(py::make_tuple(packed, sf), wo);
}

// ---- the MXFP4 cache insert ----

// DeepSeek-V4's MXFP4 indexer K cache insert (vLLM fuses it into its compressor kernel; this is
// its quantisation and store alone): k [num_tokens, D] float32 or bfloat16 bits (the roped K),
// kv_cache uint8 [num_blocks, block_size, D / 2 + 4] (or [..., 1, D / 2 + 4]) written in place,
// token t at slot slot_mapping[t] (int64 or int32; negative skips it). hadamard=True stores each
// token's Walsh-Hadamard rotation (DeepSeek-V4's K), computed in float32 in the same pass.
void indexer_k_quant_and_cache_mxfp4(const py::object& k, const py::object& kv_cache,
                                     const py::object& slot_mapping, bool hadamard) {
  constexpr const char* where = "indexer_k_quant_and_cache_mxfp4";
  const py::array ka = as_array(where, "k", k);
  require_shape(where, "k", ka, ka.ndim() == 2 && (ka.shape(1) == 128 || ka.shape(1) == 64),
                "[num_tokens, 128] or [num_tokens, 64]");
  const cache_arg c = cache_of(where, writable(where, "kv_cache", kv_cache));
  if (c.token_bytes != ka.shape(1) / 2 + 4)
    fail(where, "kv_cache has " + std::to_string(c.token_bytes) + " bytes per token; k rows of " +
                    std::to_string(ka.shape(1)) + " need " + std::to_string(ka.shape(1) / 2 + 4) +
                    " (packed e2m1, then 4 UE8M0 bytes)");
  const ml::mutable_paged_cache<ml::mxfp4> cache(c.data, c.num_blocks, c.block_size,
                                                 ml::head_dim_t{static_cast<int>(ka.shape(1))},
                                                 c.block_stride);
  with_rows(where, "k", ka, ka.shape(0), [&](auto kv) {
    with_index_span(where, "slot_mapping", slot_mapping, [&](auto slots) {
      py::gil_scoped_release release;
      ml::store_into_pages_vllm_mxfp4(
          kv, slots, cache, hadamard ? ml::row_rotation::hadamard : ml::row_rotation::none);
    });
  });
}

}  // namespace

// Names, defaults and docstrings: the ops' declarations (examples/op_registry).
void register_ops(py::module_& m) {
  namespace ops = mqalogits_bindings;
  using ops::def_op;
  def_op<ops::cp_gather_indexer_k_quant_cache>(m, &cp_gather_indexer_k_quant_cache);
  def_op<ops::indexer_q_quant>(m, &indexer_q_quant);
  def_op<ops::indexer_k_quant_and_cache_mxfp4>(m, &indexer_k_quant_and_cache_mxfp4);
}

}  // namespace mqalogits_python
