// The scale codec of a block-scaled format: how a row's block scales are stored, read and chosen.
// A format (block_scaled.hpp) is a data codec, a scale codec and a head dim; everything about the
// scales (their block size, the bytes of a row's scale field, their values, how the quantizers
// pick them) is the scale codec's, so a new one is a new struct, and the views, the quantizers
// and the backends read it through this interface:
//
//   using codec = ...;              what one scale is: float_ue8m0, float_e4m3, float (an fp32)
//   bytes_per_scale                 bytes of one scale in the field
//   block_size(head_dim)            elements per scale in a row of head_dim elements
//   field_bytes(blocks)             bytes of the scale field of a row of `blocks` scales
//   value(field, b)                 scale b of a row's field, in fp32
//   encode(amax, max_code)          the scale of a block whose largest magnitude is amax, for
//                                   codes up to max_code: an object with store(field, b), which
//                                   writes it, and apply(x), x mapped onto the code range
//   power_of_two                    every scale is a power of two (scales combine exactly)
//   ue8m0_bytes                     every scale is one UE8M0 byte, 2^(byte - 127): kernels may
//                                   read the bytes as exponents (OCP MX)
//   optional                        rows may come without scales (a null field reads as 1)
//   takes_scaling_rule              encode also takes a per_token_scaling (fp32 row scales)
//   accepts_storage<T>              the scale pointer types a view accepts
//
// The library's codecs: ue8m0_block_scales (MX, ue8m0.hpp), fp32_row_scale (fp32_scale.hpp).
#pragma once

#include <concepts>
#include <cstdint>

#include "../config.hpp"

MQALOGITS_NAMESPACE_BEGIN

// The scale field of `blocks` scales of `bytes_per_scale` bytes each, rounded up to whole 4-byte
// words, as upstream holds it (one int32 per row for the MX formats, whatever their head dim, and
// for one fp32 scale). Codecs use it for their field_bytes unless their layout says otherwise.
constexpr int word_scale_field(int blocks, int bytes_per_scale) {
  return (blocks * bytes_per_scale + 3) / 4 * 4;
}

// What the views and kernels read of a scale codec (encode: encodable_scale_codec below).
template <class S>
concept scale_codec = requires(const std::uint8_t* field) {
  typename S::codec;
  { S::bytes_per_scale } -> std::convertible_to<int>;
  { S::block_size(128) } -> std::convertible_to<int>;
  { S::field_bytes(4) } -> std::convertible_to<int>;
  { S::value(field, 0) } -> std::convertible_to<float>;
  { S::power_of_two } -> std::convertible_to<bool>;
  { S::ue8m0_bytes } -> std::convertible_to<bool>;
  { S::optional } -> std::convertible_to<bool>;
  { S::takes_scaling_rule } -> std::convertible_to<bool>;
};

// A scale codec the quantizers can write: encode(amax, max_code) gives an object that stores the
// scale and maps the block's elements onto the code range.
template <class S>
concept encodable_scale_codec = scale_codec<S> &&
    requires(float amax, float x, std::uint8_t* field) {
  S::encode(amax, amax).store(field, 0);
  { S::encode(amax, amax).apply(x) } -> std::convertible_to<float>;
};

MQALOGITS_NAMESPACE_END
