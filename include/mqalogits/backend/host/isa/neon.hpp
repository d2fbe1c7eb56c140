// The ARM64 NEON path (AdvSIMD, part of every armv8-a core): 4 fp32 lanes, 32 vector
// registers, fused multiply-add (vfmaq_f32) for the fp32 formats. The int8 path multiplies
// signed bytes by signed bytes, so keys are stored as they are: through sdot (vdotq_s32) when
// the target has the dot-product extension (armv8.2-a+dotprod, __ARM_FEATURE_DOTPROD), else
// through widening multiplies and pairwise adds, exact in int16 (|pair sum| <= 288).
#pragma once

#include "base.hpp"
#include "paths.hpp"

#if defined(MQALOGITS_HOST_NEON)
#include <arm_neon.h>

#include <cstdint>
#include <cstring>
#include <limits>

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

struct isa_neon : plain_decoders, scalar_topk {
  static constexpr const char* name = "neon";
  // The path's full name (target.hpp's tag): the ISA and its int8 extension.
#if defined(MQALOGITS_HOST_DOTPROD)
  static constexpr const char* path = isa_path_name(isa_path_id::neon_dotprod);
#else
  static constexpr const char* path = isa_path_name(isa_path_id::neon);
#endif
  static constexpr int lanes = 4;
  using vf = float32x4_t;
  using vi = int32x4_t;
  using mask = uint32x4_t;  // all-ones bits on live lanes

  // head_vectors x keys accumulators + keys broadcasts + one query vector fit in 32 registers
  // (the int8 kernel also keeps its block-scaled fp32 sums live across the 4 blocks).
  static constexpr register_block f32_blocks[] = {{4, 4, 6}, {3, 3, 7}, {2, 2, 10}, {1, 1, 14}};
  static constexpr register_block i8_blocks[] = {{2, 2, 6}, {1, 1, 10}};
  static constexpr register_block i8_fold_blocks[] = {{4, 4, 6}, {2, 2, 10}, {1, 1, 14}};
  // sdot sums in int32; without it the int16 products (<= 96 x 96) and their pair sums fit too.
  static constexpr int fold_query_spread = fold_spread;
  static constexpr bool fold_rows = true;  // the driver takes the folded kernel for rows that fold
  using int8 = int8_signed_keys;

  static vf zero() {
    return vdupq_n_f32(0.0f);
  }
  static vf load(const float* p) {
    return vld1q_f32(p);
  }
  static vf broadcast(const float* p) {
    return vld1q_dup_f32(p);
  }
  static vf fma(vf a, vf b, vf c) {
    return vfmaq_f32(c, a, b);
  }  // c + a * b, one rounding
  static vf mul(vf a, vf b) {
    return vmulq_f32(a, b);
  }
  // fmin returns NaN when either operand is NaN: NaN is kept.
  static vf cap_infinity(vf a) {
    return vminq_f32(a, vdupq_n_f32(std::numeric_limits<float>::max()));
  }
  static mask live(int n) {
    const int32x4_t lane = {0, 1, 2, 3};
    return vcltq_s32(lane, vdupq_n_s32(n));
  }
  // fmax returns NaN when either operand is NaN: relu(NaN) stays NaN.
  static vf relu(vf a, mask m) {
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(vmaxq_f32(zero(), a)), m));
  }
  static float reduce(vf a) {
    const float32x2_t h = vadd_f32(vget_low_f32(a), vget_high_f32(a));  // (0 + 2), (1 + 3)
    return vget_lane_f32(vpadd_f32(h, h), 0);
  }

  static vi zeroi() {
    return vdupq_n_s32(0);
  }
  static vi loadi(const std::int32_t* p) {
    return vld1q_s32(p);
  }
  static vi broadcast4(const std::uint8_t* p) {
    std::int32_t x;
    std::memcpy(&x, p, 4);
    return vdupq_n_s32(x);
  }
  // acc + the sum of the 4 products s8(k) * s8(q) in each 32-bit lane.
  static vi dot4(vi acc, vi k, vi q) {
    const int8x16_t kb = vreinterpretq_s8_s32(k), qb = vreinterpretq_s8_s32(q);
#if defined(MQALOGITS_HOST_DOTPROD)
    return vdotq_s32(acc, kb, qb);
#else
    const int16x8_t lo = vmull_s8(vget_low_s8(kb), vget_low_s8(qb));  // bytes 0..7
    const int16x8_t hi = vmull_high_s8(kb, qb);                       // bytes 8..15
    // Adjacent pairs, then adjacent pairs of pairs into the 32-bit lanes: bytes 4l..4l+3.
    return vpadalq_s16(acc, vpaddq_s16(lo, hi));
#endif
  }
  static vf to_float(vi a) {
    return vcvtq_f32_s32(a);
  }

  // Nibbles through the block's 16-entry table (tbl), one block (16 bytes) at a time: its low
  // nibbles, then its high nibbles.
  template <int D = default_head_dim>
  static void decode_e2m1_doubled(const std::uint8_t* packed, const block_codes<D>& codes,
                                  std::uint8_t* out) {
    const uint8x16_t nib = vdupq_n_u8(0x0F);
    for (int b = 0; b < D / mx_scale_block; ++b) {
      const uint8x16_t t = vld1q_u8(codes.block[b]);
      const uint8x16_t x = vld1q_u8(packed + 16 * b);
      vst1q_u8(out + 32 * b, vqtbl1q_u8(t, vandq_u8(x, nib)));
      vst1q_u8(out + 32 * b + 16, vqtbl1q_u8(t, vshrq_n_u8(x, 4)));
    }
  }
};

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
#endif
