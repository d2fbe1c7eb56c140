// PyTorch interop (optional: the only header of mqalogits that includes ATen). CPU tensors become
// the views the kernels take, in place, without copies: quantised Q / K rows with their scales,
// the fused paged cache, weights, index arrays and outputs. For a C++ op registered with
// TORCH_LIBRARY, as engines' CPU kernels are:
//
//   #include <mqalogits/mqalogits.hpp>
//   #include <mqalogits/interop/torch.hpp>
//   at::Tensor logits = at::empty({num_q, n}, at::kFloat);
//   const char* where = "my_op";
//   ml::fp8_fp4_mqa_logits(ml::as_rows_view<ml::fp8_per_token>(q, at::Tensor(), where, "q"),
//                          ml::as_rows_view<ml::fp8_per_token>(k, k_scale, where, "kv"),
//                          ml::as_matrix_view<const float>(weights, where, "weights"),
//                          ml::as_span<const std::int32_t>(ks, where, "ks"),
//                          ml::as_span<const std::int32_t>(ke, where, "ke"), 0,
//                          ml::as_matrix_view<float>(logits, where, "logits"));
//
// Every function checks the tensor before viewing it: defined, on the CPU, strided, the dtype the
// view reads, the rank and a layout the view can describe (rows dense, no zero or overlapping row
// strides). A failed check throws mqalogits::error naming the function (`where`), the argument
// and what is wrong, e.g. "my_op: weights has dtype torch.int32, expected torch.float32". The
// checks themselves are public in ml::torch_checks (require_tensor, require_dtype, dtype_name,
// shape, ...), for an op's own tensors, with check::require (check/require.hpp) for the rest.
//
// Dtypes: FP8 codes are torch.uint8 or torch.float8_e4m3fn (torch 2.1 on); packed FP4 codes are
// torch.int8 (DeepGEMM's packed FP4 dtype), torch.uint8 or torch.float4_e2m1fn_x2; the head dim
// is read from the codes' last dimension. Weights and logits: torch.float32 (float),
// torch.bfloat16 (mqalogits::bf16), torch.float16 (mqalogits::fp16). Index arrays: torch.int32 or
// torch.int64 (std::int32_t, std::int64_t).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <span>
#include <type_traits>

#include "../check/require.hpp"
#include "../config.hpp"
#include "../error.hpp"
#include "../format/bf16.hpp"
#include "../format/fp16.hpp"
#include "../view/matrix_view.hpp"
#include "../view/paged_cache_view.hpp"
#include "../view/rows_view.hpp"

MQALOGITS_NAMESPACE_BEGIN

// The checks the views below run, public for op libraries that check tensors of their own (a
// dtype, a shape) with the same wording.
namespace torch_checks {

using check::require;

// The dtype as Python spells it (torch.float32), which is what torch users read.
inline const char* dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float:
      return "torch.float32";
    case c10::ScalarType::BFloat16:
      return "torch.bfloat16";
    case c10::ScalarType::Half:
      return "torch.float16";
    case c10::ScalarType::Double:
      return "torch.float64";
    case c10::ScalarType::Byte:
      return "torch.uint8";
    case c10::ScalarType::Char:
      return "torch.int8";
    case c10::ScalarType::Short:
      return "torch.int16";
    case c10::ScalarType::Int:
      return "torch.int32";
    case c10::ScalarType::Long:
      return "torch.int64";
    case c10::ScalarType::Bool:
      return "torch.bool";
    default:
      return c10::toString(t);
  }
}

// Dtypes newer than the oldest torch this header builds with (float8 since 2.1, float4 since
// 2.8) are recognised by name, so one source serves every version. (A plain loop: a standard
// string comparison would be a std template instantiation shared with other ISA builds.)
inline bool dtype_is(const at::Tensor& t, const char* name) {
  const char* have = c10::toString(t.scalar_type());
  for (; *have && *have == *name; ++have) ++name;
  return *have == *name;
}

// The checks every tensor gets: present, on the CPU, strided.
inline void require_tensor(const at::Tensor& t, const char* where, const char* name) {
  require(t.defined(), where, [&](auto& m) { m << name << " is an undefined tensor"; });
  require(t.device().is_cpu(), where, [&](auto& m) {
    m << name << " is on " << c10::DeviceTypeName(t.device().type(), true)
      << "; mqalogits runs on the CPU: pass a CPU tensor";
  });
  require(t.layout() == c10::kStrided, where,
          [&](auto& m) { m << name << " must be a strided (dense) tensor"; });
}

inline void require_dtype(const at::Tensor& t, c10::ScalarType want, const char* where,
                          const char* name) {
  require(t.scalar_type() == want, where, [&](auto& m) {
    m << name << " has dtype " << dtype_name(t.scalar_type()) << ", expected " << dtype_name(want);
  });
}

