// Element types of on-chip tiles: their widths, names, and how an engine stores a value into
// each (every type used here is exact in fp32; bf16 rounds to nearest even).
#pragma once

#include <cstdint>

#include "../../config.hpp"
#include "../../format/bf16.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// Element types of on-chip tiles. u8: raw bytes (codes as stored, UE8M0 scales); fp8 / fp4:
// e4m3 / e2m1 code values; fp8x4 / fp4x4: four codes packed in one element (32 / 16 bits), the
// operand type of nc_matmul_mx.
enum class dtype : std::uint8_t { u8, fp8, fp4, bf16, fp32, fp8x4, fp4x4 };

constexpr int dtype_bits(dtype t) {
  return t == dtype::fp4                         ? 4
         : t == dtype::bf16 || t == dtype::fp4x4 ? 16
         : t == dtype::fp32 || t == dtype::fp8x4 ? 32
                                                 : 8;
}
constexpr int dtype_lanes(dtype t) {
  return t == dtype::fp8x4 || t == dtype::fp4x4 ? 4 : 1;
}
// Whether an instruction's result replaces its destination or adds to it (PSUM accumulation,
// scale_add's running sum).
enum class write_mode { overwrite, accumulate };
// Whether a DMA row is its own descriptor or part of a block row() counts once.
enum class dma_row { own_descriptor, part_of_block };

// 16-bit float data (bf16; e4m3 values, whose engine type is fp8): the types VectorE /
// ScalarE process at their 16-bit width (traits: vector_16bit_rate, scalar_16bit_rate). Raw
// bytes, integers and packed words go at the width of other types.
constexpr bool is_narrow(dtype t) {
  return t == dtype::bf16 || t == dtype::fp8;
}
constexpr const char* dtype_name(dtype t) {
  return t == dtype::u8      ? "u8"
         : t == dtype::fp8   ? "fp8"
         : t == dtype::fp4   ? "fp4"
         : t == dtype::bf16  ? "bf16"
         : t == dtype::fp8x4 ? "fp8x4"
         : t == dtype::fp4x4 ? "fp4x4"
                             : "fp32";
}
// Bytes one partition of a tile with `free` elements occupies.
constexpr std::int64_t partition_bytes(dtype t, std::int64_t free) {
  return (free * dtype_bits(t) + 7) / 8;
}
// The value an engine stores into a tile of type t: bf16 rounds to nearest even; the other
// types receive values that are already exact in them.
inline float store_as(dtype t, float v) {
  return t == dtype::bf16 ? bf16::from_float(v).to_float() : v;
}

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
