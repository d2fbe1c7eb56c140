// The transit tiles and instruction sequences that turn codes as they arrive (a row per
// partition) into a matmul operand with the head dimension on partitions: TensorE transposes
// through PSUM, the decode of codes x scales to bf16 (trn1 / trn2), the MX staging (trn3). Key
// streaming and query staging share them: a query's codes pass through while no key chunk is
// being built.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../config.hpp"
#include "chunks.hpp"
#include "core.hpp"
#include "engine_choice.hpp"
#include "memory.hpp"
#include "operand_kind.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

template <class Gen, class Format>
class operand_staging {
  using kind = operand_kind<Gen, Format>;
  static constexpr bool mx_format = kind::mx_format;
  static constexpr int D = kind::D, sb = kind::sb, used_scales = kind::used_scales;
  static constexpr std::int64_t decode_slots = kind::decode_slots;
  static constexpr std::int64_t transpose_group = kind::transpose_group;

 public:
  // `chunk`: the keys of one chunk, the columns the integer codes pass through (trn1).
  operand_staging(core<Gen>& c, std::int64_t chunk) : c_(c) {
    if constexpr (kind::mx) {
      stage_ = c_.sbuf("scale staging", dtype::u8, 128, 128);
      // Zero once: Q's rows write only their scale lanes of each quadrant (query_staging).
      c_.memset(window(stage_), 0.0f);
      tpx_ = c_.psum("transpose (words)", 128, 4 * 128, kind::word_type, psum_buffers);
    } else {
      if constexpr (!kind::decode_first && !kind::fp8_operands)
        codes_t_ = c_.sbuf("K^T codes", dtype::bf16, D, chunk);
      if constexpr (mx_format && !kind::decode_first) {
        exps_t_ = c_.sbuf("K^T exponents", dtype::bf16, 4, chunk);
        spread_ = c_.sbuf("exponent spread", dtype::bf16, 4, D);
        // 0/1 matrix spreading exponent row b to the 32 partitions of its scale block (rows of
        // the 4-byte field past D / 32 spread nowhere).
        c_.memset(window(spread_), 0.0f);
        if (c_.computes())
          for (int d = 0; d < D; ++d) spread_.at(d / scale_block, d) = 1.0f;
      }
      if constexpr ((mx_format && !kind::decode_first) || kind::per_token)
        bcast_ = c_.psum("broadcast", 128, key_tile, dtype::fp32, psum_buffers);
    }
    tp_ = c_.psum("transpose", 128, transpose_group * 128, dtype::fp32, psum_buffers);
  }

  tile& transposed() { return tp_; }          // [128, 4 x 128] fp32 PSUM: transposes land here
  tile& transposed_words() { return tpx_; }   // trn3 MX: x4 words transposed
  tile& scale_staging() { return stage_; }    // trn3 MX: a row's scale bytes padded to quadrants
  tile& integer_codes() { return codes_t_; }  // trn1: transposed integer codes before decoding
  tile& broadcast() { return bcast_; }        // a row broadcast to partitions by a matmul

  // codes [np, S x D] (integers, bf16 values or fp8 values on trn3) and, for MX formats,
  // exponents [np, S x 4] into dst [D, ...] (and exps_t_ [4, ...]): row p of slot s to
  // column first(s) + p x step.
  template <class First>
  void transpose_codes(const window& codes, tile* exps, int np, std::int64_t S, tile& dst,
                       First first, std::int64_t step, std::int64_t exps_slot0 = 0) {
    for (std::int64_t s = 0; s < S;) {
      // Slots whose columns in dst start evenly apart transpose side by side into one PSUM bank
      // and leave it in one copy (a two-level access pattern: fewer fixed costs).
      std::int64_t g = 1;
      const std::int64_t apart = s + 1 < S ? first(s + 1) - first(s) : 0;
      if (!exps)
        while (g < transpose_group && s + g < S && first(s + g) == first(s) + g * apart) ++g;
      for (std::int64_t j = 0; j < g; ++j)
        c_.transpose(window(tp_, 0, D, j * np, np),
                     window(*codes.t, 0, np, codes.c0 + (s + j) * D, D));
      c_.copy(window(dst, 0, D, first(s), g * np, step, np, apart), window(tp_, 0, D, 0, g * np),
              copy_engine(g * np));
      if (exps) {
        c_.transpose(window(tp_, 0, sb, 0, np), window(*exps, 0, np, (exps_slot0 + s) * sb, sb));
        c_.copy(window(exps_t_, 0, sb, first(s), np, step), window(tp_, 0, sb, 0, np),
                copy_engine(np));
      }
      s += g;
    }
  }

  // Decodes codes_t_ (times exps_t_'s scales for MX formats) columns [0, n) into the bf16
  // operand dst.
  void decode_operand(tile& dst, std::int64_t n) {
    for (std::int64_t c0 = 0; c0 < n; c0 += key_tile) {
      const std::int64_t m = std::min(key_tile, n - c0);
      const window codes(codes_t_, 0, D, c0, m), out(dst, 0, D, c0, m);
      if constexpr (mx_format) {
        const window spread(bcast_, 0, D, 0, m);
        // Only the rows of the exponents in use: 0 x NaN would spread an unused byte's NaN.
        c_.matmul(spread, window(spread_, 0, used_scales, 0, D),
                  window(exps_t_, 0, used_scales, c0, m), matmul_kind::broadcast);
        c_.template decode_codes<Format>(out, codes, {.exps = &spread});
      } else {
        c_.template decode_codes<Format>(out, codes);
      }
    }
  }

  // codes [np, S x D] decoded to bf16 (times their scales: values [np, S x 4], if any), a group
  // of decode_slots slots at a time in `decoded` [np, >= decode_slots x D], and transposed into
  // dst [D, ...]: row p of slot s to column first(s) + p x step (decode_first).
  template <class First>
  void decode_transpose(const window& codes, int np, std::int64_t S, tile& dst, First first,
                        std::int64_t step, tile* values, tile& decoded) {
    for (std::int64_t s0 = 0; s0 < S; s0 += decode_slots) {
      const std::int64_t n = std::min(decode_slots, S - s0);
      const window dec(decoded, 0, np, 0, n * D);
      const window part(*codes.t, codes.p0, np, codes.c0 + s0 * D, n * D);
      if (values) {
        const window v(*values, 0, np, s0 * sb, n * sb);
        c_.template decode_codes<Format>(dec, part, {.values = &v, .row = D, .per_row = sb});
      } else {
        c_.template decode_codes<Format>(dec, part);
      }
      transpose_codes(
          dec, nullptr, np, n, dst, [&](std::int64_t s) { return first(s0 + s); }, step);
    }
  }

  // The engine of a copy of n elements out of PSUM (engine_choice::copy).
  elementwise_engine copy_engine(std::int64_t n) { return engine_choice<Gen>::copy(c_, n); }

 private:
  core<Gen>& c_;
  tile stage_, tpx_, codes_t_, exps_t_, spread_, bcast_, tp_;
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
