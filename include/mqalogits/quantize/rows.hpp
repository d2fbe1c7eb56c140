// Row quantizers: fp32 / bf16 rows of 128, 64 or 32 elements -> MXFP8, MXFP4 (one UE8M0 exponent
// per 32 elements, amax / max code rounded up to a power of two), FP8 with one fp32 scale per
// row (scale = amax / 448), or any format whose scale codec can encode (Scale::encode). What an
// engine runs on its activations and keys to feed the kernels.
//
// The head dim of the rows is the source matrix's column count (quantize_rows, quantize_rows_into
// and store_into_pages take any head dim the format supports, whichever head-dim binding of the
// format is named); quantize_row and the flat-span overloads, which have no column count, use
// Format::head_dim (e.g. quantize_row<mxfp8::with_head_dim<64>>).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../check/overlap.hpp"
#include "../check/shapes.hpp"
#include "../config.hpp"
#include "../error.hpp"
#include "../format/bf16.hpp"
#include "../format/fp8_per_token.hpp"
#include "../format/mx.hpp"
#include "../std_abi.hpp"
#include "../view/matrix_view.hpp"
#include "../view/rows_view.hpp"
#include "encode.hpp"
#include "hadamard.hpp"

MQALOGITS_NAMESPACE_BEGIN

// Element types the quantizers read.
template <class T>
concept quantize_input = std::is_same_v<T, float> || std::is_same_v<T, bf16>;

namespace detail {

template <class T>
float absmax(const T* x, int begin, int end) {
  float amax = 0.0f;
  for (int i = begin; i < end; ++i) {
    const float a = to_float(x[i]) < 0 ? -to_float(x[i]) : to_float(x[i]);
    if (a > amax) amax = a;  // NaN never compares greater: it cannot set the scale
  }
  return amax;
}

}  // namespace detail

// The per-token scale fp8_per_token uses for a row whose largest magnitude is amax
// (per_token_scaling, in format/fp32_scale.hpp, says how).
inline float fp8_per_token_scale(float amax, const per_token_scaling& scaling = {}) {
  return fp32_row_scale::encode(amax, float_e4m3::max_finite, scaling).scale;
}

namespace detail {
// A scale rule applies to scale codecs that take one (fp8_per_token's fp32 row scale); the others
// (the MX formats' UE8M0 exponents) choose their scales by their own rule.
template <class Format>
void check_scaling(const char* where, const per_token_scaling& scaling) {
  char floor[32];
  std::snprintf(floor, sizeof floor, "%g", static_cast<double>(scaling.amax_floor));
  require(scaling.amax_floor >= 0 && scaling.amax_floor <= std::numeric_limits<float>::max(), where,
          [&](auto& m) {
            m << "per_token_scaling amax_floor = " << floor << " must be finite and >= 0";
          });
  if constexpr (!Format::scale_type::takes_scaling_rule)
    require(scaling.amax_floor == 0 && !scaling.power_of_two, where, [&](auto& m) {
      m << "per_token_scaling (amax_floor " << floor << ", power_of_two "
        << (scaling.power_of_two ? "true" : "false") << ") applies to fp8_per_token only, not "
        << Format::name;
    });
}
}  // namespace detail

