// The dense ops (fp8_fp4_mqa_logits, fp8_mqa_logits), what both units share (thread pool,
// outputs, errors) and the library's registration: `torch.ops.mqalogits.<name>` for every op,
// schemas in DeepGEMM's argument order. DeepGEMM's tuple arguments are lists here (a tuple
// passes): q = (codes, scales or None), kv = (codes, scales). Every op also takes a keyword-only
// `out=`, a preallocated logits tensor the result is written into (and returned).
#include "ops.hpp"  // first: it includes torch's headers in an order Clang takes

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <mutex>
#include <string>

namespace mqalogits_torch {

run_options options_for(bool clean_logits) {
  run_options r;
  r.opt.clean_logits = clean_logits;
  const int n = at::get_num_threads();
  if (n > 1) {
    static std::mutex mutex;
    static std::shared_ptr<ml::thread_pool> pool;
    std::lock_guard lock(mutex);
    if (!pool || pool->concurrency() != n) pool = std::make_shared<ml::thread_pool>(n);
    r.pool = pool;  // kept alive by this call even if another one replaces it
    r.opt.executor = *r.pool;
  }
  return r;
}

void rethrow_as_value_error(const char* op, const char* message) {
  std::string text(message);
  const std::size_t colon = text.find(": ");
  if (colon != std::string::npos && text.find(' ') > colon) text.replace(0, colon, op);
  C10_THROW_ERROR(ValueError, text);
}

at::Tensor logits_output(const char* where, const c10::optional<at::Tensor>& out, std::int64_t rows,
                         std::int64_t cols, c10::ScalarType dtype) {
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
  const std::int64_t per = 1024 / static_cast<std::int64_t>(c10::elementSize(dtype));
  const std::int64_t stride = (cols + per - 1) / per * per;
  return at::empty({rows, stride}, at::TensorOptions().dtype(dtype)).slice(1, 0, cols);
}

namespace {

// The dense kernel for both names; q_scales undefined: FP8 per-token.
at::Tensor mqa_logits(const char* where, const at::Tensor& q, const at::Tensor& q_scales,
                      const at::Tensor& kv, const at::Tensor& kv_scales, const at::Tensor& weights,
                      const at::Tensor& ks, const at::Tensor& ke, bool clean_logits,
                      std::int64_t max_seqlen_k, c10::ScalarType logits_dtype,
                      const c10::optional<at::Tensor>& out) {
  return guarded(where, [&] {
    ml::detail::check_torch_tensor(q, where, "q");
    require_rank(where, "q", q, 3, "[seq_len, num_heads, head_dim]");
    ml::detail::check_torch_tensor(kv, where, "kv");
    require_rank(where, "kv", kv, 2, "[seq_len_kv, head_dim]");
    const std::int64_t S = q.size(0), H = q.size(1);
    ml::detail::check_torch_tensor(weights, where, "weights");
    require_rank(where, "weights", weights, 2, "[seq_len, num_heads]");
    require_dim(where, "weights", weights, 0, S, "seq_len");
    require_dim(where, "weights", weights, 1, H, "num_heads");
    ml::detail::check_torch_tensor(ks, where, "cu_seq_len_k_start");
    ml::detail::check_torch_tensor(ke, where, "cu_seq_len_k_end");
    require_dim(where, "cu_seq_len_k_start", ks, 0, S, "seq_len");
    require_dim(where, "cu_seq_len_k_end", ke, 0, S, "seq_len");
    require_same_index_type(where, "cu_seq_len_k_end", ke, "cu_seq_len_k_start", ks);
    ml::detail::require(max_seqlen_k >= 0, where, [&](auto& m) {
      m << "max_seqlen_k = " << max_seqlen_k << " must be > 0 (or 0 for full width)";
    });
    at::Tensor result =
        logits_output(where, out, S, max_seqlen_k > 0 ? max_seqlen_k : kv.size(0), logits_dtype);
    const run_options run = options_for(clean_logits);
    with_format(format_of(q, q_scales.defined()), [&](auto format) {
      using F = decltype(format);
      const auto qv = ml::as_rows_view<F>(q, q_scales, where, "q", "q_sf");
      const auto kvv = ml::as_rows_view<F>(kv, kv_scales, where, "kv", "kv_sf");
      with_index_type(where, "cu_seq_len_k_start", ks, [&](auto index) {
        using I = decltype(index);
        const auto s = ml::as_span<const I>(ks, where, "cu_seq_len_k_start");
        const auto e = ml::as_span<const I>(ke, where, "cu_seq_len_k_end");
        with_weights_and_logits(where, weights, result, [&](auto w, auto o) {
          ml::fp8_fp4_mqa_logits(ml::backend::host{}, qv, kvv, w, s, e, max_seqlen_k, o, run.opt);
        });
      });
    });
    return result;
  });
}

// DeepGEMM's (q, q_sf) and (kv, kv_sf) pairs.
void require_pair(const char* where, const char* name, std::size_t size) {
  guarded(where, [&] {
    ml::detail::require(size == 2, where, [&](auto& m) {
      m << name << " must be a pair (codes, scales), not " << size << " tensors";
    });
  });
}

at::Tensor fp8_fp4_mqa_logits(const c10::List<c10::optional<at::Tensor>>& q,
                              const std::vector<at::Tensor>& kv, const at::Tensor& weights,
                              const at::Tensor& cu_seq_len_k_start,
                              const at::Tensor& cu_seq_len_k_end, bool clean_logits,
                              std::int64_t max_seqlen_k, c10::ScalarType logits_dtype,
                              const c10::optional<at::Tensor>& schedule_meta,
                              const c10::optional<at::Tensor>& out) {
  constexpr const char* where = "fp8_fp4_mqa_logits";
  (void)schedule_meta;  // upstream's SM100 work split: results never depend on it
  require_pair(where, "q", q.size());
  require_pair(where, "kv", kv.size());
  const c10::optional<at::Tensor> q_codes = q.get(0), q_sf = q.get(1);
  return mqa_logits(where, q_codes.value_or(at::Tensor()), q_sf.value_or(at::Tensor()), kv[0],
                    kv[1], weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits,
                    max_seqlen_k, logits_dtype, out);
}

at::Tensor fp8_mqa_logits(const at::Tensor& q, const std::vector<at::Tensor>& kv,
                          const at::Tensor& weights, const at::Tensor& cu_seq_len_k_start,
                          const at::Tensor& cu_seq_len_k_end, bool clean_logits,
                          std::int64_t max_seqlen_k, const c10::optional<at::Tensor>& out) {
  constexpr const char* where = "fp8_mqa_logits";
  require_pair(where, "kv", kv.size());
  return mqa_logits(where, q, at::Tensor(), kv[0], kv[1], weights, cu_seq_len_k_start,
                    cu_seq_len_k_end, clean_logits, max_seqlen_k, c10::ScalarType::Float, out);
}

}  // namespace
}  // namespace mqalogits_torch

