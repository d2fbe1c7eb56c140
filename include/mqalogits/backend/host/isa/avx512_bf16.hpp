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
  // One e4m3 row as bf16 pairs: isa_avx512's integer form for the usual row, else through fp32
  // (x86_e4m3_decoders, with this path's store_pairs). Both give the same bits.
  template <class Format>
  static void decode_row_bf16(const std::uint8_t* data, const std::uint8_t* scales,
                              std::uint32_t* out) {
    if (!decode_row_bf16_direct<Format>(data, scales, out))
      x86_e4m3_decoders<isa_avx512_bf16>::decode_row_bf16<Format>(data, scales, out);
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
