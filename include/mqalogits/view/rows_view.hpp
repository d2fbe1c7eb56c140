// Non-owning view over token-major quantised rows and their scale bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../config.hpp"
#include "../format/block_scaled.hpp"

MQALOGITS_NAMESPACE_BEGIN

// rows x [data_bytes] quantised data and rows x [scale_bytes] scale bytes, each with its own byte
// stride. Scales may be held as uint8[4], int16[2] (DeepGEMM-Ascend's packed Q scales, low byte = even
// block) or int32[1] (upstream, byte k = block k): in little-endian memory these are the same
// four bytes in block order, so the view keeps a byte pointer and a byte stride.
template <class Format>
struct rows_view {
  using format = Format;

  const std::uint8_t* data = nullptr;    // [rows, data_stride] bytes
  const std::uint8_t* scales = nullptr;  // [rows, scale_stride] bytes
  std::int64_t rows = 0;
  std::int64_t data_stride = Format::data_bytes;    // bytes between rows, >= data_bytes
  std::int64_t scale_stride = Format::scale_bytes;  // bytes between rows, >= scale_bytes

  constexpr rows_view() = default;
  // Scale storage of a type the format allows (MX: uint8 / int16 / int32 words of UE8M0 bytes;
  // FP8 per-token: float, or the raw bytes): any other pointer type is a compile error.
  template <class Scale>
  requires(Format::template accepts_scale_storage<Scale>)
      rows_view(const void* data_bytes, const Scale* scale_storage, std::int64_t num_rows,
                std::int64_t data_stride_bytes = Format::data_bytes,
                std::int64_t scale_stride_bytes = Format::scale_bytes)
      : data(static_cast<const std::uint8_t*>(data_bytes)),
        scales(reinterpret_cast<const std::uint8_t*>(scale_storage)),
        rows(num_rows),
        data_stride(data_stride_bytes),
        scale_stride(scale_stride_bytes) {}

  // Rows without scales: only for formats with scales_optional_v (fp8_per_token's Q).
  rows_view(const void* data_bytes, std::nullptr_t, std::int64_t num_rows,
            std::int64_t data_stride_bytes = Format::data_bytes)
      : data(static_cast<const std::uint8_t*>(data_bytes)),
        rows(num_rows),
        data_stride(data_stride_bytes) {}

  const std::uint8_t* row(std::int64_t r) const { return data + r * data_stride; }
  // Null when the view has no scales (allowed only for formats with scales_optional_v).
  const std::uint8_t* scale(std::int64_t r) const {
    return scales ? scales + r * scale_stride : nullptr;
  }
};

MQALOGITS_NAMESPACE_END
