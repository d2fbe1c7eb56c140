// The ops' Meta kernels (meta_ops.hpp).
#include "meta_ops.hpp"  // first: it includes torch's headers in an order Clang takes

#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>

namespace mqalogits_torch {

namespace {

// What a dense or paged op returns for `rows` rows: the top-k indices [rows, k] int32 (topk_out
// when given), the candidate blocks [rows, N] int32 (candidate_out when given), or the logits
// [rows, cols] (out, or rows padded to 1024 bytes as the CPU kernel lays them out).
at::Tensor meta_result(const at::Tensor& like, std::int64_t rows, std::int64_t cols,
                       c10::ScalarType logits_dtype, const c10::optional<at::Tensor>& out,
                       c10::optional<std::int64_t> topk, const c10::optional<at::Tensor>& topk_out,
                       c10::optional<std::int64_t> blocks,
                       const c10::optional<at::Tensor>& candidate_out) {
  if (topk_out.has_value()) return *topk_out;
  if (topk.has_value()) return at::empty({rows, *topk}, like.options().dtype(c10::ScalarType::Int));
  if (candidate_out.has_value()) return *candidate_out;
  if (blocks.has_value())
    return at::empty({rows, *blocks}, like.options().dtype(c10::ScalarType::Int));
  if (out.has_value()) return *out;
  const std::int64_t per = 1024 / static_cast<std::int64_t>(c10::elementSize(logits_dtype));
  const std::int64_t stride = (cols + per - 1) / per * per;
  return at::empty_strided({rows, cols}, {stride, 1}, like.options().dtype(logits_dtype));
}

}  // namespace

at::Tensor fp8_fp4_mqa_logits_meta(
    const c10::List<c10::optional<at::Tensor>>& q, const std::vector<at::Tensor>& kv,
    const at::Tensor& weights, const at::Tensor&, const at::Tensor&, bool,
    std::int64_t max_seqlen_k, c10::ScalarType logits_dtype, const c10::optional<at::Tensor>&, bool,
    const c10::optional<at::Tensor>& out, c10::optional<std::int64_t> topk, bool, c10::string_view,
    const c10::optional<at::Tensor>& topk_out, const c10::optional<at::Tensor>&,
    const c10::optional<at::Tensor>&, bool, c10::optional<std::int64_t> candidate_topk_blocks,
    std::int64_t, c10::string_view, c10::string_view,
    const c10::optional<at::Tensor>& candidate_out) {
  const std::int64_t rows = q.get(0).value_or(weights).size(0);
  const std::int64_t cols = max_seqlen_k > 0 ? max_seqlen_k : kv.at(0).size(0);
  return meta_result(weights, rows, cols, logits_dtype, out, topk, topk_out, candidate_topk_blocks,
                     candidate_out);
}

at::Tensor fp8_mqa_logits_meta(const at::Tensor& q, const std::vector<at::Tensor>& kv,
                               const at::Tensor& weights, const at::Tensor&, const at::Tensor&,
                               bool, std::int64_t max_seqlen_k, bool,
                               const c10::optional<at::Tensor>& out,
                               c10::optional<std::int64_t> topk, bool, c10::string_view,
                               const c10::optional<at::Tensor>& topk_out,
                               const c10::optional<at::Tensor>&, const c10::optional<at::Tensor>&,
                               bool, c10::optional<std::int64_t> candidate_topk_blocks,
                               std::int64_t, c10::string_view, c10::string_view,
                               const c10::optional<at::Tensor>& candidate_out) {
  const std::int64_t cols = max_seqlen_k > 0 ? max_seqlen_k : kv.at(0).size(0);
  return meta_result(weights, q.size(0), cols, c10::ScalarType::Float, out, topk, topk_out,
                     candidate_topk_blocks, candidate_out);
}

at::Tensor fp8_fp4_paged_mqa_logits_meta(
    const c10::List<c10::optional<at::Tensor>>& q, const at::Tensor&, const at::Tensor& weights,
    const at::Tensor&, const at::Tensor&, const at::Tensor&, std::int64_t max_context_len, bool,
    c10::ScalarType logits_dtype, const c10::optional<at::Tensor>&, bool,
    const c10::optional<at::Tensor>& out, c10::optional<std::int64_t> topk, bool, c10::string_view,
    const c10::optional<at::Tensor>& topk_out, const c10::optional<at::Tensor>&, bool,
    c10::optional<std::int64_t> candidate_topk_blocks, std::int64_t, c10::string_view,
    c10::string_view, const c10::optional<at::Tensor>& candidate_out) {
  const at::Tensor codes = q.get(0).value_or(weights);
  const std::int64_t rows = codes.dim() == 4 ? codes.size(0) * codes.size(1) : weights.size(0);
  return meta_result(weights, rows, max_context_len, logits_dtype, out, topk, topk_out,
                     candidate_topk_blocks, candidate_out);
}

at::Tensor fp8_paged_mqa_logits_meta(
    const at::Tensor& q, const at::Tensor&, const at::Tensor& weights, const at::Tensor&,
    const at::Tensor&, const at::Tensor&, std::int64_t max_context_len, bool,
    const c10::optional<at::Tensor>&, bool, const c10::optional<at::Tensor>& out,
    c10::optional<std::int64_t> topk, bool, c10::string_view,
    const c10::optional<at::Tensor>& topk_out, const c10::optional<at::Tensor>&, bool,
    c10::optional<std::int64_t> candidate_topk_blocks, std::int64_t, c10::string_view,
    c10::string_view, const c10::optional<at::Tensor>& candidate_out) {
  const std::int64_t rows = q.dim() == 4 ? q.size(0) * q.size(1) : weights.size(0);
  return meta_result(weights, rows, max_context_len, c10::ScalarType::Float, out, topk, topk_out,
                     candidate_topk_blocks, candidate_out);
}

at::Tensor get_mqa_logits_metadata_meta(const at::Tensor& cu_seq_len_k_start, const at::Tensor&,
                                        std::int64_t, std::int64_t) {
  return at::empty({2 + 2 * cu_seq_len_k_start.numel()},
                   cu_seq_len_k_start.options().dtype(c10::ScalarType::Long));
}

at::Tensor get_paged_mqa_logits_metadata_meta(const at::Tensor& context_lens, std::int64_t,
                                              std::int64_t num_sms,
                                              const c10::optional<at::Tensor>&,
                                              const c10::optional<at::Tensor>& out) {
  if (out.has_value()) return *out;
  return at::empty({num_sms + 1, 2}, context_lens.options().dtype(c10::ScalarType::Int));
}

void indexer_k_quant_and_cache_meta(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                    std::int64_t, c10::optional<c10::string_view>, bool) {}
void indexer_k_quant_and_cache_mxfp4_meta(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                          bool) {}
void cp_gather_indexer_k_quant_cache_meta(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                          const at::Tensor&, const at::Tensor&) {}

std::vector<at::Tensor> indexer_q_quant_meta(const at::Tensor& q, const at::Tensor& weights, double,
                                             double, bool use_fp4, c10::optional<c10::string_view>,
                                             c10::optional<c10::string_view>, bool) {
  const std::int64_t t = q.size(0), h = q.size(1), d = q.size(2);
  const auto bytes = q.options().dtype(c10::ScalarType::Byte);
  const at::Tensor w = at::empty({t, h}, weights.options().dtype(c10::ScalarType::Float));
  if (!use_fp4) return {at::empty({t, h, d}, bytes), w};
  return {at::empty({t, h, d / 2}, bytes),
          at::empty({t, h}, q.options().dtype(c10::ScalarType::Int)), w};
}

}  // namespace mqalogits_torch
