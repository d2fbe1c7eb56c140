// What the units of the Python module `mqalogits` share (an internal header of the module, not of
// the library). It does not include pybind11: the kernel units include it alone.
//
// The units: module.cpp defines the module and calls bindings.cpp's register_* functions;
// bindings.cpp holds everything that touches Python (the argument checks that turn numpy arrays
// into the descriptors below, the outputs, the metadata objects, the cache writer). Each kernel
// unit (dense_kernels.cpp, paged_kernels.cpp, paged_topk_kernels.cpp, sparse_kernels.cpp,
// paged_sparse_kernels.cpp) compiles its calls for every format, weight type, output and head dim
// (the driver, plans and outputs; header-only, without mqalogits::dispatch, the micro-kernels
// too): they are the costly units, and a parallel build compiles them side by side. pybind11
// costs ~4 s of compile per unit that includes it, so only the Python units (bindings.cpp,
// ops_bindings.cpp, module.cpp) do.
//
// A kernel call is one skeleton, in two halves: bindings.cpp's run_kernel (the thread pool, the
// weights' view, the output arrays, the GIL released) and dispatch_kernel below (typed views of
// the descriptors for the call's format, weight and output types); a binding states only its own
// checks, its output's size and its library call.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace mqalogits_python {

namespace ml = mqalogits;

using i32 = std::int32_t;
using i64 = std::int64_t;

// ---- what a kernel reads: checked descriptors of the numpy arrays ----

enum class qk_format { mxfp8, mxfp4, fp8_per_token };

// Q: (codes [rows..., D], scales int32 [rows...] or None).
struct q_input {
  qk_format format;
  const std::uint8_t* data;
  const void* scales;     // null: per-token FP8 without scales
  i64 rows;               // number of (token, head) rows
  std::vector<i64> dims;  // the leading dimensions of the codes (without the last)
  int head_dim;           // from the codes' last dimension
};

// Token-major K: (codes [N, D], scales [N]: int32 UE8M0 with MX Q, float32 with per-token Q).
struct kv_input {
  const std::uint8_t* data;
  const std::uint8_t* scales;
  i64 rows, data_stride, scale_stride;
  int head_dim;
};

// The fused paged cache, uint8 [num_blocks, block_kv, 1, head_dim_with_sf].
struct cache_input {
  const std::uint8_t* data;
  i64 num_pages, page_stride;
  i32 page_kv;
  int head_dim;
};

// Weights [rows, H]: float32, float16, or bfloat16 bits; rows `stride` elements apart.
enum class weights_type { f32, f16, bf16 };
struct weights_view {
  const void* data;
  i64 rows, cols, stride;
  weights_type type;
};

// What a kernel writes: logits [rows, cols] of `type` with rows `stride` elements apart, or its
// selections: when topk_indices is set, the int32 [rows, k] top-k (numbered as `index` says,
// short rows with `short_rows`) and, when topk_values is set, their float32 values, rows
// `topk_stride` / `values_stride` apart; when candidates is set, the int32 [rows, n] candidate
// blocks of `block_size` positions, rows `candidates_stride` apart (beside a top-k: both from
// one pass).
enum class logits_type { f32, bf16 };
enum class topk_numbering { column, position, slot };
struct output_view {
  i64 rows = 0, cols = 0, stride = 0;
  logits_type type = logits_type::f32;
  void* logits = nullptr;
  i32* topk_indices = nullptr;
  float* topk_values = nullptr;
  i64 k = 0, topk_stride = 0, values_stride = 0;
  topk_numbering index = topk_numbering::column;
  bool short_rows = false;
  i32* candidates = nullptr;
  i64 n = 0, candidates_stride = 0, block_size = 8;
  ml::candidate_order order = ml::candidate_order::ascending;
  ml::candidate_padding padding = ml::candidate_padding::minus_one;
};

template <class K>
struct kernel_views {
  const q_input& q;
  const K& k;
  weights_view w;
};

// ---- the kernel units: one call each, with its own arguments ----

struct dense_args {
  std::span<const i32> ks, ke;
  i64 max_seqlen_k;
  bool clean_logits;  // the legacy call's own argument
};
void run_dense(const dense_args& a, const kernel_views<kv_input>& in, const output_view& out,
               const ml::options& opt);
void run_legacy_dense(const dense_args& a, const kernel_views<kv_input>& in, const output_view& out,
                      const ml::options& opt);

struct paged_args {
  ml::matrix_view<const i32> lens, table;
  const ml::paged_mqa_schedule& schedule;
  i64 max_context_len;
  std::optional<std::span<const i32>> indices;
  bool clean_logits;  // the legacy call's own argument
};
// The paged kernel's library call, with or without upstream's varlen indices (the two paged
// kernel units make it).
template <class Q, class C, class W, class O>
void paged_call(const paged_args& a, const Q& q, const C& cache, W w, O o, const ml::options& opt) {
  if (a.indices)
    ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, q, cache, w, a.lens, a.table, a.schedule,
                                 a.max_context_len, o, *a.indices, opt);
  else
    ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, q, cache, w, a.lens, a.table, a.schedule,
                                 a.max_context_len, o, opt);
}
void run_paged(const paged_args& a, const kernel_views<cache_input>& in, const output_view& out,
               const ml::options& opt);
void run_paged_topk(const paged_args& a, const kernel_views<cache_input>& in,
                    const output_view& out, const ml::options& opt);
void run_legacy_paged(const paged_args& a, const kernel_views<cache_input>& in,
                      const output_view& out, const ml::options& opt);