// Quantises one row x of Format::head_dim elements into Format's data bytes and scale bytes, block
// by block: the scale codec chooses each block's scale from its largest magnitude and the largest
// code (Scale::encode; MX formats: head_dim / 32 UE8M0 bytes in block order, the rest of the
// 4-byte field untouched; fp8_per_token: one little-endian float32), and each element becomes the
// code nearest to it on that scale. `scales` may be null for formats whose scales are optional
// (fp8_per_token's Q, whose scale is folded into the weights): nothing is written there. NaN
// elements become NaN codes (e4m3) or 0 (e2m1, which has none). `scaling` applies to scale codecs
// that take a rule (fp8_per_token; the others ignore it, and the checked entry points below
// reject one that is not the default).
template <class Format, quantize_input T>
void quantize_row(const T* x, std::uint8_t* data, std::uint8_t* scales,
                  const per_token_scaling& scaling = {}) {
  using codec = typename Format::data_type;
  using Scale = typename Format::scale_type;
  static_assert(
      encodable_scale_codec<Scale>,
      "mqalogits: the format's scale codec has no encode(amax, max_code) to quantize with");
  for (int b = 0; b < Format::blocks; ++b) {
    const int i0 = b * Format::scale_block, i1 = i0 + Format::scale_block;
    const float amax = detail::absmax(x, i0, i1);
    const auto enc = [&] {
      if constexpr (Scale::takes_scaling_rule)
        return Scale::encode(amax, codec::max_finite, scaling);
      else
        return Scale::encode(amax, codec::max_finite);
    }();
    if (scales) enc.store(scales, b);
    for (int i = i0; i < i1; ++i)
      codec::store(data, i, encode_code(codec{}, enc.apply(to_float(x[i]))));
  }
}

// Quantises x [rows, D] (D = 128, 64, or 32 for the FP8 formats) into caller-owned rows: row r's
// data (Format::data_bytes_for(D) bytes) at data + r * data_stride, its scale bytes at scales + r *
// scale_stride (scales may be null only for fp8_per_token). A data stride of 0 means packed.
// row_rotation::hadamard quantises each row's Walsh-Hadamard rotation (hadamard.hpp) instead,
// as DeepSeek-V4 does, in the same single pass over x.
namespace detail {
// The source rows of a quantizer: [rows >= 0, D] with D a head dim of Format, aligned, its byte
// extent within int64.
template <class Format, class T>
void check_quantize_source(const char* where, const matrix_view<T>& x) {
  require(x.cols <= 128 && has_head_dim<Format>(static_cast<int>(x.cols)) && x.rows >= 0 &&
              x.stride >= x.cols,
          where, [&](auto& m) {
            m << "x shape [" << x.rows << ", " << x.cols << "] (stride " << x.stride
              << ") must be [rows, head_dim] with head_dim " << head_dims_text<Format>() << " for "
              << Format::name;
          });
  check_matrix(where, "x", x, x.rows, x.cols);
}
}  // namespace detail

template <class Format, class T>
requires quantize_input<std::remove_const_t<T>>
void quantize_rows_into(matrix_view<T> x, std::uint8_t* data, std::uint8_t* scales,
                        std::int64_t data_stride = 0,
                        std::int64_t scale_stride = Format::scale_bytes,
                        const per_token_scaling& scaling = {},
                        row_rotation rotation = row_rotation::none) {
  constexpr const char* where = "quantize_rows";
  using detail::require;
  detail::check_quantize_source<Format>(where, x);
  detail::check_scaling<Format>(where, scaling);
  detail::check_rotation(where, rotation);
  const int d = static_cast<int>(x.cols);
  const std::int64_t data_bytes = Format::data_bytes_for(d);
  if (data_stride == 0) data_stride = data_bytes;
  require(x.rows == 0 || (x.data && data && (scales || scales_optional_v<Format>)), where,
          [&](auto& m) { m << "null buffer with " << x.rows << " rows"; });
  require(data_stride >= data_bytes && scale_stride >= Format::scale_bytes, where, [&](auto& m) {
    m << "strides " << data_stride << " / " << scale_stride << " < row sizes " << data_bytes
      << " / " << Format::scale_bytes;
  });
  require(detail::extent_fits(x.rows, data_stride, data_bytes) &&
              detail::extent_fits(x.rows, scale_stride, Format::scale_bytes),
          where, [&](auto& m) {
            m << "output byte extent overflows: " << x.rows << " rows x strides " << data_stride
              << " / " << scale_stride;
          });
  // The codes and scales are written while later rows of x are still read: no two of the three
  // may share a byte.
  if (x.rows > 0) {
    const detail::byte_range src = detail::range_of("x", x),
                             codes = detail::make_range("data", data,
                                                        (x.rows - 1) * data_stride + data_bytes),
                             exps = scales ? detail::make_range(
                                                 "scales", scales,
                                                 (x.rows - 1) * scale_stride + Format::scale_bytes)
                                           : detail::byte_range{"scales"};
    detail::check_outputs_disjoint(where, {codes, exps}, {src});
  }
  with_head_dim_of<Format>(d, [&]<class F>() {
    if (rotation == row_rotation::none) {
      for (std::int64_t r = 0; r < x.rows; ++r)
        quantize_row<F>(x.row(r), data + r * data_stride,
                        scales ? scales + r * scale_stride : nullptr, scaling);
      return;
    }
    float rotated[F::head_dim];
    for (std::int64_t r = 0; r < x.rows; ++r) {
      load_hadamard_rotated<F::head_dim>(x.row(r), rotated);
      quantize_row<F>(rotated, data + r * data_stride, scales ? scales + r * scale_stride : nullptr,
                      scaling);
    }
  });
}

