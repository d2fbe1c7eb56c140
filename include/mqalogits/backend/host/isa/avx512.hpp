// The AVX-512 path (F, BW, VL, DQ + FMA): 16 fp32 lanes, 32 vector registers. Int8 dot products
// through VNNI (vpdpbusd) when the target has it, else vpmaddubsw + vpmaddwd; both multiply
// unsigned by signed bytes, so keys are offset. Its own exact decoders for MXFP8 rows and for
// packed e2m1 rows.
#pragma once

#include "base.hpp"

#if defined(MQALOGITS_HOST_AVX512)
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>

#include "intrinsics_x86.hpp"
#include "paths.hpp"

MQALOGITS_GCC12_INTRINSICS_WARNINGS_OFF
MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

struct isa_avx512_bf16;

struct isa_avx512 : x86_e4m3_decoders<isa_avx512>,
#if defined(MQALOGITS_HOST_VNNI512)
                    x86_fold_settings<true> {
#else
                    x86_fold_settings<false> {
#endif
  static constexpr const char* name = "avx512";
  // The path's full name (target.hpp's tag): the ISA and its int8 extension.
#if defined(MQALOGITS_HOST_VNNI512)
  static constexpr const char* path = isa_path_name(isa_path_id::avx512_vnni);
#else
  static constexpr const char* path = isa_path_name(isa_path_id::avx512);
#endif
  static constexpr int lanes = 16;
  using vf = __m512;
  using vi = __m512i;
  using mask = __mmask16;

  // head_vectors x keys accumulators + keys broadcasts + one query vector fit in 32 registers
  // (the int8 kernel also keeps its block-scaled fp32 sums live across the 4 blocks). The
  // folded kernel's 2 x 8 kept 5 accumulators on the stack across its block loop; 2 x 6 keeps
  // them all in registers and ran 3-5% faster on Zen 5 (2 x 7: 2-4%, 3 x 4: slower).
  static constexpr register_block f32_blocks[] = {{4, 4, 6}, {3, 3, 7}, {2, 2, 10}, {1, 1, 14}};
  static constexpr register_block i8_blocks[] = {{2, 2, 6}, {1, 1, 10}};
  static constexpr register_block i8_fold_blocks[] = {{2, 2, 6}, {1, 1, 14}};
  using int8 = int8_offset_keys;

  // These operations (and the top-k steps below) mirror isa_avx2's in shape only: 512-bit
  // types, intrinsics, masks and reductions differ, so each ISA spells its own.
  static vf zero() {
    return _mm512_setzero_ps();
  }
  static vf load(const float* p) {
    return in_register(_mm512_loadu_ps(p));
  }
  static void store(float* p, vf v) {
    _mm512_storeu_ps(p, v);
  }
  static vf broadcast(const float* p) {
    return _mm512_set1_ps(*p);
  }
  static vf fma(vf a, vf b, vf c) {
    return _mm512_fmadd_ps(a, b, c);
  }
  static vf mul(vf a, vf b) {
    return _mm512_mul_ps(a, b);
  }
  // vminps returns its second operand when either is NaN: NaN is kept.
  static vf cap_infinity(vf a) {
    return _mm512_min_ps(_mm512_set1_ps(std::numeric_limits<float>::max()), a);
  }
  static mask live(int n) {
    if (n <= 0) return 0;
    return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
  }
  // max(0, a) returns its second operand, a, when a is NaN: relu(NaN) stays NaN.
  static vf relu(vf a, mask m) {
    return _mm512_maskz_max_ps(m, _mm512_setzero_ps(), a);
  }
  static float reduce(vf a) {
    const __m256 h =
        _mm256_add_ps(_mm512_castps512_ps256(a),
                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    const __m128 x = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 q = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
  }
  // out[i] = reduce(v[i]) for 16 vectors, by reduce's tree (the 256-, 128-, 64- and 32-bit halves
  // added in turn, so each sum is bit for bit reduce's), 16 vectors at a time: 46 instructions
  // in place of 16 reductions of 8 and 16 scalar stores.
  static void reduce16(const vf* v, float* out) {
    vf t[8], u[4], w[2];
    for (int m = 0; m < 8; ++m)  // lanes 0-7: v[m]'s halves summed; lanes 8-15: v[m + 8]'s
      t[m] = _mm512_add_ps(_mm512_shuffle_f32x4(v[m], v[m + 8], 0x44),
                           _mm512_shuffle_f32x4(v[m], v[m + 8], 0xEE));
    for (int m = 0; m < 4; ++m)  // 128-bit blocks: keys m, m + 8, m + 4, m + 12
      u[m] = _mm512_add_ps(_mm512_shuffle_f32x4(t[m], t[m + 4], 0x88),
                           _mm512_shuffle_f32x4(t[m], t[m + 4], 0xDD));
    for (int m = 0; m < 2; ++m)  // two lanes each of u[m]'s and u[m + 2]'s key per block
      w[m] = _mm512_add_ps(
          _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(u[m]), _mm512_castps_pd(u[m + 2]))),
          _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(u[m]), _mm512_castps_pd(u[m + 2]))));
    const vf z = _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                               _mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
    // z's lanes hold keys 0 2 1 3, 8 10 9 11, 4 6 5 7, 12 14 13 15: the same list reorders them.
    const __m512i order = _mm512_setr_epi32(0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15);
    _mm512_storeu_ps(out, _mm512_permutexvar_ps(order, z));
  }

  static vi zeroi() {
    return _mm512_setzero_si512();
  }
  static vi loadi(const std::int32_t* p) {
    return in_register(_mm512_loadu_si512(p));
  }
  static vi broadcast4(const std::uint8_t* p) {
    std::int32_t x;
    std::memcpy(&x, p, 4);
    return _mm512_set1_epi32(x);
  }
  // acc + the sum of the 4 products u8(k) * s8(q) in each 32-bit lane.
  static vi dot4(vi acc, vi k, vi q) {
#if defined(MQALOGITS_HOST_VNNI512)
    return _mm512_dpbusd_epi32(acc, k, q);
#else
    return in_register(_mm512_add_epi32(acc, widen_int16(_mm512_maddubs_epi16(k, q))));
#endif
  }
