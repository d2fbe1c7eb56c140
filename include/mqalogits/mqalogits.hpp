// mqalogits: the attention-indexer ("lightning indexer") logits of DeepSeek-V3.2-style sparse
// attention, for FP8 / FP4 inputs, on the host CPU. One include; the NeuronCore model
// (backend::neuron) is <mqalogits/neuron.hpp>, or this header in a build whose default backend
// is neuron.
#pragma once

#include "api/dense.hpp"
#include "api/legacy.hpp"
#include "api/paged.hpp"
#include "api/paged_sparse.hpp"
#include "api/sparse.hpp"
#include "check/sizes.hpp"
#include "config.hpp"
#include "error.hpp"
#include "exec/executor.hpp"
#include "exec/options.hpp"
#include "exec/thread_pool.hpp"
#include "format/bf16.hpp"
#include "format/e2m1.hpp"
#include "format/e4m3.hpp"
#include "format/fp16.hpp"
#include "format/fp8_per_token.hpp"
#include "format/mx.hpp"
#include "format/ue8m0.hpp"
#include "interop/span.hpp"
#include "output/logits_row.hpp"
#include "output/output.hpp"
#include "output/topk.hpp"
#include "quantize.hpp"
#include "view/logits_buffer.hpp"
#include "view/matrix_view.hpp"
#include "view/paged_cache_view.hpp"
#include "view/rows_view.hpp"
