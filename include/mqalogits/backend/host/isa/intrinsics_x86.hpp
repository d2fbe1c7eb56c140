// <immintrin.h> for the x86 ISA files, without the warnings GCC 12's AVX-512 intrinsics raise
// (they seed results with _mm512_undefined_*(), which -Wuninitialized reports once inlined):
// the pragma covers the header's lines when this is its first inclusion, and
// MQALOGITS_GCC12_INTRINSICS_WARNINGS_OFF / _ON cover the code that calls them, for a consumer
// that included <immintrin.h> first. And in_register, which keeps the micro-kernels' schedule
// independent of the -mtune an engine builds with. And what the two x86 paths share beyond the
// intrinsics: their folded-kernel settings and the routing of e4m3 rows to their own decoders.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#define MQALOGITS_GCC12_INTRINSICS_WARNINGS_OFF                                        \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"") \
      _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define MQALOGITS_GCC12_INTRINSICS_WARNINGS_ON _Pragma("GCC diagnostic pop")
#else
#define MQALOGITS_GCC12_INTRINSICS_WARNINGS_OFF
#define MQALOGITS_GCC12_INTRINSICS_WARNINGS_ON
#endif

MQALOGITS_GCC12_INTRINSICS_WARNINGS_OFF
#include <immintrin.h>
MQALOGITS_GCC12_INTRINSICS_WARNINGS_ON

#include <cstdint>

#include "../../../config.hpp"
#include "base.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// A loaded vector the micro-kernel reuses across several multiply-adds, pinned to a register.
// Without it GCC's AMD Zen tuning (-march=znver*, -mtune=znver*) folds the load into every
// multiply-add that reads it ("vfmadd231ps (mem)" once per key), turning one load per query
// vector into one per product: the loads, not the multiply-adds, then bound the loop (a 2 x 4
// fp32 block issued 12 loads per 8 FMAs and ran at 41% of the FMA peak instead of 91%). The
// empty asm generates no instruction; it only makes the value live in a register (volatile:
// without it GCC 12 may still drop it and fold the loads).
template <class V>
inline V in_register(V v) {
#if defined(__GNUC__) || defined(__clang__)
  __asm__ volatile("" : "+v"(v));
#endif
  return v;
}

// The folded int8 kernel's settings of an x86 path: with VNNI (vpdpbusd sums in int32) those of
// every other path.
template <bool Vnni>
struct x86_fold_settings {
  static constexpr int fold_query_spread = fold_spread;
  static constexpr bool fold_rows = true;
};
template <>
struct x86_fold_settings<false> {
  // vpmaddubsw saturates its int16 pair sums: folded keys reach 192 (k + 96), so queries may
  // only be shifted by up to 2 (|q| <= 48: 2 x 192 x 48 = 18432 < 2^15).
  static constexpr int fold_query_spread = 2;
  // And the folded kernel cannot sum in int16 (its pairs reach 18432), so each of its steps
  // costs vpmaddubsw + vpmaddwd + vpaddd where the per-block kernel's costs vpmaddubsw + vpaddw:
  // rows that fold run faster through the per-block kernel, and the driver never folds.
  static constexpr bool fold_rows = false;
};

// decode_row_f32<Format> of an x86 path I with its own exact e4m3 decoders: MXFP8 rows go to
// I::decode_e4m3_ue8m0<blocks>(data, scales, out), FP8 per-token rows to
// I::decode_e4m3_fp32<blocks>(data, row scale, out) (blocks of 32 codes), other formats to
// their own Format::decode_row (plain_decoders).
template <class I>
struct x86_e4m3_decoders : plain_decoders {
  template <class Format>
  static void decode_row_f32(const std::uint8_t* data, const std::uint8_t* scales, float* out) {
    if constexpr (e4m3_ue8m0_rows<Format> && Format::data_bytes == Format::head_dim) {
      I::template decode_e4m3_ue8m0<Format::blocks>(data, scales, out);
    } else if constexpr (e4m3_fp32_rows<Format> && Format::data_bytes == Format::head_dim) {
      I::template decode_e4m3_fp32<Format::head_dim / 32>(data, Format::block_scale(scales, 0),
                                                          out);
    } else {
      Format::decode_row(data, scales, out);
    }
  }
};

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
