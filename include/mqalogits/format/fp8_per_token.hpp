// FP8 e4m3fn with one fp32 scale per token: the format upstream's SM90 path and the vLLM /
// sglang indexer caches hold (128 data bytes + 4 scale bytes = 132 bytes per KV token).
//
// K: value = code x scale, the scale one little-endian float32 per row. Q: no scales at all
// (engines fold Q's per-token scale into the weights), so a rows_view of this format may carry a
// null scale pointer, read as scale 1.
#pragma once

#include <cstdint>
#include <cstring>

#include "../config.hpp"
#include "e4m3.hpp"
#include "mx.hpp"

MQALOGITS_NAMESPACE_BEGIN

struct fp8_per_token {
  using data_type = float_e4m3;
  using scale_type = float;  // one IEEE float32 per row, little-endian in memory
  static constexpr const char* name = "FP8 per-token";
  static constexpr int data_bytes = head_dim;
  static constexpr int scale_bytes = 4;
  // Rows may come without scales (Q): validation accepts a null scale pointer for this format.
  static constexpr bool scales_optional = true;

  // The row's scale; 1 when `scales` is null. memcpy: the bytes may sit at any alignment.
  static float scale(const std::uint8_t* scales) {
    float s = 1.0f;
    if (scales) std::memcpy(&s, scales, sizeof s);
    return s;
  }
  static constexpr float element(const std::uint8_t* data, int i) { return e4m3_values[data[i]]; }
  // out[i] = code(i) x scale, one fp32 rounding (exact when the scale has <= 20 significant bits).
  static void decode_row(const std::uint8_t* data, const std::uint8_t* scales, float* out) {
    const float s = scale(scales);
    for (int i = 0; i < head_dim; ++i) out[i] = element(data, i) * s;
  }
};

static_assert(row_format<fp8_per_token>);
static_assert(sizeof(float) == fp8_per_token::scale_bytes);

MQALOGITS_NAMESPACE_END
