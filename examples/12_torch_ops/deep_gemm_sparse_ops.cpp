// The sparse ops under DeepGEMM's names and schemas (see deep_gemm_ops.cpp). Upstream's sparse
// metadata is a tensor; here it is the record of the call it was made for (int64: a tag, the
// scalars, then each input tensor's rank, dtype, sizes and values), from which the kernel op
// rebuilds the op library's metadata object. The CPU ops read the record, so these two kernels
// and their metadata are not traced on meta tensors.
#include "deep_gemm_twin.hpp"

#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "../op_registry/deep_gemm_ops.hpp"
#include "../op_registry/torch_schema.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace {

using mqalogits_deep_gemm::call_twin;
using optional_tensor = c10::optional<at::Tensor>;

constexpr std::int64_t sparse_tag = 0x4d514c53;        // a get_sparse_mqa_logits_metadata record
constexpr std::int64_t paged_sparse_tag = 0x4d514c50;  // a get_paged_sparse_... record

void append(std::vector<std::int64_t>& rec, const at::Tensor& t) {
  rec.push_back(t.dim());
  rec.push_back(static_cast<std::int64_t>(t.scalar_type()));
  for (const std::int64_t s : t.sizes()) rec.push_back(s);
  const at::Tensor v = t.to(c10::ScalarType::Long).contiguous();
  rec.insert(rec.end(), v.data_ptr<std::int64_t>(), v.data_ptr<std::int64_t>() + v.numel());
}

at::Tensor as_tensor(const std::vector<std::int64_t>& rec) {
  at::Tensor t = at::empty({static_cast<std::int64_t>(rec.size())},
                           at::TensorOptions().dtype(c10::ScalarType::Long));
  std::copy(rec.begin(), rec.end(), t.data_ptr<std::int64_t>());
  return t;
}

// Reads a record back: its scalars, then its tensors in order.
struct record_reader {
  const std::int64_t* p;
  const std::int64_t* end;

  record_reader(const at::Tensor& metadata, std::int64_t tag, const char* maker) {
    const bool ok = metadata.defined() && metadata.device().is_cpu() &&
                    metadata.scalar_type() == c10::ScalarType::Long && metadata.dim() == 1 &&
                    metadata.is_contiguous() && metadata.numel() > 0 &&
                    metadata.data_ptr<std::int64_t>()[0] == tag;
    TORCH_CHECK_VALUE(ok, "metadata was not made by ", maker);
    p = metadata.data_ptr<std::int64_t>() + 1;
    end = metadata.data_ptr<std::int64_t>() + metadata.numel();
  }
  std::int64_t scalar() {
    TORCH_CHECK_VALUE(p < end, "metadata is truncated");
    return *p++;
  }
  at::Tensor tensor() {
    const std::int64_t rank = scalar();
    const auto dtype = static_cast<c10::ScalarType>(scalar());
    TORCH_CHECK_VALUE(rank >= 0 && rank <= 4, "metadata is damaged");
    std::vector<std::int64_t> sizes;
    std::int64_t n = 1;
    for (std::int64_t d = 0; d < rank; ++d) {
      sizes.push_back(scalar());
      n *= sizes.back();
    }
    TORCH_CHECK_VALUE(n >= 0 && n <= end - p, "metadata is truncated");
    at::Tensor t = at::empty(sizes, at::TensorOptions().dtype(c10::ScalarType::Long));
    std::copy(p, p + n, t.data_ptr<std::int64_t>());
    p += n;
    return t.to(dtype);
  }
};

at::Tensor get_sparse_mqa_logits_metadata(const at::Tensor& ks, const at::Tensor& ke,
                                          std::int64_t num_kv_tokens, const at::Tensor& blocks,
                                          c10::ScalarType qk_dtype, std::int64_t sparse_block_kv,
                                          bool use_unaligned_ks) {
  // The op library checks the arguments now, as the kernel op will rebuild from them.
  call_twin("get_sparse_mqa_logits_metadata",
            {ks, ke, num_kv_tokens, blocks, qk_dtype, sparse_block_kv, use_unaligned_ks});
  std::vector<std::int64_t> rec{sparse_tag, num_kv_tokens, static_cast<std::int64_t>(qk_dtype),
                                sparse_block_kv, use_unaligned_ks};
  for (const at::Tensor* t : {&ks, &ke, &blocks}) append(rec, *t);
  return as_tensor(rec);
}

