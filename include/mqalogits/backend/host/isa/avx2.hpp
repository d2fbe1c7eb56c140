// The AVX2 + FMA path: 8 fp32 lanes, 16 vector registers. Int8 dot products through AVX-VNNI
// when the target has it, else vpmaddubsw + vpmaddwd (exact here: the pair sums of |u8 * s8|
// stay far below int16 saturation). Both multiply unsigned by signed bytes: keys are offset.
// Its own exact decoder for e4m3 rows (MXFP8 and FP8 per-token), built from integer and fp32
// operations only (no F16C, which -mavx2 does not imply).
#pragma once

#include "base.hpp"

#if defined(MQALOGITS_HOST_AVX2)
#include <cstdint>
#include <cstring>
#include <limits>

#include "intrinsics_x86.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

struct isa_avx2 : plain_decoders {
  using plain_decoders::decode_row_f32;
  static constexpr const char* name = "avx2";
  static constexpr int lanes = 8;
  using vf = __m256;
  using vi = __m256i;
  using mask = __m256;  // all-ones bits on live lanes

  // head_vectors x keys accumulators + keys broadcasts + one query vector fit in 16 registers.
  // The int8 kernels are narrower: the per-block one also keeps its block-scaled fp32 sums live
  // across the 4 blocks, and without VNNI each dot4 needs two temporaries and a ones vector (a
  // 2 x 4 block spilled accumulators to the stack; one head vector x 6 keys ran 1.4x faster on
  // Zen 3).
  static constexpr register_block f32_blocks[] = {{2, 2, 4}, {1, 1, 6}};
#if defined(MQALOGITS_HOST_VNNI256)
  static constexpr register_block i8_blocks[] = {{ 1, 1, 6 }};
  static constexpr register_block i8_fold_blocks[] = {{2, 2, 4}, { 1, 1, 6 }};
#else
  static constexpr register_block i8_blocks[] = {{1, 1, 4}};
  static constexpr register_block i8_fold_blocks[] = {{1, 1, 6}};
#endif
  using int8 = int8_offset_keys;
#if defined(MQALOGITS_HOST_VNNI256)
  static constexpr int fold_query_spread = fold_spread;
#else
  // vpmaddubsw saturates its int16 pair sums: folded keys reach 192 (k + 96), so queries may
  // only be shifted by up to 2 (|q| <= 48: 2 x 192 x 48 = 18432 < 2^15).
  static constexpr int fold_query_spread = 2;
#endif

