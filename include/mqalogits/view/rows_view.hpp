// Non-owning view over token-major quantised rows and their scale bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../config.hpp"
#include "../format/block_scaled.hpp"

MQALOGITS_NAMESPACE_BEGIN

// rows x [data_bytes] quantised data and rows x [scale_bytes] scale bytes, each with its own byte
// stride. MX scales may be held as uint8[4], int16[2] (DeepGEMM-Ascend's packed Q scales, low
// byte = even block) or int32[1] (upstream, byte k = block k): in little-endian memory these are
// the same four bytes in block order, so the view keeps a byte pointer and a byte stride (the
// pointer types a format takes are its scale codec's accepts_storage).
//
// Rows have `head_dim` elements: Format::head_dim (128 for mxfp8, mxfp4, fp8_per_token) unless a
// head_dim_t is given, as upstream takes it from the tensors' last dimension:
//   rows_view<mxfp8> q(q_bytes, q_scales, rows, head_dim_t{64});  // 64 codes + 4 scale bytes
// The default data stride follows it (packed rows of data_bytes()); the scale field stays
// Format::scale_bytes (4 for the shipped formats at every head dim; the scale codec sets it).
// The entry points check that Q and K agree and run the kernel compiled for that D.
template <class Format>
struct rows_view {
  using format = Format;

  const std::uint8_t* data = nullptr;    // [rows, data_stride] bytes
  const std::uint8_t* scales = nullptr;  // [rows, scale_stride] bytes
  std::int64_t rows = 0;
  std::int64_t data_stride = Format::data_bytes;    // bytes between rows, >= data_bytes()
  std::int64_t scale_stride = Format::scale_bytes;  // bytes between rows, >= scale_bytes
  int head_dim = Format::head_dim;                  // elements per row: 128, 64 or 32

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
  // Rows of `dim.value` elements; a data stride of 0 means packed (data_bytes()).
  template <class Scale>
  requires(Format::template accepts_scale_storage<Scale>)
      rows_view(const void* data_bytes, const Scale* scale_storage, std::int64_t num_rows,
                head_dim_t dim, std::int64_t data_stride_bytes = 0,
                std::int64_t scale_stride_bytes = Format::scale_bytes)
      : data(static_cast<const std::uint8_t*>(data_bytes)),
        scales(reinterpret_cast<const std::uint8_t*>(scale_storage)),
        rows(num_rows),
        data_stride(data_stride_bytes ? data_stride_bytes : Format::data_bytes_for(dim.value)),
        scale_stride(scale_stride_bytes),
        head_dim(dim.value) {}

  // Rows without scales: only for formats with scales_optional_v (fp8_per_token's Q).
  rows_view(const void* data_bytes, std::nullptr_t, std::int64_t num_rows,
            std::int64_t data_stride_bytes = Format::data_bytes)
      : data(static_cast<const std::uint8_t*>(data_bytes)),
        rows(num_rows),
        data_stride(data_stride_bytes) {}
  rows_view(const void* data_bytes, std::nullptr_t, std::int64_t num_rows, head_dim_t dim,
            std::int64_t data_stride_bytes = 0)
      : data(static_cast<const std::uint8_t*>(data_bytes)),
        rows(num_rows),
        data_stride(data_stride_bytes ? data_stride_bytes : Format::data_bytes_for(dim.value)),
        head_dim(dim.value) {}

  // Data bytes of one row at this view's head dim.
  std::int64_t data_bytes() const { return Format::data_bytes_for(head_dim); }
  const std::uint8_t* row(std::int64_t r) const { return data + r * data_stride; }
  // Null when the view has no scales (allowed only for formats with scales_optional_v).
  const std::uint8_t* scale(std::int64_t r) const {
    return scales ? scales + r * scale_stride : nullptr;
  }
};

namespace detail {
// The same rows seen as another head-dim binding of their format (the kernel's compiled one).
// Member by member, as rebind_cache copies a cache's: the constructors would turn a zero stride
// (which the checks reject) into the packed one.
template <class To, class From>
rows_view<To> rebind_rows(const rows_view<From>& v) {
  rows_view<To> r;
  r.data = v.data;
  r.scales = v.scales;
  r.rows = v.rows;
  r.data_stride = v.data_stride;
  r.scale_stride = v.scale_stride;
  r.head_dim = v.head_dim;
  return r;
}
}  // namespace detail

MQALOGITS_NAMESPACE_END
