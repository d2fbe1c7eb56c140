// The baseline an engine author would write without this library: decode everything to fp32
// with the library's own row decoder, one Eigen GEMM per query block (Q block x K^T), then
// relu * w and the head sum over the materialised score block. Threads: query blocks spread
// over the same pool as the library's kernels.
#pragma once

#include <mqalogits/mqalogits.hpp>

#include "inputs.hpp"

namespace bench {

template <class Format>
void eigen_dense(const dense_inputs<Format>& in, ml::matrix_view<ml::bf16> out,
                 ml::executor_ref exec);
template <class Format>
void eigen_paged(const paged_inputs<Format>& in, ml::matrix_view<ml::bf16> out,
                 ml::executor_ref exec);
// paged = true: the keys come from the paged copy of the KV (paged sparse).
template <class Format>
void eigen_sparse(const sparse_inputs<Format>& in, bool paged, ml::matrix_view<ml::bf16> out,
                  ml::executor_ref exec);

}  // namespace bench
