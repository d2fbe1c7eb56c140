// The format axis: a row of HeadDim elements stored as codes of one data codec, with one scale
// per block of ScaleBlock elements from one scale codec (scale_codec.hpp), which also sets the
// block size and the bytes of the row's scale field. Every format the kernels read is a point on
// this template (mx.hpp, fp8_per_token.hpp); views, quantizers, decoders and backends ask it for
// what they need (sizes, capabilities), never which format it is.
//
// The head dim is part of the format type, so every kernel is compiled for its row length
// (DeepGEMM instantiates its kernels per head dim the same way). A named format (mxfp8, mxfp4,
// fp8_per_token) has head dim 128; Format::with_head_dim<D> is the same format with rows of D.
// Views carry the head dim of their rows at run time, and the entry points pick the kernel of
// that D.
#pragma once

#include <concepts>
#include <cstdint>

#include "../config.hpp"
#include "scale_codec.hpp"

MQALOGITS_NAMESPACE_BEGIN

// Head dims upstream supports for a data codec of `bits` per code (32 only with one code per
// byte).
constexpr bool head_dim_supported(int d, int bits) {
  return d == 128 || d == 64 || (d == 32 && bits == 8);
}

template <class Data, class Scale, int ScaleBlock, int HeadDim = default_head_dim>
struct block_scaled {
  using data_type = Data;    // the element codec: float_e4m3, float_e2m1
  using scale_type = Scale;  // the scale codec: ue8m0_block_scales, fp32_row_scale
  static_assert(scale_codec<Scale>, "mqalogits: Scale is not a scale codec (see scale_codec.hpp)");

  static constexpr bool supports_head_dim(int d) { return head_dim_supported(d, Data::bits); }
  static_assert(head_dim_supported(HeadDim, Data::bits),
                "mqalogits: head dims are 128, 64 and 32 (32 for the FP8 formats only)");
  static_assert(HeadDim % ScaleBlock == 0, "mqalogits: a scale block must divide the head dim");
  static_assert(ScaleBlock == Scale::block_size(HeadDim),
                "mqalogits: the scale block must be the scale codec's block_size");

  static constexpr int head_dim = HeadDim;             // elements per row
  static constexpr int scale_block = ScaleBlock;       // elements per scale
  static constexpr int blocks = HeadDim / ScaleBlock;  // scales per row
  static constexpr int data_bytes = HeadDim * Data::bits / 8;
  // Data bytes of a row of d elements (a view's run-time head dim).
  static constexpr int data_bytes_for(int d) { return d * Data::bits / 8; }
  // Bytes of a row's scale field, the scale codec's for this many blocks (4 for the MX formats
  // and fp8_per_token at every head dim, as upstream holds it: one int32 per row).
  static constexpr int scale_bytes = Scale::field_bytes(blocks);

  // Capabilities the backends choose their paths by.
  // Twice every code is an integer that fits int8: block dot products are exact in int32.
  static constexpr bool doubled_codes_int8 = Data::doubled_is_int8;
  // Scales are powers of two: they combine as exponents, exactly.
  static constexpr bool power_of_two_scales = Scale::power_of_two;
  // Scales are UE8M0 bytes (2^(byte - 127)): kernels may read them as integer exponents.
  static constexpr bool ue8m0_scales = Scale::ue8m0_bytes;
  // Rows may come without scales (read as 1).
  static constexpr bool scales_optional = Scale::optional;
  // The scale pointer types a view of this format accepts.
  template <class Storage>
  static constexpr bool accepts_scale_storage = Scale::template accepts_storage<Storage>;
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
  { F::head_dim } -> std::convertible_to<int>;
  { F::name } -> std::convertible_to<const char*>;
  F::decode_row(p, p, out);
};

// Formats that name their other head-dim bindings (mxfp8, mxfp4, fp8_per_token); a format
// written on block_scaled without with_head_dim has its own head dim only.
template <class F>
concept head_dim_rebindable = requires {
  typename F::template with_head_dim<F::head_dim>;
};

// The head dim this build compiles kernels for (MQALOGITS_ONLY_HEAD_DIM), 0 for every one.
inline constexpr int only_head_dim = MQALOGITS_ONLY_HEAD_DIM;
constexpr bool head_dim_compiled(int d) {
  return only_head_dim == 0 || d == only_head_dim;
}

// Whether rows of d elements are a layout of Format (whatever kernels this build compiles): what
// size helpers such as page_bytes accept.
template <class F>
constexpr bool is_head_dim_of(int d) {
  if constexpr (head_dim_rebindable<F>)
    return F::supports_head_dim(d);
  else
    return d == F::head_dim;
}

// Whether rows of d elements can be read as Format: a head dim it has kernels for in this build.
template <class F>
constexpr bool has_head_dim(int d) {
  return is_head_dim_of<F>(d) && (!head_dim_rebindable<F> || head_dim_compiled(d));
}

// The head dims has_head_dim accepts, for error messages: m << head_dims_text<F>().
template <class F>
struct head_dims_text_of {
  template <class Message>
  void write_to(Message& m) const {
    if constexpr (!head_dim_rebindable<F>)
      m << F::head_dim;
    else if constexpr (only_head_dim != 0) {
      if (F::supports_head_dim(only_head_dim))
        m << only_head_dim << " in this build (MQALOGITS_ONLY_HEAD_DIM)";
      else
        m << "none in this build (MQALOGITS_ONLY_HEAD_DIM = " << only_head_dim << ")";
    } else
      m << (F::supports_head_dim(32) ? "128, 64 or 32" : "128 or 64");
  }
};
template <class F>
constexpr head_dims_text_of<F> head_dims_text() {
  return {};
}

// Calls fn.template operator()<Format::with_head_dim<d>>() for the head dim d of a call's rows
// (checked has_head_dim before): one compiled kernel per head dim, chosen once per call.
template <class Format, class Fn>
decltype(auto) with_head_dim_of(int d, Fn&& fn) {
  if constexpr (!head_dim_rebindable<Format>) {
    return fn.template operator()<Format>();
  } else if constexpr (only_head_dim != 0) {
    // One kernel (a format without that head dim is refused by has_head_dim before: its
    // default binding stands in, never called).
    (void)d;
    if constexpr (Format::supports_head_dim(only_head_dim))
      return fn.template operator()<typename Format::template with_head_dim<only_head_dim>>();
    else
      return fn.template operator()<Format>();
  } else {
    // Views and caches hold one scale stride whatever their run-time head dim: the bindings of a
    // format share its scale field size.
    static_assert(Format::template with_head_dim<64>::scale_bytes == Format::scale_bytes &&
                      Format::template with_head_dim<128>::scale_bytes == Format::scale_bytes,
                  "mqalogits: every head-dim binding of a format has the same scale field size");
    if constexpr (Format::supports_head_dim(32))
      if (d == 32) return fn.template operator()<typename Format::template with_head_dim<32>>();
    if (d == 64) return fn.template operator()<typename Format::template with_head_dim<64>>();
    return fn.template operator()<typename Format::template with_head_dim<128>>();
  }
}

// Formats with one scale for the whole row (fp8_per_token, or an MX row of 32 elements): the
// scale commutes with the row's dot product.
template <class F>
inline constexpr bool is_row_scaled_v = F::blocks == 1;

// True for formats whose rows may come without scales (a null scale pointer reads as scale 1),
// e.g. fp8_per_token's Q, whose scale upstream folds into the weights.
template <class F>
inline constexpr bool scales_optional_v = F::scales_optional;

MQALOGITS_NAMESPACE_END
