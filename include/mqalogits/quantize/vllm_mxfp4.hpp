// MXFP4 quantisation by vLLM's DeepSeek-V4 indexer rule (its fused K compressor's cache insert
// and its MXFP4 Q path): per block of 32 elements, amax raised to at least 1e-4, exponent
// e = ceil(log2(amax / 6)) in fp32 clamped to [-127, 127], UE8M0 byte e + 127, and each element
// the e2m1 code of x * 2^-e (ties toward zero, saturating at 6, -0 as +0). The library's own MX
// rule (quantize_row) differs: no floor (an all-zero block gets byte 1), and an exact power-of-two
// bound instead of log2. The cache page is the library's MXFP4 page (page_kv x head_dim / 2 code
// bytes, then page_kv x 4 scale bytes), which is vLLM's.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <type_traits>

#include "../check/overlap.hpp"
#include "../check/shapes.hpp"
#include "../config.hpp"
#include "../error.hpp"
#include "../format/e2m1.hpp"
#include "../format/mx.hpp"
#include "../view/matrix_view.hpp"
#include "encode.hpp"
#include "gather_pages.hpp"  // detail::check_out_rows
#include "hadamard.hpp"
#include "pages.hpp"
#include "q_fold.hpp"  // scale_weights
#include "rows.hpp"

MQALOGITS_NAMESPACE_BEGIN

// The UE8M0 byte of a block whose largest magnitude is amax (a NaN amax reads as the floor).
inline std::uint8_t vllm_mxfp4_scale_byte(float amax) {
  const float a = amax > 1e-4f ? amax : 1e-4f;
  float e = std::ceil(std::log2(a / 6.0f));
  e = e < -127.0f ? -127.0f : (e > 127.0f ? 127.0f : e);
  return static_cast<std::uint8_t>(static_cast<int>(e) + 127);
}

// One row of d elements (a multiple of 32): d / 2 code bytes (element 2i in the low nibble of
// byte i) and d / 32 UE8M0 bytes. NaN elements become code 0.
template <quantize_input T>
void quantize_row_vllm_mxfp4(const T* x, int d, std::uint8_t* data, std::uint8_t* scales) {
  for (int b = 0; b < d / 32; ++b) {
    const std::uint8_t byte = vllm_mxfp4_scale_byte(detail::absmax(x, b * 32, b * 32 + 32));
    scales[b] = byte;
    const float inv = std::ldexp(1.0f, 127 - static_cast<int>(byte));  // 2^-e, exact
    for (int i = b * 32; i < b * 32 + 32; ++i)
      float_e2m1::store(data, i, encode_e2m1(to_float(x[i]) * inv));
  }
}

// Rows x [rows, D] (D = 128 or 64, fp32 or bf16) into caller-owned rows: codes at data + r *
// data_stride (0: packed, D / 2 bytes), scale bytes at scales + r * scale_stride (D / 32 bytes
// written; the stride at least 4, the format's scale field). vLLM's MXFP4 Q:
// data [T * H, 64] and scales [T * H, 4] for rows of 128. No two of x, data and scales may share
// a byte. row_rotation::hadamard quantises each row's Walsh-Hadamard rotation (hadamard.hpp).
template <class T>
requires quantize_input<std::remove_const_t<T>>
void quantize_rows_vllm_mxfp4(matrix_view<T> x, std::uint8_t* data, std::uint8_t* scales,
                              std::int64_t data_stride = 0,
                              std::int64_t scale_stride = mxfp4::scale_bytes,
                              row_rotation rotation = row_rotation::none) {
  constexpr const char* where = "quantize_rows_vllm_mxfp4";
  detail::check_quantize_source<mxfp4>(where, x);
  detail::check_rotation(where, rotation);
  const std::int64_t bytes = x.cols / 2;
  if (data_stride == 0) data_stride = bytes;
  const detail::byte_range codes = detail::check_out_rows(where, "data", data, x.rows, data_stride,
                                                          bytes),
                           exps = detail::check_out_rows(where, "scales", scales, x.rows,
                                                         scale_stride, mxfp4::scale_bytes),
                           src = detail::range_of("x", x);
  detail::check_outputs_disjoint(where, {codes, exps}, {src});
  const int d = static_cast<int>(x.cols);
  float rotated[128];
  for (std::int64_t r = 0; r < x.rows; ++r)
    detail::with_rotated_row(x.row(r), d, rotation, rotated, [&](const auto* row) {
      quantize_row_vllm_mxfp4(row, d, data + r * data_stride, scales + r * scale_stride);
    });
}

