// The torch ops `torch.ops.mqalogits.*`: DeepGEMM's indexer-logits functions over CPU tensors,
// with DeepGEMM's names and argument order. What the op library's files share: the run options
// and pool (ops.cpp), the argument checks, and the dense and paged ops' entry points
// (dense_ops.cpp, paged_ops.cpp; registered in registration.cpp).
#pragma once

// ivalue.h before anything that includes List.h: List.h alone holds a std::vector of the
// incomplete c10::IValue, which Clang rejects in C++20 (torch 1.13).
#include <ATen/core/ivalue.h>

#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Optional.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <mqalogits/interop/torch.hpp>
#include <mqalogits/mqalogits.hpp>

namespace mqalogits_torch {

namespace ml = mqalogits;

// Per-call options and the pool they run on: at::get_num_threads() threads, as torch's own CPU
// ops (one pool per process, replaced when torch's thread count changes, so at most one lives).
struct run_options {
  std::shared_ptr<ml::thread_pool> pool;  // null: serial on the calling thread
  ml::options opt;
};
// truncate_long_contexts: the library's option (rows longer than the output are cut, not refused).
run_options options_for(bool clean_logits, bool truncate_long_contexts = false);

// The logits output: `out` checked against [rows, cols] and the dtype, or a new tensor whose
// rows are 1024-byte aligned, as DeepGEMM's. width_name names the argument cols comes from, for
// the error when the padded size overflows.
at::Tensor logits_output(const char* where, const c10::optional<at::Tensor>& out, std::int64_t rows,
                         std::int64_t cols, c10::ScalarType dtype, const char* width_name);

// Library errors (ml::error, "<function>: <what>") reach Python as ValueError "<op>: <what>".
[[noreturn]] void rethrow_as_value_error(const char* op, const char* message);

// ---- the typed calls an op makes, chosen by the tensors' dtypes ----

// The Q / K format: FP8 with a per-token fp32 K scale when Q comes without scales (the engine
// folded them into the weights), else MX: packed FP4 (int8, or float4_e2m1fn_x2) or MXFP8.
enum class qk_format { fp8_per_token, mxfp8, mxfp4 };

inline qk_format format_of(const at::Tensor& q_codes, bool has_q_scales) {
  if (!has_q_scales) return qk_format::fp8_per_token;
  const bool fp4 = q_codes.defined() && (q_codes.scalar_type() == c10::ScalarType::Char ||
                                         ml::torch_checks::dtype_is(q_codes, "Float4_e2m1fn_x2"));
  return fp4 ? qk_format::mxfp4 : qk_format::mxfp8;
}

// fn(Format{}) for the call's format.
template <class Fn>
void with_format(qk_format f, Fn&& fn) {
  switch (f) {
    case qk_format::fp8_per_token:
      return fn(ml::fp8_per_token{});
    case qk_format::mxfp8:
      return fn(ml::mxfp8{});
    case qk_format::mxfp4:
      return fn(ml::mxfp4{});
  }
}

// The logits dtypes the ops write.
inline void check_logits_dtype(const char* where, c10::ScalarType t) {
  ml::check::require(t == c10::ScalarType::Float || t == c10::ScalarType::BFloat16, where,
                     [&](auto& m) {
                       m << "logits_dtype = " << ml::torch_checks::dtype_name(t)
                         << ", expected torch.float32 or torch.bfloat16";
                     });
}

// fn(std::int32_t{}) or fn(std::int64_t{}) for an index tensor's dtype.
template <class Fn>
void with_index_type(const char* where, const char* name, const at::Tensor& t, Fn&& fn) {
  ml::torch_checks::require_tensor(t, where, name);
  if (t.scalar_type() == c10::ScalarType::Int) return fn(std::int32_t{});
  if (t.scalar_type() == c10::ScalarType::Long) return fn(std::int64_t{});
  ml::check::require(false, where, [&](auto& m) {
    m << name << " has dtype " << ml::torch_checks::dtype_name(t.scalar_type())
      << ", expected torch.int32 or torch.int64";
  });
}

// Two index tensors read by one call share a dtype.
inline void require_same_index_type(const char* where, const char* name, const at::Tensor& t,
                                    const char* other, const at::Tensor& o) {
  ml::check::require(t.scalar_type() == o.scalar_type(), where, [&](auto& m) {
    m << name << " has dtype " << ml::torch_checks::dtype_name(t.scalar_type()) << " but " << other
      << " has " << ml::torch_checks::dtype_name(o.scalar_type())
      << ": pass both as torch.int32 or both as torch.int64";
  });
}

// A tensor's size along d, as the shape checks name it.
inline void require_dim(const char* where, const char* name, const at::Tensor& t, std::int64_t d,
                        std::int64_t want, const char* what) {
  ml::check::require(t.dim() > d && t.size(d) == want, where, [&](auto& m) {
    m << name << " has shape " << ml::torch_checks::shape{t} << ", expected " << what << " = "
      << want << " in dimension " << d;
  });
}
inline void require_rank(const char* where, const char* name, const at::Tensor& t,
                         std::int64_t rank, const char* shape) {
  ml::check::require(t.dim() == rank, where, [&](auto& m) {
    m << name << " has shape " << ml::torch_checks::shape{t} << ", expected " << shape;
  });
}

// Runs fn, library errors turned into ValueError that names the op called: the library names
// its own entry point ("fp8_fp4_mqa_logits: ..."), which a legacy op's caller never wrote.
template <class Fn>
decltype(auto) guarded(const char* op, Fn&& fn) {
  try {
    return fn();
  } catch (const std::invalid_argument& e) {  // ml::error, also from the shared kernel calls
    rethrow_as_value_error(op, e.what());
  }
}

// The fused top-k keywords of the dense and paged ops: topk=k selects each row's k largest
// logits instead of writing them (topk_out: the caller's int32 [rows, k] buffer, k its width
// when topk is None); topk_values_out: a float32 [rows, k] buffer the values are written into;
// topk_index "column" (or "slot" on the paged ops: cache slots); topk_short_rows writes a row
// with at most k valid columns as those columns ascending, -1 after.
struct topk_keywords {
  c10::optional<std::int64_t> topk;
  bool values = false;
  std::string index = "column";
  c10::optional<at::Tensor> out, values_out;
  bool short_rows = false;
};

// The candidate blocks of the dense and paged ops: candidate_topk_blocks=N selects each row's N
// blocks of candidate_block_size request-local positions with the largest block-max logits
// (int32 [rows, N]; candidate_out: the caller's buffer, N its width when candidate_topk_blocks
// is None). Alone they are what the op returns; beside topk=k both come from one pass, the op
// returns the top-k and the blocks go to candidate_out. candidate_order "ascending" (by block id)
// or "score" (best first); candidate_padding "minus_one" or "repeat_last".
struct candidate_keywords {
  c10::optional<std::int64_t> n;
  std::int64_t block_size = 8;
  std::string order = "ascending", padding = "minus_one";
  c10::optional<at::Tensor> out;
};

// The keyword-only arguments of the dense and paged ops (topk_offset: the dense ops').
struct kernel_keywords {
  bool truncate_long_contexts = false;
  c10::optional<at::Tensor> out;
  topk_keywords topk;
  c10::optional<at::Tensor> topk_offset;
  candidate_keywords candidates;
};

at::Tensor fp8_fp4_mqa_logits(const c10::List<c10::optional<at::Tensor>>& q,
                              const std::vector<at::Tensor>& kv, const at::Tensor& weights,
                              const at::Tensor& cu_seq_len_k_start,
                              const at::Tensor& cu_seq_len_k_end, bool clean_logits,
                              std::int64_t max_seqlen_k, c10::ScalarType logits_dtype,
                              const c10::optional<at::Tensor>& schedule_meta,
                              const kernel_keywords& kw);
at::Tensor fp8_mqa_logits(const at::Tensor& q, const std::vector<at::Tensor>& kv,
                          const at::Tensor& weights, const at::Tensor& cu_seq_len_k_start,
                          const at::Tensor& cu_seq_len_k_end, bool clean_logits,
                          std::int64_t max_seqlen_k, const kernel_keywords& kw);

at::Tensor fp8_fp4_paged_mqa_logits(const c10::List<c10::optional<at::Tensor>>& q,
                                    const at::Tensor& kv_cache, const at::Tensor& weights,
                                    const at::Tensor& context_lens, const at::Tensor& block_table,
                                    const at::Tensor& schedule_meta, std::int64_t max_context_len,
                                    bool clean_logits, c10::ScalarType logits_dtype,
                                    const c10::optional<at::Tensor>& indices,
                                    const kernel_keywords& kw);
at::Tensor fp8_paged_mqa_logits(const at::Tensor& q, const at::Tensor& kv_cache,
                                const at::Tensor& weights, const at::Tensor& context_lens,
                                const at::Tensor& block_table, const at::Tensor& schedule_meta,
                                std::int64_t max_context_len, bool clean_logits,
                                const c10::optional<at::Tensor>& indices,
                                const kernel_keywords& kw);
at::Tensor get_mqa_logits_metadata(const at::Tensor& cu_seq_len_k_start,
                                   const at::Tensor& cu_seq_len_k_end, std::int64_t num_kv_tokens,
                                   std::int64_t num_heads);
// DeepGEMM's get_num_sms / set_num_sms: the partition count an engine passes as the metadata's
// num_sms, by default at::get_num_threads() (the ops' thread count); set_num_sms(n), n in
// [1, 4096], replaces it. The ops spread a schedule of any count over their threads.
std::int64_t get_num_sms();
void set_num_sms(std::int64_t num_sms);

at::Tensor get_paged_mqa_logits_metadata(const at::Tensor& context_lens, std::int64_t block_kv,
                                         std::int64_t num_sms,
                                         const c10::optional<at::Tensor>& indices,
                                         const c10::optional<at::Tensor>& out);

}  // namespace mqalogits_torch
