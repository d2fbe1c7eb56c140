// Exact decoders of the host backend, for any instruction set I: query rows into the transposed
// layouts the micro-kernels read (once per row), key rows into fp32 rows or int8 rows in I's own
// encoding (once per key tile). The row decoding itself is I's (isa/*.hpp); every ISA decodes to
// the same values.
//
// The route is asked of the format's codecs: codes whose doubles are int8 (e2m1) with UE8M0
// scales per 32 elements (MXFP4 x MXFP4) take the exact int8 path; every other format, whatever
// its scale codec, goes through the fp32 path (Format::decode_row: each block's codes times its
// fp32 scale). A format without query scales (q.scales == nullptr) is handed null scale
// pointers, meaning scale 1.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../config.hpp"
#include "../../format/mx.hpp"
#include "../../view/rows_view.hpp"
#include "isa/base.hpp"
#include "kernel_abi.hpp"
#include "microkernel.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// Which micro-kernel family a format uses: the one place that decides it. The int8 kernels fold
// UE8M0 bytes as exponents and are written for 32-element blocks.
template <class Format>
inline constexpr bool int8_path =
    Format::doubled_codes_int8&& Format::ue8m0_scales&& Format::scale_block == mx_scale_block;

// Whether the host runs a scale codec: the int8 path reads UE8M0 bytes, the fp32 path any codec
// whose scales read as fp32 values (every scale_codec).
template <class Scale>
inline constexpr bool runs_scale_codec_v = scale_codec<Scale>;

// Bytes of one decoded int8 key of D elements: one per element.
template <int D>
inline constexpr int i8_key_bytes = D;

template <class Format>
const std::uint8_t* q_scales(const rows_view<Format>& q, std::int64_t r) {
  return q.scales ? q.scale(r) : nullptr;
}

// ---- fp32 path ----

// One key row into Format::head_dim fp32 values, bit-identical to Format::decode_row.
template <class I, class Format>
inline void decode_key_f32(const std::uint8_t* data, const std::uint8_t* scales, float* out) {
  I::template decode_row_f32<Format>(data, scales, out);
}

// Query rows first_row.. (one query token: `heads` consecutive rows, padded to hp) into the
// fp32 kernel's panels of `chunk` head vectors (isa/base.hpp's panel_index).
template <class I, class Format>
void decode_q_f32(const rows_view<Format>& q, std::int64_t first_row, int heads, int hp, int chunk,
                  float* qt) {
  constexpr int D = Format::head_dim, L = I::lanes;
  alignas(64) float tmp[static_cast<std::size_t>(D)];
  for (int h = 0; h < hp; ++h) {
    if (h < heads)
      decode_key_f32<I, Format>(q.row(first_row + h), q_scales(q, first_row + h), tmp);
    else
      for (int d = 0; d < D; ++d) tmp[d] = 0.0f;
    for (int d = 0; d < D; ++d) qt[panel_index(D, L, hp / L, chunk, d, h)] = tmp[d];
  }
}

// ---- bf16 path (e4m3 formats, on ISAs with bf16 pair dot products) ----

// The formats with a bf16 form: e4m3 rows with UE8M0 block scales (MXFP8) or one row scale
// (FP8 per-token, whose keys keep that scale apart: bf16_key_scales).
template <class Format>
inline constexpr bool bf16_form = Format::data_bytes == Format::head_dim&& Format::head_dim % 32 ==
                                      0 &&
                                  (e4m3_ue8m0_rows<Format> || e4m3_fp32_rows<Format>);
template <class Format>
inline constexpr bool bf16_key_scales = e4m3_fp32_rows<Format>;

// Whether path I scores Format's rows in bf16 form.
template <class I, class Format>
inline constexpr bool runs_bf16 = bf16_form<Format>&& requires {
  requires I::bf16_pairs;
};

