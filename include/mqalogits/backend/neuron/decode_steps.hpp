// The instruction sequences that decode MX codes on engines without an e4m3fn or e2m1 type
// (trn1 / trn2).
#pragma once

#include "../../config.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// The instruction sequence that decodes a format's codes where no instruction does it (trn1 /
// trn2: no e4m3fn or e2m1 type). Each step is one VectorE instruction over the row's elements,
// with one or two inputs, on 16-bit data or not; the fewest the ISA allows, since reading the
// code as a signed byte makes the sign extension place the sign bit:
// - e4m3fn: (x << 4) & 0x87F0 of the signed byte (tensor_scalar, two ALU ops) is the bf16 bit
//   pattern of the code times 2^-120; times 2^120 as bf16 arithmetic (the exponent re-bias,
//   exact for subnormals too); times the block scale (tensor_tensor: it varies along the free
//   axis); NaN codes by (x & 0x7F) == 0x7F reduced to one flag per partition (tensor_scalar
//   with accumulation) and, only where a flag is set, a predicated copy of NaN.
// - e2m1 (each nibble unpacked into the high half of a byte): (y << 2) & 0x81C0 of the signed
//   byte is the code times 2^-126; times 2^126; times the block scale. No NaN.
// Where VectorE and GpSimd have separate SBUF ports (trn2), each one-input integer step runs on
// whichever of the two would finish it first. The UE8M0 scales become bf16 2^(s - 127) by
// s << 7 and fixes of s = 0 and s = 255 (scale_decode_instructions one-input steps).
struct decode_step {
  int inputs;
  bool applies_scale;  // the step that multiplies by the block scale (skipped without scales)
  bool bf16_arith;     // bf16 arithmetic (the re-bias, the predicated copy); else integer bits
  bool nan_only;       // runs only where the NaN-code flag is set
};
inline constexpr decode_step e4m3_decode_steps[] = {{1, false, false, false},
                                                    {1, false, true, false},
                                                    {2, true, false, false},
                                                    {1, false, false, false},
                                                    {2, false, true, true}};
inline constexpr decode_step e2m1_decode_steps[] = {
    {1, false, false, false}, {1, false, true, false}, {2, true, false, false}};
inline constexpr int scale_decode_instructions = 3;

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
