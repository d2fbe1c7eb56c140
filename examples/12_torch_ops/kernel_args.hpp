// The ops' tensors as the descriptors of the compiled kernel calls they share with the Python
// module (examples/10_python_module/bindings_common.hpp: every format, weight type, head dim and
// fused top-k, compiled once there), checked as the Python module checks its arrays.
#pragma once

#include "ops.hpp"  // first: it includes torch's headers in an order Clang takes

#include <optional>
#include <string>

#include "../10_python_module/bindings_common.hpp"

namespace mqalogits_torch {

namespace mp = mqalogits_python;

// Q (codes, scales or undefined) of rank `rank` (`shape` names it), its format from the dtypes.
// Rows that are not dense are copied to a dense tensor, held here while the call runs.
struct q_arg {
  mp::q_input in;
  at::Tensor codes, scales;
};
q_arg q_of(const char* where, const at::Tensor& codes, const at::Tensor& scales, std::int64_t rank,
           const char* shape);

// Token-major K (codes [N, D], scales [N]) in Q's format.
mp::kv_input kv_of(const char* where, const at::Tensor& codes, const at::Tensor& scales,
                   mp::qk_format format);

// The fused paged cache uint8 [num_blocks, block_kv, 1, head_dim_with_sf] in Q's format.
mp::cache_input cache_of(const char* where, const at::Tensor& cache, mp::qk_format format);

// Weights [rows, num_heads] (or [rows, num_heads, 1]): float32, float16 or bfloat16.
mp::weights_view weights_of(const char* where, const at::Tensor& weights, std::int64_t rows,
                            const char* rows_name, std::int64_t heads);

// An int32 or int64 index tensor as a dense int32 one (int64 values checked to fit).
at::Tensor int32_of(const char* where, const char* name, const at::Tensor& t);

// What a kernel call writes and the tensor the op returns: the logits, or with a top-k its
// indices (the values, when asked for, go to topk_values_out).
struct kernel_output {
  mp::output_view view;
  at::Tensor result;
};
// The kernels, for the numberings their top-k takes: "column" everywhere, "slot" on the paged
// and paged-sparse kernels (cache slots), "position" on the sparse ones (request-local).
enum class kernel_kind { dense, paged, sparse, paged_sparse };
// The top-k of `rows` rows, or nullopt when the keywords ask for none.
std::optional<kernel_output> topk_output(const char* where, const topk_keywords& k,
                                         std::int64_t rows, kernel_kind kind);
// Adds the candidate blocks the keywords ask for to `selection` (made here when it holds no
// top-k: the blocks are then the result).
void add_candidates(const char* where, const candidate_keywords& c, std::int64_t rows,
                    std::optional<kernel_output>& selection);
// The logits [rows, cols] (out= or a new tensor, see logits_output).
kernel_output logits_of(const char* where, const c10::optional<at::Tensor>& out, std::int64_t rows,
                        std::int64_t cols, c10::ScalarType dtype, const char* width_name);

// The bf16 weights' rule of DeepGEMM: bfloat16 weights write bfloat16 logits.
void check_weights_for_logits(const char* where, const mp::weights_view& w, c10::ScalarType logits);

// What a dense or paged call writes: its selection when it asks for one (out=, the logits'
// buffer, is then refused), else its logits [rows, cols] in logits_dtype (out= or a new tensor),
// which the weights' type must allow.
kernel_output output_of(const char* where, const std::optional<kernel_output>& selection,
                        const c10::optional<at::Tensor>& out, std::int64_t rows, std::int64_t cols,
                        c10::ScalarType logits_dtype, const char* width_name,
                        const mp::weights_view& w);

}  // namespace mqalogits_torch
