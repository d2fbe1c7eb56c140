// Part of the Python module's unit bindings.cpp (its parts in order, each including the one
// before): q, K, the paged cache and the weights as the kernels' input descriptors: the format from
// the dtypes, the head dim from the last extent, the scales' layout; the logits' dtype.
#pragma once

#include "checks.hpp"

namespace mqalogits_python {
namespace {

const char* format_label(qk_format f) {
  switch (f) {
    case qk_format::mxfp8:
      return "FP8 e4m3 with UE8M0 int32 scales";
    case qk_format::mxfp4:
      return "packed FP4 e2m1 (int8) with UE8M0 int32 scales";
    default:
      return "FP8 e4m3 with fp32 per-token K scales";
  }
}

// The codes of Q or K: uint8 [..., D] FP8 e4m3 codes (a float8 tensor viewed as uint8) or int8
// [..., D / 2] packed FP4 (DeepGEMM's kPackedFP4 dtype). Head dim D = 128 or 64, or 32 for FP8,
// as upstream; the library checks that Q and K agree.
bool is_fp4_codes(const char* where, const char* name, const py::array& a) {
  const bool fp4 = has_dtype<std::int8_t>(a);
  if (!fp4 && !has_dtype<std::uint8_t>(a))
    fail(where, std::string(name) + " has dtype " + dtype_name(a) +
                    ", expected uint8 (FP8 e4m3 codes) or int8 (packed FP4, two e2m1 per byte)");
  const i64 last = a.ndim() < 1 ? 0 : a.shape(a.ndim() - 1);
  const bool ok = fp4 ? last == 64 || last == 32 : last == 128 || last == 64 || last == 32;
  if (!ok)
    fail(where, std::string(name) + " has shape " + shape_of(a) + ": its last dimension must be " +
                    (fp4 ? "64 or 32 (head dim 128 or 64, two e2m1 per int8)"
                         : "128, 64 or 32 (the head dim, e4m3 codes)") +
                    "; packed FP4 must be int8, uint8 is read as FP8 codes");
  return fp4;
}

// The head dim of codes whose last dimension is `last` bytes.
int head_dim_of(i64 last, bool fp4) {
  return static_cast<int>(fp4 ? 2 * last : last);
}

q_input q_of(const char* where, const py::handle& q, int ndim) {
  py::tuple t;
  if (py::isinstance<py::tuple>(q) || py::isinstance<py::list>(q))
    t = py::reinterpret_borrow<py::object>(q).cast<py::tuple>();
  else
    fail(where, "q must be a tuple (q_codes, q_scales or None)");
  if (t.size() != 2) fail(where, "q must be a tuple (q_codes, q_scales or None)");
  const py::array codes = as_array(where, "q[0]", t[0]);
  const bool fp4 = is_fp4_codes(where, "q[0]", codes);
  if (codes.ndim() != ndim)
    fail(where, "q[0] has shape " + shape_of(codes) + ", expected " +
                    (ndim == 3 ? "[num_q, num_heads, head_dim]"
                               : "[batch_size, next_n, num_heads, head_dim]"));
  require_contiguous(where, "q[0]", codes);
  q_input in{};
  in.data = static_cast<const std::uint8_t*>(codes.data());
  in.head_dim = head_dim_of(codes.shape(codes.ndim() - 1), fp4);
  in.rows = 1;
  for (py::ssize_t i = 0; i + 1 < codes.ndim(); ++i) {
    in.dims.push_back(codes.shape(i));
    in.rows *= codes.shape(i);
  }
  if (t[1].is_none()) {
    if (fp4) fail(where, "packed FP4 q needs its UE8M0 scales (q[1] is None)");
    in.format = qk_format::fp8_per_token;
    in.scales = nullptr;
    return in;
  }
  const py::array sf = as_array(where, "q[1]", t[1]);
  require_dtype<i32>(where, "q[1]", sf, "int32 (four UE8M0 exponents per row)");
  bool same = sf.ndim() == codes.ndim() - 1;
  for (py::ssize_t i = 0; same && i < sf.ndim(); ++i) same = sf.shape(i) == codes.shape(i);
  if (!same)
    fail(where, "q[1] has shape " + shape_of(sf) + ", q[0] is " + shape_of(codes) +
                    ": one int32 of scales per (token, head) row");
  require_contiguous(where, "q[1]", sf);
  in.format = fp4 ? qk_format::mxfp4 : qk_format::mxfp8;
  in.scales = sf.data();
  return in;
}

// Token-major K: (codes [N, D], scales [N]: int32 UE8M0 with MX Q, float32 with per-token Q).
kv_input kv_of(const char* where, const py::handle& kv, qk_format format) {
  if (!(py::isinstance<py::tuple>(kv) || py::isinstance<py::list>(kv)) || py::len(kv) != 2)
    fail(where, "kv must be a tuple (kv_codes, kv_scales)");
  const py::tuple t = py::reinterpret_borrow<py::object>(kv).cast<py::tuple>();
  const py::array codes = as_array(where, "kv[0]", t[0]);
  const bool fp4 = is_fp4_codes(where, "kv[0]", codes);
  if (fp4 != (format == qk_format::mxfp4))
    fail(where, std::string("kv[0] is ") + (fp4 ? "packed FP4" : "FP8") + ", q is " +
                    format_label(format));
  require_ndim(where, "kv[0]", codes, 2, "[num_kv_tokens, head_dim]");
  if (codes.strides(1) != 1 || codes.strides(0) < codes.shape(1))
    fail(where, "kv[0] rows must be dense (stride(1) == 1)");
  const py::array sf = as_array(where, "kv[1]", t[1]);
  if (format == qk_format::fp8_per_token)
    require_dtype<float>(where, "kv[1]", sf, "float32 (one scale per token, as q has no scales)");
  else
    require_dtype<i32>(where, "kv[1]", sf, "int32 (four UE8M0 exponents per token)");
  require_ndim(where, "kv[1]", sf, 1, "[num_kv_tokens]");
  if (sf.shape(0) != codes.shape(0))
    fail(where, "kv[1] has " + std::to_string(sf.shape(0)) + " scales for " +
                    std::to_string(codes.shape(0)) + " kv rows");
  return {static_cast<const std::uint8_t*>(codes.data()),
          static_cast<const std::uint8_t*>(sf.data()),
          codes.shape(0),
          codes.shape(0) > 1 ? codes.strides(0) : codes.shape(1),
          sf.shape(0) > 1 ? sf.strides(0) : 4,
          head_dim_of(codes.shape(1), fp4)};
}

// The fused paged cache, uint8 [num_blocks, block_kv, 1, head_dim_with_sf]: per block, block_kv
// code rows then block_kv scale rows (vLLM's and sglang's indexer cache). head_dim_with_sf is
// the code bytes of the head dim + 4 (132 for FP8 at D = 128, 68 for MXFP4 at D = 128).
// The cache's blocks must not overlap: a block stride of 0 (every block the same bytes), below
// a block's bytes or negative would make the view describe num_blocks blocks of smaller
// storage (and a view's page stride of 0 means "packed").
void require_block_stride(const char* where, const py::array& c, i64 block_bytes) {
  if (c.shape(0) > 1 && c.strides(0) < block_bytes)
    fail(where, "kv_cache has block stride " + std::to_string(c.strides(0)) +
                    " bytes for blocks of " + std::to_string(block_bytes) +
                    " bytes: blocks must not overlap or run backwards");
}

cache_input cache_of(const char* where, const py::handle& obj, qk_format format) {
  const py::array c = as_array(where, "kv_cache", obj);
  require_dtype<std::uint8_t>(where, "kv_cache", c, "uint8");
  require_ndim(where, "kv_cache", c, 4, "[num_blocks, block_kv, 1, head_dim_with_sf]");
  const bool fp4 = format == qk_format::mxfp4;
  const i64 token_bytes = c.shape(3);
  // In range before it is narrowed to a head dim (a last dimension of 2^32 + 132 is no 128).
  const int head_dim =
      token_bytes > 4 && token_bytes <= 132 ? head_dim_of(token_bytes - 4, fp4) : 0;
  const bool known = head_dim == 128 || head_dim == 64 || (head_dim == 32 && !fp4);
  if (c.shape(2) != 1 || !known)
    fail(where, "kv_cache has shape " + shape_of(c) + ", expected [num_blocks, block_kv, 1, " +
                    (fp4 ? "68 or 36" : "132, 68 or 36") + "] (head dim " +
                    (fp4 ? "128 or 64" : "128, 64 or 32") + " + 4 scale bytes) for " +
                    format_label(format));
  if (c.strides(3) != 1 || (c.shape(1) > 1 && c.strides(1) != token_bytes))
    fail(where, "kv_cache blocks must be dense (stride(1) == head_dim_with_sf, stride(3) == 1)");
  const i64 used = c.shape(1) * token_bytes;
  require_block_stride(where, c, used);
  return {static_cast<const std::uint8_t*>(c.data()), c.shape(0),
          c.shape(0) > 1 ? i64{c.strides(0)} : used,
          ml::checked_int32(where, "kv_cache's block size (dimension 1)", c.shape(1)), head_dim};
}

// Weights [rows, H]: float32, float16, or bfloat16 as uint16 bits (a bf16 tensor's
// .view(torch.int16) is accepted as int16 too).
struct weights_input {
  py::array array;
  weights_type type;
};

weights_input weights_of(const char* where, const py::handle& obj) {
  const py::array a = as_array(where, "weights", obj);
  const bool f32 = has_dtype<float>(a);
  const bool b16 = has_dtype<std::uint16_t>(a) || has_dtype<std::int16_t>(a);
  const bool f16 = a.dtype().kind() == 'f' && a.dtype().itemsize() == 2;
  if (!f32 && !b16 && !f16)
    fail(where, "weights has dtype " + dtype_name(a) +
                    ", expected float32, float16 or bfloat16 bits as uint16 / int16");
  // [num_q, num_heads, 1] (sglang's weights before its squeeze) is read as [num_q, num_heads].
  if (a.ndim() == 3 && a.shape(2) == 1)
    return {
        py::array(a.dtype(), {a.shape(0), a.shape(1)}, {a.strides(0), a.strides(1)}, a.data(), a),
        f32   ? weights_type::f32
        : f16 ? weights_type::f16
              : weights_type::bf16};
  require_ndim(where, "weights", a, 2, "[num_q, num_heads] (or [num_q, num_heads, 1])");
  return {a, f32 ? weights_type::f32 : f16 ? weights_type::f16 : weights_type::bf16};
}

}  // namespace
}  // namespace mqalogits_python
