// The OCP MX formats: 32-element blocks with one UE8M0 scale each (CUTLASS's mx_float8_t /
// mx_float4_t). Row: the codes, then 4 scale bytes in block order.
#pragma once

#include "../config.hpp"
#include "block_scaled.hpp"
#include "e2m1.hpp"
#include "e4m3.hpp"
#include "ue8m0.hpp"

MQALOGITS_NAMESPACE_BEGIN

// MXFP8: 128 e4m3fn bytes + 4 UE8M0 bytes per row.
struct mxfp8 : block_scaled<float_e4m3, ue8m0_block_scales, 32> {
  static constexpr const char* name = "MXFP8";
};

// MXFP4: 64 bytes of packed e2m1 pairs (element 2i in the low nibble) + 4 UE8M0 bytes per row.
struct mxfp4 : block_scaled<float_e2m1, ue8m0_block_scales, 32> {
  static constexpr const char* name = "MXFP4";
};

static_assert(row_format<mxfp8> && row_format<mxfp4>);

MQALOGITS_NAMESPACE_END
