// Quantizers: fp32 / bf16 -> MXFP8, MXFP4 and FP8 per-token rows, and stores into a paged cache
// through a slot mapping. Engines must produce the kernels' inputs; these produce them exactly.
#pragma once

#include "quantize/encode.hpp"
#include "quantize/pages.hpp"
#include "quantize/rows.hpp"
