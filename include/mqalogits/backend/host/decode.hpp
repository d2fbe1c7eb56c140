// Exact decoders of the host backend: query rows into the transposed layouts the micro-kernels
// read (once per row), key rows into fp32 rows or biased int8 rows (once per key tile).
//
// Any format bundle with Format::decode_row goes through the fp32 path; MXFP8 keys get a SIMD
// decoder on AVX-512, MXFP4 x MXFP4 takes the exact int8 path. A format without query scales
// (q.scales == nullptr) is handed null scale pointers, meaning scale 1.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../config.hpp"
#include "../../format/mx.hpp"
#include "../../view/rows_view.hpp"
#include "microkernel.hpp"
#include "simd.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// Which micro-kernel family a format uses.
template <class Format>
inline constexpr bool int8_path = Format::doubled_codes_int8&& Format::power_of_two_scales;

template <class Format>
const std::uint8_t* q_scales(const rows_view<Format>& q, std::int64_t r) {
  return q.scales ? q.scale(r) : nullptr;
}

// ---- fp32 path ----

#if defined(MQALOGITS_HOST_AVX512)
// e4m3 -> fp16 is a pure bit move (same mantissa, exponent bias 7 vs 15: value / 2^8, subnormals
// included), vcvtph2ps widens exactly, x 256 restores the value (exact), x the block scale is
// the one rounding decode_row does too. 0x7F / 0xFF would land on a finite fp16: made NaN.
inline void decode_mxfp8_avx512(const std::uint8_t* data, const std::uint8_t* scales, float* out) {
  const __m256i low7 = _mm256_set1_epi8(0x7F);
  const __m512i sign = _mm512_set1_epi16(static_cast<short>(0x8000));
  const __m512i body = _mm512_set1_epi16(0x3F80);
  const __m512i nan = _mm512_set1_epi16(0x7E00);
  const __m512 restore = _mm512_set1_ps(256.0f);
  for (int b = 0; b < head_dim / scale_block; ++b) {
    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + 32 * b));
    const __m512i x = _mm512_cvtepu8_epi16(bytes);
    __m512i h = _mm512_or_si512(_mm512_and_si512(_mm512_slli_epi16(x, 8), sign),
                                _mm512_and_si512(_mm512_slli_epi16(x, 7), body));
    const __mmask32 is_nan = _mm256_cmpeq_epi8_mask(_mm256_and_si256(bytes, low7), low7);
    h = _mm512_mask_mov_epi16(h, is_nan, nan);
    const __m512 lo = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
    const __m512 hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
    const std::uint8_t e = scales[b];
    if (e <= 246) {  // 2^8 * 2^(e - 127) is a normal float: one multiply, the same rounding
      const __m512 s = _mm512_set1_ps(ue8m0_values[e + 8]);
      _mm512_storeu_ps(out + 32 * b, _mm512_mul_ps(lo, s));
      _mm512_storeu_ps(out + 32 * b + 16, _mm512_mul_ps(hi, s));
    } else {
      const __m512 s = _mm512_set1_ps(ue8m0_values[e]);
      _mm512_storeu_ps(out + 32 * b, _mm512_mul_ps(_mm512_mul_ps(lo, restore), s));
      _mm512_storeu_ps(out + 32 * b + 16, _mm512_mul_ps(_mm512_mul_ps(hi, restore), s));
    }
  }
}
#endif

// One key row into 128 fp32 values, bit-identical to Format::decode_row.
template <class I, class Format>
inline void decode_key_f32(const std::uint8_t* data, const std::uint8_t* scales, float* out) {
#if defined(MQALOGITS_HOST_AVX512)
  if constexpr (std::is_same_v<I, isa_avx512> && std::is_same_v<Format, mxfp8>) {
    decode_mxfp8_avx512(data, scales, out);
    return;
  }
#endif
  Format::decode_row(data, scales, out);
}

// Query rows r0.. (one query token: `heads` consecutive rows) into qt[d * hp + h].
template <class I, class Format>
void decode_q_f32(const rows_view<Format>& q, std::int64_t first_row, int heads, int hp,
                  float* qt) {
  alignas(64) float tmp[head_dim];
  for (int h = 0; h < heads; ++h) {
    decode_key_f32<I, Format>(q.row(first_row + h), q_scales(q, first_row + h), tmp);
    for (int d = 0; d < head_dim; ++d) qt[d * hp + h] = tmp[d];
  }
  for (int h = heads; h < hp; ++h)
    for (int d = 0; d < head_dim; ++d) qt[d * hp + h] = 0.0f;
}