// Writes "[a, b, c]".
struct shape {
  const at::Tensor& t;
  template <class M>
  void write_to(M& m) const {
    m << "[";
    for (std::int64_t i = 0; i < t.dim(); ++i) m << (i ? ", " : "") << t.size(i);
    m << "]";
  }
};

// The element stride between rows of `cols` elements when the first `row_dims` dimensions are
// collapsed into one row index (dimensions of size 1 impose nothing): they must nest (each
// stride the next one's times its size) and keep rows apart.
inline std::int64_t rows_stride(const at::Tensor& t, std::int64_t row_dims, std::int64_t cols,
                                const char* where, const char* name) {
  std::int64_t stride = cols, inner = -1;  // inner: the innermost row dimension of size > 1
  for (std::int64_t d = row_dims - 1; d >= 0; --d) {
    if (t.size(d) <= 1) continue;
    if (inner < 0) {
      stride = t.stride(d);
      require(stride >= cols, where, [&](auto& m) {
        m << name << " has stride " << stride << " in dimension " << d << " for rows of " << cols
          << " elements: rows must not overlap (no zero or broadcast strides)";
      });
    } else {
      require(t.stride(d) == t.stride(inner) * t.size(inner), where, [&](auto& m) {
        m << name << " with shape " << shape{t} << " has stride " << t.stride(d) << " in dimension "
          << d << ", expected " << t.stride(inner) * t.size(inner)
          << ": its leading dimensions must be contiguous";
      });
    }
    inner = d;
  }
  return stride;
}

// Rows of the last dimension, which must be dense; every other dimension is a row index.
inline std::int64_t row_stride(const at::Tensor& t, const char* where, const char* name) {
  const std::int64_t last = t.dim() - 1, cols = t.size(last);
  require(cols <= 1 || t.stride(last) == 1, where, [&](auto& m) {
    m << name << " has stride " << t.stride(last) << " in its last dimension; it must be 1";
  });
  return rows_stride(t, last, cols, where, name);
}

template <class T>
constexpr c10::ScalarType dtype_of() {
  using U = std::remove_const_t<T>;
  if constexpr (std::is_same_v<U, float>)
    return c10::ScalarType::Float;
  else if constexpr (std::is_same_v<U, bf16>)
    return c10::ScalarType::BFloat16;
  else if constexpr (std::is_same_v<U, fp16>)
    return c10::ScalarType::Half;
  else if constexpr (std::is_same_v<U, std::int32_t>)
    return c10::ScalarType::Int;
  else if constexpr (std::is_same_v<U, std::int64_t>)
    return c10::ScalarType::Long;
  else
    static_assert(std::is_same_v<U, std::uint8_t>,
                  "mqalogits: views of torch tensors hold float, bf16, fp16, int32, int64 or "
                  "uint8 elements");
  return c10::ScalarType::Byte;
}

// The codes of a format: FP8 (uint8 / float8_e4m3fn) or packed FP4 (int8 / uint8 /
// float4_e2m1fn_x2). Returns the head dim the last dimension holds.
template <class Format>
int codes_head_dim(const at::Tensor& codes, const char* where, const char* name) {
  constexpr bool fp4 = Format::data_type::bits == 4;
  const bool ok =
      codes.scalar_type() == c10::ScalarType::Byte ||
      (fp4 ? codes.scalar_type() == c10::ScalarType::Char || dtype_is(codes, "Float4_e2m1fn_x2")
           : dtype_is(codes, "Float8_e4m3fn"));
  require(ok, where, [&](auto& m) {
    m << name << " has dtype " << dtype_name(codes.scalar_type()) << ", expected "
      << (fp4 ? "torch.int8 or torch.uint8 (packed FP4, two e2m1 per byte)"
              : "torch.float8_e4m3fn or torch.uint8 (FP8 e4m3 codes)")
      << " for " << Format::name;
  });
  require(codes.dim() >= 1, where, [&](auto& m) { m << name << " is a 0-d tensor"; });
  const std::int64_t last = codes.size(codes.dim() - 1);
  // In range before doubling: an expanded tensor's last dimension can be near INT64_MAX.
  const std::int64_t d = fp4 ? (last >= 0 && last <= 64 ? 2 * last : -1) : last;
  require(d <= 128 && Format::supports_head_dim(static_cast<int>(d)), where, [&](auto& m) {
    m << name << " has shape " << shape{codes} << ": its last dimension must be "
      << (fp4 ? "64 or 32 (head dim 128 or 64, two e2m1 per byte)"
              : "128, 64 or 32 (the head dim)");
  });
  return static_cast<int>(d);
}

}  // namespace torch_checks

