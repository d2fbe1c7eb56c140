// The ops' tensors as the shared kernel calls' descriptors (kernel_args.hpp).
#include "kernel_args.hpp"

#include <ATen/ops/empty.h>

#include <limits>

namespace mqalogits_torch {

namespace {

mp::qk_format kernel_format(qk_format f) {
  return f == qk_format::mxfp4   ? mp::qk_format::mxfp4
         : f == qk_format::mxfp8 ? mp::qk_format::mxfp8
                                 : mp::qk_format::fp8_per_token;
}

template <class Fn>
void with_kernel_format(mp::qk_format f, Fn&& fn) {
  with_format(f == mp::qk_format::mxfp4   ? qk_format::mxfp4
              : f == mp::qk_format::mxfp8 ? qk_format::mxfp8
                                          : qk_format::fp8_per_token,
              std::forward<Fn>(fn));
}

// A buffer the op writes: int32 / float32 [rows, cols] with dense rows.
at::Tensor out_buffer(const char* where, const char* name, const c10::optional<at::Tensor>& given,
                      std::int64_t rows, std::int64_t cols, c10::ScalarType dtype) {
  if (!given.has_value()) return at::empty({rows, cols}, at::TensorOptions().dtype(dtype));
  const at::Tensor& o = *given;
  ml::torch_checks::require_tensor(o, where, name);
  ml::torch_checks::require_dtype(o, dtype, where, name);
  ml::check::require(o.dim() == 2 && o.size(0) == rows && o.size(1) == cols, where, [&](auto& m) {
    m << name << " has shape " << ml::torch_checks::shape{o} << ", expected [" << rows << ", "
      << cols << "]";
  });
  return o;
}

}  // namespace

q_arg q_of(const char* where, const at::Tensor& codes, const at::Tensor& scales, std::int64_t rank,
           const char* shape) {
  ml::torch_checks::require_tensor(codes, where, "q");
  require_rank(where, "q", codes, rank, shape);
  q_arg q;
  q.codes = codes;
  q.scales = scales;
  q.in.format = kernel_format(format_of(codes, scales.defined()));
  with_kernel_format(q.in.format, [&](auto format) {
    using F = decltype(format);
    auto v = ml::as_rows_view<F>(q.codes, q.scales, where, "q", "q_sf");
    // The kernels read Q's rows dense: a strided Q is copied (after its checks).
    if (v.data_stride != v.data_bytes() || (v.scales && v.scale_stride != F::scale_bytes)) {
      q.codes = codes.contiguous();
      q.scales = scales.defined() ? scales.contiguous() : scales;
      v = ml::as_rows_view<F>(q.codes, q.scales, where, "q", "q_sf");
    }
    q.in.data = v.data;
    q.in.scales = v.scales;
    q.in.rows = v.rows;
    q.in.head_dim = v.head_dim;
  });
  for (std::int64_t d = 0; d + 1 < rank; ++d) q.in.dims.push_back(codes.size(d));
  return q;
}

mp::kv_input kv_of(const char* where, const at::Tensor& codes, const at::Tensor& scales,
                   mp::qk_format format) {
  ml::torch_checks::require_tensor(codes, where, "kv");
  require_rank(where, "kv", codes, 2, "[seq_len_kv, head_dim]");
  mp::kv_input k{};
  with_kernel_format(format, [&](auto f) {
    const auto v = ml::as_rows_view<decltype(f)>(codes, scales, where, "kv", "kv_sf");
    k = {v.data, v.scales, v.rows, v.data_stride, v.scale_stride, v.head_dim};
  });
  return k;
}

mp::cache_input cache_of(const char* where, const at::Tensor& cache, mp::qk_format format) {
  ml::torch_checks::require_tensor(cache, where, "kv_cache");
  // The Python module's rule and words: vLLM's and sglang's 4-D cache only.
  ml::check::require(cache.dim() == 4, where, [&](auto& m) {
    m << "kv_cache has shape " << ml::torch_checks::shape{cache}
      << ", expected [num_blocks, block_kv, 1, head_dim_with_sf]";
  });
  mp::cache_input c{};
  with_kernel_format(format, [&](auto f) {
    const auto v = ml::as_paged_cache_view<decltype(f)>(cache, where, "kv_cache");
    c = {v.base, v.num_pages, v.page_stride, v.page_kv, v.head_dim};
  });
  return c;
}

mp::weights_view weights_of(const char* where, const at::Tensor& weights, std::int64_t rows,
                            const char* rows_name, std::int64_t heads) {
  ml::torch_checks::require_tensor(weights, where, "weights");
  // [rows, num_heads, 1] (sglang's weights before its squeeze) is read as [rows, num_heads].
  const at::Tensor w = weights.dim() == 3 && weights.size(2) == 1 ? weights.select(2, 0) : weights;
  require_rank(where, "weights", w, 2, "[rows, num_heads] (or [rows, num_heads, 1])");
  require_dim(where, "weights", w, 0, rows, rows_name);
  require_dim(where, "weights", w, 1, heads, "num_heads");
  const auto t = w.scalar_type();
  ml::check::require(
      t == c10::ScalarType::Float || t == c10::ScalarType::Half || t == c10::ScalarType::BFloat16,
      where, [&](auto& m) {
        m << "weights has dtype " << ml::torch_checks::dtype_name(t)
          << ", expected torch.float32, torch.float16 or torch.bfloat16";
      });
  return {w.data_ptr(), w.size(0), w.size(1), ml::torch_checks::row_stride(w, where, "weights"),
          t == c10::ScalarType::Float  ? mp::weights_type::f32
          : t == c10::ScalarType::Half ? mp::weights_type::f16
                                       : mp::weights_type::bf16};
}

void check_weights_for_logits(const char* where, const mp::weights_view& w,
                              c10::ScalarType logits) {
  ml::check::require(w.type != mp::weights_type::bf16 || logits == c10::ScalarType::BFloat16, where,
                     [&](auto& m) {
                       m << "weights of torch.bfloat16 need logits_dtype=torch.bfloat16 (as "
                            "DeepGEMM)";
                     });
}

at::Tensor int32_of(const char* where, const char* name, const at::Tensor& t) {
  ml::torch_checks::require_tensor(t, where, name);
  const auto type = t.scalar_type();
  ml::check::require(type == c10::ScalarType::Int || type == c10::ScalarType::Long, where,
                     [&](auto& m) {
                       m << name << " has dtype " << ml::torch_checks::dtype_name(type)
                         << ", expected torch.int32 or torch.int64";
                     });
  if (type == c10::ScalarType::Int) return t.is_contiguous() ? t : t.contiguous();
  const at::Tensor c = t.contiguous();
  const std::int64_t* v = c.data_ptr<std::int64_t>();
  for (std::int64_t i = 0, n = c.numel(); i < n; ++i)
    ml::check::require(v[i] >= std::numeric_limits<std::int32_t>::min() &&
                           v[i] <= std::numeric_limits<std::int32_t>::max(),
                       where, [&](auto& m) {
                         m << name << " holds " << v[i] << ", outside int32 (element " << i << ")";
                       });
  return c.to(c10::ScalarType::Int);
}

std::optional<kernel_output> topk_output(const char* where, const topk_keywords& k,
                                         std::int64_t rows, kernel_kind kind) {
  c10::optional<std::int64_t> topk = k.topk;
  if (!topk.has_value() && k.out.has_value()) {
    ml::torch_checks::require_tensor(*k.out, where, "topk_out");
    require_rank(where, "topk_out", *k.out, 2, "[rows, k]");
    topk = k.out->size(1);
  }
  const bool values = k.values || k.values_out.has_value();
  const bool position = kind == kernel_kind::sparse || kind == kernel_kind::paged_sparse;
  const bool slot = kind == kernel_kind::paged || kind == kernel_kind::paged_sparse;
  ml::check::require(
      k.index == "column" || (position && k.index == "position") || (slot && k.index == "slot"),
      where, [&](auto& m) {
        m << "topk_index = '" << k.index << "' is not supported ("
          << (kind == kernel_kind::dense    ? "'column'; 'slot' is the paged kernel's, "
                                              "'position' the sparse kernels'"
              : kind == kernel_kind::paged  ? "'column' or 'slot'"
              : kind == kernel_kind::sparse ? "'column' or 'position'"
                                            : "'column', 'position' or 'slot'")
          << ")";
      });
  if (!topk.has_value()) {
    ml::check::require(!values && k.index == "column", where,
                       [](auto& m) { m << "topk_values / topk_index need topk = k"; });
    ml::check::require(!k.short_rows, where,
                       [](auto& m) { m << "topk_short_rows needs topk = k"; });
    return std::nullopt;
  }
  ml::check::require(*topk >= 1 && *topk <= std::numeric_limits<std::int32_t>::max(), where,
                     [&](auto& m) { m << "topk = " << *topk << " must be in [1, 2^31 - 1]"; });
  ml::check::require(!(k.short_rows && values), where, [](auto& m) {
    m << "topk_short_rows writes no values (a short row is not ranked): drop topk_values / "
         "topk_values_out";
  });
  // A schema returns one tensor: the indices; the values are the caller's buffer.
  ml::check::require(!values || k.values_out.has_value(), where, [](auto& m) {
    m << "topk_values=True needs topk_values_out= (a float32 [rows, k] tensor the values are "
         "written into; the op returns the indices)";
  });
  kernel_output o;
  o.result = out_buffer(where, "topk_out", k.out, rows, *topk, c10::ScalarType::Int);
  o.view.rows = rows;
  o.view.k = *topk;
  o.view.topk_indices = o.result.data_ptr<std::int32_t>();
  o.view.topk_stride = ml::torch_checks::row_stride(o.result, where, "topk_out");
  o.view.index = k.index == "slot"       ? mp::topk_numbering::slot
                 : k.index == "position" ? mp::topk_numbering::position
                                         : mp::topk_numbering::column;
  o.view.short_rows = k.short_rows;
  if (values) {
    const at::Tensor v =
        out_buffer(where, "topk_values_out", k.values_out, rows, *topk, c10::ScalarType::Float);
    o.view.topk_values = v.data_ptr<float>();
    o.view.values_stride = ml::torch_checks::row_stride(v, where, "topk_values_out");
  }
  return o;
}

void add_candidates(const char* where, const candidate_keywords& c, std::int64_t rows,
                    std::optional<kernel_output>& selection) {
  c10::optional<std::int64_t> n = c.n;
  if (!n.has_value() && c.out.has_value()) {
    ml::torch_checks::require_tensor(*c.out, where, "candidate_out");
    require_rank(where, "candidate_out", *c.out, 2, "[rows, N]");
    n = c.out->size(1);
  }
  if (!n.has_value()) {
    ml::check::require(c.block_size == 8 && c.order == "ascending" && c.padding == "minus_one",
                       where, [](auto& m) {
                         m << "candidate_block_size / candidate_order / candidate_padding need "
                              "candidate_topk_blocks = N";
                       });
    return;
  }
  ml::check::require(
      *n >= 1 && *n <= std::numeric_limits<std::int32_t>::max(), where,
      [&](auto& m) { m << "candidate_topk_blocks = " << *n << " must be in [1, 2^31 - 1]"; });
  ml::check::require(c.block_size >= 1 && c.block_size <= ml::max_candidate_block_size &&
                         (c.block_size & (c.block_size - 1)) == 0,
                     where, [&](auto& m) {
                       m << "candidate_block_size = " << c.block_size
                         << " must be a power of two in [1, 2^20]";
                     });
  ml::check::require(c.order == "ascending" || c.order == "score", where, [&](auto& m) {
    m << "candidate_order = '" << c.order << "' is not supported ('ascending' or 'score')";
  });
  ml::check::require(c.padding == "minus_one" || c.padding == "repeat_last", where, [&](auto& m) {
    m << "candidate_padding = '" << c.padding
      << "' is not supported ('minus_one' or 'repeat_last')";
  });
  // A schema returns one tensor: beside a top-k, the blocks are the caller's buffer.
  ml::check::require(!selection.has_value() || c.out.has_value(), where, [](auto& m) {
    m << "candidate_topk_blocks beside topk needs candidate_out= (an int32 [rows, N] tensor the "
         "blocks are written into; the op returns the top-k)";
  });
  const at::Tensor blocks =
      out_buffer(where, "candidate_out", c.out, rows, *n, c10::ScalarType::Int);
  if (!selection.has_value()) {
    selection.emplace();
    selection->result = blocks;
    selection->view.rows = rows;
  }
  mp::output_view& v = selection->view;
  v.candidates = blocks.data_ptr<std::int32_t>();
  v.n = *n;
  v.candidates_stride = ml::torch_checks::row_stride(blocks, where, "candidate_out");
  v.block_size = c.block_size;
  v.order = c.order == "score" ? ml::candidate_order::score : ml::candidate_order::ascending;
  v.padding = c.padding == "repeat_last" ? ml::candidate_padding::repeat_last
                                         : ml::candidate_padding::minus_one;
}

kernel_output logits_of(const char* where, const c10::optional<at::Tensor>& out, std::int64_t rows,
                        std::int64_t cols, c10::ScalarType dtype, const char* width_name) {
  kernel_output o;
  o.result = logits_output(where, out, rows, cols, dtype, width_name);
  o.view.rows = rows;
  o.view.cols = cols;
  o.view.stride = ml::torch_checks::row_stride(o.result, where, "out");
  o.view.type = dtype == c10::ScalarType::Float ? mp::logits_type::f32 : mp::logits_type::bf16;
  o.view.logits = o.result.data_ptr();
  return o;
}

kernel_output output_of(const char* where, const std::optional<kernel_output>& selection,
                        const c10::optional<at::Tensor>& out, std::int64_t rows, std::int64_t cols,
                        c10::ScalarType logits_dtype, const char* width_name,
                        const mp::weights_view& w) {
  if (selection) {
    ml::check::require(!out.has_value(), where, [](auto& m) {
      m << "out is the logits' buffer; with topk / candidate_topk_blocks the buffers are "
           "topk_out / topk_values_out / candidate_out";
    });
    return *selection;
  }
  kernel_output logits = logits_of(where, out, rows, cols, logits_dtype, width_name);
  check_weights_for_logits(where, w, logits_dtype);
  return logits;
}

}  // namespace mqalogits_torch
