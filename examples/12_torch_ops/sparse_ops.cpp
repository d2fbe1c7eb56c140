// The sparse ops: the sparse and paged-sparse kernels and their metadata. DeepGEMM's sparse
// metadata is a uint8 tensor its kernel reads; here it is the library's metadata object in a torch
// custom class (torch.classes.mqalogits.SparseMetadata / PagedSparseMetadata), which engines pass
// back as they pass upstream's tensor. It holds the selection, so one metadata serves every
// indexer layer of a step (each layer its own cache); make a new one when lengths, tables or
// selections change. The kernels take DeepGEMM's: MX formats (Q with its int32 scales), bfloat16
// weights and logits.
#include "sparse_ops.hpp"  // first: it includes torch's headers in an order Clang takes

#include <string>
#include <utility>

namespace mqalogits_torch {

namespace {

// DeepGEMM passes the format's dtype; FP8 or packed FP4 (int8 / uint8 / float8 / float4 names).
void check_qk_dtype(const char* where, c10::ScalarType t) {
  const std::string name = c10::toString(t);
  ml::check::require(t == c10::ScalarType::Byte || t == c10::ScalarType::Char ||
                         name == "Float8_e4m3fn" || name == "Float4_e2m1fn_x2",
                     where, [&](auto& m) {
                       m << "qk_dtype = " << ml::torch_checks::dtype_name(t)
                         << ", expected the codes' dtype (torch.float8_e4m3fn or torch.uint8 "
                            "for FP8, torch.int8 for packed FP4)";
                     });
}

// The call's arguments must be the metadata's: upstream reads them from the call.
void check_geometry(const char* where, std::int64_t cap, std::int64_t block, std::int64_t meta_cap,
                    std::int64_t meta_block) {
  ml::check::require(cap == meta_cap && block == meta_block, where, [&](auto& m) {
    m << "num_max_sparse_blocks = " << cap << ", sparse_block_kv = " << block
      << " but the metadata was made for " << meta_cap << " and " << meta_block;
  });
}

// DeepGEMM's sparse kernels read bfloat16 weights.
void check_bf16_weights(const char* where, const at::Tensor& weights) {
  ml::torch_checks::require_tensor(weights, where, "weights");
  ml::check::require(weights.scalar_type() == c10::ScalarType::BFloat16, where, [&](auto& m) {
    m << "weights has dtype " << ml::torch_checks::dtype_name(weights.scalar_type())
      << ", expected torch.bfloat16 (as DeepGEMM's sparse kernels)";
  });
}

// The sparse kernels' Q: DeepGEMM's (codes, scales) pair, MX only (the scales are required).
std::pair<at::Tensor, at::Tensor> mx_q_pair(const char* where,
                                            const c10::List<c10::optional<at::Tensor>>& q) {
  at::Tensor codes = q.get(0).value_or(at::Tensor()), sf = q.get(1).value_or(at::Tensor());
  ml::check::require(sf.defined(), where, [](auto& m) {
    m << "q_sf is missing: the sparse kernels take MX Q (codes and int32 scales)";
  });
  ml::torch_checks::require_tensor(codes, where, "q");
  return {codes, sf};
}

// Both sparse kernels after their own checks: bf16 logits [rows, cols] of the metadata (out or a
// new tensor), kernel(q, weights, output) with Q's descriptor in the format of its codes.
template <class Meta, class Kernel>
at::Tensor sparse_logits(const char* where, const q_arg& q, const Meta& meta,
                         const at::Tensor& weights, const c10::optional<at::Tensor>& out,
                         const topk_keywords& topk, kernel_kind kind, Kernel&& kernel) {
  check_bf16_weights(where, weights);
  const mp::weights_view w = weights_of(where, weights, q.in.rows / q.codes.size(q.codes.dim() - 2),
                                        "num_q_tokens", q.codes.size(q.codes.dim() - 2));
  const std::optional<kernel_output> selected = topk_output(where, topk, meta.num_rows(), kind);
  ml::check::require(!selected || !out.has_value(), where, [](auto& m) {
    m << "out is the logits' buffer; with topk the buffers are topk_out / topk_values_out";
  });
  const kernel_output o = selected ? *selected
                                   : logits_of(where, out, meta.num_rows(), meta.num_cols(),
                                               c10::ScalarType::BFloat16, "the metadata's columns");
  const run_options run = options_for(true);
  kernel(w, o.view, run.opt);
  return o.result;
}

}  // namespace

c10::intrusive_ptr<sparse_metadata> get_sparse_mqa_logits_metadata(
    const at::Tensor& cu_seq_len_k_start, const at::Tensor& cu_seq_len_k_end,
    std::int64_t num_kv_tokens, const at::Tensor& sparse_kv_block_indices, c10::ScalarType qk_dtype,
    std::int64_t sparse_block_kv, bool use_unaligned_ks) {
  constexpr const char* where = "get_sparse_mqa_logits_metadata";
  return guarded(where, [&] {
    check_qk_dtype(where, qk_dtype);
    require_same_index_type(where, "cu_seq_len_k_end", cu_seq_len_k_end, "cu_seq_len_k_start",
                            cu_seq_len_k_start);
    require_same_index_type(where, "sparse_kv_block_indices", sparse_kv_block_indices,
                            "cu_seq_len_k_start", cu_seq_len_k_start);
    auto holder = c10::make_intrusive<sparse_metadata>();
    with_index_type(where, "cu_seq_len_k_start", cu_seq_len_k_start, [&](auto index) {
      using I = decltype(index);
      holder->meta = ml::get_sparse_mqa_logits_metadata(
          ml::as_span<const I>(cu_seq_len_k_start, where, "cu_seq_len_k_start"),
          ml::as_span<const I>(cu_seq_len_k_end, where, "cu_seq_len_k_end"), num_kv_tokens,
          ml::as_matrix_view<const I>(sparse_kv_block_indices, where, "sparse_kv_block_indices"),
          sparse_block_kv, use_unaligned_ks);
    });
    return holder;
  });
}

c10::intrusive_ptr<paged_sparse_metadata> get_paged_sparse_mqa_logits_metadata(
    const at::Tensor& context_lens, const at::Tensor& block_table, const at::Tensor& indices,
    std::int64_t page_kv, const at::Tensor& sparse_kv_block_indices, c10::ScalarType qk_dtype,
    std::int64_t sparse_block_kv) {
  constexpr const char* where = "get_paged_sparse_mqa_logits_metadata";
  return guarded(where, [&] {
    check_qk_dtype(where, qk_dtype);
    for (const auto& [t, name] :
         {std::pair{&block_table, "block_table"}, std::pair{&indices, "indices"},
          std::pair{&sparse_kv_block_indices, "sparse_kv_block_indices"}})
      require_same_index_type(where, name, *t, "context_lens", context_lens);
    ml::check::require(page_kv >= 1 && page_kv <= ml::max_page_kv, where, [&](auto& m) {
      m << "page_kv = " << page_kv << " is not supported (1.." << ml::max_page_kv << ")";
    });
    auto holder = c10::make_intrusive<paged_sparse_metadata>();
    with_index_type(where, "context_lens", context_lens, [&](auto index) {
      using I = decltype(index);
      // [num_q] or [num_q, 1], as upstream's numel() check takes both.
      const at::Tensor lens = context_lens.dim() == 2 && context_lens.size(1) == 1
                                  ? context_lens.select(1, 0)
                                  : context_lens;
      holder->meta = ml::get_paged_sparse_mqa_logits_metadata(
          ml::as_span<const I>(lens, where, "context_lens"),
          ml::as_matrix_view<const I>(block_table, where, "block_table"),
          ml::as_span<const I>(indices, where, "indices"), static_cast<std::int32_t>(page_kv),
          ml::as_matrix_view<const I>(sparse_kv_block_indices, where, "sparse_kv_block_indices"),
          sparse_block_kv);
    });
    return holder;
  });
}

at::Tensor fp8_fp4_sparse_mqa_logits(const c10::List<c10::optional<at::Tensor>>& q,
                                     const std::vector<at::Tensor>& kv, const at::Tensor& weights,
                                     const c10::intrusive_ptr<sparse_metadata>& metadata,
                                     std::int64_t num_max_sparse_blocks,
                                     std::int64_t sparse_block_kv, bool use_unaligned_ks,
                                     const c10::optional<at::Tensor>& out,
                                     const topk_keywords& topk) {
  constexpr const char* where = "fp8_fp4_sparse_mqa_logits";
  return guarded(where, [&] {
    ml::check::require(q.size() == 2 && kv.size() == 2, where, [&](auto& m) {
      m << "q and kv must be pairs (codes, scales), not " << q.size() << " and " << kv.size()
        << " tensors";
    });
    const ml::sparse_mqa_metadata& meta = metadata->meta;
    check_geometry(where, num_max_sparse_blocks, sparse_block_kv, meta.capacity(),
                   meta.sparse_block_kv());
    ml::check::require(use_unaligned_ks == meta.use_unaligned_ks(), where, [&](auto& m) {
      m << "use_unaligned_ks = " << (use_unaligned_ks ? "True" : "False")
        << " but the metadata was made with " << (meta.use_unaligned_ks() ? "True" : "False");
    });
    const std::pair<at::Tensor, at::Tensor> q_pair = mx_q_pair(where, q);
    const q_arg qa =
        q_of(where, q_pair.first, q_pair.second, 3, "[num_q_tokens, num_heads, head_dim]");
    const mp::kv_input k = kv_of(where, kv[0], kv[1], qa.in.format);
    return sparse_logits(
        where, qa, meta, weights, out, topk, kernel_kind::sparse,
        [&](const mp::weights_view& w, const mp::output_view& o, const ml::options& opt) {
          mp::run_sparse(meta, {qa.in, k, w}, o, opt);
        });
  });
}

at::Tensor fp8_fp4_paged_sparse_mqa_logits(
    const c10::List<c10::optional<at::Tensor>>& q, const at::Tensor& kv_cache,
    const at::Tensor& weights, const c10::intrusive_ptr<paged_sparse_metadata>& metadata,
    std::int64_t num_max_sparse_blocks, std::int64_t sparse_block_kv,
    const c10::optional<at::Tensor>& out, const topk_keywords& topk) {
  constexpr const char* where = "fp8_fp4_paged_sparse_mqa_logits";
  return guarded(where, [&] {
    ml::check::require(q.size() == 2, where, [&](auto& m) {
      m << "q must be a pair (codes, scales), not " << q.size() << " tensors";
    });
    const ml::paged_sparse_mqa_metadata& meta = metadata->meta;
    check_geometry(where, num_max_sparse_blocks, sparse_block_kv, meta.capacity(),
                   meta.sparse_block_kv());
    const std::pair<at::Tensor, at::Tensor> q_pair = mx_q_pair(where, q);
    require_rank(where, "q", q_pair.first, 4, "[num_q_tokens, 1, num_heads, head_dim]");
    require_dim(where, "q", q_pair.first, 1, 1, "next_n");
    const q_arg qa =
        q_of(where, q_pair.first, q_pair.second, 4, "[num_q_tokens, 1, num_heads, head_dim]");
    const mp::cache_input cache = cache_of(where, kv_cache, qa.in.format);
    return sparse_logits(
        where, qa, meta, weights, out, topk, kernel_kind::paged_sparse,
        [&](const mp::weights_view& w, const mp::output_view& o, const ml::options& opt) {
          mp::run_paged_sparse(meta, {qa.in, cache, w}, o, opt);
        });
  });
}

}  // namespace mqalogits_torch
