// What the matmul operands are for a generation and key format, and so which instructions
// build them.
//
// - trn1 / trn2 have no e4m3fn or e2m1 type: codes x scales are decoded to bf16 by integer
//   instructions (core::decode_codes). trn2 decodes where the codes arrive (a block per
//   partition, each UE8M0 exponent decoded once and read along its 32 codes by a broadcast
//   access pattern) and transposes the bf16 values, bit-exact on its TensorE (decode_first).
//   trn1's TensorE is not bit-accurate on NaN / Inf, so it transposes the codes and exponents as
//   integers, spreads the exponents to their 32 partitions by a 0/1 matmul and decodes after.
//   Every code times a power of two is exact in bf16, so the bf16 matmul loses nothing.
// - trn3 multiplies MXFP8 / MXFP4 natively (nc_matmul_mx): x4-packed words on 32 partitions, the
//   scales in the quadrant's rows. Four consecutive keys of a block go to the four quadrants
//   (quadrant j holds keys 4c + j), so four row-tiled 32-partition matmuls cover 4 x 128 keys.
// - fp8_per_token: the Q scale is folded into the weights and the K scale applied to the
//   head-summed row (relu(s x d) = |s| relu(sign(s) d): the sign flips the codes), so the codes
//   go through bf16 matmuls (trn1 / trn2) or fp8 "double row" matmuls (trn3, native e4m3fn)
//   instead of fp32 passes.
// A head dim D below 128 uses D partitions for the contraction (the matmuls, their cost and the
// transposes follow from it); on trn3's MX matmul, whose operands span whole 32-partition
// quadrants, a row of D / 4 words is padded with zero words (and zero exponents) to one quadrant.
#pragma once

#include <cstdint>

#include "../../config.hpp"
#include "../../format/mx.hpp"
#include "chunks.hpp"
#include "dtype.hpp"
#include "traits.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// The scale codecs the model has kernels for, asked of the codec: UE8M0 bytes per 32 elements
// (MX, is_mx_format_v), or one scale for the whole row (applied to the head-summed row).
template <class Scale, int Block, int HeadDim>
inline constexpr bool runs_scale_codec_v =
    (Scale::ue8m0_bytes && Block == mx_scale_block) || Block == HeadDim;
template <class Format>
inline constexpr bool runs_format_v =
    runs_scale_codec_v<typename Format::scale_type, Format::scale_block, Format::head_dim>;

template <class Gen, class Format>
struct operand_kind {
  static_assert(
      runs_scale_codec_v<typename Format::scale_type, Format::scale_block, Format::head_dim>,
      "mqalogits neuron model: no kernel for this scale codec (it reads UE8M0 bytes per "
      "32 elements or one scale per row)");
  using tr = traits<Gen>;
  static constexpr bool mx_format = is_mx_format_v<Format>;
  static constexpr bool per_token = !mx_format;           // one scale per row
  static constexpr bool mx = tr::mx_matmul && mx_format;  // trn3 MX matmul
  static constexpr bool fp4 = Format::data_type::bits == 4;
  static constexpr bool fp8_operands = per_token && tr::native_e4m3fn;  // trn3 fp8_per_token
  // trn2 decodes the codes where they arrive, a block per partition row, each UE8M0 exponent
  // decoded once to its bf16 value and read by a broadcast access pattern along its 32 codes,
  // then transposes the bf16 values, which its TensorE moves bit-exactly (NaN and Inf too): no
  // exponent transposes, no spreading matmuls, and every decode step reads SBUF, so GpSimd can
  // take any of them. trn1, whose transposes are not bit-accurate on NaN / Inf, transposes the
  // integer codes and exponents, spreads the exponents by a 0/1 matmul and decodes after.
  static constexpr bool decode_first = !mx && !fp8_operands && tr::exact_pe_transpose;
  static constexpr std::int64_t decode_slots = 2048 / Format::head_dim;  // per decode: 2048 codes
  static constexpr dtype word_type = fp4 ? dtype::fp4x4 : dtype::fp8x4;
  // The matmul operand: x4 words (trn3 MX), fp8 codes (trn3 per-token) or decoded bf16.
  static constexpr dtype operand_type = mx ? word_type : fp8_operands ? dtype::fp8 : dtype::bf16;
  static constexpr int db = Format::data_bytes, sb = Format::scale_bytes;
  static constexpr int D = Format::head_dim;          // the contraction: partitions of K^T and Q^T
  static constexpr int words = D / mx_pack;           // x4 words per row
  static constexpr int used_scales = Format::blocks;  // exponents of a row's 4-byte field in use
  static constexpr std::int64_t score_step = mx ? mx_pack * quadrant_tile : key_tile;
  static constexpr std::int64_t transpose_group = 4;  // [D, <= 128] transposes per PSUM bank
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