// The names these helpers had before they were public, kept for code written against them.
namespace detail {
inline const char* torch_dtype_name(c10::ScalarType t) {
  return torch_checks::dtype_name(t);
}
inline bool torch_dtype_is(const at::Tensor& t, const char* name) {
  return torch_checks::dtype_is(t, name);
}
inline void check_torch_tensor(const at::Tensor& t, const char* where, const char* name) {
  torch_checks::require_tensor(t, where, name);
}
inline void require_torch_dtype(const at::Tensor& t, c10::ScalarType want, const char* where,
                                const char* name) {
  torch_checks::require_dtype(t, want, where, name);
}
using torch_shape = torch_checks::shape;
inline std::int64_t torch_rows_stride(const at::Tensor& t, std::int64_t row_dims, std::int64_t cols,
                                      const char* where, const char* name) {
  return torch_checks::rows_stride(t, row_dims, cols, where, name);
}
inline std::int64_t torch_row_stride(const at::Tensor& t, const char* where, const char* name) {
  return torch_checks::row_stride(t, where, name);
}
template <class T>
constexpr c10::ScalarType torch_dtype_of() {
  return torch_checks::dtype_of<T>();
}
template <class Format>
int torch_codes_head_dim(const at::Tensor& codes, const char* where, const char* name) {
  return torch_checks::codes_head_dim<Format>(codes, where, name);
}
}  // namespace detail

// A 2-D tensor [rows, cols] of T's dtype as a matrix_view over its storage: the last dimension
// dense, any row stride that keeps rows apart. T const for inputs (weights, block tables,
// context lengths), non-const for outputs (logits).
template <class T>
matrix_view<T> as_matrix_view(const at::Tensor& t, const char* where, const char* name) {
  torch_checks::require_tensor(t, where, name);
  torch_checks::require_dtype(t, torch_checks::dtype_of<T>(), where, name);
  torch_checks::require(t.dim() == 2, where, [&](auto& m) {
    m << name << " has shape " << torch_checks::shape{t} << ", expected 2 dimensions";
  });
  const std::int64_t stride = torch_checks::row_stride(t, where, name);
  return matrix_view<T>(static_cast<T*>(t.data_ptr()), t.size(0), t.size(1), stride);
}

// A contiguous 1-D tensor of T's dtype as a span (ks, ke, varlen indices).
template <class T>
std::span<T> as_span(const at::Tensor& t, const char* where, const char* name) {
  torch_checks::require_tensor(t, where, name);
  torch_checks::require_dtype(t, torch_checks::dtype_of<T>(), where, name);
  torch_checks::require(t.dim() == 1, where, [&](auto& m) {
    m << name << " has shape " << torch_checks::shape{t} << ", expected 1 dimension";
  });
  torch_checks::require(t.size(0) <= 1 || t.stride(0) == 1, where, [&](auto& m) {
    m << name << " has stride " << t.stride(0) << "; it must be contiguous";
  });
  return {static_cast<T*>(t.data_ptr()), static_cast<std::size_t>(t.size(0))};
}

// Quantised rows: codes [..., D] (FP8) or [..., D / 2] (packed FP4), every leading dimension a
// row (Q [S, H, D] is S * H rows), and their scales with the codes' leading shape: int32 (the
// four UE8M0 bytes of a row, as DeepGEMM holds them) for the MX formats, float32 for the K of
// fp8_per_token (also with a trailing dimension of 1). `scales` undefined (at::Tensor()) means
// none, which only fp8_per_token allows (Q, whose scale the engine folded into the weights).
template <class Format>
rows_view<Format> as_rows_view(const at::Tensor& codes, const at::Tensor& scales, const char* where,
                               const char* name, const char* scales_name = "scales") {
  torch_checks::require_tensor(codes, where, name);
  rows_view<Format> v;
  v.data = static_cast<const std::uint8_t*>(codes.data_ptr());
  v.head_dim = torch_checks::codes_head_dim<Format>(codes, where, name);
  v.rows = codes.numel() / codes.size(codes.dim() - 1);          // a head dim > 0, checked above
  v.data_stride = torch_checks::row_stride(codes, where, name);  // 1-byte elements
  if (!scales.defined()) {
    torch_checks::require(Format::scales_optional, where, [&](auto& m) {
      m << scales_name << " is missing: " << Format::name << " rows need their scales";
    });
    v.scales = nullptr;
    v.scale_stride = Format::scale_bytes;
    return v;
  }
  torch_checks::require_tensor(scales, where, scales_name);
  torch_checks::require_dtype(scales,
                              Format::ue8m0_scales ? c10::ScalarType::Int : c10::ScalarType::Float,
                              where, scales_name);
  // The codes' leading shape, or that with a trailing 1 (K scales as [N, 1]).
  const std::int64_t row_dims = codes.dim() - 1;
  bool same =
      scales.dim() == row_dims || (scales.dim() == row_dims + 1 && scales.size(row_dims) == 1);
  for (std::int64_t d = 0; same && d < row_dims; ++d) same = scales.size(d) == codes.size(d);
  torch_checks::require(same, where, [&](auto& m) {
    m << scales_name << " has shape " << torch_checks::shape{scales} << ", expected " << name
      << "'s shape without its last dimension (" << name << ": " << torch_checks::shape{codes}
      << ")";
  });
  // One element per row: every dimension is a row index.
  const std::int64_t stride = torch_checks::rows_stride(scales, row_dims, 1, where, scales_name);
  v.scales = static_cast<const std::uint8_t*>(scales.data_ptr());
  v.scale_stride = stride * 4;
  return v;
}