// ---- int8 path (MXFP4) ----
//
// Element order inside a 32-element block (16 packed bytes): the 16 low nibbles (elements 0, 2,
// .., 30), then the 16 high nibbles (1, 3, .., 31). Q and K use the same order.

inline constexpr std::uint8_t e2m1_doubled_plus12[16] = {12, 13, 14, 15, 16, 18, 20, 24,
                                                         12, 11, 10, 9,  8,  6,  4,  0};

#if defined(MQALOGITS_HOST_AVX512)
// One packed e2m1 row (64 bytes) into 128 doubled values in the stored block order: nibbles
// through a 16-entry table (vpshufb), then block b's low and high nibbles side by side.
inline void e2m1_row_avx512(const std::uint8_t* packed, const std::uint8_t (&table)[16],
                            std::uint8_t* out) {
  const __m512i x = _mm512_loadu_si512(packed);
  const __m512i nib = _mm512_set1_epi8(0x0F);
  const __m512i t =
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table)));
  const __m512i lo = _mm512_shuffle_epi8(t, _mm512_and_si512(x, nib));
  const __m512i hi = _mm512_shuffle_epi8(t, _mm512_and_si512(_mm512_srli_epi16(x, 4), nib));
  // 128-bit lanes: block b's low nibbles are lane b of lo, its high nibbles lane b of hi.
  const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  _mm512_storeu_si512(out, _mm512_permutex2var_epi64(lo, first, hi));
  _mm512_storeu_si512(out + 64, _mm512_permutex2var_epi64(lo, second, hi));
}
#endif

inline constexpr std::uint8_t e2m1_doubled[16] = {0, 1,   2,   3,   4,   6,   8,   12,
                                                  0, 255, 254, 253, 252, 250, 248, 244};

// Query rows (one query token) into a q_i8_row's arrays: data [32][hp] words, bias [4][hp],
// scale [4][hp].
template <class I>
void decode_q_i8(const rows_view<mxfp4>& q, std::int64_t first_row, int heads, int hp,
                 std::int32_t* data, std::int32_t* bias, float* scale) {
  constexpr int blocks = head_dim / scale_block;
  for (int h = 0; h < heads; ++h) {
    const std::uint8_t* packed = q.row(first_row + h);
    const std::uint8_t* sc = q_scales(q, first_row + h);
    alignas(64) std::int8_t v[head_dim];  // doubled values, stored block order
#if defined(MQALOGITS_HOST_AVX512)
    if constexpr (std::is_same_v<I, isa_avx512>) {
      e2m1_row_avx512(packed, e2m1_doubled, reinterpret_cast<std::uint8_t*>(v));
    } else
#endif
    {
      for (int b = 0; b < blocks; ++b)
        for (int j = 0; j < 16; ++j) {
          const std::uint8_t byte = packed[b * 16 + j];
          v[b * 32 + j] = float_e2m1::decode_doubled(byte & 0xF);
          v[b * 32 + 16 + j] = float_e2m1::decode_doubled(byte >> 4);
        }
    }
    for (int b = 0; b < blocks; ++b) {
      int sum = 0;
      for (int p = 0; p < scale_block; ++p) sum += v[b * scale_block + p];
      bias[b * hp + h] = -12 * sum;
      scale[b * hp + h] = 0.25f * (sc ? ue8m0_values[sc[b]] : 1.0f);
    }
    for (int w = 0; w < head_dim / 4; ++w) std::memcpy(&data[w * hp + h], v + 4 * w, 4);
  }
  for (int h = heads; h < hp; ++h)
    for (int b = 0; b < blocks; ++b) {
      for (int s = 0; s < 8; ++s) data[(b * 8 + s) * hp + h] = 0;
      bias[b * hp + h] = 0;
      scale[b * hp + h] = 0.0f;
    }
}

// One key row into i8_key_bytes biased values (k + 12) and its 4 block scales.
template <class I>
inline void decode_key_i8(const std::uint8_t* packed, const std::uint8_t* scales, std::uint8_t* out,
                          float* ks) {
  constexpr int blocks = head_dim / scale_block;
  for (int b = 0; b < blocks; ++b) ks[b] = ue8m0_values[scales[b]];
#if defined(MQALOGITS_HOST_AVX512)
  if constexpr (std::is_same_v<I, isa_avx512>) {
    e2m1_row_avx512(packed, e2m1_doubled_plus12, out);
    return;
  }
#endif
  for (int b = 0; b < blocks; ++b)
    for (int j = 0; j < 16; ++j) {
      const std::uint8_t byte = packed[b * 16 + j];
      out[b * 32 + j] = e2m1_doubled_plus12[byte & 0xF];
      out[b * 32 + 16 + j] = e2m1_doubled_plus12[byte >> 4];
    }
}

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
