// The format axis: a row of head_dim elements stored as codes of one data codec, with one scale
// per block of ScaleBlock elements from one scale codec. Every format the kernels read is a point
// on this template (mx.hpp, fp8_per_token.hpp); views, quantizers, decoders and backends ask it
// for what they need (sizes, capabilities), never which format it is.
#pragma once

#include <concepts>
#include <cstdint>

#include "../config.hpp"

MQALOGITS_NAMESPACE_BEGIN

template <class Data, class Scale, int ScaleBlock>
struct block_scaled {
  using data_type = Data;    // the element codec: float_e4m3, float_e2m1
  using scale_type = Scale;  // the scale codec: ue8m0_block_scales, fp32_row_scale
  static_assert(head_dim % ScaleBlock == 0, "mqalogits: a scale block must divide the head dim");
  static_assert(head_dim * Data::bits % 8 == 0, "mqalogits: a row must fill whole bytes");

  static constexpr int scale_block = ScaleBlock;        // elements per scale
  static constexpr int blocks = head_dim / ScaleBlock;  // scales per row
  static constexpr int data_bytes = head_dim * Data::bits / 8;
  // The scale field is 4 bytes for every format (upstream holds it as one int32 per row).
  static constexpr int scale_bytes = 4;
  static_assert(blocks <= scale_bytes, "mqalogits: a row's scales must fit its 4-byte field");

  // Capabilities the backends choose their paths by.
  // Twice every code is an integer that fits int8: block dot products are exact in int32.
  static constexpr bool doubled_codes_int8 = Data::doubled_is_int8;
  // Scales are powers of two: they combine as exponents, exactly.
  static constexpr bool power_of_two_scales = Scale::power_of_two;
  // Rows may come without scales (read as 1).
  static constexpr bool scales_optional = Scale::optional;
  // The scale pointer types a view of this format accepts.
  template <class Storage>
  static constexpr bool accepts_scale_storage = Scale::template accepts_storage<Storage>;
  // Head dims upstream supports for this data type (32 only with one code per byte).
  static constexpr bool supports_head_dim(int d) {
    return d == 128 || d == 64 || (d == 32 && Data::bits == 8);
  }

  static constexpr float element(const std::uint8_t* data, int i) { return Data::element(data, i); }
  static float block_scale(const std::uint8_t* scales, int b) { return Scale::value(scales, b); }

  // Dequantises one row: out[i] = code(i) x scale(i / ScaleBlock), one fp32 rounding (exact for
  // power-of-two scales).
  static void decode_row(const std::uint8_t* data, const std::uint8_t* scales, float* out) {
    for (int b = 0; b < blocks; ++b) {
      const float s = block_scale(scales, b);
      for (int i = b * ScaleBlock; i < (b + 1) * ScaleBlock; ++i) out[i] = element(data, i) * s;
    }
  }
};

// What a kernel needs of a format.
template <class F>
concept row_format = requires(const std::uint8_t* p, float* out) {
  typename F::data_type;
  typename F::scale_type;
  { F::data_bytes } -> std::convertible_to<int>;
  { F::scale_bytes } -> std::convertible_to<int>;
  { F::blocks } -> std::convertible_to<int>;
  { F::name } -> std::convertible_to<const char*>;
  F::decode_row(p, p, out);
};

// True for formats whose rows may come without scales (a null scale pointer reads as scale 1),
// e.g. fp8_per_token's Q, whose scale upstream folds into the weights.
template <class F>
inline constexpr bool scales_optional_v = F::scales_optional;

MQALOGITS_NAMESPACE_END
