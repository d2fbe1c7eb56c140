// Part of the Python module's unit bindings.cpp (its parts in order, each including the one
// before): vLLM's FP8 K cache writer, indexer_k_quant_and_cache.
#pragma once

#include "sparse.hpp"

namespace mqalogits_python {
namespace {

// vLLM's indexer_k_quant_and_cache(k, kv_cache, slot_mapping, quant_block_size, scale_fmt): k
// [num_tokens, 128] float32 or bfloat16 bits, quantised to FP8 with one fp32 scale per token as
// vLLM computes it (amax clamped at 1e-4, / 448, a power of two with scale_fmt "ue8m0") into
// kv_cache uint8 [num_blocks, block_size, 132] (or [..., 1, 132]) in place, token t at slot
// slot_mapping[t] (int64 or int32; negative skips). hadamard=True stores each token's
// Walsh-Hadamard rotation (DeepSeek-V4's K), computed in float32 in the same pass.
void indexer_k_quant_and_cache(const py::object& k, const py::object& kv_cache,
                               const py::object& slot_mapping, i64 quant_block_size,
                               const py::object& scale_fmt, bool hadamard) {
  constexpr const char* where = "indexer_k_quant_and_cache";
  if (quant_block_size != ml::head_dim)
    fail(where, "quant_block_size = " + std::to_string(quant_block_size) +
                    " is not supported (128: one scale per token)");
  const std::string fmt = scale_fmt.is_none() ? "" : py::str(scale_fmt).cast<std::string>();
  if (fmt != "" && fmt != "ue8m0")
    fail(where, "scale_fmt = " + fmt + " is not supported (\"ue8m0\" or None)");
  const py::array ka = as_array(where, "k", k);
  py::array c = as_array(where, "kv_cache", kv_cache);
  require_dtype<std::uint8_t>(where, "kv_cache", c, "uint8");
  if (!c.writeable()) fail(where, "kv_cache is read-only (the tokens are written into it)");
  const bool four = c.ndim() == 4;
  if ((c.ndim() != 3 && !four) || (four && c.shape(2) != 1) || c.shape(c.ndim() - 1) != 132)
    fail(where, "kv_cache has shape " + shape_of(c) +
                    ", expected [num_blocks, block_size, 132] (or [num_blocks, block_size, 1, "
                    "132])");
  if (c.strides(c.ndim() - 1) != 1 || (c.shape(1) > 1 && c.strides(1) != 132) || c.strides(0) < 0)
    fail(where, "kv_cache blocks must be dense (stride(1) == 132, stride(-1) == 1)");
  const i32 block_size =
      ml::checked_int32(where, "kv_cache's block size (dimension 1)", c.shape(1));
  require_block_stride(where, c, i64{block_size} * 132);
  const i64 stride = c.shape(0) > 1 ? i64{c.strides(0)} : i64{block_size} * 132;
  const ml::mutable_paged_cache<ml::fp8_per_token> cache(
      static_cast<std::uint8_t*>(c.mutable_data()), c.shape(0), block_size, stride);
  const ml::per_token_scaling scaling = ml::vllm_indexer_k_scaling(fmt == "ue8m0");
  const ml::row_rotation rotation = hadamard ? ml::row_rotation::hadamard : ml::row_rotation::none;
  const py::array sa = as_array(where, "slot_mapping", slot_mapping);
  require_ndim(where, "slot_mapping", sa, 1, "[num_tokens]");
  require_contiguous(where, "slot_mapping", sa);
  const auto store = [&](auto kv) {
    if (has_dtype<std::int64_t>(sa))
      ml::store_into_pages(
          kv,
          std::span<const std::int64_t>(static_cast<const std::int64_t*>(sa.data()),
                                        static_cast<std::size_t>(sa.shape(0))),
          cache, scaling, rotation);
    else if (has_dtype<i32>(sa))
      ml::store_into_pages(kv,
                           std::span<const i32>(static_cast<const i32*>(sa.data()),
                                                static_cast<std::size_t>(sa.shape(0))),
                           cache, scaling, rotation);
    else
      fail(where, "slot_mapping has dtype " + dtype_name(sa) + ", expected int64 or int32");
  };
  if (has_dtype<float>(ka))
    store(matrix<float>(where, "k", ka));
  else if (has_dtype<std::uint16_t>(ka) || has_dtype<std::int16_t>(ka))
    store(matrix<ml::bf16, std::uint16_t>(where, "k", ka));
  else
    fail(where, "k has dtype " + dtype_name(ka) + ", expected float32 or bfloat16 bits as uint16");
}

}  // namespace
}  // namespace mqalogits_python
