// The AVX2 + FMA path: 8 fp32 lanes, 16 vector registers. Int8 dot products through AVX-VNNI
// when the target has it, else vpmaddubsw + vpmaddwd (exact here: the pair sums of |u8 * s8|
// stay far below int16 saturation). Both multiply unsigned by signed bytes: keys are offset.
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
  static constexpr const char* name = "avx2";
  static constexpr int lanes = 8;
  using vf = __m256;
  using vi = __m256i;
  using mask = __m256;  // all-ones bits on live lanes

  // head_vectors x keys accumulators + keys broadcasts + one query vector fit in 16 registers
  // (the int8 kernel also keeps its block-scaled fp32 sums live across the 4 blocks).
  static constexpr register_block f32_blocks[] = {{2, 2, 4}, {1, 1, 6}};
  static constexpr register_block i8_blocks[] = {{2, 2, 4}, {1, 1, 6}};
  using int8 = int8_offset_keys;

  static vf zero() { return _mm256_setzero_ps(); }
  static vf load(const float* p) { return _mm256_loadu_ps(p); }
  static vf broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static vf fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
  static vf mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
  // minps returns its second operand when either is NaN: NaN is kept.
  static vf cap_infinity(vf a) {
    return _mm256_min_ps(_mm256_set1_ps(std::numeric_limits<float>::max()), a);
  }
  static mask live(int n) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane));
  }
  // max(0, a) returns its second operand, a, when a is NaN: relu(NaN) stays NaN.
  static vf relu(vf a, mask m) { return _mm256_and_ps(_mm256_max_ps(_mm256_setzero_ps(), a), m); }
  static float reduce(vf a) {
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
  }

  static vi zeroi() { return _mm256_setzero_si256(); }
  static vi loadi(const std::int32_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
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

  // Nibbles through a 16-entry table (vpshufb), two blocks per 32-byte load: each 128-bit
  // half holds one block, whose low and high nibbles are then put one after the other.
  static void decode_e2m1_doubled(const std::uint8_t* packed, const std::uint8_t (&code)[16],
                                  std::uint8_t* out) {
    const __m256i nib = _mm256_set1_epi8(0x0F);
    const __m256i t =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(code)));
    for (int pair = 0; pair < 2; ++pair) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(packed + 32 * pair));
      const __m256i lo = _mm256_shuffle_epi8(t, _mm256_and_si256(x, nib));
      const __m256i hi = _mm256_shuffle_epi8(t, _mm256_and_si256(_mm256_srli_epi16(x, 4), nib));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * pair),
                          _mm256_permute2x128_si256(lo, hi, 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * pair + 32),
                          _mm256_permute2x128_si256(lo, hi, 0x31));
    }
  }
};

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
#endif
