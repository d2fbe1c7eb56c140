// The integer instruction sequences that decode MX codes on engines without an e4m3fn or
// e2m1 type (trn1 / trn2).
#pragma once

#include "../../config.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// The instruction sequence that decodes a format's codes on VectorE where no instruction does it
// (trn1 / trn2: no e4m3fn or e2m1 type). Each step is one VectorE instruction over the row's
// elements (x num / den), with one or two inputs, on 16-bit data or not. e4m3fn -> bf16 bits:
// (x & 0x7F) << 4 and (x & 0x80) << 8 (tensor_scalar, two ALU ops each), their OR
// (tensor_tensor), times 2^120 read as bf16 (the exponent re-bias, exact for subnormals too),
// times the block scale broadcast along the 32 elements (tensor_tensor), NaN codes by
// (x & 0x7F) == 0x7F and a predicated copy. e2m1: low and high nibbles (x & 0xF, x >> 4) to
// even and odd elements, sign (n & 8) << 12 and magnitude (n & 7) << 6, OR, times 2^126, times
// the scale. UE8M0 scales become bf16 2^(s - 127) by s << 7 plus fixes of s = 0 and s = 255
// (three instructions over the 4 scales of a row, counted by the caller). Where VectorE and
// GpSimd have separate SBUF ports (trn2), each one-input integer step reading SBUF (the masks,
// shifts, the NaN compare, the scale fixes) runs on whichever of the two would finish it first.
struct decode_step {
  int inputs;
  int num, den;
  bool applies_scale;  // the step that multiplies by the row's scale (skipped without scales)
  bool bf16_arith;     // bf16 arithmetic (the re-bias, the predicated copy); else integer bits
};
inline constexpr decode_step e4m3_decode_steps[] = {
    {1, 1, 1, false, false}, {1, 1, 1, false, false}, {2, 1, 1, false, false},
    {1, 1, 1, false, true},  {2, 1, 1, true, false},  {1, 1, 1, false, false},
    {2, 1, 1, false, true}};
inline constexpr decode_step e2m1_decode_steps[] = {
    {1, 1, 2, false, false}, {1, 1, 2, false, false}, {1, 1, 1, false, false},
    {1, 1, 1, false, false}, {2, 1, 1, false, false}, {1, 1, 1, false, true},
    {2, 1, 1, true, false}};
inline constexpr int scale_decode_instructions = 3;

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