// A row takes the bf16 form only where the bf16 kernel does the same fp32 arithmetic as the
// fp32 one. It flushes subnormal inputs and results to zero, so none may occur: every value of
// a row must be a multiple of 2^-63 (e4m3 codes are multiples of 2^-9, so block scales of at
// least 2^-54, UE8M0 byte 73), which makes every product, and every partial sum however it is
// rounded, a multiple of 2^-126: zero or a normal float. Byte 255 (NaN) stays general. An FP8
// per-token key's values are its codes, its scale multiplies the dot products afterwards: any
// scale whose 2^8 multiple is an ordinary float (the range decode_e4m3_fp32 multiplies once). A
// per-token query row's values are its codes too, its scale (when it has one: DeepGEMM's query
// rows have none) multiplies the dot products after the key's: any in the same range.
inline constexpr int bf16_min_scale = 127 - 54, bf16_max_scale = 254;
template <class Format>
bool ue8m0_row_fits_bf16(const std::uint8_t* scales) {
  if (!scales) return true;
  bool fits = true;
  for (int b = 0; b < Format::blocks; ++b)
    fits &= scales[b] >= bf16_min_scale && scales[b] <= bf16_max_scale;
  return fits;
}
inline bool row_scale_fits_bf16(float s) {
  const float m = std::fabs(s);
  return m >= 0x1p-100f && m <= 0x1p100f;
}

// Query rows first_row.. (one query token) as bf16 pairs, pairs[p * hp + h] (padded heads zero),
// when every head's row fits: returns host_abi::bf16_pairs, or bf16_scaled_pairs for FP8
// per-token rows with scales (then in scales[h], padded heads 0); 0 (nothing written) otherwise.
template <class I, class Format>
int decode_q_bf16(const rows_view<Format>& q, std::int64_t first_row, int heads, int hp,
                  std::uint32_t* pairs, float* scales) {
  constexpr int P = Format::head_dim / 2;
  const bool scaled = bf16_key_scales<Format> && q.scales;
  for (int h = 0; h < heads; ++h) {
    const std::uint8_t* sc = q_scales(q, first_row + h);
    if constexpr (e4m3_ue8m0_rows<Format>) {
      if (!ue8m0_row_fits_bf16<Format>(sc)) return 0;
    } else {
      if (scaled && !row_scale_fits_bf16(Format::block_scale(sc, 0))) return 0;
    }
  }
  alignas(64) std::uint32_t tmp[static_cast<std::size_t>(P)];
  for (int h = 0; h < heads; ++h) {
    const std::uint8_t* sc = q_scales(q, first_row + h);
    I::template decode_row_bf16<Format>(q.row(first_row + h), sc, tmp);
    for (int p = 0; p < P; ++p) pairs[p * hp + h] = tmp[p];
    if (scaled) scales[h] = Format::block_scale(sc, 0);
  }
  for (int h = heads; h < hp; ++h) {
    for (int p = 0; p < P; ++p) pairs[p * hp + h] = 0;
    if (scaled) scales[h] = 0.0f;
  }
  return scaled ? host_abi::bf16_scaled_pairs : host_abi::bf16_pairs;
}

// One key row as D/2 bf16 pairs and the scale of its dot products (1 for MX keys), when it
// fits; false (nothing written) otherwise.
template <class I, class Format>
inline bool decode_key_bf16(const std::uint8_t* data, const std::uint8_t* scales,
                            std::uint32_t* out, float* key_scale) {
  if constexpr (e4m3_ue8m0_rows<Format>) {
    if (!ue8m0_row_fits_bf16<Format>(scales)) return false;
    *key_scale = 1.0f;
  } else {
    const float s = Format::block_scale(scales, 0);
    if (!row_scale_fits_bf16(s)) return false;
    *key_scale = s;
  }
  I::template decode_row_bf16<Format>(data, scales, out);
  return true;
}

// ---- int8 path (MXFP4) ----

