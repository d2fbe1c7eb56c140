// The instruction sequences that turn stored codes (e4m3fn bytes, e2m1 nibbles, UE8M0
// exponents) into the values a matmul reads, on generations without those types (trn1 / trn2):
// integer steps on VectorE or GpSimd, whichever would finish first (instruction_ledger::sbuf_step).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>

#include "../../config.hpp"
#include "../../format/bf16.hpp"
#include "../../format/mx.hpp"
#include "../../std_abi.hpp"
#include "decode_steps.hpp"
#include "dtype.hpp"
#include "engine_rules.hpp"
#include "instruction_ledger.hpp"
#include "memory.hpp"
#include "traits.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// Where decode_codes finds each code's block scale: `exps`, UE8M0 exponents (integers) of the
// codes' own shape (e.g. spread into PSUM), or `values`, the 2^(e - 127) values of decode_scales
// in the layout the scales arrive in: per partition, row j of `row` codes reads the `per_row`
// columns from j x per_row, code i of the row column i / 32 (a broadcast access pattern).
// Neither: no scales.
struct block_scales {
  const window* exps = nullptr;
  const window* values = nullptr;
  std::int64_t row = 0, per_row = 0;
};

template <class Gen>
class code_decoding {
  using traits_type = traits<Gen>;
  using rules = engine_rules<Gen>;

 public:
  explicit code_decoding(instruction_ledger<Gen>& ledger) : ledger_(ledger) {}

  // Flips the sign of the codes of every row whose fp32 scale is negative: codes [P, S x per]
  // (u8 bytes: bit 7; fp8 values: negated), scales [P, S], one scale per `per` codes (a
  // tensor_tensor XOR with the scales' sign bits broadcast along each row).
  void flip_signs(const window& codes, const window& scales, std::int64_t per) {
    rules::check(scales.np == codes.np && scales.nc * per == codes.nc,
                 "flip_signs scales are [P, S]");
    rules::check_partition_start(codes);
    if (ledger_.computes())
      for (std::int64_t p = 0; p < codes.np; ++p)
        for (std::int64_t i = 0; i < codes.nc; ++i)
          if (std::signbit(scales.at(p, i / per))) {
            float& c = codes.at(p, i);
            c = codes.type() == dtype::u8 ? static_cast<float>(static_cast<int>(c) ^ 0x80) : -c;
          }
    ledger_.vector_instruction(codes.nc, 2, is_narrow(codes.type()), false);
  }
  // Low and high nibbles of [P, m] bytes into [P, 2m] e2m1 codes, each in the high half of its
  // byte, where a signed read puts its sign bit (x << 4 to the even elements, x & 0xF0 to the odd
  // ones: two one-input integer steps, integer_step).
  void unpack_nibbles(const window& out, const window& in) {
    rules::check(
        in.type() == dtype::u8 && out.type() == dtype::u8 && out.np == in.np && out.nc == 2 * in.nc,
        "unpack_nibbles reads [P, m] bytes into [P, 2m] codes");
    rules::check_partition_start(out);
    rules::check_partition_start(in);
    if (ledger_.computes())
      for (std::int64_t p = 0; p < in.np; ++p)
        for (std::int64_t i = 0; i < in.nc; ++i) {
          const int b = static_cast<int>(in.at(p, i));
          out.at(p, 2 * i) = static_cast<float>((b << 4) & 0xF0);
          out.at(p, 2 * i + 1) = static_cast<float>(b & 0xF0);
        }
    integer_step(in.nc);
    integer_step(in.nc);
  }
  // Decodes codes (e4m3fn bytes, or e2m1 codes in the high half of a byte when Format is MXFP4)
  // held as integers into their values in out's type, times their block scales (`scales`; none:
  // times 1). Charged as the format's instruction sequence (e4m3_decode_steps / e2m1_decode_steps;
  // the nibble split is unpack_nibbles'), the NaN codes' predicated copy only where a code is NaN
  // (cost-only runs see none), plus the exponents' decode when `scales` holds exponents.
  template <class Format>
  void decode_codes(const window& out, const window& codes, const block_scales& scales = {}) {
    rules::check_same_shape(out, codes);
    const window* const sw = scales.exps ? scales.exps : scales.values;
    if (scales.exps) rules::check_same_shape(out, *scales.exps);
    if (scales.values)
      rules::check(scales.row > 0 && scales.values->np == out.np &&
                       scales.values->nc * scales.row == out.nc * scales.per_row,
                   "decode_codes reads [P, rows x per_row] scale values for [P, rows x row] codes");
    constexpr bool fp4 = Format::data_type::bits == 4;
    bool nan_code = false;
    if (ledger_.computes())
      for (std::int64_t p = 0; p < out.np; ++p)
        for (std::int64_t i = 0; i < out.nc; ++i) {
          const auto c = static_cast<std::uint8_t>(codes.at(p, i));
          nan_code = nan_code || (!fp4 && (c & 0x7F) == 0x7F);
          const float v = fp4 ? e2m1_values[c >> 4] : e4m3_values[c];
          float s = 1.0f;
          if (scales.exps)
            s = ue8m0_values[static_cast<std::uint8_t>(scales.exps->at(p, i))];
          else if (scales.values)
            s = scales.values->at(
                p, i / scales.row * scales.per_row + i % scales.row / mx_scale_block);
          out.at(p, i) = store_as(out.type(), v * s);
        }
    const bool narrow = is_narrow(out.type());
    const std::span<const decode_step> steps =
        fp4 ? std::span<const decode_step>(e2m1_decode_steps)
            : std::span<const decode_step>(e4m3_decode_steps);
    for (const decode_step& st : steps) {
      if ((st.applies_scale && !sw) || (st.nan_only && !nan_code)) continue;
      const bool in_psum = st.applies_scale && sw->space() == memory::psum;
      if (in_psum)
        ledger_.vector_instruction(out.nc, st.inputs, narrow && st.bf16_arith, true);
      else
        ledger_.sbuf_step(out.nc, st.inputs, narrow && st.bf16_arith);
    }
    if (scales.exps)  // 2^(e - 127) from the exponents: e << 7, fixes of 0 and 255
      for (int i = 0; i < scale_decode_instructions; ++i) {
        if (i > 0 || scales.exps->space() == memory::sbuf)
          integer_step(out.nc);
        else
          ledger_.vector_instruction(out.nc, 1, false, true);
      }
  }
  // UE8M0 exponents (integers) into their values 2^(e - 127) in out's type (bf16 holds every one
  // exactly: 2^-127 as a subnormal, e = 255 as NaN): the exponent steps of decode_codes, here over
  // the exponents' own layout (a row's few bytes per partition, not one per code).
  void decode_scales(const window& out, const window& exps) {
    rules::check_same_shape(out, exps);
    rules::check_partition_start(out);
    if (ledger_.computes())
      for (std::int64_t p = 0; p < out.np; ++p)
        for (std::int64_t i = 0; i < out.nc; ++i)
          out.at(p, i) =
              store_as(out.type(), ue8m0_values[static_cast<std::uint8_t>(exps.at(p, i))]);
    for (int i = 0; i < scale_decode_instructions; ++i) integer_step(out.nc);
  }
  // A one-input integer step over n elements per partition (a mask, shift or compare) reading
  // and writing SBUF.
  void integer_step(std::int64_t n) { ledger_.sbuf_step(n, 1, false); }

 private:
  instruction_ledger<Gen>& ledger_;
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
