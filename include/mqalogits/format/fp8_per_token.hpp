// FP8 e4m3fn with one fp32 scale per token: the format upstream's SM90 path and the vLLM /
// sglang indexer caches hold (128 data bytes + 4 scale bytes = 132 bytes per KV token).
//
// K: value = code x scale, the scale one little-endian float32 per row. Q: no scales at all
// (engines fold Q's per-token scale into the weights), so a rows_view of this format may carry a
// null scale pointer, read as scale 1.
#pragma once

#include "../config.hpp"
#include "block_scaled.hpp"
#include "e4m3.hpp"
#include "fp32_scale.hpp"

MQALOGITS_NAMESPACE_BEGIN

// One scale block spanning the whole row. decode_row rounds code x scale once in fp32 (exact
// when the scale has at most 20 significant bits).
struct fp8_per_token : block_scaled<float_e4m3, fp32_row_scale, head_dim> {
  static constexpr const char* name = "FP8 per-token";
  // The row's scale; 1 when `scales` is null.
  static float scale(const std::uint8_t* scales) { return fp32_row_scale::value(scales, 0); }
};

static_assert(row_format<fp8_per_token>);

MQALOGITS_NAMESPACE_END
