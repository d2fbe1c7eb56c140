// What a call must do whatever its schedule, counted from its plan (call_work), and the floor's
// terms at the documented rates of a generation (add_floor; floor.hpp combines them). Each term
// names why no schedule meeting the accuracy contract avoids it; the sources of the rates are
// in traits.hpp. The floor ranges over the instructions this model knows: transposes on TensorE
// (DMA transposes are documented for 2-byte types only), the relu and the weighted head sum as
// two passes (no instruction applies relu and a signed weight and accumulates), the head sum on
// TensorE or VectorE and the decode on VectorE or GpSimd, the decode as decode_steps.hpp's
// sequence.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "../../config.hpp"
#include "../../format/mx.hpp"
#include "../../variant/plan.hpp"
#include "decode_steps.hpp"
#include "floor.hpp"
#include "traits.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// The work of a call: distinct valid keys per group (each read from HBM once), row x key pairs
// (scores per head), logits written, and the cache blocks holding the keys (gathered plans).
struct call_work {
  std::int64_t rows = 0, keys = 0, scores = 0, logits = 0, blocks = 0;
};

template <class Plan>
call_work count_work(const Plan& plan) {
  call_work w;
  const std::int64_t B = plan.gather_block();
  for (std::int64_t g = 0; g < plan.num_groups(); ++g) {
    const row_span span = plan.group_rows(g);
    for (std::int64_t row = span.begin; row < span.end; ++row) {
      const row_keys rk = plan.row(row);
      for (std::int64_t k = rk.key_begin; k < rk.key_end; ++k) w.scores += plan.key(g, k).valid();
    }
    const row_keys all = detail::key_union(plan, span);
    std::int64_t last_block = -1;
    for (std::int64_t k = all.key_begin; k < all.key_end; ++k) {
      if (!plan.key(g, k).valid()) continue;
      ++w.keys;
      if (B > 0 && k / B != last_block) {
        last_block = k / B;
        ++w.blocks;
      }
    }
  }
  w.rows = plan.num_rows();
  w.logits = w.rows * plan.num_cols();
  return w;
}