// Quantised rows that own their bytes (packed: strides = row sizes). data and scales are
// std::vector<std::uint8_t, A> with A the library's allocator (detail::vector, std_abi.hpp: a
// std::vector<std::uint8_t> filled here would be a standard instantiation shared with units built
// for other instruction sets): data(), size(), indexing, iterators and ranges work as for a
// std::vector; a std::vector of them is a copy, std::vector<std::uint8_t>(q.data.begin(),
// q.data.end()).
template <class Format>
struct quantized_rows {
  std::int64_t rows = 0;
  int head_dim = Format::head_dim;      // elements per row
  detail::vector<std::uint8_t> data;    // [rows, data_bytes_for(head_dim)]
  detail::vector<std::uint8_t> scales;  // [rows, scale_bytes]

  rows_view<Format> view() const {
    return rows_view<Format>(data.data(), scales.data(), rows, head_dim_t{head_dim});
  }
  // fp8_per_token Q: the codes without scales (scale 1), once the scales are folded elsewhere.
  rows_view<Format> unscaled_view() const requires scales_optional_v<Format> {
    return rows_view<Format>(data.data(), nullptr, rows, head_dim_t{head_dim});
  }
  // fp8_per_token: row r's fp32 scale.
  float token_scale(std::int64_t r) const requires(Format::scale_type::takes_scaling_rule) {
    return Format::block_scale(scales.data() + r * Format::scale_bytes, 0);
  }
};

template <class Format, class T>
requires quantize_input<std::remove_const_t<T>> quantized_rows<Format> quantize_rows(
    matrix_view<T> x, const per_token_scaling& scaling = {},
    row_rotation rotation = row_rotation::none) {
  // Before sizing the result: a row count whose bytes overflow is an error, not a wrapped size.
  detail::check_quantize_source<Format>("quantize_rows", x);
  detail::check_scaling<Format>("quantize_rows", scaling);
  detail::check_rotation("quantize_rows", rotation);
  quantized_rows<Format> out;
  out.rows = x.rows;
  out.head_dim = static_cast<int>(x.cols);
  const std::int64_t data_bytes = Format::data_bytes_for(out.head_dim);
  out.data.resize(static_cast<std::size_t>(x.rows * data_bytes));
  out.scales.resize(static_cast<std::size_t>(x.rows * Format::scale_bytes));
  quantize_rows_into<Format>(x, out.data.data(), out.scales.data(), data_bytes, Format::scale_bytes,
                             scaling, rotation);
  return out;
}

// The same from a flat span of rows * Format::head_dim elements (row-major, packed).
template <class Format, class T, std::size_t Extent>
requires quantize_input<std::remove_const_t<T>> quantized_rows<Format> quantize_rows(
    std::span<T, Extent> x, const per_token_scaling& scaling = {},
    row_rotation rotation = row_rotation::none) {
  constexpr int d = Format::head_dim;
  detail::require(x.size() % d == 0, "quantize_rows", [&](auto& m) {
    m << "x has " << x.size() << " elements, not a multiple of " << d << " (the format's head dim)";
  });
  const auto rows = static_cast<std::int64_t>(x.size() / d);
  return quantize_rows<Format>(matrix_view<const std::remove_const_t<T>>(x.data(), rows, d),
                               scaling, rotation);
}

