// The AVX-512 path with bf16 pair dot products (AVX512_BF16's vdpbf16ps): isa_avx512 plus the
// bf16 kernel of the e4m3 formats. An e4m3 code is a bf16 value exactly (4 significant bits of
// 8), and so is its product with a power-of-two block scale while that stays a normal float; the
// product of two bf16 values is exact in fp32. vdpbf16ps adds two such products to an fp32
// accumulator per lane, so one instruction does the work of two fp32 multiply-adds on the same
// values: the dot products are the same fp32 arithmetic, twice as fast where the instruction
// issues as often as vfmadd231ps (Zen 4 and Zen 5). It treats subnormal inputs and results as
// zero whatever MXCSR says: decode.hpp gives a row the bf16 form only where no value, product or
// partial sum can be subnormal.
#pragma once

#include "avx512.hpp"
#include "paths.hpp"

#if defined(MQALOGITS_HOST_BF16)
#include <cstdint>

MQALOGITS_GCC12_INTRINSICS_WARNINGS_OFF
MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

struct isa_avx512_bf16 : isa_avx512 {
  static constexpr const char* name = "avx512_bf16";
  static constexpr const char* path = isa_path_name(isa_path_id::avx512_bf16);
  // The bf16 kernel exists on this path (kernel_table.hpp asks).
  static constexpr bool bf16_pairs = true;
  // The fp32 kernel's blockings (the same registers: one accumulator per head vector and key).
  static constexpr register_block bf16_blocks[] = {{4, 4, 6}, {3, 3, 7}, {2, 2, 8}, {1, 1, 14}};

  // 16 words of bf16 pairs (a query step's head vector), as the fp32 vector type.
  static vf load_pairs(const std::uint32_t* p) {
    return in_register(_mm512_castsi512_ps(_mm512_loadu_si512(p)));
  }
  // One key's pair, in every lane.
  static vf broadcast_pair(const std::uint32_t* p) {
    return _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(*p)));
  }
  // acc + q.lo x k.lo + q.hi x k.hi in each lane (products exact, sums in fp32).
  static vf dot_pairs(vf acc, vf q, vf k) {
    return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh&>(q), reinterpret_cast<__m512bh&>(k));
  }
  // One e4m3 row as bf16 pairs. The usual row (no NaN code, block scales that keep every value
  // a normal bf16) is built with integer operations: e4m3
  // and bf16 differ only in the widths of exponent and mantissa, so a code's bits move into place
  // and one add rebases its exponent (bias 7 to 127) and applies the block scale; codes of
  // exponent 0 (zero, subnormals) take their magnitude from a table. Other rows go through fp32
  // (x86_e4m3_decoders, with this path's store_pairs). Both give the same bits.
  template <class Format>
  static void decode_row_bf16(const std::uint8_t* data, const std::uint8_t* scales,
                              std::uint32_t* out) {
    constexpr int blocks = Format::head_dim / 32;
    bool direct = true;
    if constexpr (e4m3_ue8m0_rows<Format>)
      for (int b = 0; b < blocks; ++b) direct &= scales[b] >= 7 && scales[b] <= 246;
    if (!direct || has_nan_code<blocks>(data)) {
      x86_e4m3_decoders<isa_avx512_bf16>::decode_row_bf16<Format>(data, scales, out);
      return;
    }
    MQALOGITS_UNROLL
    for (int b = 0; b < blocks; ++b) {
      int e = 127;
      if constexpr (e4m3_ue8m0_rows<Format>) e = scales[b];
      e4m3_block_to_bf16(data + 32 * b, e, out + 16 * b);
    }
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
  // 32 fp32 values (two vectors, in order) into 16 words of bf16 pairs: round to nearest even,
  // exact for the values decode.hpp hands it.
  static void store_pairs(std::uint32_t* out, vf lo, vf hi) {
    const __m512bh b = _mm512_cvtne2ps_pbh(hi, lo);
    _mm512_storeu_si512(out, reinterpret_cast<const __m512i&>(b));
  }
};

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
MQALOGITS_GCC12_INTRINSICS_WARNINGS_ON
#endif
