// The OCP MX formats: 32-element blocks with one UE8M0 scale each (CUTLASS's mx_float8_t /
// mx_float4_t). Row: the codes, then 4 scale bytes in block order.
#pragma once

#include <type_traits>

#include "../config.hpp"
#include "block_scaled.hpp"
#include "e2m1.hpp"
#include "e4m3.hpp"
#include "ue8m0.hpp"

MQALOGITS_NAMESPACE_BEGIN

// MXFP8: HeadDim e4m3fn bytes + 4 UE8M0 bytes per row (HeadDim / 32 of them used).
template <int HeadDim = default_head_dim>
struct mxfp8_format : block_scaled<float_e4m3, ue8m0_block_scales, 32, HeadDim> {
  static constexpr const char* name = "MXFP8";
  template <int D>
  using with_head_dim = mxfp8_format<D>;
};

// MXFP4: HeadDim / 2 bytes of packed e2m1 pairs (element 2i in the low nibble) + 4 UE8M0 bytes
// per row. Head dim 64 or 128.
template <int HeadDim = default_head_dim>
struct mxfp4_format : block_scaled<float_e2m1, ue8m0_block_scales, 32, HeadDim> {
  static constexpr const char* name = "MXFP4";
  template <int D>
  using with_head_dim = mxfp4_format<D>;
};

// OCP MX formats: one UE8M0 byte per 32 elements, the layout MX hardware reads (e.g. a
// NeuronCore's nc_matmul_mx), asked of the format's scale codec and block.
template <class F>
inline constexpr bool is_mx_format_v = F::ue8m0_scales&& F::scale_block == mx_scale_block;

// The names users write: rows of 128 (128 + 4 and 64 + 4 bytes).
using mxfp8 = mxfp8_format<>;
using mxfp4 = mxfp4_format<>;

static_assert(row_format<mxfp8> && row_format<mxfp4>);
static_assert(std::is_same_v<mxfp8::with_head_dim<128>, mxfp8>);
static_assert(is_mx_format_v<mxfp8> && is_mx_format_v<mxfp4>);

MQALOGITS_NAMESPACE_END