// Query rows (one query token) into an i8_path::query's arrays: data [D/32][hp x 8] words (per
// block, in i8_query_word order), start [D/32][hp] (only written when I's encoding offsets keys),
// scale [D/32][hp].
template <class I, class Format>
void decode_q_i8(const rows_view<Format>& q, std::int64_t first_row, int heads, int hp,
                 std::int32_t* data, std::int32_t* start, float* scale) {
  static_assert(std::conjunction_v<std::is_same<typename Format::data_type, float_e2m1>,
                                   std::bool_constant<Format::scale_block == mx_scale_block>>,
                "the int8 path reads packed e2m1 codes with one scale per 32 elements");
  constexpr int D = Format::head_dim, blocks = Format::blocks;
  for (int h = 0; h < heads; ++h) {
    const std::uint8_t* sc = q_scales(q, first_row + h);
    alignas(64) std::int8_t v[static_cast<std::size_t>(D)];  // doubled values, stored block order
    I::template decode_e2m1_doubled<D>(q.row(first_row + h), same_codes<D>(query_code),
                                       reinterpret_cast<std::uint8_t*>(v));
    for (int b = 0; b < blocks; ++b) {
      if constexpr (I::int8::offset_keys) {
        std::int32_t sum = 0;
        for (int p = 0; p < mx_scale_block; ++p) sum += v[b * mx_scale_block + p];
        const std::int32_t s = I::int8::block_start(sum);
        start[b * hp + h] = int16_block_sums<I> ? i8_int16_start(s) : s;
      }
      scale[b * hp + h] = 0.25f * (sc ? ue8m0_values[sc[b]] : 1.0f);
    }
    for (int w = 0; w < D / 4; ++w)
      std::memcpy(&data[w / 8 * 8 * hp + i8_query_word<I::lanes>(8, w % 8, h)], v + 4 * w, 4);
  }
  for (int h = heads; h < hp; ++h)
    for (int b = 0; b < blocks; ++b) {
      for (int s = 0; s < 8; ++s) data[b * 8 * hp + i8_query_word<I::lanes>(8, s, h)] = 0;
      if constexpr (I::int8::offset_keys) start[b * hp + h] = 0;
      scale[b * hp + h] = 0.0f;
    }
}

// The folded form of the same query rows when every head's row folds within I's query spread
// (returns false, writing nothing more, otherwise): data [hp x D/4] words of shifted codes (in
// i8_query_word order), start [hp] (I::int8::fold_start of the row sum), scale [hp] (the row's
// smallest block scale over 4). Padded heads hold zeros.
template <class I, class Format>
bool decode_q_i8_fold(const rows_view<Format>& q, std::int64_t first_row, int heads, int hp,
                      std::int32_t* data, std::int32_t* start, float* scale) {
  constexpr int D = Format::head_dim, blocks = Format::blocks;
  for (int h = 0; h < heads; ++h) {
    const std::uint8_t* sc = q_scales(q, first_row + h);
    if (!sc || fold_exponent<blocks>(sc, I::fold_query_spread) < 0) return false;
  }
  using tables = fold_tables<typename I::int8>;
  for (int h = 0; h < heads; ++h) {
    const std::uint8_t* sc = q_scales(q, first_row + h);
    const int lo = fold_exponent<blocks>(sc, I::fold_query_spread);
    alignas(64) std::int8_t v[static_cast<std::size_t>(D)];
    block_codes<D> codes{};
    for (int b = 0; b < blocks; ++b) codes.block[b] = tables::query[sc[b] - lo].v;
    I::template decode_e2m1_doubled<D>(q.row(first_row + h), codes,
                                       reinterpret_cast<std::uint8_t*>(v));
    std::int32_t sum = 0;
    for (int p = 0; p < D; ++p) sum += v[p];
    start[h] = I::int8::fold_start(sum);
    scale[h] = 0.25f * ue8m0_values[static_cast<std::size_t>(lo)];
    for (int w = 0; w < D / 4; ++w)
      std::memcpy(&data[i8_query_word<I::lanes>(D / 4, w, h)], v + 4 * w, 4);
  }
  for (int h = heads; h < hp; ++h) {
    for (int w = 0; w < D / 4; ++w) data[i8_query_word<I::lanes>(D / 4, w, h)] = 0;
    start[h] = 0;
    scale[h] = 0.0f;
  }
  return true;
}

