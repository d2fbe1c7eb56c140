// The dense ops: fp8_fp4_mqa_logits and the legacy fp8_mqa_logits, their logits or, with topk=k,
// each row's fused top-k (the kernel calls are the Python module's, see kernel_args.hpp), and
// get_mqa_logits_metadata. Upstream's dense metadata is an SM100 work split the results never
// depend on; here it is the record of the call it was made for (int64 [num_kv_tokens,
// num_heads, ks..., ke...]), and a call given another one is refused, as a stale upstream
// schedule would be wrong.
#include "kernel_args.hpp"  // first: it includes torch's headers in an order Clang takes

#include <ATen/ops/empty.h>
#include <algorithm>
#include <limits>
#include <vector>

namespace mqalogits_torch {

namespace {

// The dense kernel for both names; q_scales undefined: FP8 per-token.
at::Tensor mqa_logits(const char* where, const at::Tensor& q, const at::Tensor& q_scales,
                      const at::Tensor& kv, const at::Tensor& kv_scales, const at::Tensor& weights,
                      const at::Tensor& ks, const at::Tensor& ke, bool clean_logits,
                      std::int64_t max_seqlen_k, c10::ScalarType logits_dtype,
                      const kernel_keywords& kw, bool legacy) {
  return guarded(where, [&] {
    const q_arg qa = q_of(where, q, q_scales, 3, "[seq_len, num_heads, head_dim]");
    const std::int64_t S = q.size(0), H = q.size(1);
    const mp::kv_input k = kv_of(where, kv, kv_scales, qa.in.format);
    const mp::weights_view w = weights_of(where, weights, S, "seq_len", H);
    ml::torch_checks::require_tensor(ks, where, "cu_seq_len_k_start");
    ml::torch_checks::require_tensor(ke, where, "cu_seq_len_k_end");
    require_dim(where, "cu_seq_len_k_start", ks, 0, S, "seq_len");
    require_dim(where, "cu_seq_len_k_end", ke, 0, S, "seq_len");
    require_same_index_type(where, "cu_seq_len_k_end", ke, "cu_seq_len_k_start", ks);
    const at::Tensor s32 = int32_of(where, "cu_seq_len_k_start", ks);
    const at::Tensor e32 = int32_of(where, "cu_seq_len_k_end", ke);
    ml::check::require(max_seqlen_k >= 0, where, [&](auto& m) {
      m << "max_seqlen_k = " << max_seqlen_k << " must be > 0 (or 0 for full width)";
    });
    const std::int64_t cols = max_seqlen_k > 0 ? max_seqlen_k : kv.size(0);
    std::optional<kernel_output> topk = topk_output(where, kw.topk, S, kernel_kind::dense);
    // sglang's topk_indices_offset: added to each selected column, -1 kept.
    std::vector<std::int32_t> offsets;
    if (kw.topk_offset.has_value()) {
      ml::check::require(topk.has_value(), where,
                         [](auto& m) { m << "topk_offset needs topk = k"; });
      require_dim(where, "topk_offset", *kw.topk_offset, 0, S, "seq_len");
      const at::Tensor o = int32_of(where, "topk_offset", *kw.topk_offset);
      const std::int32_t* v = o.data_ptr<std::int32_t>();
      for (std::int64_t r = 0; r < S; ++r)
        ml::check::require(
            v[r] >= 0 && std::max<std::int64_t>(cols - 1, 0) <=
                             std::numeric_limits<std::int32_t>::max() - std::int64_t{v[r]},
            where, [&](auto& m) {
              m << "topk_offset[" << r << "] = " << v[r]
                << ": must be >= 0, and column + offset must fit int32 (columns < " << cols << ")";
            });
      offsets.assign(v, v + S);
    }
    add_candidates(where, kw.candidates, S, topk);  // topk: the selection from here on
    const kernel_output out =
        output_of(where, topk, kw.out, S, cols, logits_dtype, "max_seqlen_k", w);
    const run_options run = options_for(clean_logits, kw.truncate_long_contexts);
    const mp::dense_args args{std::span<const std::int32_t>(s32.data_ptr<std::int32_t>(), S),
                              std::span<const std::int32_t>(e32.data_ptr<std::int32_t>(), S),
                              max_seqlen_k, clean_logits};
    const mp::kernel_views<mp::kv_input> views{qa.in, k, w};
    if (legacy && !topk)
      mp::run_legacy_dense(args, views, out.view, run.opt);
    else
      mp::run_dense(args, views, out.view, run.opt);
    if (!offsets.empty()) {
      at::Tensor idx = out.result;
      for (std::int64_t r = 0; r < S; ++r) {
        std::int32_t* row = idx.data_ptr<std::int32_t>() + r * idx.stride(0);
        for (std::int64_t j = 0; j < idx.size(1); ++j)
          if (row[j] >= 0) row[j] += offsets[static_cast<std::size_t>(r)];
      }
    }
    return out.result;
  });
}

// The record get_mqa_logits_metadata makes: int64 [num_kv_tokens, num_heads, ks..., ke...].
at::Tensor dense_schedule(const char* where, const at::Tensor& ks, const at::Tensor& ke,
                          std::int64_t num_kv_tokens, std::int64_t num_heads) {
  ml::torch_checks::require_tensor(ks, where, "cu_seq_len_k_start");
  ml::torch_checks::require_tensor(ke, where, "cu_seq_len_k_end");
  require_rank(where, "cu_seq_len_k_start", ks, 1, "[num_q]");
  require_rank(where, "cu_seq_len_k_end", ke, 1, "[num_q]");
  const at::Tensor s = int32_of(where, "cu_seq_len_k_start", ks).to(c10::ScalarType::Long);
  const at::Tensor e = int32_of(where, "cu_seq_len_k_end", ke).to(c10::ScalarType::Long);
  ml::check::require(s.numel() == e.numel() && s.numel() > 0, where, [&](auto& m) {
    m << "cu_seq_len_k_start has " << s.numel() << " entries and cu_seq_len_k_end " << e.numel()
      << " (both num_q > 0)";
  });
  at::Tensor t = at::empty({2 + 2 * s.numel()}, at::TensorOptions().dtype(c10::ScalarType::Long));
  std::int64_t* v = t.data_ptr<std::int64_t>();
  v[0] = num_kv_tokens;
  v[1] = num_heads;
  std::copy_n(s.data_ptr<std::int64_t>(), s.numel(), v + 2);
  std::copy_n(e.data_ptr<std::int64_t>(), e.numel(), v + 2 + s.numel());
  return t;
}

// A dense call's schedule_meta must be the record of its own arguments (num_heads -1: any).
void check_dense_schedule(const char* where, const at::Tensor& meta, const at::Tensor& ks,
                          const at::Tensor& ke, std::int64_t num_kv_tokens,
                          std::int64_t num_heads) {
  guarded(where, [&] {
    ml::torch_checks::require_tensor(meta, where, "schedule_meta");
    const at::Tensor want = dense_schedule(where, ks, ke, num_kv_tokens, num_heads);
    const bool same =
        meta.scalar_type() == c10::ScalarType::Long && meta.dim() == 1 &&
        meta.numel() == want.numel() && meta.is_contiguous() &&
        std::equal(want.data_ptr<std::int64_t>(), want.data_ptr<std::int64_t>() + want.numel(),
                   meta.data_ptr<std::int64_t>());
    ml::check::require(same, where, [](auto& m) {
      m << "schedule_meta was made for other cu_seq_len_k_start / cu_seq_len_k_end / "
           "num_kv_tokens / num_heads (regenerate it with get_mqa_logits_metadata)";
    });
  });
}

// DeepGEMM's (q, q_sf) and (kv, kv_sf) pairs.
void require_pair(const char* where, const char* name, std::size_t size) {
  guarded(where, [&] {
    ml::check::require(size == 2, where, [&](auto& m) {
      m << name << " must be a pair (codes, scales), not " << size << " tensors";
    });
  });
}

}  // namespace

at::Tensor get_mqa_logits_metadata(const at::Tensor& cu_seq_len_k_start,
                                   const at::Tensor& cu_seq_len_k_end, std::int64_t num_kv_tokens,
                                   std::int64_t num_heads) {
  constexpr const char* where = "get_mqa_logits_metadata";
  return guarded(where, [&] {
    ml::check::require(num_kv_tokens > 0, where, [&](auto& m) {
      m << "num_kv_tokens = " << num_kv_tokens << " must be > 0";
    });
    ml::check::require(num_heads >= 1 && num_heads <= 128, where,
                       [&](auto& m) { m << "num_heads = " << num_heads << " must be in 1..128"; });
    return dense_schedule(where, cu_seq_len_k_start, cu_seq_len_k_end, num_kv_tokens, num_heads);
  });
}

at::Tensor fp8_fp4_mqa_logits(const c10::List<c10::optional<at::Tensor>>& q,
                              const std::vector<at::Tensor>& kv, const at::Tensor& weights,
                              const at::Tensor& cu_seq_len_k_start,
                              const at::Tensor& cu_seq_len_k_end, bool clean_logits,
                              std::int64_t max_seqlen_k, c10::ScalarType logits_dtype,
                              const c10::optional<at::Tensor>& schedule_meta,
                              const kernel_keywords& kw) {
  constexpr const char* where = "fp8_fp4_mqa_logits";
  require_pair(where, "q", q.size());
  require_pair(where, "kv", kv.size());
  const c10::optional<at::Tensor> q_codes = q.get(0), q_sf = q.get(1);
  if (schedule_meta.has_value())
    check_dense_schedule(where, *schedule_meta, cu_seq_len_k_start, cu_seq_len_k_end,
                         kv[0].defined() ? kv[0].size(0) : -1,
                         q_codes.has_value() && q_codes->dim() == 3 ? q_codes->size(1) : -1);
  return mqa_logits(where, q_codes.value_or(at::Tensor()), q_sf.value_or(at::Tensor()), kv[0],
                    kv[1], weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits,
                    max_seqlen_k, logits_dtype, kw, false);
}

at::Tensor fp8_mqa_logits(const at::Tensor& q, const std::vector<at::Tensor>& kv,
                          const at::Tensor& weights, const at::Tensor& cu_seq_len_k_start,
                          const at::Tensor& cu_seq_len_k_end, bool clean_logits,
                          std::int64_t max_seqlen_k, const kernel_keywords& kw) {
  constexpr const char* where = "fp8_mqa_logits";
  require_pair(where, "kv", kv.size());
  return mqa_logits(where, q, at::Tensor(), kv[0], kv[1], weights, cu_seq_len_k_start,
                    cu_seq_len_k_end, clean_logits, max_seqlen_k, c10::ScalarType::Float, kw, true);
}

}  // namespace mqalogits_torch