// The fused paged cache [num_blocks, block_kv, 1, bytes] (or [num_blocks, block_kv, bytes]) of
// uint8 (float8_e4m3fn for FP8, int8 for FP4 pass too), bytes = the codes of one token and its
// 4 scale bytes (132 for FP8 at D = 128, 68 for FP4), each page laid out as all its tokens' codes
// then all their scales. The head dim follows from `bytes`; the page stride is the tensor's
// (vLLM and sglang: block_kv * bytes; DeepGEMM pads it to a multiple of 512).
template <class Format>
paged_cache_view<Format> as_paged_cache_view(const at::Tensor& cache, const char* where,
                                             const char* name) {
  torch_checks::require_tensor(cache, where, name);
  constexpr bool fp4 = Format::data_type::bits == 4;
  const bool dtype_ok = cache.scalar_type() == c10::ScalarType::Byte ||
                        (fp4 ? cache.scalar_type() == c10::ScalarType::Char
                             : torch_checks::dtype_is(cache, "Float8_e4m3fn"));
  torch_checks::require(dtype_ok, where, [&](auto& m) {
    m << name << " has dtype " << torch_checks::dtype_name(cache.scalar_type())
      << ", expected torch.uint8 (the fused cache's bytes)";
  });
  const bool rank_ok = (cache.dim() == 4 && cache.size(2) == 1) || cache.dim() == 3;
  torch_checks::require(rank_ok, where, [&](auto& m) {
    m << name << " has shape " << torch_checks::shape{cache}
      << ", expected [num_blocks, block_kv, 1, bytes per token]";
  });
  const std::int64_t last = cache.dim() - 1;
  const std::int64_t blocks = cache.size(0), block_kv = cache.size(1), bytes = cache.size(last);
  const std::int64_t data_bytes = bytes - Format::scale_bytes;
  const std::int64_t d = fp4 ? 2 * data_bytes : data_bytes;
  torch_checks::require(d > 0 && d <= 128 && Format::supports_head_dim(static_cast<int>(d)), where,
                        [&](auto& m) {
                          m << name << " has " << bytes << " bytes per token (shape "
                            << torch_checks::shape{cache} << "), expected "
                            << (fp4 ? "68 or 36 (head dim 128 or 64: D / 2 + 4)"
                                    : "132, 68 or 36 (head dim 128, 64 or 32: D + 4)")
                            << " for " << Format::name;
                        });
  torch_checks::require(bytes <= 1 || cache.stride(last) == 1, where, [&](auto& m) {
    m << name << " has stride " << cache.stride(last) << " in its last dimension; it must be 1";
  });
  torch_checks::require(block_kv <= 1 || cache.stride(1) == bytes, where, [&](auto& m) {
    m << name << " has stride " << cache.stride(1) << " between the tokens of a block, expected "
      << bytes << " (a block is one dense run of block_kv x " << bytes << " bytes)";
  });
  torch_checks::require(block_kv >= 1 && block_kv <= INT32_MAX, where, [&](auto& m) {
    m << name << " has block_kv = " << block_kv << " (shape " << torch_checks::shape{cache} << ")";
  });
  const std::int64_t page = block_kv * bytes;
  const std::int64_t page_stride = blocks > 1 ? cache.stride(0) : page;
  torch_checks::require(page_stride >= page, where, [&](auto& m) {
    m << name << " has block stride " << page_stride << " bytes for blocks of " << page
      << " bytes: blocks must not overlap";
  });
  return paged_cache_view<Format>(cache.data_ptr(), blocks, static_cast<std::int32_t>(block_kv),
                                  head_dim_t{static_cast<int>(d)}, page_stride);
}

MQALOGITS_NAMESPACE_END
