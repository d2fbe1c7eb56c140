// The ops around the kernels, with vLLM's names and argument orders: the indexer K cache inserts
// (indexer_k_quant_and_cache: FP8 with a per-token fp32 scale; indexer_k_quant_and_cache_mxfp4:
// DeepSeek-V4's MXFP4), the prefill gather of the paged cache (cp_gather_indexer_k_quant_cache)
// and Q quantisation with its scale folded into the weights (indexer_q_quant, what vLLM's
// fused_indexer_q_rope_quant does after its RoPE). Caches and dst tensors are written in place;
// the rules are the Python module's functions of the same names.
#include "cache_ops.hpp"  // first: it includes torch's headers in an order Clang takes

#include <ATen/ops/empty.h>

#include <mqalogits/quantize.hpp>

#include <string>

namespace mqalogits_torch {

namespace {

// A paged cache [num_blocks, block_size, bytes] or [..., 1, bytes] of uint8, `bytes` per token:
// its base, blocks, block size and block stride.
struct cache_arg {
  std::uint8_t* data;
  std::int64_t num_blocks, block_stride;
  std::int32_t block_size;
  std::int64_t token_bytes;
};
cache_arg cache_bytes(const char* where, const at::Tensor& c, std::int64_t bytes) {
  ml::torch_checks::require_tensor(c, where, "kv_cache");
  ml::torch_checks::require_dtype(c, c10::ScalarType::Byte, where, "kv_cache");
  const bool four = c.dim() == 4;
  ml::check::require(
      (c.dim() == 3 || (four && c.size(2) == 1)) && (bytes < 0 || c.size(c.dim() - 1) == bytes),
      where, [&](auto& m) {
        m << "kv_cache has shape " << ml::torch_checks::shape{c}
          << ", expected [num_blocks, block_size, "
          << (bytes < 0 ? std::string("bytes") : std::to_string(bytes))
          << "] (or [num_blocks, block_size, 1, ...])";
      });
  const std::int64_t token_bytes = c.size(c.dim() - 1);
  ml::check::require(c.stride(c.dim() - 1) == 1 && (c.size(1) <= 1 || c.stride(1) == token_bytes),
                     where, [](auto& m) {
                       m << "kv_cache blocks must be dense (stride(1) == bytes per token, "
                            "stride(-1) == 1)";
                     });
  const std::int64_t block_bytes = c.size(1) * token_bytes;
  ml::check::require(c.size(0) <= 1 || c.stride(0) >= block_bytes, where, [&](auto& m) {
    m << "kv_cache has block stride " << c.stride(0) << " bytes for blocks of " << block_bytes
      << " bytes: blocks must not overlap";
  });
  ml::check::require(c.size(1) >= 1 && c.size(1) <= INT32_MAX, where,
                     [&](auto& m) { m << "kv_cache has block_size " << c.size(1); });
  return {static_cast<std::uint8_t*>(c.data_ptr()), c.size(0),
          c.size(0) > 1 ? c.stride(0) : block_bytes, static_cast<std::int32_t>(c.size(1)),
          token_bytes};
}

// fn(rows) for a [rows, D] float32 or bfloat16 tensor (D dense).
template <class Fn>
void with_rows(const char* where, const char* name, const at::Tensor& t, Fn&& fn) {
  ml::torch_checks::require_tensor(t, where, name);
  if (t.scalar_type() == c10::ScalarType::BFloat16)
    return fn(ml::as_matrix_view<const ml::bf16>(t, where, name));
  ml::check::require(t.scalar_type() == c10::ScalarType::Float, where, [&](auto& m) {
    m << name << " has dtype " << ml::torch_checks::dtype_name(t.scalar_type())
      << ", expected torch.float32 or torch.bfloat16";
  });
  fn(ml::as_matrix_view<const float>(t, where, name));
}

// fn(span) for the int32 / int64 slot mapping.
template <class Fn>
void with_slots(const char* where, const at::Tensor& slots, Fn&& fn) {
  with_index_type(where, "slot_mapping", slots, [&](auto index) {
    fn(ml::as_span<const decltype(index)>(slots, where, "slot_mapping"));
  });
}

ml::row_rotation rotation_of(bool hadamard) {
  return hadamard ? ml::row_rotation::hadamard : ml::row_rotation::none;
}

std::string text_of(const c10::optional<c10::string_view>& s) {
  return s.has_value() ? std::string(s->data(), s->size()) : std::string();
}

}  // namespace

void indexer_k_quant_and_cache(const at::Tensor& k, const at::Tensor& kv_cache,
                               const at::Tensor& slot_mapping, std::int64_t quant_block_size,
                               c10::optional<c10::string_view> scale_fmt, bool hadamard) {
  constexpr const char* where = "indexer_k_quant_and_cache";
  guarded(where, [&] {
    ml::check::require(quant_block_size == 128, where, [&](auto& m) {
      m << "quant_block_size = " << quant_block_size
        << " is not supported (128: one scale per token)";
    });
    const std::string fmt = text_of(scale_fmt);
    ml::check::require(fmt.empty() || fmt == "ue8m0", where, [&](auto& m) {
      m << "scale_fmt = " << fmt << " is not supported (\"ue8m0\" or None)";
    });
    const cache_arg c = cache_bytes(where, kv_cache, 132);
    const ml::mutable_paged_cache<ml::fp8_per_token> cache(c.data, c.num_blocks, c.block_size,
                                                           c.block_stride);
    const ml::per_token_scaling scaling = ml::vllm_indexer_k_scaling(fmt == "ue8m0");
    with_rows(where, "k", k, [&](auto rows) {
      with_slots(where, slot_mapping, [&](auto slots) {
        ml::store_into_pages(rows, slots, cache, scaling, rotation_of(hadamard));
      });
    });
  });
}

void indexer_k_quant_and_cache_mxfp4(const at::Tensor& k, const at::Tensor& kv_cache,
                                     const at::Tensor& slot_mapping, bool hadamard) {
  constexpr const char* where = "indexer_k_quant_and_cache_mxfp4";
  guarded(where, [&] {
    ml::torch_checks::require_tensor(k, where, "k");
    ml::check::require(k.dim() == 2 && (k.size(1) == 128 || k.size(1) == 64), where, [&](auto& m) {
      m << "k has shape " << ml::torch_checks::shape{k}
        << ", expected [num_tokens, 128] or [num_tokens, 64]";
    });
    const cache_arg c = cache_bytes(where, kv_cache, k.size(1) / 2 + 4);
    const ml::mutable_paged_cache<ml::mxfp4> cache(c.data, c.num_blocks, c.block_size,
                                                   ml::head_dim_t{static_cast<int>(k.size(1))},
                                                   c.block_stride);
    with_rows(where, "k", k, [&](auto rows) {
      with_slots(where, slot_mapping, [&](auto slots) {
        ml::store_into_pages_vllm_mxfp4(rows, slots, cache, rotation_of(hadamard));
      });
    });
  });
}

void cp_gather_indexer_k_quant_cache(const at::Tensor& kv_cache, const at::Tensor& dst_k,
                                     const at::Tensor& dst_scale, const at::Tensor& block_table,
                                     const at::Tensor& cu_seq_lens) {
  constexpr const char* where = "cp_gather_indexer_k_quant_cache";
  guarded(where, [&] {
    const cache_arg c = cache_bytes(where, kv_cache, -1);
    ml::torch_checks::require_tensor(dst_k, where, "dst_k");
    ml::check::require((dst_k.scalar_type() == c10::ScalarType::Byte ||
                        dst_k.scalar_type() == c10::ScalarType::Char ||
                        ml::torch_checks::dtype_is(dst_k, "Float8_e4m3fn")) &&
                           dst_k.dim() == 2 && (dst_k.size(1) == 128 || dst_k.size(1) == 64),
                       where, [&](auto& m) {
                         m << "dst_k has shape " << ml::torch_checks::shape{dst_k} << " and dtype "
                           << ml::torch_checks::dtype_name(dst_k.scalar_type())
                           << ", expected [num_tokens, 128] (FP8 codes) or [num_tokens, 64] "
                              "(packed MXFP4) bytes";
                       });
    const std::int64_t data_bytes = dst_k.size(1), tokens = dst_k.size(0);
    ml::check::require(c.token_bytes == data_bytes + 4, where, [&](auto& m) {
      m << "kv_cache has " << c.token_bytes << " bytes per token; dst_k rows of " << data_bytes
        << " bytes need " << data_bytes + 4;
    });
    ml::torch_checks::require_tensor(dst_scale, where, "dst_scale");
    const auto st = dst_scale.scalar_type();
    const bool words = st == c10::ScalarType::Float || st == c10::ScalarType::Int;
    const bool bytes = st == c10::ScalarType::Byte || st == c10::ScalarType::Char;
    const bool shape_ok =
        dst_scale.dim() >= 1 && dst_scale.size(0) == tokens &&
        (words ? dst_scale.dim() == 1 || (dst_scale.dim() == 2 && dst_scale.size(1) == 1)
               : dst_scale.dim() == 2 && dst_scale.size(1) == 4);
    ml::check::require((words || bytes) && shape_ok, where, [&](auto& m) {
      m << "dst_scale has shape " << ml::torch_checks::shape{dst_scale} << " and dtype "
        << ml::torch_checks::dtype_name(st) << ", expected uint8 [" << tokens
        << ", 4] (or float32 / int32 [" << tokens << "]): 4 scale bytes per row of dst_k";
    });
    const at::Tensor k2 = dst_k, s2 = dst_scale.reshape({tokens, -1});
    ml::check::require(s2.data_ptr() == dst_scale.data_ptr() &&
                           (tokens <= 1 || s2.stride(1) == 1 || s2.size(1) == 1),
                       where, [](auto& m) { m << "dst_scale rows must be dense"; });
    const std::int64_t k_stride = ml::torch_checks::row_stride(k2, where, "dst_k");
    const std::int64_t s_stride =
        (tokens > 1 ? s2.stride(0) : s2.size(1)) * static_cast<std::int64_t>(s2.element_size());
    with_index_type(where, "block_table", block_table, [&](auto index) {
      using I = decltype(index);
      const auto table = ml::as_matrix_view<const I>(block_table, where, "block_table");
      with_index_type(where, "cu_seq_lens", cu_seq_lens, [&](auto cu_index) {
        const auto cu = ml::as_span<const decltype(cu_index)>(cu_seq_lens, where, "cu_seq_lens");
        auto* kp = static_cast<std::uint8_t*>(k2.data_ptr());
        auto* sp = static_cast<std::uint8_t*>(s2.data_ptr());
        if (data_bytes == 128)
          ml::gather_from_pages(ml::paged_cache_view<ml::fp8_per_token>(
                                    c.data, c.num_blocks, c.block_size, c.block_stride),
                                table, cu, kp, sp, tokens, k_stride, s_stride);
        else
          ml::gather_from_pages(
              ml::paged_cache_view<ml::mxfp4>(c.data, c.num_blocks, c.block_size, c.block_stride),
              table, cu, kp, sp, tokens, k_stride, s_stride);
      });
    });
  });
}

std::vector<at::Tensor> indexer_q_quant(const at::Tensor& q, const at::Tensor& weights,
                                        double softmax_scale, double head_scale, bool use_fp4,
                                        c10::optional<c10::string_view> rule_arg,
                                        c10::optional<c10::string_view> scale_fmt, bool hadamard) {
  constexpr const char* where = "indexer_q_quant";
  return guarded(where, [&] {
    ml::torch_checks::require_tensor(q, where, "q");
    require_rank(where, "q", q, 3, "[num_tokens, num_heads, head_dim]");
    const std::int64_t tokens = q.size(0), heads = q.size(1), d = q.size(2);
    ml::torch_checks::require_tensor(weights, where, "weights");
    require_rank(where, "weights", weights, 2, "[num_tokens, num_heads]");
    require_dim(where, "weights", weights, 0, tokens, "num_tokens");
    require_dim(where, "weights", weights, 1, heads, "num_heads");
    const std::string fmt = text_of(scale_fmt);
    ml::check::require(fmt.empty() || fmt == "ue8m0", where, [&](auto& m) {
      m << "scale_fmt = " << fmt << " is not supported (\"ue8m0\" or None)";
    });
    const std::string rule =
        rule_arg.has_value() ? text_of(rule_arg) : (use_fp4 ? "deepseek_v4" : "deepseek_v32");
    ml::check::require(rule == "deepseek_v32" || rule == "deepseek_v4", where, [&](auto& m) {
      m << "rule = " << rule << " is not supported (\"deepseek_v32\" or \"deepseek_v4\")";
    });
    ml::q_fold_scaling scaling =
        rule == "deepseek_v4" ? ml::vllm_v4_q_scaling() : ml::vllm_v32_q_scaling();
    scaling.power_of_two = fmt == "ue8m0";
    scaling.rotation = rotation_of(hadamard);
    const at::Tensor rows = q.reshape({tokens * heads, d});
    at::Tensor w_out =
        at::empty({tokens, heads}, at::TensorOptions().dtype(c10::ScalarType::Float));
    const auto wv = ml::as_matrix_view<float>(w_out, where, "weights_out");
    const auto sm = static_cast<float>(softmax_scale), hs = static_cast<float>(head_scale);
    // Weights as the kernels read them: float32, float16 or bfloat16.
    const auto with_weights = [&](auto&& fn) {
      const auto t = weights.scalar_type();
      if (t == c10::ScalarType::BFloat16)
        return fn(ml::as_matrix_view<const ml::bf16>(weights, where, "weights"));
      if (t == c10::ScalarType::Half)
        return fn(ml::as_matrix_view<const ml::fp16>(weights, where, "weights"));
      fn(ml::as_matrix_view<const float>(weights, where, "weights"));
    };
    if (!use_fp4) {
      at::Tensor codes =
          at::empty({tokens, heads, d}, at::TensorOptions().dtype(c10::ScalarType::Byte));
      with_rows(where, "q", rows, [&](auto qv) {
        with_weights([&](auto w) {
          ml::quantize_q_fold_weights(qv, w, static_cast<std::uint8_t*>(codes.data_ptr()), d, wv,
                                      sm, hs, scaling);
        });
      });
      return std::vector<at::Tensor>{codes, w_out};
    }
    ml::check::require(rule == "deepseek_v4" && fmt == "ue8m0", where, [](auto& m) {
      m << "use_fp4 is DeepSeek-V4's MXFP4 Q: rule \"deepseek_v4\", scale_fmt \"ue8m0\"";
    });
    at::Tensor packed =
        at::empty({tokens, heads, d / 2}, at::TensorOptions().dtype(c10::ScalarType::Byte));
    at::Tensor sf = at::empty({tokens, heads}, at::TensorOptions().dtype(c10::ScalarType::Int));
    with_rows(where, "q", rows, [&](auto qv) {
      with_weights([&](auto w) {
        ml::quantize_q_mxfp4_scale_weights(qv, w, static_cast<std::uint8_t*>(packed.data_ptr()),
                                           d / 2, static_cast<std::uint8_t*>(sf.data_ptr()), 4, wv,
                                           sm, hs, scaling.rotation);
      });
    });
    return std::vector<at::Tensor>{packed, sf, w_out};
  });
}

}  // namespace mqalogits_torch
