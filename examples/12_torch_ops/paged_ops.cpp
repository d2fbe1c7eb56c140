// The paged ops: get_paged_mqa_logits_metadata, fp8_fp4_paged_mqa_logits and the legacy
// fp8_paged_mqa_logits, and get_num_sms / set_num_sms.
//
// The schedule is DeepGEMM's int32 [num_sms + 1, 2] tensor, written and read by the library's
// array form of the schedule: engines copy it into a buffer of their own and pass it back; the
// kernel rebuilds the schedule from the call's context lengths (and indices) with as many
// workers as the tensor has rows minus one and requires the tensor to equal it, so a stale or
// foreign array is a named error, never a wrong read.
#include "kernel_args.hpp"  // first: it includes torch's headers in an order Clang takes

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

namespace mqalogits_torch {

namespace {

// context_lens [B, next_n], or [B] (one length per request; see paged_logits for next_n > 1).
template <class I>
ml::matrix_view<const I> lens_view(const char* where, const at::Tensor& lens) {
  if (lens.dim() == 1) {
    const auto s = ml::as_span<const I>(lens, where, "context_lens");
    return {s.data(), static_cast<std::int64_t>(s.size()), 1};
  }
  return ml::as_matrix_view<const I>(lens, where, "context_lens");
}

// block_kv and num_sms in range before they are narrowed to the library's types.
void check_schedule_args(const char* where, std::int64_t block_kv, std::int64_t num_sms) {
  ml::check::require(block_kv >= 1 && block_kv <= ml::max_page_kv, where, [&](auto& m) {
    m << "block_kv = " << block_kv << " is not supported (1.." << ml::max_page_kv << ")";
  });
  ml::check::require(num_sms >= 1 && num_sms <= ml::max_paged_workers, where, [&](auto& m) {
    m << "num_sms = " << num_sms << " must be in [1, " << ml::max_paged_workers << "]";
  });
}

void check_schedule_tensor(const char* where, const at::Tensor& t) {
  ml::torch_checks::require_tensor(t, where, "schedule_meta");
  ml::torch_checks::require_dtype(t, c10::ScalarType::Int, where, "schedule_meta");
  ml::check::require(t.dim() == 2 && t.size(0) >= 2 && t.size(1) == 2 && t.is_contiguous(), where,
                     [&](auto& m) {
                       m << "schedule_meta has shape " << ml::torch_checks::shape{t}
                         << ", expected a contiguous [num_sms + 1, 2] tensor from "
                            "get_paged_mqa_logits_metadata";
                     });
}

at::Tensor paged_logits(const char* where, const at::Tensor& q, const at::Tensor& q_scales,
                        const at::Tensor& kv_cache, const at::Tensor& weights,
                        const at::Tensor& context_lens, const at::Tensor& block_table,
                        const at::Tensor& schedule_meta, std::int64_t max_context_len,
                        bool clean_logits, c10::ScalarType logits_dtype,
                        const c10::optional<at::Tensor>& indices, const kernel_keywords& kw,
                        bool legacy) {
  return guarded(where, [&] {
    const q_arg qa = q_of(where, q, q_scales, 4, "[batch_size, next_n, num_heads, head_dim]");
    const std::int64_t B = q.size(0), next_n = q.size(1), H = q.size(2);
    const mp::cache_input cache = cache_of(where, kv_cache, qa.in.format);
    ml::torch_checks::require_tensor(context_lens, where, "context_lens");
    require_dim(where, "context_lens", context_lens, 0, B, "batch_size");
    if (context_lens.dim() != 1) {
      require_rank(where, "context_lens", context_lens, 2, "[batch_size, next_n] or [batch_size]");
      require_dim(where, "context_lens", context_lens, 1, next_n, "next_n");
    }
    ml::torch_checks::require_tensor(block_table, where, "block_table");
    require_same_index_type(where, "block_table", block_table, "context_lens", context_lens);
    require_rank(where, "block_table", block_table, 2, "[batch_size, max_blocks]");
    const mp::weights_view w = weights_of(where, weights, B * next_n, "batch_size * next_n", H);
    check_schedule_tensor(where, schedule_meta);
    ml::check::require(max_context_len > 0, where, [&](auto& m) {
      m << "max_context_len = " << max_context_len << " must be > 0";
    });
    const at::Tensor lens32 = int32_of(where, "context_lens", context_lens);
    const at::Tensor table32 = int32_of(where, "block_table", block_table);
    at::Tensor indices32;
    if (indices.has_value()) {
      require_same_index_type(where, "indices", *indices, "context_lens", context_lens);
      indices32 = int32_of(where, "indices", *indices);
    }
    // DeepGEMM's 1-D context_lens [B] with next_n rows per request: row j sees positions
    // t <= context_lens[b] - next_n + j (ml::expand_context_lens), as the Python module reads it;
    // the schedule made from the 1-D lengths is the expanded lengths' one.
    std::vector<std::int32_t> expanded;
    ml::matrix_view<const std::int32_t> lens(lens32.data_ptr<std::int32_t>(), B,
                                             context_lens.dim() == 1 ? 1 : next_n);
    if (context_lens.dim() == 1 && next_n > 1) {
      expanded.resize(static_cast<std::size_t>(B * next_n));
      ml::expand_context_lens(std::span<const std::int32_t>(lens.data, static_cast<std::size_t>(B)),
                              ml::matrix_view<std::int32_t>(expanded.data(), B, next_n));
      lens = ml::matrix_view<const std::int32_t>(expanded.data(), B, next_n);
    }
    const ml::matrix_view<const std::int32_t> table(table32.data_ptr<std::int32_t>(),
                                                    table32.size(0), table32.size(1));
    std::optional<std::span<const std::int32_t>> idx;
    if (indices32.defined())
      idx = std::span<const std::int32_t>(indices32.data_ptr<std::int32_t>(),
                                          static_cast<std::size_t>(indices32.numel()));
    // The schedule these lengths (and indices) give, which the table must equal.
    const auto array =
        ml::as_matrix_view<const std::int32_t>(schedule_meta, where, "schedule_meta");
    const ml::paged_mqa_schedule schedule = [&] {
      try {
        return idx ? ml::paged_mqa_schedule_from_array(array, lens, cache.page_kv, *idx)
                   : ml::paged_mqa_schedule_from_array(array, lens, cache.page_kv);
      } catch (const std::invalid_argument& e) {
        ml::check::require(false, where, [&](auto& m) { m << "schedule_meta: " << e.what(); });
        throw;
      }
    }();
    const std::int64_t rows = B * next_n;
    // The selection: a top-k, candidate blocks, or both (one pass).
    std::optional<kernel_output> topk = topk_output(where, kw.topk, rows, kernel_kind::paged);
    add_candidates(where, kw.candidates, rows, topk);
    const kernel_output out =
        output_of(where, topk, kw.out, rows, max_context_len, logits_dtype, "max_context_len", w);
    const run_options run = options_for(clean_logits, kw.truncate_long_contexts);
    const mp::paged_args args{lens, table, schedule, max_context_len, idx, clean_logits};
    const mp::kernel_views<mp::cache_input> views{qa.in, cache, w};
    if (topk)
      mp::run_paged_topk(args, views, out.view, run.opt);
    else if (legacy)
      mp::run_legacy_paged(args, views, out.view, run.opt);
    else
      mp::run_paged(args, views, out.view, run.opt);
    return out.result;
  });
}

}  // namespace

namespace {
std::atomic<std::int64_t> num_sms_setting{0};  // 0: not set
}  // namespace

std::int64_t get_num_sms() {
  const std::int64_t n = num_sms_setting.load(std::memory_order_relaxed);
  return n > 0 ? n : std::max(1, at::get_num_threads());
}

void set_num_sms(std::int64_t num_sms) {
  constexpr const char* where = "set_num_sms";
  guarded(where, [&] {
    ml::check::require(num_sms >= 1 && num_sms <= ml::max_paged_workers, where, [&](auto& m) {
      m << "num_sms = " << num_sms << " must be in [1, " << ml::max_paged_workers << "]";
    });
    num_sms_setting.store(num_sms, std::memory_order_relaxed);
  });
}

at::Tensor get_paged_mqa_logits_metadata(const at::Tensor& context_lens, std::int64_t block_kv,
                                         std::int64_t num_sms,
                                         const c10::optional<at::Tensor>& indices,
                                         const c10::optional<at::Tensor>& out) {
  constexpr const char* where = "get_paged_mqa_logits_metadata";
  return guarded(where, [&] {
    ml::torch_checks::require_tensor(context_lens, where, "context_lens");
    ml::check::require(context_lens.dim() == 1 || context_lens.dim() == 2, where, [&](auto& m) {
      m << "context_lens has shape " << ml::torch_checks::shape{context_lens}
        << ", expected [batch_size, next_n] or [batch_size]";
    });
    check_schedule_args(where, block_kv, num_sms);
    // out: an engine's scheduler_metadata_buffer, written and returned.
    at::Tensor result =
        out.has_value()
            ? *out
            : at::empty({num_sms + 1, 2}, at::TensorOptions().dtype(c10::ScalarType::Int));
    if (out.has_value()) {
      ml::torch_checks::require_tensor(result, where, "out");
      ml::torch_checks::require_dtype(result, c10::ScalarType::Int, where, "out");
      ml::check::require(result.dim() == 2 && result.size(0) == num_sms + 1 && result.size(1) == 2,
                         where, [&](auto& m) {
                           m << "out has shape " << ml::torch_checks::shape{result}
                             << ", expected [" << num_sms + 1 << ", 2]";
                         });
    }
    const auto out = ml::as_matrix_view<std::int32_t>(result, where, "schedule_meta");
    const auto page_kv = static_cast<std::int32_t>(block_kv);
    const int workers = static_cast<int>(num_sms);
    with_index_type(where, "context_lens", context_lens, [&](auto index) {
      using I = decltype(index);
      const auto lens = lens_view<I>(where, context_lens);
      if (indices.has_value()) {
        require_same_index_type(where, "indices", *indices, "context_lens", context_lens);
        ml::get_paged_mqa_logits_metadata(lens, page_kv, workers,
                                          ml::as_span<const I>(*indices, where, "indices"), out);
      } else {
        ml::get_paged_mqa_logits_metadata(lens, page_kv, workers, out);
      }
    });
    return result;
  });
}

at::Tensor fp8_fp4_paged_mqa_logits(const c10::List<c10::optional<at::Tensor>>& q,
                                    const at::Tensor& kv_cache, const at::Tensor& weights,
                                    const at::Tensor& context_lens, const at::Tensor& block_table,
                                    const at::Tensor& schedule_meta, std::int64_t max_context_len,
                                    bool clean_logits, c10::ScalarType logits_dtype,
                                    const c10::optional<at::Tensor>& indices,
                                    const kernel_keywords& kw) {
  constexpr const char* where = "fp8_fp4_paged_mqa_logits";
  guarded(where, [&] {
    ml::check::require(q.size() == 2, where, [&](auto& m) {
      m << "q must be a pair (codes, scales or None), not " << q.size() << " tensors";
    });
  });
  const c10::optional<at::Tensor> q_codes = q.get(0), q_sf = q.get(1);
  return paged_logits(where, q_codes.value_or(at::Tensor()), q_sf.value_or(at::Tensor()), kv_cache,
                      weights, context_lens, block_table, schedule_meta, max_context_len,
                      clean_logits, logits_dtype, indices, kw, false);
}

at::Tensor fp8_paged_mqa_logits(const at::Tensor& q, const at::Tensor& kv_cache,
                                const at::Tensor& weights, const at::Tensor& context_lens,
                                const at::Tensor& block_table, const at::Tensor& schedule_meta,
                                std::int64_t max_context_len, bool clean_logits,
                                const c10::optional<at::Tensor>& indices,
                                const kernel_keywords& kw) {
  return paged_logits("fp8_paged_mqa_logits", q, at::Tensor(), kv_cache, weights, context_lens,
                      block_table, schedule_meta, max_context_len, clean_logits,
                      c10::ScalarType::Float, indices, kw, true);
}

}  // namespace mqalogits_torch
