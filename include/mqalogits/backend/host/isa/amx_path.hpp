// The AMX path over any instruction set Base and any tile implementation Tiles: Base's vectors,
// decoders, fp32 kernel and top-k steps, with the score steps of the e4m3 formats (bf16 form)
// and of MXFP4 (folded and per-block int8 forms) done in tiles (amx_scores.hpp).
// isa/avx512_amx.hpp instantiates it over AVX-512 and the AMX instructions; the tests over the
// compiled paths and the tile model (amx/tile_model.hpp), which runs it on any CPU.
//
// The layouts are the other paths' ones, read in tiles of 16 keys x Base::lanes heads (16 on
// AVX-512): the bf16 query row's words of pairs, [d/2][padded heads], are TDPBF16PS's second
// operand as they are; each key's D/2 words are a row of its first operand. MXFP4 keys keep
// signed doubled codes (TDPBSSD multiplies signed bytes), so int32 sums need no offset; the
// query row's words, [head vector][D/4 steps][lanes] when folded and
// [block][head vector][8 steps][lanes] per block, are TDPBSSD's second operand for one head
// vector (and block). Rows and keys take the compact forms only where those are exact
// (decode.hpp): other e4m3 rows stay on Base's fp32 kernel, and MXFP4 rows whose block
// exponents do not fold take one tile step per block.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "../../../config.hpp"
#include "base.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

template <class Base, class Tiles>
struct amx_path : Base {
  static_assert(Base::lanes <= 16 && 16 % Base::lanes == 0,
                "a tile row of 64 bytes holds a whole number of head vectors");
  using base = Base;
  using tiles = Tiles;
  static constexpr const char* name = Tiles::path;
  static constexpr const char* path = Tiles::path;

  // The e4m3 formats' bf16 form exists here (kernel_table.hpp then takes the tile kernel).
  static constexpr bool bf16_pairs = true;
  // MXFP4: signed bytes; rows and keys that fold (decode.hpp) take one TDPBSSD sum per 64
  // bytes, the others the per-block kernel.
  static constexpr bool fold_rows = true;
  static constexpr bool relative_rows = false;
  static constexpr bool int16_block_sums = false;
  using int8 = int8_signed_keys;

  // acc + the sum of the 4 products s8(k) * s8(q) in each 32-bit lane: the ISA's dot product in
  // its own encoding (signed keys), as the tests of every path check it. The path's kernels
  // multiply in tiles and never call it, so it is plain code over Base's integer vectors.
  static typename Base::vi dot4(typename Base::vi acc, typename Base::vi k, typename Base::vi q) {
    using vi = typename Base::vi;
    static_assert(sizeof(vi) == 4 * Base::lanes, "one int32 per lane");
    alignas(64) std::int32_t a[Base::lanes], kw[Base::lanes], qw[Base::lanes];
    std::memcpy(a, &acc, sizeof a);
    std::memcpy(kw, &k, sizeof kw);
    std::memcpy(qw, &q, sizeof qw);
    for (int l = 0; l < Base::lanes; ++l)
      for (int b = 0; b < 4; ++b)
        a[l] += static_cast<std::int8_t>(static_cast<std::uint32_t>(kw[l]) >> 8 * b) *
                static_cast<std::int8_t>(static_cast<std::uint32_t>(qw[l]) >> 8 * b);
    return Base::loadi(a);
  }

  // One e4m3 row as bf16 pairs: MXFP8 rows with their block scales, FP8 per-token rows without
  // their row scale (the kernel multiplies by it). Base's integer form where it has one and the
  // row is the usual one; else through Base's fp32 decoders: every value decode.hpp lets
  // through is a bf16 value exactly (4 significant bits, a normal exponent), so its fp32 bits'
  // upper half is it; a NaN code stays a quiet NaN.
  template <class Format>
  static void decode_row_bf16(const std::uint8_t* data, const std::uint8_t* scales,
                              std::uint32_t* out) {
    constexpr int D = Format::head_dim;
    if constexpr (requires { Base::template decode_row_bf16_direct<Format>(data, scales, out); })
      if (Base::template decode_row_bf16_direct<Format>(data, scales, out)) return;
    alignas(64) float v[static_cast<std::size_t>(D)];
    if constexpr (e4m3_ue8m0_rows<Format>)
      Base::template decode_row_f32<Format>(data, scales, v);
    else if constexpr (requires { Base::template decode_e4m3_fp32<D / 32>(data, 1.0f, v); })
      Base::template decode_e4m3_fp32<D / 32>(data, 1.0f, v);
    else
      for (int i = 0; i < D; ++i) v[i] = Format::element(data, i);
    auto half = [](float x) -> std::uint32_t {
      std::uint32_t bits;
      std::memcpy(&bits, &x, sizeof bits);
      return std::isnan(x) ? 0x7FC0u : bits >> 16;
    };
    for (int p = 0; p < D / 2; ++p) out[p] = half(v[2 * p]) | half(v[2 * p + 1]) << 16;
  }
};

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
