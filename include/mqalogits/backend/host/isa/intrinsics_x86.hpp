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

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "../../../config.hpp"
#include "../../../format/ue8m0.hpp"
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
  // rows that fold run faster through the per-block kernel, and the driver never folds. (The
  // AVX2 path's compact form is the relative one instead: isa_avx2::relative_rows.)
  static constexpr bool fold_rows = false;
};

// decode_row_f32<Format> of an x86 path I with its own exact e4m3 decoders: MXFP8 rows go to
// I::decode_e4m3_ue8m0<blocks>(data, scales, out), FP8 per-token rows to
// I::decode_e4m3_fp32<blocks>(data, row scale, out) (blocks of 32 codes), other formats to
// their own Format::decode_row (plain_decoders). On a path with bf16 pairs (I::store_pairs),
// decode_row_bf16<Format> writes the same values as bf16 pairs: MXFP8 rows with their block
// scales, FP8 per-token rows without their row scale (the kernel multiplies by it).
//
// Those two are written here for paths that widen e4m3 through half precision:
// I::e4m3_blocks<Blocks, Nan>(data, visit) hands visit(block, parts) each block's 32 codes as
// fp32 vectors worth code / 2^8 (exact: e4m3 -> fp16 is a bit move, vcvtph2ps widens exactly),
// NaN codes made NaN with Nan, and rows without NaN codes (I::has_nan_code) take it without. x 2^8
// restores each value exactly and x the scale is the one rounding Format::decode_row does too;
// where the scale's 2^8 multiple is a normal float, the two are one multiply by that multiple
// (the same product, rounded once). A path without the widening defines its own.
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
  template <class Format>
  static void decode_row_bf16(const std::uint8_t* data, const std::uint8_t* scales,
                              std::uint32_t* out) {
    static_assert(Format::data_bytes == Format::head_dim && Format::head_dim % 32 == 0);
    if constexpr (e4m3_ue8m0_rows<Format>)
      decode_e4m3_ue8m0<Format::blocks>(data, scales, out);
    else
      decode_e4m3_fp32<Format::head_dim / 32>(data, 1.0f, out);
  }

  // out: fp32 values, or (on a path with I::store_pairs) bf16 pairs.
  template <int Blocks, class Out>
  static void decode_e4m3_ue8m0(const std::uint8_t* data, const std::uint8_t* scales, Out* out) {
    e4m3_halves<Blocks>(data, [&](int b, const auto& parts) {
      const std::uint8_t e = scales[b];
      // 2^8 x 2^(e - 127) is a normal float for 1 <= e <= 246. Byte 0 keeps its own subnormal
      // scale (2^-127), so that denormals-are-zero reads the block as 0 here as on every other
      // path.
      if (e != 0 && e <= 246)
        store_scaled(block_out(out, b), parts, ue8m0_values[e + 8]);
      else
        store_scaled(block_out(out, b), parts, 256.0f, ue8m0_values[e]);
    });
  }

  template <int Blocks, class Out>
  static void decode_e4m3_fp32(const std::uint8_t* data, float scale, Out* out) {
    const float magnitude = std::fabs(scale);
    if (magnitude >= 0x1p-100f && magnitude <= 0x1p100f) {
      const float both = scale * 256.0f;
      e4m3_halves<Blocks>(
          data, [&](int b, const auto& parts) { store_scaled(block_out(out, b), parts, both); });
    } else {
      e4m3_halves<Blocks>(data, [&](int b, const auto& parts) {
        store_scaled(block_out(out, b), parts, 256.0f, scale);
      });
    }
  }

 private:
  // Where block b of a row starts: 32 fp32 values, or 16 words of bf16 pairs.
  static float* block_out(float* out, int b) { return out + 32 * b; }
  static std::uint32_t* block_out(std::uint32_t* out, int b) { return out + 16 * b; }

  // The row's blocks with the NaN fix only when the row holds a NaN code (checked once per row).
  template <int Blocks, class Visit>
  static void e4m3_halves(const std::uint8_t* data, Visit visit) {
    if (I::template has_nan_code<Blocks>(data))
      I::template e4m3_blocks<Blocks, true>(data, visit);
    else
      I::template e4m3_blocks<Blocks, false>(data, visit);
  }
  // out[p] = parts[p] x s (x t), vector by vector.
  template <class V, std::size_t N>
  static void store_scaled(float* out, const V (&parts)[N], float s) {
    const V sv = I::broadcast(&s);
    MQALOGITS_UNROLL
    for (std::size_t p = 0; p < N; ++p) I::store(out + p * I::lanes, I::mul(parts[p], sv));
  }
  template <class V, std::size_t N>
  static void store_scaled(float* out, const V (&parts)[N], float s, float t) {
    const V sv = I::broadcast(&s), tv = I::broadcast(&t);
    MQALOGITS_UNROLL
    for (std::size_t p = 0; p < N; ++p)
      I::store(out + p * I::lanes, I::mul(I::mul(parts[p], sv), tv));
  }
  // The same into bf16 pairs (a block is two vectors on the paths that have them).
  template <class V>
  static void store_scaled(std::uint32_t* out, const V (&parts)[2], float s) {
    const V sv = I::broadcast(&s);
    I::store_pairs(out, I::mul(parts[0], sv), I::mul(parts[1], sv));
  }
  template <class V>
  static void store_scaled(std::uint32_t* out, const V (&parts)[2], float s, float t) {
    const V sv = I::broadcast(&s), tv = I::broadcast(&t);
    I::store_pairs(out, I::mul(I::mul(parts[0], sv), tv), I::mul(I::mul(parts[1], sv), tv));
  }
};

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