// quantize_rows_into from a flat span of rows * Format::head_dim elements (row-major, packed).
template <class Format, class T, std::size_t Extent>
requires quantize_input<std::remove_const_t<T>>
void quantize_rows_into(std::span<T, Extent> x, std::uint8_t* data, std::uint8_t* scales,
                        std::int64_t data_stride = Format::data_bytes,
                        std::int64_t scale_stride = Format::scale_bytes,
                        const per_token_scaling& scaling = {},
                        row_rotation rotation = row_rotation::none) {
  constexpr int d = Format::head_dim;
  detail::require(x.size() % d == 0, "quantize_rows", [&](auto& m) {
    m << "x has " << x.size() << " elements, not a multiple of " << d << " (the format's head dim)";
  });
  const auto rows = static_cast<std::int64_t>(x.size() / d);
  quantize_rows_into<Format>(matrix_view<const std::remove_const_t<T>>(x.data(), rows, d), data,
                             scales, data_stride, scale_stride, scaling, rotation);
}

// Folds fp8_per_token Q scales into the weights, as upstream's engines do: a scale s > 0
// commutes with relu, so relu(dot(s q, k)) w = relu(dot(q, k)) (s w). q_scales: [num_q * H], row
// (q, h) at q * H + h; weights: [num_q, H], updated in place.
inline void fold_q_scales(std::span<const float> q_scales, matrix_view<float> weights) {
  constexpr const char* where = "fold_q_scales";
  detail::require(weights.rows >= 0 && weights.cols >= 0, where, [&](auto& m) {
    m << "weights shape [" << weights.rows << ", " << weights.cols << "]";
  });
  detail::check_matrix(where, "weights", weights, weights.rows, weights.cols);
  std::int64_t entries = 0;
  detail::require(!__builtin_mul_overflow(weights.rows, weights.cols, &entries), where,
                  [&](auto& m) { m << weights.rows << " x " << weights.cols << " overflows"; });
  detail::require(q_scales.empty() || q_scales.data(), where,
                  [&](auto& m) { m << "q_scales is null with " << q_scales.size() << " entries"; });
  detail::check_aligned(where, "q_scales", q_scales.data(), alignof(float));
  // The weights are scaled in place while q_scales is read: they may not share a byte.
  const detail::byte_range s = detail::make_range(
                               "q_scales", q_scales.data(),
                               static_cast<std::int64_t>(q_scales.size() * sizeof(float))),
                           w = detail::range_of("weights", weights);
  detail::require(detail::disjoint(s, w), where, [&](auto& m) {
    m << "q_scales [" << static_cast<std::uint64_t>(s.begin) << ", "
      << static_cast<std::uint64_t>(s.end) << ") overlap the weights ["
      << static_cast<std::uint64_t>(w.begin) << ", " << static_cast<std::uint64_t>(w.end) << ")";
  });
  detail::require(static_cast<std::int64_t>(q_scales.size()) == entries, where, [&](auto& m) {
    m << "q_scales has " << q_scales.size() << " entries, weights are [" << weights.rows << ", "
      << weights.cols << "]";
  });
  for (std::int64_t q = 0; q < weights.rows; ++q)
    for (std::int64_t h = 0; h < weights.cols; ++h)
      weights(q, h) *= q_scales[static_cast<std::size_t>(q * weights.cols + h)];
}

// The fp32 scales of fp8_per_token rows, e.g. to fold Q's into the weights (a std::vector<float,
// A> with the library's allocator, as quantized_rows' bytes).
inline detail::vector<float> token_scales(const quantized_rows<fp8_per_token>& rows) {
  detail::vector<float> s(static_cast<std::size_t>(rows.rows));
  for (std::int64_t r = 0; r < rows.rows; ++r) s[static_cast<std::size_t>(r)] = rows.token_scale(r);
  return s;
}

MQALOGITS_NAMESPACE_END
