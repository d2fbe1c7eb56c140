// What each kernel accepts in the position of its output: every output kind (the logits row, the
// top-k with the index kinds that kernel numbers, the candidate blocks, the two selections
// together), as the kernel's output context makes them (make_output).
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "candidate_blocks.hpp"
#include "logits_row.hpp"
#include "topk_numbering.hpp"
#include "two_selections.hpp"

MQALOGITS_NAMESPACE_BEGIN

template <class T>
concept dense_output_argument = output_for<T, dense_outputs>;
template <class T>
concept paged_output_argument = output_for<T, paged_outputs<std::int32_t>>;
template <class T>
concept sparse_output_argument = output_for<T, sparse_outputs>;
template <class T>
concept paged_sparse_output_argument = output_for<T, paged_sparse_outputs>;

MQALOGITS_NAMESPACE_END