// Whether the same query rows have the relative form (I::relative_rows): every head's block
// exponents within the form's range (isa/base.hpp's rel_exponent). Its kernel reads the
// per-block form, as decode_q_i8 writes it.
template <class Format>
bool q_rows_relative(const rows_view<Format>& q, std::int64_t first_row, int heads) {
  for (int h = 0; h < heads; ++h) {
    const std::uint8_t* sc = q_scales(q, first_row + h);
    if (sc && rel_exponent<Format::blocks>(sc, 255) < 0) return false;
  }
  return true;
}

// One key row of D elements into i8_key_bytes<D> bytes in I's encoding and its D/32 block scales.
template <class I, int D = default_head_dim>
inline void decode_key_i8(const std::uint8_t* packed, const std::uint8_t* scales, std::uint8_t* out,
                          float* ks) {
  for (int b = 0; b < D / mx_scale_block; ++b) ks[b] = ue8m0_values[scales[b]];
  I::template decode_e2m1_doubled<D>(packed, same_codes<D>(I::int8::key_code), out);
}

// The folded form of a key row, when it folds: i8_key_bytes<D> bytes in I's folded encoding and
// the row's smallest block scale. Returns false (nothing written) when the row does not fold.
template <class I, int D = default_head_dim>
inline bool decode_key_i8_fold(const std::uint8_t* packed, const std::uint8_t* scales,
                               std::uint8_t* out, float* scale) {
  constexpr int blocks = D / mx_scale_block;
  const int lo = fold_exponent<blocks>(scales, fold_spread);
  if (lo < 0) return false;
  using tables = fold_tables<typename I::int8>;
  block_codes<D> codes{};
  MQALOGITS_UNROLL
  for (int b = 0; b < blocks; ++b) codes.block[b] = tables::key[scales[b] - lo].v;
  I::template decode_e2m1_doubled<D>(packed, codes, out);
  *scale = ue8m0_values[static_cast<std::size_t>(lo)];
  return true;
}

// The relative form's scale words of a key row, when it has one (its codes are i8_path's):
// i8_compact_scale_words<D> words, the block multipliers 2^(e_b - e_min) (in both int16 halves
// of an int32) and the base scale 2^(e_min - 127). Returns false (nothing written) otherwise.
template <int D = default_head_dim>
inline bool rel_key_scales(const std::uint8_t* scales, float* words) {
  constexpr int blocks = D / mx_scale_block;
  const int lo = rel_exponent<blocks>(scales);
  if (lo < 0) return false;
  for (int b = 0; b < blocks; ++b) {
    const std::int32_t m = (std::int32_t{1} << (scales[b] - lo)) * 0x00010001;
    std::memcpy(words + b, &m, sizeof m);
  }
  words[blocks] = ue8m0_values[static_cast<std::size_t>(lo)];
  return true;
}

// A key that scores 0 whatever the query (a masked slot of a tile).
template <class I, int D = default_head_dim>
inline void masked_key_i8(std::uint8_t* out, float* ks) {
  std::fill(out, out + i8_key_bytes<D>, I::int8::masked_key);
  std::fill(ks, ks + D / mx_scale_block, 0.0f);
}
template <class I, int D = default_head_dim>
inline void masked_key_i8_fold(std::uint8_t* out, float* scale) {
  std::fill(out, out + i8_key_bytes<D>, static_cast<std::uint8_t>(I::int8::fold_offset));
  *scale = 0.0f;
}
// (Multipliers and base scale 0, with the masked per-block codes.)
template <int D = default_head_dim>
inline void masked_key_rel_scales(float* words) {
  std::fill(words, words + i8_compact_scale_words<D>, 0.0f);
}

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