// vLLM's DeepSeek-V4 MXFP4 Q (fused_indexer_q.py with use_fp4) in one call: q [T * H, D] (row
// (t, h) at t * H + h) to codes as quantize_rows_vllm_mxfp4 writes them, each row's 4-byte scale
// field at scales + r * scale_stride (the D / 32 scale bytes, then zeros), and
// weights_out = weights * softmax_scale * head_scale as scale_weights computes it. Every argument
// is checked before the first byte is written: no output may share a byte with q, weights or
// another output, except weights_out being the float weights themselves (scaled in place).
// row_rotation::hadamard quantises each row's Walsh-Hadamard rotation (DeepSeek-V4's Q).
template <class T, class W>
requires(quantize_input<std::remove_const_t<T>>&& weight_input<
         W>) void quantize_q_mxfp4_scale_weights(matrix_view<T> q, matrix_view<W> weights,
                                                 std::uint8_t* data, std::int64_t data_stride,
                                                 std::uint8_t* scales, std::int64_t scale_stride,
                                                 matrix_view<float> weights_out,
                                                 float softmax_scale, float head_scale,
                                                 row_rotation rotation = row_rotation::none) {
  constexpr const char* where = "quantize_q_mxfp4_scale_weights";
  detail::check_quantize_source<mxfp4>(where, q);
  detail::check_rotation(where, rotation);
  detail::check_q_rows_and_weights(where, q, weights, weights_out);
  const std::int64_t bytes = q.cols / 2;
  if (data_stride == 0) data_stride = bytes;
  const detail::byte_range codes =
      detail::check_out_rows(where, "data", data, q.rows, data_stride, bytes);
  const detail::byte_range exps =
      detail::check_out_rows(where, "scales", scales, q.rows, scale_stride, mxfp4::scale_bytes);
  const detail::byte_range in_q = detail::range_of("q", q),
                           in_w = detail::range_of("weights", weights),
                           out_w = detail::range_of("weights_out", weights_out);
  // weights_out against the codes, the scales and q; against the weights it may be them.
  detail::check_outputs_disjoint(where, {codes, exps, out_w}, {in_q});
  detail::check_outputs_disjoint(where, {codes, exps}, {in_w});
  detail::check_weights_out_in_place_or_apart(where, weights, weights_out);
  const int d = static_cast<int>(q.cols);
  float rotated[128];
  for (std::int64_t r = 0; r < q.rows; ++r) {
    std::uint8_t* field = scales + r * scale_stride;
    for (int i = 0; i < mxfp4::scale_bytes; ++i) field[i] = 0;
    detail::with_rotated_row(q.row(r), d, rotation, rotated, [&](const auto* row) {
      quantize_row_vllm_mxfp4(row, d, data + r * data_stride, field);
    });
  }
  scale_weights(weights, weights_out, softmax_scale, head_scale);
}

// The MXFP4 cache insert: k [n, D] (D the cache's head dim; fp32, or bf16 as the engine's RoPE
// leaves it) quantised into the cache, token i to slot_mapping[i] (int32 or int64; negative
// skips the token). Every argument is checked before any byte is written (slots inside the
// cache, k and the mapping disjoint from it). row_rotation::hadamard stores each token's
// Walsh-Hadamard rotation (DeepSeek-V4's K, hadamard.hpp), rotated and quantised in one pass.
template <class T, class Slot, std::size_t Extent>
requires(quantize_input<std::remove_const_t<T>>&& std::is_integral_v<std::remove_const_t<
             Slot>>) void store_into_pages_vllm_mxfp4(matrix_view<T> k,
                                                      std::span<Slot, Extent> slot_mapping,
                                                      const mutable_paged_cache<mxfp4>& cache,
                                                      row_rotation rotation = row_rotation::none) {
  constexpr const char* where = "store_into_pages_vllm_mxfp4";
  detail::check_rotation(where, rotation);
  detail::check_cache_insert(where, k, slot_mapping, cache);
  float rotated[128];
  for (std::int64_t i = 0; i < k.rows; ++i) {
    const std::int64_t slot = slot_mapping[static_cast<std::size_t>(i)];
    if (slot < 0) continue;
    const std::int64_t page = slot / cache.page_kv, offset = slot % cache.page_kv;
    detail::with_rotated_row(k.row(i), cache.head_dim, rotation, rotated, [&](const auto* row) {
      quantize_row_vllm_mxfp4(row, cache.head_dim, cache.data(page, offset),
                              cache.scale(page, offset));
    });
  }
}

MQALOGITS_NAMESPACE_END
