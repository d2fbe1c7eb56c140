// The AVX2 + FMA path: 8 fp32 lanes, 16 vector registers. Int8 dot products through AVX-VNNI
// when the target has it, else vpmaddubsw + vpmaddwd (exact here: the pair sums of |u8 * s8|
// stay far below int16 saturation). Both multiply unsigned by signed bytes: keys are offset.
// e4m3 rows (MXFP8 and FP8 per-token) through half precision where the target has F16C, else
// its own exact decoder built from integer and fp32 operations (-mavx2 does not imply F16C).
#pragma once

#include "base.hpp"

#if defined(MQALOGITS_HOST_AVX2)
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>

#include "intrinsics_x86.hpp"
#include "paths.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

struct isa_avx2 : x86_e4m3_decoders<isa_avx2>,
#if defined(MQALOGITS_HOST_VNNI256)
                  x86_fold_settings<true> {
#else
                  x86_fold_settings<false> {
#endif
  static constexpr const char* name = "avx2";
  // The path's full name (target.hpp's tag): the ISA and its int8 extension.
#if defined(MQALOGITS_HOST_VNNI256)
  static constexpr const char* path = isa_path_name(isa_path_id::avx2_vnni);
#else
  static constexpr const char* path = isa_path_name(isa_path_id::avx2);
#endif
  static constexpr int lanes = 8;
  using vf = __m256;
  using vi = __m256i;
  using mask = __m256;  // all-ones bits on live lanes

  // head_vectors x keys accumulators + keys broadcasts + one query vector fit in 16 registers.
  // The int8 kernels are narrower: the per-block one also keeps its block-scaled fp32 sums live
  // across the 4 blocks. Without VNNI the per-block kernel sums in int16 and runs 1 x 6:
  // 1.05-1.10x over 2 x 3 (which keeps two of its fp32 sums in memory) on Zen 3. Zen 5 built
  // for AVX2 preferred 2 x 3 by 1.05x, but takes the AVX-512 path. The relative kernel (rows in
  // its range; its epilogue holds no scale product) runs 2 x 3 at 1.02x its 1 x 6 on Zen 3.
  static constexpr register_block f32_blocks[] = {{2, 2, 4}, {1, 1, 6}};
#if defined(MQALOGITS_HOST_VNNI256)
  static constexpr register_block i8_blocks[] = {{ 1, 1, 6 }};
  static constexpr register_block i8_fold_blocks[] = {{2, 2, 4}, { 1, 1, 6 }};
#else
  static constexpr register_block i8_blocks[] = {{1, 1, 6}};
  static constexpr register_block i8_rel_blocks[] = {{2, 2, 3}, {1, 1, 6}};
#endif
  using int8 = int8_offset_keys;

  // These operations (and the top-k steps below) mirror isa_avx512's in shape only: 256-bit
  // types, intrinsics, masks and reductions differ, so each ISA spells its own.
  static vf zero() {
    return _mm256_setzero_ps();
  }
  static vf load(const float* p) {
    return in_register(_mm256_loadu_ps(p));
  }
  static void store(float* p, vf v) {
    _mm256_storeu_ps(p, v);
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
    return in_register(_mm256_add_epi32(acc, widen_int16(_mm256_maddubs_epi16(k, q))));
#endif
  }
#if !defined(MQALOGITS_HOST_VNNI256)
  // Without VNNI the per-block kernel sums a block's 8 steps of vpmaddubsw pairs in int16 and
  // widens them to int32 once per block: one add per step instead of vpmaddwd + add. Exact:
  // offset keys are in [0, 24] and queries in [-12, 12], so a pair is at most 576 in magnitude
  // and 8 steps of them 4608 (9216 with the block's start, i8_int16_start).
  // The sums go through in_register: integer adds may be reassociated, and GCC then computed a
  // block's 32 products first and kept them on the stack (21 stores per block; MXFP4 ran at
  // 0.72x). Pinned, each step adds into its accumulator as written.
  static constexpr bool int16_block_sums = true;
  static vi dot4_int16(vi acc, vi k, vi q) {
    return in_register(_mm256_add_epi16(acc, _mm256_maddubs_epi16(k, q)));
  }
  // The int16 sums of acc, pairwise, in int32.
  static vi widen_int16(vi acc) {
    return _mm256_madd_epi16(acc, _mm256_set1_epi16(1));
  }
  // The same, each int16 sum times m's (vpmaddwd): the relative form's block multipliers.
  static vi widen_int16_by(vi acc, vi m) {
    return _mm256_madd_epi16(acc, m);
  }
  // MXFP4 rows take the relative form where they have it (score_paths_i8_compact.hpp's
  // i8_rel_path).
  static constexpr bool relative_rows = true;
#endif
  static vf to_float(vi a) {
    return _mm256_cvtepi32_ps(a);
  }

  // Nibbles through each block's 16-entry table (vpshufb), two blocks per 32-byte load: each
  // 128-bit half holds one block (and its table), whose low and high nibbles are then put one
  // after the other. Rows of 64 or 128 elements (MXFP4's head dims): one or two loads.
  template <int D = default_head_dim>
  static void decode_e2m1_doubled(const std::uint8_t* packed, const block_codes<D>& codes,
                                  std::uint8_t* out) {
    static_assert(D % 64 == 0, "MXFP4 rows have 64 or 128 elements");
    const __m256i nib = _mm256_set1_epi8(0x0F);
    auto table = [&](int b) {
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes.block[b]));
    };
    MQALOGITS_UNROLL
    for (int pair = 0; pair < D / 64; ++pair) {
      const __m256i t =
          _mm256_inserti128_si256(_mm256_castsi128_si256(table(2 * pair)), table(2 * pair + 1), 1);
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(packed + 32 * pair));
      const __m256i lo = _mm256_shuffle_epi8(t, _mm256_and_si256(x, nib));
      const __m256i hi = _mm256_shuffle_epi8(t, _mm256_and_si256(_mm256_srli_epi16(x, 4), nib));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * pair),
                          _mm256_permute2x128_si256(lo, hi, 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * pair + 32),
                          _mm256_permute2x128_si256(lo, hi, 0x31));
    }
  }

  // ---- top-k selection (output/topk_select.hpp): the same keys as admit_keys_scalar and
  // compact_at_least_scalar (topk_key.hpp) ----

  // 8 scores per step, keys built as on AVX-512, the tail one at a time.
  static std::int64_t admit_keys(const float* scores, const unsigned char* valid, std::int64_t n,
                                 std::int64_t col, std::uint64_t floor, float bar,
                                 std::uint64_t* out) {
    std::int64_t held = 0;
    const __m256 bar_v = _mm256_set1_ps(bar);
    // Unsigned 64-bit order as signed order: both sides with the top bit flipped.
    const __m256i top = _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull));
    const __m256i floor_v =
        _mm256_xor_si256(_mm256_set1_epi64x(static_cast<long long>(floor)), top);
    const __m256i sign_bit = _mm256_set1_epi32(static_cast<int>(0x80000000u));
    const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
    const __m256i inf_bits = _mm256_set1_epi32(0x7F800000);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 s = _mm256_loadu_ps(scores + i);
      std::uint64_t v8;
      std::memcpy(&v8, valid + i, sizeof v8);
      const __m256i v = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(v8)));
      const __m256 live = _mm256_castsi256_ps(_mm256_cmpgt_epi32(v, _mm256_setzero_si256()));
      const int pass =
          _mm256_movemask_ps(_mm256_and_ps(_mm256_cmp_ps(s, bar_v, _CMP_NLT_UQ), live));
      if (pass == 0) continue;
      const __m256i b = _mm256_castps_si256(s);
      const __m256i mag = _mm256_and_si256(b, magnitude);
      const __m256i nan = _mm256_cmpgt_epi32(mag, inf_bits);  // (both sides non-negative)
      const __m256i zero = _mm256_cmpeq_epi32(mag, _mm256_setzero_si256());
      __m256i rank = _mm256_xor_si256(b, _mm256_or_si256(_mm256_srai_epi32(b, 31), sign_bit));
      rank = _mm256_blendv_epi8(rank, sign_bit, zero);
      rank = _mm256_or_si256(rank, nan);  // NaN: all ones
      const __m256i keep = _mm256_and_si256(_mm256_srli_epi32(b, 31), _mm256_or_si256(nan, zero));
      const __m256i reversed =
          _mm256_sub_epi32(_mm256_set1_epi32(static_cast<int>(0x7FFFFFFF - (col + i))), lane);
      const __m256i low = _mm256_or_si256(_mm256_slli_epi32(reversed, 1), keep);
      for (int half = 0; half < 2; ++half) {
        const __m128i r = half ? _mm256_extracti128_si256(rank, 1) : _mm256_castsi256_si128(rank);
        const __m128i l = half ? _mm256_extracti128_si256(low, 1) : _mm256_castsi256_si128(low);
        const __m256i key = _mm256_or_si256(_mm256_slli_epi64(_mm256_cvtepu32_epi64(r), 32),
                                            _mm256_cvtepu32_epi64(l));
        const __m256i above = _mm256_cmpgt_epi64(_mm256_xor_si256(key, top), floor_v);
        const int take =
            _mm256_movemask_pd(_mm256_castsi256_pd(above)) & (pass >> (4 * half)) & 0xF;
        held += compress_store(out + held, take, key);
      }
    }
    return held +
           detail::admit_keys_scalar(scores + i, valid + i, n - i, col + i, floor, bar, out + held);
  }

  static std::int64_t compact_at_least(std::uint64_t* keys, std::int64_t n, std::uint64_t t) {
    std::int64_t out = 0, i = 0;
    // Unsigned 64-bit order as signed order: both sides with the top bit flipped.
    const __m256i top = _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull));
    const __m256i t_v = _mm256_xor_si256(_mm256_set1_epi64x(static_cast<long long>(t)), top);
    for (; i + 4 <= n; i += 4) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + i));
      const __m256i below = _mm256_cmpgt_epi64(t_v, _mm256_xor_si256(x, top));
      out += compress_store(keys + out, ~_mm256_movemask_pd(_mm256_castsi256_pd(below)) & 0xF, x);
    }
    const std::int64_t tail = detail::compact_at_least_scalar(keys + i, n - i, t);
    std::copy(keys + i, keys + i + tail, keys + out);
    return out + tail;
  }

 private:
  // The 64-bit lanes of v selected by take (4 bits), stored in order at out; returns how many.
  // AVX2 has no compress: a table of lane permutations, indexed by take, moves the selected
  // lanes to the front, and a masked store writes only them; all lanes (a row's first keys):
  // a plain store.
  static int compress_store(std::uint64_t* out, int take, __m256i v) {
    if (take == 0xF) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), v);
      return 4;
    }
    alignas(32) static constexpr std::int32_t to_front[16][8] = {
        {0, 0, 0, 0, 0, 0, 0, 0}, {0, 1, 0, 0, 0, 0, 0, 0}, {2, 3, 0, 0, 0, 0, 0, 0},
        {0, 1, 2, 3, 0, 0, 0, 0}, {4, 5, 0, 0, 0, 0, 0, 0}, {0, 1, 4, 5, 0, 0, 0, 0},
        {2, 3, 4, 5, 0, 0, 0, 0}, {0, 1, 2, 3, 4, 5, 0, 0}, {6, 7, 0, 0, 0, 0, 0, 0},
        {0, 1, 6, 7, 0, 0, 0, 0}, {2, 3, 6, 7, 0, 0, 0, 0}, {0, 1, 2, 3, 6, 7, 0, 0},
        {4, 5, 6, 7, 0, 0, 0, 0}, {0, 1, 4, 5, 6, 7, 0, 0}, {2, 3, 4, 5, 6, 7, 0, 0},
        {0, 1, 2, 3, 4, 5, 6, 7}};
    alignas(32) static constexpr std::int64_t first_lanes[5][4] = {
        {0, 0, 0, 0}, {-1, 0, 0, 0}, {-1, -1, 0, 0}, {-1, -1, -1, 0}, {-1, -1, -1, -1}};
    const int n = std::popcount(static_cast<unsigned>(take));
    const __m256i front = _mm256_permutevar8x32_epi32(
        v, _mm256_load_si256(reinterpret_cast<const __m256i*>(to_front[take])));
    _mm256_maskstore_epi64(reinterpret_cast<long long*>(out),
                           _mm256_load_si256(reinterpret_cast<const __m256i*>(first_lanes[n])),
                           front);
    return n;
  }

  // ---- e4m3 rows (MXFP8, FP8 per-token), which decode_row_f32 routes here ----
  friend struct x86_e4m3_decoders<isa_avx2>;
