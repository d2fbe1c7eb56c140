// mqalogits: the attention-indexer ("lightning indexer") logits of DeepSeek-V3.2-style sparse
// attention, for FP8 / FP4 inputs, on the host CPU or as a NeuronCore model. One include.
#pragma once

#include "backend/neuron/neuron.hpp"
#include "config.hpp"
#include "error.hpp"
#include "exec/executor.hpp"
#include "exec/thread_pool.hpp"
#include "format/bf16.hpp"
#include "format/e2m1.hpp"
#include "format/e4m3.hpp"
#include "format/fp8_per_token.hpp"
#include "format/mx.hpp"
#include "format/ue8m0.hpp"
#include "kernel/dense.hpp"
#include "kernel/options.hpp"
#include "kernel/paged.hpp"
#include "kernel/paged_sparse.hpp"
#include "kernel/sparse.hpp"
#include "view/logits_buffer.hpp"
#include "view/matrix_view.hpp"
#include "view/paged_cache_view.hpp"
#include "view/rows_view.hpp"
