// The scale codec of upstream's FP8 per-token format: one little-endian float32 per row, for all
// of its elements. Q rows may come without it (engines fold Q's scale into the weights): a null
// scale pointer reads as 1.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "../config.hpp"
#include "scale_codec.hpp"

MQALOGITS_NAMESPACE_BEGIN

// How the fp8_per_token quantizer picks a row's scale from its largest magnitude amax.
// The default: amax / 448, or 1 when amax is 0 or not finite (the codes are then 0 or
// saturated). vLLM's indexer K cache write (indexer_k_quant_and_cache) differs; use
// vllm_indexer_k_scaling() to write its bytes exactly.
struct per_token_scaling {
  // > 0: amax is raised to at least this before the division, and an infinite amax gives an
  // infinite scale, as vLLM computes it (1e-4 there). 0: the default rule.
  float amax_floor = 0.0f;
  // Round the scale up to a power of two (UE8M0) the way vLLM does with scale_fmt "ue8m0":
  // exp2f(ceilf(log2f(scale))) in fp32, so a scale within a few ulps above a power of two
  // rounds down to it (log2f rounds to the integer), as on the GPU.
  bool power_of_two = false;
};

// vLLM's indexer K cache write: amax clamped at 1e-4, divided by 448, optionally UE8M0.
constexpr per_token_scaling vllm_indexer_k_scaling(bool ue8m0 = false) {
  return {1e-4f, ue8m0};
}

struct fp32_row_scale {
  using codec = float;                         // one fp32 per scale
  static constexpr int bytes_per_scale = 4;    // little-endian
  static constexpr bool power_of_two = false;  // any fp32: applied as a multiply
  static constexpr bool ue8m0_bytes = false;
  static constexpr bool optional = true;
  static constexpr bool takes_scaling_rule = true;
  // One scale for the whole row.
  static constexpr int block_size(int row_elements) { return row_elements; }
  static constexpr int field_bytes(int blocks) { return word_scale_field(blocks, bytes_per_scale); }
  // A float array, or the raw bytes of a cache.
  template <class Storage>
  static constexpr bool accepts_storage =
      std::is_same_v<Storage, float> || std::is_same_v<Storage, std::uint8_t>;
  // memcpy: the 4 bytes may sit at any alignment inside a cache page.
  static float value(const std::uint8_t* scales, int block) {
    float s = 1.0f;
    if (scales) std::memcpy(&s, scales + block * bytes_per_scale, sizeof s);
    return s;
  }

  // A chosen scale s: codes are x / s.
  struct encoding {
    float scale;
    float apply(float x) const { return x / scale; }
    void store(std::uint8_t* field, int block) const {
      std::memcpy(field + block * bytes_per_scale, &scale, sizeof scale);
    }
  };
  // amax / max_code by `scaling`'s rule (per_token_scaling).
  static encoding encode(float amax, float max_code, const per_token_scaling& scaling = {}) {
    float s = 1.0f;
    if (scaling.amax_floor > 0)
      s = (amax > scaling.amax_floor ? amax : scaling.amax_floor) / max_code;
    else if (amax > 0 && amax <= std::numeric_limits<float>::max())
      s = amax / max_code;
    if (scaling.power_of_two) s = std::exp2(std::ceil(std::log2(s)));
    return {s};
  }
};

static_assert(scale_codec<fp32_row_scale>);

MQALOGITS_NAMESPACE_END