TORCH_LIBRARY(mqalogits, m) {
  namespace mt = mqalogits_torch;
  // ScalarType defaults are torch's codes: 6 = torch.float32.
  m.def(
      "fp8_fp4_mqa_logits(Tensor?[] q, Tensor[] kv, Tensor weights, Tensor cu_seq_len_k_start, "
      "Tensor cu_seq_len_k_end, bool clean_logits=True, int max_seqlen_k=0, "
      "ScalarType logits_dtype=6, Tensor? schedule_meta=None, *, Tensor(a!)? out=None) -> Tensor",
      &mt::fp8_fp4_mqa_logits);
  m.def(
      "fp8_mqa_logits(Tensor q, Tensor[] kv, Tensor weights, Tensor cu_seq_len_k_start, "
      "Tensor cu_seq_len_k_end, bool clean_logits=True, int max_seqlen_k=0, *, "
      "Tensor(a!)? out=None) -> Tensor",
      &mt::fp8_mqa_logits);
  m.def(
      "get_paged_mqa_logits_metadata(Tensor context_lens, int block_kv, int num_sms, "
      "Tensor? indices=None) -> Tensor",
      &mt::get_paged_mqa_logits_metadata);
  m.def(
      "fp8_fp4_paged_mqa_logits(Tensor?[] q, Tensor kv_cache, Tensor weights, "
      "Tensor context_lens, Tensor block_table, Tensor schedule_meta, int max_context_len, "
      "bool clean_logits=False, ScalarType logits_dtype=6, Tensor? indices=None, *, "
      "Tensor(a!)? out=None) -> Tensor",
      &mt::fp8_fp4_paged_mqa_logits);
  m.def(
      "fp8_paged_mqa_logits(Tensor q, Tensor kv_cache, Tensor weights, Tensor context_lens, "
      "Tensor block_table, Tensor schedule_meta, int max_context_len, bool clean_logits=False, "
      "Tensor? indices=None, *, Tensor(a!)? out=None) -> Tensor",
      &mt::fp8_paged_mqa_logits);
}