  static vf zero() {
    return _mm256_setzero_ps();
  }
  static vf load(const float* p) {
    return in_register(_mm256_loadu_ps(p));
  }
  static vf broadcast(const float* p) {
    return _mm256_broadcast_ss(p);
  }
  static vf fma(vf a, vf b, vf c) {
    return _mm256_fmadd_ps(a, b, c);
  }
  static vf mul(vf a, vf b) {
    return _mm256_mul_ps(a, b);
  }
  // minps returns its second operand when either is NaN: NaN is kept.
  static vf cap_infinity(vf a) {
    return _mm256_min_ps(_mm256_set1_ps(std::numeric_limits<float>::max()), a);
  }
  static mask live(int n) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane));
  }
  // max(0, a) returns its second operand, a, when a is NaN: relu(NaN) stays NaN.
  static vf relu(vf a, mask m) {
    return _mm256_and_ps(_mm256_max_ps(_mm256_setzero_ps(), a), m);
  }
  static float reduce(vf a) {
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
  }

  static vi zeroi() {
    return _mm256_setzero_si256();
  }
  static vi loadi(const std::int32_t* p) {
    return in_register(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static vi broadcast4(const std::uint8_t* p) {
    std::int32_t x;
    std::memcpy(&x, p, 4);
    return _mm256_set1_epi32(x);
  }
  // acc + the sum of the 4 products u8(k) * s8(q) in each 32-bit lane.
  static vi dot4(vi acc, vi k, vi q) {
#if defined(MQALOGITS_HOST_VNNI256)
#if defined(MQALOGITS_HOST_VNNI512)
    return _mm256_dpbusd_epi32(acc, k, q);
#else
    return _mm256_dpbusd_avx_epi32(acc, k, q);
#endif
#else
    const __m256i pairs = _mm256_maddubs_epi16(k, q);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
#endif
  }
  static vf to_float(vi a) {
    return _mm256_cvtepi32_ps(a);
  }

  // e4m3 rows (MXFP8, FP8 per-token): every code to its exact fp32 value, then one multiply by
  // the block (or row) scale, the one rounding Format::decode_row does too. Other formats keep
  // their own decode_row.
  template <class Format>
  static void decode_row_f32(const std::uint8_t* data, const std::uint8_t* scales, float* out) {
    if constexpr (e4m3_ue8m0_rows<Format> && Format::data_bytes == Format::head_dim) {
      for (int b = 0; b < Format::blocks; ++b)
        decode_e4m3(data + 32 * b, 32, _mm256_set1_ps(ue8m0_values[scales[b]]), out + 32 * b);
    } else if constexpr (e4m3_fp32_rows<Format> && Format::data_bytes == Format::head_dim) {
      decode_e4m3(data, Format::head_dim, _mm256_set1_ps(fp32_row_scale::value(scales, 0)), out);
    } else {
      Format::decode_row(data, scales, out);
    }
  }

  // Nibbles through a 16-entry table (vpshufb), two blocks per 32-byte load: each 128-bit
  // half holds one block, whose low and high nibbles are then put one after the other. Rows of
  // 64 or 128 elements (MXFP4's head dims): one or two loads.
  template <int D = default_head_dim>
  static void decode_e2m1_doubled(const std::uint8_t* packed, const std::uint8_t (&code)[16],
                                  std::uint8_t* out) {
    static_assert(D % 64 == 0, "MXFP4 rows have 64 or 128 elements");
    const __m256i nib = _mm256_set1_epi8(0x0F);
    const __m256i t =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(code)));
    for (int pair = 0; pair < D / 64; ++pair) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(packed + 32 * pair));
      const __m256i lo = _mm256_shuffle_epi8(t, _mm256_and_si256(x, nib));
      const __m256i hi = _mm256_shuffle_epi8(t, _mm256_and_si256(_mm256_srli_epi16(x, 4), nib));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * pair),
                          _mm256_permute2x128_si256(lo, hi, 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * pair + 32),
                          _mm256_permute2x128_si256(lo, hi, 0x31));
    }
  }

 private:
  // n codes (a multiple of 8), 8 per step. A normal code (exponent field e >= 1, mantissa m) is
  // the fp32 with exponent e - 7 and the same 3 mantissa bits: its 7 magnitude bits shifted to
  // the top of the fp32 mantissa, plus 120 on the exponent field. A subnormal code is m x 2^-9,
  // converted from the integer m. Both are normal fp32 values, so flush-to-zero / denormals-
  // are-zero modes cannot change them. The sign bit moves over; 0x7F / 0xFF become the same
  // NaN float_e4m3::decode returns.
  static void decode_e4m3(const std::uint8_t* data, int n, __m256 scale, float* out) {
    const __m256i low7 = _mm256_set1_epi32(0x7F);
    const __m256i bias = _mm256_set1_epi32(120 << 23);
    const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));
    const __m256i eight = _mm256_set1_epi32(8);
    const __m256 subnormal_unit = _mm256_set1_ps(1.0f / 512.0f);
    const __m256 nan = _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN());
    for (int i = 0; i < n; i += 8) {
      const __m256i x =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(data + i)));
      const __m256i m = _mm256_and_si256(x, low7);
      const __m256 normal = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(m, 20), bias));
      const __m256 subnormal = _mm256_mul_ps(_mm256_cvtepi32_ps(m), subnormal_unit);
      __m256 v =
          _mm256_blendv_ps(normal, subnormal, _mm256_castsi256_ps(_mm256_cmpgt_epi32(eight, m)));
      v = _mm256_or_ps(v, _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(x, 24), sign)));
      v = _mm256_blendv_ps(v, nan, _mm256_castsi256_ps(_mm256_cmpeq_epi32(m, low7)));
      _mm256_storeu_ps(out + i, _mm256_mul_ps(v, scale));
    }
  }
};

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
#endif