void run_sparse(const ml::sparse_mqa_metadata& meta, const kernel_views<kv_input>& in,
                const output_view& out, const ml::options& opt);
void run_paged_sparse(const ml::paged_sparse_mqa_metadata& meta,
                      const kernel_views<cache_input>& in, const output_view& out,
                      const ml::options& opt);

// ---- the kernel half of the skeleton ----

template <class... Formats>
struct formats {};
using any_format = formats<ml::mxfp8, ml::mxfp4, ml::fp8_per_token>;
template <class... Logits>
struct logits_types {};  // float, ml::bf16
// The selections a kernel unit compiles: a top-k numbered by each of Index (none: no top-k) and,
// with Candidates, candidate blocks, alone and beside each top-k.
template <bool Candidates, class... Index>
struct selections {};
using no_selection = selections<false>;

template <class F>
constexpr qk_format format_of = std::is_same_v<F, ml::mxfp8>   ? qk_format::mxfp8
                                : std::is_same_v<F, ml::mxfp4> ? qk_format::mxfp4
                                                               : qk_format::fp8_per_token;
template <class O>
constexpr logits_type logits_type_of =
    std::is_same_v<O, float> ? logits_type::f32 : logits_type::bf16;

template <class Format>
ml::rows_view<Format> q_view(const q_input& q) {
  if constexpr (std::is_same_v<Format, ml::fp8_per_token>)
    return ml::rows_view<Format>(q.data, nullptr, q.rows, ml::head_dim_t{q.head_dim});
  else
    return ml::rows_view<Format>(q.data, static_cast<const std::uint8_t*>(q.scales), q.rows,
                                 ml::head_dim_t{q.head_dim});
}

template <class Format>
ml::rows_view<Format> k_view(const kv_input& k) {
  return ml::rows_view<Format>(k.data, k.scales, k.rows, ml::head_dim_t{k.head_dim}, k.data_stride,
                               k.scale_stride);
}

template <class Format>
ml::paged_cache_view<Format> k_view(const cache_input& c) {
  return ml::paged_cache_view<Format>(c.data, c.num_pages, c.page_kv, ml::head_dim_t{c.head_dim},
                                      c.page_stride);
}

template <class W>
ml::matrix_view<const W> w_view(const weights_view& w) {
  return ml::matrix_view<const W>(static_cast<const W*>(w.data), w.rows, w.cols, w.stride);
}

template <class Index>
constexpr topk_numbering numbering_of =
    std::is_same_v<Index, ml::topk_index::slot_t>       ? topk_numbering::slot
    : std::is_same_v<Index, ml::topk_index::position_t> ? topk_numbering::position
                                                        : topk_numbering::column;

// The selection `out` asks for as the library's output argument, passed to emit; false when it
// asks for none (its logits).
template <bool Candidates, class... Index, class Emit>
bool emit_selection(const output_view& out, selections<Candidates, Index...>, Emit&& emit) {
  if constexpr (Candidates || sizeof...(Index) > 0) {
    const auto blocks = [&] {
      return ml::candidate_blocks(
          ml::matrix_view<i32>(out.candidates, out.rows, out.n, out.candidates_stride),
          out.block_size, out.order, out.padding);
    };
    if (!out.topk_indices) {
      if constexpr (Candidates) {
        if (out.candidates) return emit(blocks()), true;
      }
      return false;
    }
    const ml::matrix_view<i32> iv(out.topk_indices, out.rows, out.k, out.topk_stride);
    const ml::matrix_view<float> vv =
        out.topk_values
            ? ml::matrix_view<float>(out.topk_values, out.rows, out.k, out.values_stride)
            : ml::matrix_view<float>{};
    const auto with_topk = [&](auto sel) {
      if (out.short_rows) sel = sel.with_short_rows();
      if constexpr (Candidates) {
        if (out.candidates) return emit(ml::topk_and_candidates(sel, blocks()));
      }
      emit(sel);
    };
    return ((out.index == numbering_of<Index> && (with_topk(ml::topk(iv, vv, Index{})), true)) ||
            ...);
  } else {
    (void)out, (void)emit;
    return false;
  }
}

// Calls call(q, k, weights, out) with the library's views: q and k in the call's format (one of
// Formats), the weights in their type, out the logits (one of Logits) or the selection of `out`
// (as Selections allows). Each kernel unit instantiates it for its own call.
template <class Formats, class Logits, class Selections, class K, class Call>
void dispatch_kernel(const kernel_views<K>& in, const output_view& out, Call&& call) {
  const auto with_output = [&](const auto& q, const auto& k, const auto& w) {
    if (emit_selection(out, Selections{}, [&](const auto& o) { call(q, k, w, o); })) return;
    [&]<class... Os>(logits_types<Os...>) {
      (void)((out.type == logits_type_of<Os> &&
              (call(q, k, w,
                    ml::matrix_view<Os>(static_cast<Os*>(out.logits), out.rows, out.cols,
                                        out.stride)),
               true)) ||
             ...);
    }(Logits{});
  };
  const auto with_weights = [&](const auto& q, const auto& k) {
    if (in.w.type == weights_type::bf16)
      with_output(q, k, w_view<ml::bf16>(in.w));
    else if (in.w.type == weights_type::f16)
      with_output(q, k, w_view<ml::fp16>(in.w));
    else
      with_output(q, k, w_view<float>(in.w));
  };
  [&]<class... Fs>(formats<Fs...>) {
    (void)((in.q.format == format_of<Fs> &&
            (with_weights(q_view<Fs>(in.q), k_view<Fs>(in.k)), true)) ||
           ...);
  }(Formats{});
}

}  // namespace mqalogits_python
