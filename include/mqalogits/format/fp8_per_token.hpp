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

// One scale block spanning the whole row (of 128, 64 or 32 elements). decode_row rounds code x
// scale once in fp32 (exact when the scale has at most 20 significant bits).
template <int HeadDim = default_head_dim>
struct fp8_per_token_format : block_scaled<float_e4m3, fp32_row_scale, HeadDim, HeadDim> {
  static constexpr const char* name = "FP8 per-token";
  template <int D>
  using with_head_dim = fp8_per_token_format<D>;
  // The row's scale; 1 when `scales` is null.
  static float scale(const std::uint8_t* scales) { return fp32_row_scale::value(scales, 0); }
};

// The name users write: rows of 128 codes + one float32 (132 bytes).
using fp8_per_token = fp8_per_token_format<>;

static_assert(row_format<fp8_per_token>);

MQALOGITS_NAMESPACE_END