#if defined(__F16C__)
  // With F16C (every AVX2 CPU has it; the dispatch library's avx2 paths require it): through
  // half precision, as the AVX-512 path. 16 codes to fp16 (value / 2^8, exact): the code
  // sign-extended and shifted left by 7, the copy of the sign on bit 14 cleared; with Nan, the
  // NaN codes (magnitude bits all set) made NaN, without, a row must hold none (has_nan_code).
  template <bool Nan>
  static __m256i e4m3_to_half(__m128i bytes) {
    const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(bytes), 7),
                                       _mm256_set1_epi16(static_cast<short>(0xBF80)));
    if constexpr (!Nan) {
      return h;
    } else {
      const __m256i magnitude = _mm256_set1_epi16(0x3F80);
      const __m256i is_nan = _mm256_cmpeq_epi16(_mm256_and_si256(h, magnitude), magnitude);
      return _mm256_blendv_epi8(h, _mm256_set1_epi16(0x7E00), is_nan);
    }
  }
  template <int Blocks>
  static bool has_nan_code(const std::uint8_t* data) {
    const __m256i low7 = _mm256_set1_epi8(0x7F);
    __m256i any = _mm256_setzero_si256();
    MQALOGITS_UNROLL
    for (int b = 0; b < Blocks; ++b)
      any = _mm256_or_si256(
          any, _mm256_cmpeq_epi8(
                   _mm256_and_si256(
                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + 32 * b)), low7),
                   low7));
    return !_mm256_testz_si256(any, any);
  }
  // Blocks x 32 codes, each block as four vectors of 8 fp32 (code / 2^8) handed to
  // visit(block, parts) (x86_e4m3_decoders scales and stores them).
  template <int Blocks, bool Nan, class Visit>
  static void e4m3_blocks(const std::uint8_t* data, Visit visit) {
    MQALOGITS_UNROLL
    for (int b = 0; b < Blocks; ++b) {
      const __m256i h0 =
          e4m3_to_half<Nan>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 32 * b)));
      const __m256i h1 =
          e4m3_to_half<Nan>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 32 * b + 16)));
      const __m256 parts[4] = {_mm256_cvtph_ps(_mm256_castsi256_si128(h0)),
                               _mm256_cvtph_ps(_mm256_extracti128_si256(h0, 1)),
                               _mm256_cvtph_ps(_mm256_castsi256_si128(h1)),
                               _mm256_cvtph_ps(_mm256_extracti128_si256(h1, 1))};
      visit(b, parts);
    }
  }
#else
  // Without F16C (-mavx2 alone does not enable it): every code to its exact fp32 value, then one
  // multiply by the block (or row) scale, the one rounding Format::decode_row does too.
  template <int Blocks>
  static void decode_e4m3_ue8m0(const std::uint8_t* data, const std::uint8_t* scales, float* out) {
    for (int b = 0; b < Blocks; ++b)
      decode_e4m3(data + 32 * b, 32, _mm256_set1_ps(ue8m0_values[scales[b]]), out + 32 * b);
  }
  template <int Blocks>
  static void decode_e4m3_fp32(const std::uint8_t* data, float scale, float* out) {
    decode_e4m3(data, 32 * Blocks, _mm256_set1_ps(scale), out);
  }

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
#endif
};

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
#endif
