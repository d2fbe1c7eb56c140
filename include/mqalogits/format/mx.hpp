// Format bundles: a data type paired with its scale type and the byte sizes of one row, so a
// kernel can never be handed a mismatched pair (CUTLASS's mx_float8_t idea).
#pragma once

#include <concepts>
#include <cstdint>

#include "../config.hpp"
#include "e2m1.hpp"
#include "e4m3.hpp"
#include "ue8m0.hpp"

MQALOGITS_NAMESPACE_BEGIN

// MXFP8: 128 e4m3fn bytes + 4 UE8M0 bytes (one per 32 elements, in block order) per row.
struct mxfp8 {
  using data_type = float_e4m3;
  using scale_type = float_ue8m0;
  static constexpr const char* name = "MXFP8";
  static constexpr int data_bytes = head_dim;
  static constexpr int scale_bytes = head_dim / scale_block;

  static constexpr float element(const std::uint8_t* data, int i) { return e4m3_values[data[i]]; }
  // Dequantises one row: out[i] = code(i) * 2^(scale[i / 32] - 127), exact in fp32.
  static void decode_row(const std::uint8_t* data, const std::uint8_t* scales, float* out) {
    for (int b = 0; b < head_dim / scale_block; ++b) {
      const float s = ue8m0_values[scales[b]];
      for (int i = b * scale_block; i < (b + 1) * scale_block; ++i) out[i] = element(data, i) * s;
    }
  }
};

// MXFP4: 64 bytes of packed e2m1 pairs (element 2i in the low nibble) + 4 UE8M0 bytes per row.
struct mxfp4 {
  using data_type = float_e2m1;
  using scale_type = float_ue8m0;
  static constexpr const char* name = "MXFP4";
  static constexpr int data_bytes = head_dim / 2;
  static constexpr int scale_bytes = head_dim / scale_block;

  static constexpr float element(const std::uint8_t* data, int i) {
    return e2m1_values[float_e2m1::nibble(data, i)];
  }
  static void decode_row(const std::uint8_t* data, const std::uint8_t* scales, float* out) {
    for (int b = 0; b < head_dim / scale_block; ++b) {
      const float s = ue8m0_values[scales[b]];
      for (int i = b * scale_block; i < (b + 1) * scale_block; ++i) out[i] = element(data, i) * s;
    }
  }
};

// What a kernel needs of a format bundle.
template <class F>
concept row_format = requires(const std::uint8_t* p, float* out) {
  typename F::data_type;
  typename F::scale_type;
  { F::data_bytes } -> std::convertible_to<int>;
  { F::scale_bytes } -> std::convertible_to<int>;
  F::decode_row(p, p, out);
};

static_assert(row_format<mxfp8> && row_format<mxfp4>);

// True for formats whose rows may come without scales (a null scale pointer reads as scale 1),
// e.g. fp8_per_token's Q, whose scale upstream folds into the weights.
template <class F>
inline constexpr bool scales_optional_v = requires { requires F::scales_optional; };

MQALOGITS_NAMESPACE_END