at::Tensor get_paged_sparse_mqa_logits_metadata(const at::Tensor& context_lens,
                                                const at::Tensor& block_table,
                                                const at::Tensor& indices, std::int64_t page_kv,
                                                const at::Tensor& blocks, c10::ScalarType qk_dtype,
                                                std::int64_t sparse_block_kv) {
  call_twin("get_paged_sparse_mqa_logits_metadata",
            {context_lens, block_table, indices, page_kv, blocks, qk_dtype, sparse_block_kv});
  std::vector<std::int64_t> rec{paged_sparse_tag, page_kv, static_cast<std::int64_t>(qk_dtype),
                                sparse_block_kv};
  for (const at::Tensor* t : {&context_lens, &block_table, &indices, &blocks}) append(rec, *t);
  return as_tensor(rec);
}

at::Tensor fp8_fp4_sparse_mqa_logits(const at::Tensor& q, const optional_tensor& q_sf,
                                     const at::Tensor& kv, const at::Tensor& kv_sf,
                                     const at::Tensor& weights, const at::Tensor& metadata,
                                     std::int64_t num_max_sparse_blocks,
                                     std::int64_t sparse_block_kv, bool use_unaligned_ks) {
  record_reader r(metadata, sparse_tag, "get_sparse_mqa_logits_metadata");
  const std::int64_t num_kv_tokens = r.scalar();
  const auto qk_dtype = static_cast<c10::ScalarType>(r.scalar());
  const std::int64_t block_kv = r.scalar();
  const bool unaligned = r.scalar() != 0;
  const at::Tensor ks = r.tensor(), ke = r.tensor(), blocks = r.tensor();
  const c10::IValue meta =
      call_twin("get_sparse_mqa_logits_metadata",
                {ks, ke, num_kv_tokens, blocks, qk_dtype, block_kv, unaligned});
  return call_twin("fp8_fp4_sparse_mqa_logits",
                   {c10::List<optional_tensor>({q, q_sf}), c10::List<at::Tensor>({kv, kv_sf}),
                    weights, meta, num_max_sparse_blocks, sparse_block_kv, use_unaligned_ks})
      .toTensor();
}

at::Tensor fp8_fp4_paged_sparse_mqa_logits(const at::Tensor& q, const optional_tensor& q_sf,
                                           const at::Tensor& kv_cache, const at::Tensor& weights,
                                           const at::Tensor& metadata,
                                           std::int64_t num_max_sparse_blocks,
                                           std::int64_t sparse_block_kv) {
  record_reader r(metadata, paged_sparse_tag, "get_paged_sparse_mqa_logits_metadata");
  const std::int64_t page_kv = r.scalar();
  const auto qk_dtype = static_cast<c10::ScalarType>(r.scalar());
  const std::int64_t block_kv = r.scalar();
  const at::Tensor lens = r.tensor(), table = r.tensor(), indices = r.tensor(), blocks = r.tensor();
  const c10::IValue meta = call_twin("get_paged_sparse_mqa_logits_metadata",
                                     {lens, table, indices, page_kv, blocks, qk_dtype, block_kv});
  return call_twin("fp8_fp4_paged_sparse_mqa_logits",
                   {c10::List<optional_tensor>({q, q_sf}), kv_cache, weights, meta,
                    num_max_sparse_blocks, sparse_block_kv})
      .toTensor();
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(deep_gemm, m) {
  namespace ops = mqalogits_bindings::deep_gemm;
  using mqalogits_bindings::torch_schema;
  m.def(torch::schema(torch_schema(ops::get_sparse_mqa_logits_metadata).c_str()),
        &get_sparse_mqa_logits_metadata);
  m.def(torch::schema(torch_schema(ops::get_paged_sparse_mqa_logits_metadata).c_str()),
        &get_paged_sparse_mqa_logits_metadata);
  m.def(torch::schema(torch_schema(ops::fp8_fp4_sparse_mqa_logits).c_str()),
        &fp8_fp4_sparse_mqa_logits);
  m.def(torch::schema(torch_schema(ops::fp8_fp4_paged_sparse_mqa_logits).c_str()),
        &fp8_fp4_paged_sparse_mqa_logits);
}