#if !defined(MQALOGITS_HOST_VNNI512)
  // Without VNNI, a block's steps summed in int16 as on AVX2 (isa_avx2::dot4_int16).
  static constexpr bool int16_block_sums = true;
  static vi dot4_int16(vi acc, vi k, vi q) {
    return in_register(_mm512_add_epi16(acc, _mm512_maddubs_epi16(k, q)));
  }
  // The int16 sums of acc, pairwise, in int32.
  static vi widen_int16(vi acc) {
    return _mm512_madd_epi16(acc, _mm512_set1_epi16(1));
  }
#endif
  static vf to_float(vi a) {
    return _mm512_cvtepi32_ps(a);
  }

  // One packed e2m1 row of 128 (64 bytes) into 128 bytes codes.block[b][nibble] in the stored
  // block order: 128-bit lane b of the load is block b, so its nibbles go through block b's
  // table in lane b (vpshufb), then block b's low and high nibbles are put side by side. Rows of
  // 64 take the plain decoder (the same bytes).
  template <int D = default_head_dim>
  static void decode_e2m1_doubled(const std::uint8_t* packed, const block_codes<D>& codes,
                                  std::uint8_t* out) {
    if constexpr (D != 128) {
      plain_decoders::decode_e2m1_doubled<D>(packed, codes, out);
    } else {
      const __m512i x = _mm512_loadu_si512(packed);
      const __m512i nib = _mm512_set1_epi8(0x0F);
      auto table = [&](int b) {
        return _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes.block[b]));
      };
      const __m512i t = _mm512_inserti32x4(
          _mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(table(0)), table(1), 1),
                             table(2), 2),
          table(3), 3);
      const __m512i lo = _mm512_shuffle_epi8(t, _mm512_and_si512(x, nib));
      const __m512i hi = _mm512_shuffle_epi8(t, _mm512_and_si512(_mm512_srli_epi16(x, 4), nib));
      // 128-bit lanes: block b's low nibbles are lane b of lo, its high nibbles lane b of hi.
      const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
      const __m512i second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
      _mm512_storeu_si512(out, _mm512_permutex2var_epi64(lo, first, hi));
      _mm512_storeu_si512(out + 64, _mm512_permutex2var_epi64(lo, second, hi));
    }
  }

  // ---- top-k selection (output/topk_select.hpp): the same keys as admit_keys_scalar and
  // compact_at_least_scalar (topk_key.hpp) ----

  // 16 scores per step: keys built in 32-bit lanes as topk_key::make does, widened to 64 bits,
  // and the admitted ones compressed to the front of a vector and stored.
  static std::int64_t admit_keys(const float* scores, const unsigned char* valid, std::int64_t n,
                                 std::int64_t col, std::uint64_t floor, float bar,
                                 std::uint64_t* out) {
    std::int64_t held = 0;
    const __m512 bar_v = _mm512_set1_ps(bar);
    const __m512i floor_v = _mm512_set1_epi64(static_cast<long long>(floor));
    const __m512i sign_bit = _mm512_set1_epi32(static_cast<int>(0x80000000u));
    const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF);
    const __m512i inf_bits = _mm512_set1_epi32(0x7F800000);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (std::int64_t i = 0; i < n; i += 16) {
      const auto in_range = static_cast<__mmask16>(n - i >= 16 ? 0xFFFFu : (1u << (n - i)) - 1u);
      const __m128i v = _mm_maskz_loadu_epi8(in_range, valid + i);
      const __m512 s = _mm512_maskz_loadu_ps(in_range, scores + i);
      const __mmask16 pass =
          _mm512_mask_cmp_ps_mask(_mm_mask_test_epi8_mask(in_range, v, v), s, bar_v, _CMP_NLT_UQ);
      if (pass == 0) continue;
      const __m512i b = _mm512_castps_si512(s);
      const __m512i mag = _mm512_and_si512(b, magnitude);
      const __mmask16 nan = _mm512_cmpgt_epu32_mask(mag, inf_bits);
      const __mmask16 zero = _mm512_testn_epi32_mask(mag, mag);
      __m512i rank = _mm512_xor_si512(b, _mm512_or_si512(_mm512_srai_epi32(b, 31), sign_bit));
      rank = _mm512_mask_mov_epi32(rank, zero, sign_bit);
      rank = _mm512_mask_mov_epi32(rank, nan, _mm512_set1_epi32(-1));
      const __m512i keep = _mm512_maskz_srli_epi32(static_cast<__mmask16>(nan | zero), b, 31);
      const __m512i reversed =
          _mm512_sub_epi32(_mm512_set1_epi32(static_cast<int>(0x7FFFFFFF - (col + i))), lane);
      const __m512i low = _mm512_or_si512(_mm512_slli_epi32(reversed, 1), keep);
      for (int half = 0; half < 2; ++half) {
        const __m256i r = half ? _mm512_extracti64x4_epi64(rank, 1) : _mm512_castsi512_si256(rank);
        const __m256i l = half ? _mm512_extracti64x4_epi64(low, 1) : _mm512_castsi512_si256(low);
        const __m512i key = _mm512_or_si512(_mm512_slli_epi64(_mm512_cvtepu32_epi64(r), 32),
                                            _mm512_cvtepu32_epi64(l));
        const auto take =
            _mm512_mask_cmpgt_epu64_mask(static_cast<__mmask8>(pass >> (8 * half)), key, floor_v);
        held += compress_store(out + held, take, key);
      }
    }
    return held;
  }

  static std::int64_t compact_at_least(std::uint64_t* keys, std::int64_t n, std::uint64_t t) {
    std::int64_t out = 0, i = 0;
    const __m512i t_v = _mm512_set1_epi64(static_cast<long long>(t));
    for (; i + 8 <= n; i += 8) {
      const __m512i x = _mm512_loadu_si512(keys + i);
      out += compress_store(keys + out, _mm512_cmpge_epu64_mask(x, t_v), x);
    }
    const std::int64_t tail = detail::compact_at_least_scalar(keys + i, n - i, t);
    std::copy(keys + i, keys + i + tail, keys + out);
    return out + tail;
  }

 private:
  // The lanes of v selected by take, stored in order at out; returns how many. (A masked store
  // of the compressed vector: the compressing store to memory is slow on some cores.)
  // All lanes (a row's first keys): a plain store, since the compress is the slow part.
  static int compress_store(std::uint64_t* out, __mmask8 take, __m512i v) {
    if (take == 0xFF) {
      _mm512_storeu_si512(out, v);
      return 8;
    }
    const int n = std::popcount(static_cast<unsigned>(take));
    _mm512_mask_storeu_epi64(out, static_cast<__mmask8>((1u << n) - 1u),
                             _mm512_maskz_compress_epi64(take, v));
    return n;
  }

 protected:
  // ---- e4m3 rows (MXFP8, FP8 per-token), which decode_row_f32 routes here ----
  // e4m3 -> fp16 is a pure bit move (same mantissa, exponent bias 7 vs 15: value / 2^8,
  // subnormals included), vcvtph2ps widens exactly, x 256 restores the value (exact), x the
  // block scale is the one rounding Format::decode_row does too. 0x7F / 0xFF would land on a
  // finite fp16: made NaN.
  friend struct x86_e4m3_decoders<isa_avx512>;
  friend struct x86_e4m3_decoders<isa_avx512_bf16>;

  // 32 e4m3 codes to fp16 (value / 2^8, exact), in two halves of 16 lanes: the code sign-extended
  // to 16 bits and shifted left by 7 puts its 7 magnitude bits on the half's exponent and
  // mantissa and its sign on bit 15; the copy of the sign on bit 14 is cleared. With Nan, the
  // NaN codes are made NaN; without, a row must hold none (has_nan_code).
  template <bool Nan>
  static __m512i e4m3_to_half(__m256i bytes) {
    const __m512i h = _mm512_and_si512(_mm512_slli_epi16(_mm512_cvtepi8_epi16(bytes), 7),
                                       _mm512_set1_epi16(static_cast<short>(0xBF80)));
    if constexpr (!Nan) {
      return h;
    } else {
      const __m256i low7 = _mm256_set1_epi8(0x7F);
      const __mmask32 is_nan = _mm256_cmpeq_epi8_mask(_mm256_and_si256(bytes, low7), low7);
      return _mm512_mask_mov_epi16(h, is_nan, _mm512_set1_epi16(0x7E00));
    }
  }

  // Whether a row of Blocks x 32 codes holds a NaN code (0x7F or 0xFF): checked once per row, so
  // that the decode of the (usual) rows without one skips the per-block fix.
  template <int Blocks>
  static bool has_nan_code(const std::uint8_t* data) {
    __mmask32 any = 0;
    const __m256i low7 = _mm256_set1_epi8(0x7F);
    MQALOGITS_UNROLL
    for (int b = 0; b < Blocks; ++b)
      any |= _mm256_cmpeq_epi8_mask(
          _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + 32 * b)),
                           low7),
          low7);
    return any != 0;
  }

  // One e4m3 row as bf16 pairs, when it is the usual row (no NaN code, block scales that keep
  // every value a normal bf16; returns false, writing nothing, otherwise), with integer
  // operations alone: e4m3 and bf16 differ only in the widths of exponent and mantissa, so a
  // code's bits move into place and one add rebases its exponent (bias 7 to 127) and applies
  // the block scale; codes of exponent 0 (zero, subnormals) take their magnitude from a table.
  // FP8 per-token rows without their row scale. The paths with a bf16 form (avx512_bf16, AMX)
  // take it, and the same bits through fp32 for the other rows.
  template <class Format>
  static bool decode_row_bf16_direct(const std::uint8_t* data, const std::uint8_t* scales,
                                     std::uint32_t* out) {
    constexpr int blocks = Format::head_dim / 32;
    static_assert(Format::data_bytes == Format::head_dim && Format::head_dim % 32 == 0);
    bool direct = true;
    if constexpr (e4m3_ue8m0_rows<Format>)
      for (int b = 0; b < blocks; ++b) direct &= scales[b] >= 7 && scales[b] <= 246;
    if (!direct || has_nan_code<blocks>(data)) return false;
    MQALOGITS_UNROLL
    for (int b = 0; b < blocks; ++b) {
      int e = 127;
      if constexpr (e4m3_ue8m0_rows<Format>) e = scales[b];
      e4m3_block_to_bf16(data + 32 * b, e, out + 16 * b);
    }
    return true;
  }
  // 32 e4m3 codes (no NaN code) times 2^(e - 127), 7 <= e <= 246, as bf16: exact, every result a
  // normal bf16 or zero.
  static void e4m3_block_to_bf16(const std::uint8_t* codes, int e, std::uint32_t* out) {
    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes));
    const __m512i w = _mm512_cvtepi8_epi16(bytes);  // sign on bits 15..7, magnitude on 6..0
    // The sign on bit 15, the 4 exponent and 3 mantissa bits on bf16's bits 10..4; then the
    // exponent rebased and scaled.
    __m512i t =
        _mm512_and_si512(_mm512_slli_epi16(w, 4), _mm512_set1_epi16(static_cast<short>(0x87F0)));
    t = _mm512_add_epi16(t, _mm512_set1_epi16(static_cast<short>((e - 7) * 128)));
    // Exponent 0: m x 2^-9 x 2^(e - 127) for mantissa m (0 for m = 0), looked up by the code's
    // low bits; the sign is put back on every lane (a no-op where it is there already).
    const __mmask32 low = _mm256_testn_epi8_mask(bytes, _mm256_set1_epi8(0x78));
    const __m512i table = _mm512_maskz_add_epi16(
        0xFEu, subnormal_bf16(), _mm512_set1_epi16(static_cast<short>((e - 127) * 128)));
    t = _mm512_mask_permutexvar_epi16(t, low, w, table);
    t = _mm512_ternarylogic_epi32(t, w, _mm512_set1_epi16(static_cast<short>(0x8000)), 0xF8);
    _mm512_storeu_si512(out, t);
  }
  // The bf16 bits of m x 2^-9 in word m (m = 0..7).
  static __m512i subnormal_bf16() {
    return _mm512_setr_epi32(0x3B000000, 0x3BC03B80, 0x3C203C00, 0x3C603C40, 0, 0, 0, 0, 0, 0, 0, 0,
                             0, 0, 0, 0);
  }

  // Blocks x 32 codes, each block's two halves of 16 widened to fp32 (code / 2^8) and handed to
  // visit(block, parts) (x86_e4m3_decoders scales and stores them).
  template <int Blocks, bool Nan, class Visit>
  static void e4m3_blocks(const std::uint8_t* data, Visit visit) {
    MQALOGITS_UNROLL
    for (int b = 0; b < Blocks; ++b) {
      const __m512i h =
          e4m3_to_half<Nan>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + 32 * b)));
      const __m512 parts[2] = {_mm512_cvtph_ps(_mm512_castsi512_si256(h)),
                               _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1))};
      visit(b, parts);
    }
  }
};

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
MQALOGITS_GCC12_INTRINSICS_WARNINGS_ON
#endif
