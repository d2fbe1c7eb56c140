// Quantizers: fp32 / bf16 -> MXFP8, MXFP4 and FP8 per-token rows, stores into a paged cache
// through a slot mapping, the gather of a paged cache into rows, Q quantised with its scale
// folded into the weights, and vLLM's MXFP4 rule. Engines must produce the kernels' inputs; these
// produce them exactly.
#pragma once

#include "quantize/encode.hpp"
#include "quantize/gather_pages.hpp"
#include "quantize/pages.hpp"
#include "quantize/q_fold.hpp"
#include "quantize/rows.hpp"
#include "quantize/vllm_mxfp4.hpp"