// The floor's terms of one call of `heads` heads, weights and logits of w_bytes and o_bytes.
template <class Gen, class Format, class Plan>
void add_floor(floor_terms& f, const call_work& work, std::int64_t heads, std::int64_t w_bytes,
               std::int64_t o_bytes) {
  using tr = traits<Gen>;
  constexpr bool mx_format = is_mx_format_v<Format>;
  constexpr bool mx = tr::mx_matmul && mx_format;
  constexpr bool decode = mx_format ? !tr::mx_matmul : !tr::native_e4m3fn;
  constexpr bool native = requires {
    requires Plan::native_mx_layout;
  };
  constexpr std::int64_t D = Format::head_dim, db = Format::data_bytes, sb = Format::scale_bytes;
  const auto n = [](std::int64_t v) { return static_cast<double>(v); };
  const double relu_elements = n(work.scores * heads);  // fp32 scores, one per head

  // DMA: Q, weights, each key once and the logits (the roofline's bytes); one descriptor per
  // contiguous HBM range a block row reads (the native MX layout puts each of its rows, words
  // and scales side by side, on a partition of its own) and per output row; without indirect
  // DMA (trn1) a transfer per block, else a gather per 128 block rows, each with its fixed cost.
  // A descriptor reads one contiguous source range, and the split layouts keep a block's codes
  // and its scales apart (a paged cache stores a page's scales after all of its codes, key rows
  // their scales in an array of their own), so each of their blocks is two descriptors.
  const std::int64_t block_rows = native ? Format::head_dim / mx_pack : 1;
  const std::int64_t ranges = native || sb == 0 ? 1 : 2;
  const std::int64_t gathered = work.blocks * block_rows;
  const std::int64_t descriptors = gathered * ranges;
  f.dma_bytes_s +=
      n(work.rows * heads * (db + sb + w_bytes) + work.keys * (db + sb) + work.logits * o_bytes) /
      tr::dma_bytes_per_s;
  f.dma_descriptors_s +=
      n((descriptors + work.rows) * tr::dma_descriptor_overhead_bytes) / tr::dma_bytes_per_s;
  const std::int64_t starts = tr::indirect_dma ? (gathered + 127) / 128 : work.blocks;
  f.dma_fixed_s += n(starts) * tr::dma_fixed_s / tr::dma_queues;

  // TensorE: every score's D-long dot product at 128 x 128 MACs per cycle (nc_matmul_mx: 4x).
  f.tensor_scores_s +=
      n(work.scores * heads * D) / (128.0 * 128 * (mx ? mx_pack : 1)) / tr::tensor_hz;
  // The transposes of a token-major cache and of Q: a transpose of [P, F <= 128] elements costs
  // max(P, 64) cycles per pass, so at best 128 elements per cycle and pass. Where transposes
  // are exact (trn2 / trn3) the codes go as 32-bit words, 4 bytes each, in the transpose mode's
  // 2 passes (trn3's MX scales of Q with them: the MX matmul reads them on the contraction's
  // partitions; trn2 applies them before); trn1's transposes are not exact on NaN / Inf bit
  // patterns, so its codes and scales go as one finite value per byte in 1 pass.
  const double per_key = tr::exact_pe_transpose
                             ? n((db + (mx ? sb : 0) + 3) / 4 * tr::pe_fp32_transpose_passes)
                             : n(db + (mx_format ? sb : 0));
  // A trn3 MX key's scales cannot ride with its words: the MX matmul reads a key's four scales
  // on the first four partitions of its quadrant, and a transpose puts input column l on output
  // partition l, so one input row carries the scales of at most four keys (one per quadrant):
  // a 1-pass row per four keys (32 / 128 cycles per key), beside the words' 2 passes.
  const double per_mx_key =
      n((db + 3) / 4 * tr::pe_fp32_transpose_passes) + 128.0 / static_cast<double>(mx_pack);
  const std::int64_t keys_transposed = native ? 0 : work.keys;
  f.tensor_transposes_s +=
      (n(keys_transposed) * (mx ? per_mx_key : per_key) + n(work.rows * heads) * per_key) / 128.0 /
      tr::tensor_hz;
  // Transposes write PSUM and matmuls read SBUF, so the transposed MX keys are copied out once:
  // the code words on VectorE at its 32-bit width (x4 words: ScalarE's fp32 path carries one
  // value per element), and each transposed row of scales (keys / 4 elements per partition) on
  // ScalarE or VectorE, a PSUM read beside the relu's, at the width of other types: the MX
  // matmul reads u8 scales, and the 16-bit modes are documented for 16-bit floats only.
  if constexpr (mx && !native) {
    f.vector_copies_s +=
        n(work.keys * ((db + 3) / 4)) / 128.0 / (tr::vector_other_rate * tr::vector_hz);
    const double scale_rows = n(work.keys) / mx_pack;
    f.relu_scalar_s += scale_rows / (tr::scalar_other_rate * tr::scalar_hz);
    f.relu_vector_s += scale_rows / (tr::vector_other_rate * tr::vector_hz);
  }

  // Software DGE (trn2 / trn3): GpSimd writes every descriptor of the gathered block rows.
  if constexpr (tr::gather_on_gpsimd)
    f.gpsimd_descriptors_s += n(descriptors * tr::gpsimd_cycles_per_descriptor) / tr::gpsimd_hz;

  // The relu of every score as it leaves PSUM, in fp32 (bf16 scores would cost 2^-9 of the
  // contract's M, over its 2^-14 budget): one read at the fp32 width of ScalarE or VectorE.
  f.relu_scalar_s += relu_elements / (128.0 * tr::scalar_other_rate * tr::scalar_hz);
  f.relu_vector_s += relu_elements / (128.0 * tr::vector_other_rate * tr::vector_hz);
  // The head sum of relu(score) x w in fp32 (a bf16 sum breaks the same budget): TensorE fp32
  // matmuls with 128 keys on the output partitions, max(N, 64) = 64 cycles in 4 passes per
  // 128 x 128 relu values, or a two-input pass on VectorE (2 cycles per element at the fp32
  // width) or GpSimd (2 cycles per element). A VectorE multiply by w fused into the relu and a
  // reduce over the heads on GpSimd cost half of each pass per element: splits of these two
  // cover it. Where VectorE and GpSimd share the SBUF port (trn1) GpSimd's slower pass only adds
  // to the port's time, so it takes none.
  f.head_sum_tensor_s +=
      relu_elements / (128.0 * 128) * n(tr::pe_fp32_passes * tr::pe_min_cycles) / tr::tensor_hz;
  f.head_sum_vector_s += 2 * relu_elements / (128.0 * tr::vector_other_rate * tr::vector_hz);
  if constexpr (!tr::sbuf_vector_gpsimd_exclusive)
    f.head_sum_gpsimd_s += n(tr::two_input_cycle_factor) * relu_elements / 128.0 / tr::gpsimd_hz;

  // No instruction reads the codes (trn1 / trn2): the integer decode of every code of every
  // key and query row (decode_steps.hpp: the fewest steps the ISA allows, the NaN copy only where a
  // code is NaN), fp4's nibble split, and the UE8M0 scales' decode once per row, on VectorE or
  // GpSimd.
  if constexpr (decode) {
    constexpr bool fp4 = Format::data_type::bits == 4;
    double vector_cycles = 0, gpsimd_cycles = 0;
    const auto step = [&](std::int64_t elements, int inputs, bool narrow) {
      const double factor = inputs > 1 ? tr::two_input_cycle_factor : 1;
      const double rate = !narrow       ? tr::vector_other_rate
                          : inputs == 1 ? tr::vector_fast_16bit_rate
                                        : tr::vector_16bit_rate;
      vector_cycles += n(elements) * factor / rate;
      gpsimd_cycles += n(elements) * factor;
    };
    const std::span<const decode_step> steps =
        fp4 ? std::span<const decode_step>(e2m1_decode_steps)
            : std::span<const decode_step>(e4m3_decode_steps);
    for (const decode_step& s : steps)
      if (!s.nan_only && (mx_format || !s.applies_scale)) step(D, s.inputs, s.bf16_arith);
    if constexpr (fp4)
      for (int i = 0; i < 2; ++i) step(db, 1, false);
    if constexpr (mx_format)
      for (int i = 0; i < scale_decode_instructions; ++i) step(sb, 1, false);
    const double rows = n(work.keys + work.rows * heads);  // keys and query rows
    f.decode_vector_s += rows * vector_cycles / 128.0 / tr::vector_hz;
    f.decode_gpsimd_s += rows * gpsimd_cycles / 128.0 / tr::gpsimd_hz;
  }
  f.psum_port_shared = tr::psum_read_exclusive;
  f.sbuf_port_shared = tr::sbuf_vector_gpsimd_exclusive;
}

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
