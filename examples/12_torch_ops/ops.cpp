// The sparse ops (the sparse and paged-sparse kernels and their metadata), what the units share
// (thread pool, outputs, errors) and the library's registration: `torch.ops.mqalogits.<name>` for
// every op, schemas in DeepGEMM's argument order. DeepGEMM's tuple arguments are lists here (a
// tuple passes): q = (codes, scales or None), kv = (codes, scales). Every kernel also takes a
// keyword-only `out=`, a preallocated logits tensor the result is written into (and returned).
//
// The sparse kernels take DeepGEMM's: MX formats (Q with its int32 scales), bfloat16 weights and
// logits. DeepGEMM's sparse metadata is a uint8 tensor its kernel reads; here it is the
// library's metadata object in a torch custom class (torch.classes.mqalogits.SparseMetadata /
// PagedSparseMetadata), which engines pass back as they pass upstream's tensor. It holds the
// selection, so one metadata serves every indexer layer of a step (each layer its own cache);
// make a new one when lengths, tables or selections change.
#include "kernel_args.hpp"  // first: it includes torch's headers in an order Clang takes

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/custom_class.h>
#include <torch/library.h>

#include <pthread.h>

#include <atomic>
#include <mutex>
#include <new>
#include <string>
#include <utility>

namespace mqalogits_torch {

// The ops' pool, sized by torch's intra-op thread count. Held on the heap and never destroyed: a
// child made by fork() gets a fresh holder (the at-fork handler below), since the parent's mutex
// may have been held by another thread at the fork and its pool's workers do not exist there;
// the parent's pool is left to the child's exit, where an inherited pool neither waits nor joins.
struct pool_holder {
  std::mutex mutex;
  std::shared_ptr<ml::thread_pool> pool;
};
std::atomic<pool_holder*> pool_now{nullptr};

void fresh_pool_in_child() noexcept {
  pool_now.store(new (std::nothrow) pool_holder, std::memory_order_relaxed);
}

// Made when the library is loaded (one thread), so no first-use lock can be inherited held.
[[maybe_unused]] const bool pool_holder_made = [] {
  pool_now.store(new pool_holder, std::memory_order_release);
  ::pthread_atfork(nullptr, nullptr, &fresh_pool_in_child);
  return true;
}();

run_options options_for(bool clean_logits, bool truncate_long_contexts) {
  run_options r;
  r.opt.clean_logits = clean_logits;
  r.opt.truncate_long_contexts = truncate_long_contexts;
  const int n = at::get_num_threads();
  if (n > 1) {
    pool_holder* h = pool_now.load(std::memory_order_acquire);
    if (!h) throw std::bad_alloc();  // a forked child could not allocate its holder
    std::lock_guard lock(h->mutex);
    if (!h->pool || h->pool->concurrency() != n) h->pool = std::make_shared<ml::thread_pool>(n);
    r.pool = h->pool;  // kept alive by this call even if another one replaces it
    r.opt.executor = *r.pool;
  }
  return r;
}

void rethrow_as_value_error(const char* op, const char* message) {
  std::string text(message);
  const std::size_t colon = text.find(": ");
  if (colon != std::string::npos && text.find(' ') > colon) text.replace(0, colon, op);
  // The library's option as the op's callers know it: a keyword.
  const std::string option = "options::truncate_long_contexts";
  if (const auto at = text.find(option); at != std::string::npos)
    text.replace(at, option.size(), "truncate_long_contexts=True");
  C10_THROW_ERROR(ValueError, text);
}

at::Tensor logits_output(const char* where, const c10::optional<at::Tensor>& out, std::int64_t rows,
                         std::int64_t cols, c10::ScalarType dtype, const char* width_name) {
  check_logits_dtype(where, dtype);
  if (out.has_value()) {
    const at::Tensor& o = *out;
    ml::detail::check_torch_tensor(o, where, "out");
    ml::detail::require_torch_dtype(o, dtype, where, "out");
    ml::detail::require(o.dim() == 2 && o.size(0) == rows && o.size(1) == cols, where,
                        [&](auto& m) {
                          m << "out has shape " << ml::detail::torch_shape{o} << ", expected ["
                            << rows << ", " << cols << "]";
                        });
    return o;
  }
  // Rows padded to a multiple of 1024 bytes, as DeepGEMM lays its logits out.
  // A width from the caller (max_seqlen_k, max_context_len): its rounding and the tensor's size
  // are overflow-checked, a ValueError naming it rather than torch's message about a negative
  // size.
  const std::int64_t per = 1024 / static_cast<std::int64_t>(c10::elementSize(dtype));
  const std::int64_t stride = ml::checked_round_up(where, width_name, cols, per);
  ml::checked_mul(where, width_name, rows, stride);  // the tensor's elements
  return at::empty({rows, stride}, at::TensorOptions().dtype(dtype)).slice(1, 0, cols);
}

namespace {

// ---- sparse ----

struct sparse_metadata : torch::CustomClassHolder {
  ml::sparse_mqa_metadata meta;
};
struct paged_sparse_metadata : torch::CustomClassHolder {
  ml::paged_sparse_mqa_metadata meta;
};

// DeepGEMM passes the format's dtype; FP8 or packed FP4 (int8 / uint8 / float8 / float4 names).
void check_qk_dtype(const char* where, c10::ScalarType t) {
  const std::string name = c10::toString(t);
  ml::detail::require(t == c10::ScalarType::Byte || t == c10::ScalarType::Char ||
                          name == "Float8_e4m3fn" || name == "Float4_e2m1fn_x2",
                      where, [&](auto& m) {
                        m << "qk_dtype = " << ml::detail::torch_dtype_name(t)
                          << ", expected the codes' dtype (torch.float8_e4m3fn or torch.uint8 "
                             "for FP8, torch.int8 for packed FP4)";
                      });
}

// The call's arguments must be the metadata's: upstream reads them from the call.
void check_geometry(const char* where, std::int64_t cap, std::int64_t block, std::int64_t meta_cap,
                    std::int64_t meta_block) {
  ml::detail::require(cap == meta_cap && block == meta_block, where, [&](auto& m) {
    m << "num_max_sparse_blocks = " << cap << ", sparse_block_kv = " << block
      << " but the metadata was made for " << meta_cap << " and " << meta_block;
  });
}

// DeepGEMM's sparse kernels read bfloat16 weights.
void check_bf16_weights(const char* where, const at::Tensor& weights) {
  ml::detail::check_torch_tensor(weights, where, "weights");
  ml::detail::require(weights.scalar_type() == c10::ScalarType::BFloat16, where, [&](auto& m) {
    m << "weights has dtype " << ml::detail::torch_dtype_name(weights.scalar_type())
      << ", expected torch.bfloat16 (as DeepGEMM's sparse kernels)";
  });
}

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
    ml::detail::require(page_kv >= 1 && page_kv <= ml::max_page_kv, where, [&](auto& m) {
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

// The sparse kernels' Q: DeepGEMM's (codes, scales) pair, MX only (the scales are required).
std::pair<at::Tensor, at::Tensor> mx_q_pair(const char* where,
                                            const c10::List<c10::optional<at::Tensor>>& q) {
  at::Tensor codes = q.get(0).value_or(at::Tensor()), sf = q.get(1).value_or(at::Tensor());
  ml::detail::require(sf.defined(), where, [](auto& m) {
    m << "q_sf is missing: the sparse kernels take MX Q (codes and int32 scales)";
  });
  ml::detail::check_torch_tensor(codes, where, "q");
  return {codes, sf};
}

// Both sparse kernels after their own checks: bf16 logits [rows, cols] of the metadata (out or a
// new tensor), kernel(q, weights, output) with Q's descriptor in the format of its codes.
template <class Meta, class Kernel>
at::Tensor sparse_logits(const char* where, const q_arg& q, const Meta& meta,
                         const at::Tensor& weights, const c10::optional<at::Tensor>& out,
                         Kernel&& kernel) {
  check_bf16_weights(where, weights);
  const mp::weights_view w = weights_of(where, weights, q.in.rows / q.codes.size(q.codes.dim() - 2),
                                        "num_q_tokens", q.codes.size(q.codes.dim() - 2));
  const kernel_output o = logits_of(where, out, meta.num_rows(), meta.num_cols(),
                                    c10::ScalarType::BFloat16, "the metadata's columns");
  const run_options run = options_for(true);
  kernel(w, o.view, run.opt);
  return o.result;
}

at::Tensor fp8_fp4_sparse_mqa_logits(const c10::List<c10::optional<at::Tensor>>& q,
                                     const std::vector<at::Tensor>& kv, const at::Tensor& weights,
                                     const c10::intrusive_ptr<sparse_metadata>& metadata,
                                     std::int64_t num_max_sparse_blocks,
                                     std::int64_t sparse_block_kv, bool use_unaligned_ks,
                                     const c10::optional<at::Tensor>& out) {
  constexpr const char* where = "fp8_fp4_sparse_mqa_logits";
  return guarded(where, [&] {
    ml::detail::require(q.size() == 2 && kv.size() == 2, where, [&](auto& m) {
      m << "q and kv must be pairs (codes, scales), not " << q.size() << " and " << kv.size()
        << " tensors";
    });
    const ml::sparse_mqa_metadata& meta = metadata->meta;
    check_geometry(where, num_max_sparse_blocks, sparse_block_kv, meta.capacity(),
                   meta.sparse_block_kv());
    ml::detail::require(use_unaligned_ks == meta.use_unaligned_ks(), where, [&](auto& m) {
      m << "use_unaligned_ks = " << (use_unaligned_ks ? "True" : "False")
        << " but the metadata was made with " << (meta.use_unaligned_ks() ? "True" : "False");
    });
    const std::pair<at::Tensor, at::Tensor> q_pair = mx_q_pair(where, q);
    const q_arg qa =
        q_of(where, q_pair.first, q_pair.second, 3, "[num_q_tokens, num_heads, head_dim]");
    const mp::kv_input k = kv_of(where, kv[0], kv[1], qa.in.format);
    return sparse_logits(
        where, qa, meta, weights, out,
        [&](const mp::weights_view& w, const mp::output_view& o, const ml::options& opt) {
          mp::run_sparse(meta, {qa.in, k, w}, o, opt);
        });
  });
}

at::Tensor fp8_fp4_paged_sparse_mqa_logits(
    const c10::List<c10::optional<at::Tensor>>& q, const at::Tensor& kv_cache,
    const at::Tensor& weights, const c10::intrusive_ptr<paged_sparse_metadata>& metadata,
    std::int64_t num_max_sparse_blocks, std::int64_t sparse_block_kv,
    const c10::optional<at::Tensor>& out) {
  constexpr const char* where = "fp8_fp4_paged_sparse_mqa_logits";
  return guarded(where, [&] {
    ml::detail::require(q.size() == 2, where, [&](auto& m) {
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
        where, qa, meta, weights, out,
        [&](const mp::weights_view& w, const mp::output_view& o, const ml::options& opt) {
          mp::run_paged_sparse(meta, {qa.in, cache, w}, o, opt);
        });
  });
}

// The schemas' flat keyword-only arguments, as the ops take them.
kernel_keywords keywords_of(bool truncate_long_contexts, const c10::optional<at::Tensor>& out,
                            c10::optional<std::int64_t> topk, bool topk_values,
                            c10::string_view topk_index, const c10::optional<at::Tensor>& topk_out,
                            const c10::optional<at::Tensor>& topk_values_out, bool topk_short_rows,
                            const c10::optional<at::Tensor>& topk_offset = c10::nullopt) {
  return {truncate_long_contexts,
          out,
          {topk, topk_values, std::string(topk_index.data(), topk_index.size()), topk_out,
           topk_values_out, topk_short_rows},
          topk_offset};
}

at::Tensor fp8_fp4_mqa_logits_op(
    const c10::List<c10::optional<at::Tensor>>& q, const std::vector<at::Tensor>& kv,
    const at::Tensor& weights, const at::Tensor& cu_seq_len_k_start,
    const at::Tensor& cu_seq_len_k_end, bool clean_logits, std::int64_t max_seqlen_k,
    c10::ScalarType logits_dtype, const c10::optional<at::Tensor>& schedule_meta,
    bool truncate_long_contexts, const c10::optional<at::Tensor>& out,
    c10::optional<std::int64_t> topk, bool topk_values, c10::string_view topk_index,
    const c10::optional<at::Tensor>& topk_out, const c10::optional<at::Tensor>& topk_values_out,
    const c10::optional<at::Tensor>& topk_offset, bool topk_short_rows) {
  return fp8_fp4_mqa_logits(q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits,
                            max_seqlen_k, logits_dtype, schedule_meta,
                            keywords_of(truncate_long_contexts, out, topk, topk_values, topk_index,
                                        topk_out, topk_values_out, topk_short_rows, topk_offset));
}

at::Tensor fp8_mqa_logits_op(const at::Tensor& q, const std::vector<at::Tensor>& kv,
                             const at::Tensor& weights, const at::Tensor& cu_seq_len_k_start,
                             const at::Tensor& cu_seq_len_k_end, bool clean_logits,
                             std::int64_t max_seqlen_k, bool truncate_long_contexts,
                             const c10::optional<at::Tensor>& out, c10::optional<std::int64_t> topk,
                             bool topk_values, c10::string_view topk_index,
                             const c10::optional<at::Tensor>& topk_out,
                             const c10::optional<at::Tensor>& topk_values_out,
                             const c10::optional<at::Tensor>& topk_offset, bool topk_short_rows) {
  return fp8_mqa_logits(q, kv, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits,
                        max_seqlen_k,
                        keywords_of(truncate_long_contexts, out, topk, topk_values, topk_index,
                                    topk_out, topk_values_out, topk_short_rows, topk_offset));
}

at::Tensor fp8_fp4_paged_mqa_logits_op(
    const c10::List<c10::optional<at::Tensor>>& q, const at::Tensor& kv_cache,
    const at::Tensor& weights, const at::Tensor& context_lens, const at::Tensor& block_table,
    const at::Tensor& schedule_meta, std::int64_t max_context_len, bool clean_logits,
    c10::ScalarType logits_dtype, const c10::optional<at::Tensor>& indices,
    bool truncate_long_contexts, const c10::optional<at::Tensor>& out,
    c10::optional<std::int64_t> topk, bool topk_values, c10::string_view topk_index,
    const c10::optional<at::Tensor>& topk_out, const c10::optional<at::Tensor>& topk_values_out,
    bool topk_short_rows) {
  return fp8_fp4_paged_mqa_logits(
      q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len, clean_logits,
      logits_dtype, indices,
      keywords_of(truncate_long_contexts, out, topk, topk_values, topk_index, topk_out,
                  topk_values_out, topk_short_rows));
}

at::Tensor fp8_paged_mqa_logits_op(
    const at::Tensor& q, const at::Tensor& kv_cache, const at::Tensor& weights,
    const at::Tensor& context_lens, const at::Tensor& block_table, const at::Tensor& schedule_meta,
    std::int64_t max_context_len, bool clean_logits, const c10::optional<at::Tensor>& indices,
    bool truncate_long_contexts, const c10::optional<at::Tensor>& out,
    c10::optional<std::int64_t> topk, bool topk_values, c10::string_view topk_index,
    const c10::optional<at::Tensor>& topk_out, const c10::optional<at::Tensor>& topk_values_out,
    bool topk_short_rows) {
  return fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta,
                              max_context_len, clean_logits, indices,
                              keywords_of(truncate_long_contexts, out, topk, topk_values,
                                          topk_index, topk_out, topk_values_out, topk_short_rows));
}

}  // namespace
}  // namespace mqalogits_torch

// The keyword-only arguments the dense and paged ops share: the logits' buffer and the fused
// top-k (see kernel_keywords).
#define TOPK_KEYWORDS                                                                         \
  "Tensor(a!)? out=None, int? topk=None, bool topk_values=False, str topk_index=\"column\", " \
  "Tensor(b!)? topk_out=None, Tensor(c!)? topk_values_out=None"

TORCH_LIBRARY(mqalogits, m) {
  namespace mt = mqalogits_torch;
  // ScalarType defaults are torch's codes: 6 = torch.float32.
  m.def(
      "fp8_fp4_mqa_logits(Tensor?[] q, Tensor[] kv, Tensor weights, Tensor cu_seq_len_k_start, "
      "Tensor cu_seq_len_k_end, bool clean_logits=True, int max_seqlen_k=0, "
      "ScalarType logits_dtype=6, Tensor? schedule_meta=None, *, "
      "bool truncate_long_contexts=False, " TOPK_KEYWORDS
      ", Tensor? topk_offset=None, bool topk_short_rows=False) -> Tensor",
      &mt::fp8_fp4_mqa_logits_op);
  m.def(
      "fp8_mqa_logits(Tensor q, Tensor[] kv, Tensor weights, Tensor cu_seq_len_k_start, "
      "Tensor cu_seq_len_k_end, bool clean_logits=True, int max_seqlen_k=0, *, "
      "bool truncate_long_contexts=False, " TOPK_KEYWORDS
      ", Tensor? topk_offset=None, bool topk_short_rows=False) -> Tensor",
      &mt::fp8_mqa_logits_op);
  m.def(
      "get_paged_mqa_logits_metadata(Tensor context_lens, int block_kv, int num_sms, "
      "Tensor? indices=None) -> Tensor",
      &mt::get_paged_mqa_logits_metadata);
  m.def("get_num_sms() -> int", &mt::get_num_sms);
  m.def("set_num_sms(int num_sms) -> ()", &mt::set_num_sms);
  m.def(
      "fp8_fp4_paged_mqa_logits(Tensor?[] q, Tensor kv_cache, Tensor weights, "
      "Tensor context_lens, Tensor block_table, Tensor schedule_meta, int max_context_len, "
      "bool clean_logits=False, ScalarType logits_dtype=6, Tensor? indices=None, *, "
      "bool truncate_long_contexts=False, " TOPK_KEYWORDS ", bool topk_short_rows=False) -> Tensor",
      &mt::fp8_fp4_paged_mqa_logits_op);
  m.def(
      "fp8_paged_mqa_logits(Tensor q, Tensor kv_cache, Tensor weights, Tensor context_lens, "
      "Tensor block_table, Tensor schedule_meta, int max_context_len, bool clean_logits=False, "
      "Tensor? indices=None, *, bool truncate_long_contexts=False, " TOPK_KEYWORDS
      ", bool topk_short_rows=False) -> Tensor",
      &mt::fp8_paged_mqa_logits_op);
  m.class_<mt::sparse_metadata>("SparseMetadata");
  m.class_<mt::paged_sparse_metadata>("PagedSparseMetadata");
  m.def(
      "get_sparse_mqa_logits_metadata(Tensor cu_seq_len_k_start, Tensor cu_seq_len_k_end, "
      "int num_kv_tokens, Tensor sparse_kv_block_indices, ScalarType qk_dtype, "
      "int sparse_block_kv, bool use_unaligned_ks=False) -> "
      "__torch__.torch.classes.mqalogits.SparseMetadata",
      &mt::get_sparse_mqa_logits_metadata);
  m.def(
      "get_paged_sparse_mqa_logits_metadata(Tensor context_lens, Tensor block_table, "
      "Tensor indices, int page_kv, Tensor sparse_kv_block_indices, ScalarType qk_dtype, "
      "int sparse_block_kv) -> __torch__.torch.classes.mqalogits.PagedSparseMetadata",
      &mt::get_paged_sparse_mqa_logits_metadata);
  m.def(
      "fp8_fp4_sparse_mqa_logits(Tensor?[] q, Tensor[] kv, Tensor weights, "
      "__torch__.torch.classes.mqalogits.SparseMetadata metadata, int num_max_sparse_blocks, "
      "int sparse_block_kv, bool use_unaligned_ks=False, *, Tensor(a!)? out=None) -> Tensor",
      &mt::fp8_fp4_sparse_mqa_logits);
  m.def(
      "fp8_fp4_paged_sparse_mqa_logits(Tensor?[] q, Tensor kv_cache, Tensor weights, "
      "__torch__.torch.classes.mqalogits.PagedSparseMetadata metadata, "
      "int num_max_sparse_blocks, int sparse_block_kv, *, Tensor(a!)? out=None) -> Tensor",
      &mt::fp8_fp4_paged_sparse_mqa_logits);
}
