// Query staging: Q rows from HBM into the stationary operand Q^T [D, rows] (trn3 MX: replicated
// into the four quadrants, with its scales), through the same transposes and decode as the keys
// (operand_staging). Per-token Q scales flip the codes' signs and are folded into the weights
// by the passes.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../config.hpp"
#include "../../format/mx.hpp"
#include "../../std_abi.hpp"
#include "../../view/rows_view.hpp"
#include "core.hpp"
#include "engine_choice.hpp"
#include "memory.hpp"
#include "operand_kind.hpp"
#include "operand_staging.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

template <class Gen, class Format>
class query_staging {
  using kind = operand_kind<Gen, Format>;
  static constexpr bool mx_format = kind::mx_format, per_token = kind::per_token, mx = kind::mx;
  static constexpr bool fp4 = kind::fp4, fp8_operands = kind::fp8_operands;
  static constexpr bool decode_first = kind::decode_first;
  static constexpr dtype word_type = kind::word_type, operand_type = kind::operand_type;
  static constexpr int db = kind::db, sb = kind::sb, D = kind::D, words = kind::words;
  static constexpr int used_scales = kind::used_scales;
  static constexpr std::int64_t decode_slots = kind::decode_slots;

 public:
  // `chunk`: the columns of the staging's integer codes (trn1), a key chunk's.
  query_staging(core<Gen>& c, const rows_view<Format>& q, std::int64_t chunk,
                operand_staging<Gen, Format>& staging)
      : c_(c), q_(q), chunk_(chunk), staging_(staging) {}

  bool has_scales() const { return q_.scales != nullptr; }

  // Loads Q rows [first, first + np x S) (S consecutive rows per partition) and builds the
  // operand: qt [D, S x stride] (slot s at columns s x stride; [128, ..] of padded quadrants on
  // trn3 MX), with scales qsc on trn3;
  // per-token Q scales (if any) flip the codes' signs and are returned in qscale [np, S].
  void load(std::int64_t first, int np, std::int64_t S, std::int64_t stride, tile& qt, tile& qsc,
            tile& qscale) {
    tile raw, exps;
    read_q(first, np, S, raw, exps, qscale);
    if constexpr (mx)
      q_operand_mx(np, S, stride, raw, exps, qt, qsc);
    else
      q_operand(np, S, stride, raw, exps, qscale, qt);
  }

 private:
  // Q rows [first, first + np x S) as stored: codes into raw [np, S x row], MX exponents into
  // exps [np, S x 4] or per-token scales into qscale [np, S]. One DMA each, a row per partition
  // when the rows are contiguous, else a row per Q row.
  void read_q(std::int64_t first, int np, std::int64_t S, tile& raw, tile& exps, tile& qscale) {
    const bool contiguous = q_.data_stride == db && q_.scale_stride == sb;
    raw = mx             ? c_.sbuf("Q words", word_type, np, S * words)
          : fp8_operands ? c_.sbuf("Q codes", dtype::fp8, np, S * db)
                         : c_.sbuf("Q bytes", dtype::u8, np, S * db);
    {
      auto t = c_.dma();
      for (int p = 0; p < np; ++p) {
        for (std::int64_t s = 0; s < S; ++s) {
          const std::uint8_t* row = q_.row(first + p * S + s);
          if constexpr (mx)
            t.template words_in<Format>(window(raw), p, s * words, row, words,
                                        dma_row::part_of_block);
          else if constexpr (fp8_operands)
            t.template codes_in<Format>(window(raw), p, s * db, row, db, dma_row::part_of_block);
          else
            t.bytes_in(window(raw), p, s * db, row, db, dma_row::part_of_block);
          if (!contiguous) t.row(db);
        }
        if (contiguous) t.row(S * db);
      }
    }
    if (q_.scales) {
      auto t = c_.dma();
      if constexpr (mx_format) exps = c_.sbuf("Q scales", dtype::u8, np, S * sb);
      if constexpr (per_token) qscale = c_.sbuf("Q scales", dtype::fp32, np, S);
      for (int p = 0; p < np; ++p) {
        for (std::int64_t s = 0; s < S; ++s) {
          const std::uint8_t* sc = q_.scale(first + p * S + s);
          if constexpr (per_token) {
            const float v = Format::block_scale(sc, 0);
            t.values_in(window(qscale), p, s, &v, 1, dma_row::part_of_block);
          } else {
            t.bytes_in(window(exps), p, s * sb, sc, sb, dma_row::part_of_block);
          }
          if (!contiguous) t.row(sb);
        }
        if (contiguous) t.row(S * sb);
      }
    }
  }

  // trn3 MX: each slot's words replicated into the four quadrants (the four row tiles) of
  // qt [128, S x stride], its scales into each quadrant's first rows of qsc.
  void q_operand_mx(int np, std::int64_t S, std::int64_t stride, tile& raw, tile& exps, tile& qt,
                    tile& qsc) {
    qt = c_.sbuf("Q^T", word_type, 128, S * stride);
    qsc = c_.sbuf("Q^T scales", dtype::u8, 128, S * stride);
    if (S * stride > np * S) {  // padding columns (even stationary size) stay zero
      c_.memset(window(qt), 0.0f);
      c_.memset(window(qsc), 0.0f);
    }
    tile stage_w = c_.sbuf("Q staging", word_type, np, 128);
    detail::vector<std::int32_t> map(128);
    detail::vector<unsigned char> is_word(128);
    for (int i = 0; i < 128; ++i) is_word[static_cast<std::size_t>(i)] = i % mx_quadrant < words;
    for (std::int64_t s = 0; s < S; ++s) {
      for (int i = 0; i < 128; ++i)
        map[static_cast<std::size_t>(i)] =
            static_cast<std::int32_t>(s * words + std::min(i % mx_quadrant, words - 1));
      // Full quadrants (D = 128) take every word (a plain copy: VectorE or GpSimd); shorter rows
      // are padded with zero words.
      if constexpr (words == mx_quadrant)
        c_.select(window(stage_w), window(raw), map.data(), nullptr, 0.0f,
                  engine_choice<Gen>::sbuf_copy(c_, 128));
      else
        c_.select(window(stage_w), window(raw), map.data(), is_word.data(), 0.0f);
      c_.transpose(window(staging_.transposed_words(), 0, 128, 0, np), window(stage_w));
      c_.copy(window(qt, 0, 128, s * stride, np),
              window(staging_.transposed_words(), 0, 128, 0, np));
      // The row's scales into the first lanes of each quadrant; the staging tile's other lanes
      // are zero (operand_staging), so one copy of 4 x used_scales lanes per row.
      c_.copy(window(staging_.scale_staging(), 0, np, 0, mx_pack * used_scales, 1, used_scales,
                     mx_quadrant),
              window(exps, 0, np, s * sb, mx_pack * used_scales, 1, used_scales, 0),
              staging_.copy_engine(mx_pack * used_scales));
      c_.transpose(window(staging_.transposed(), 0, 128, 0, np),
                   window(staging_.scale_staging(), 0, np, 0, 128));
      c_.copy(window(qsc, 0, 128, s * stride, np), window(staging_.transposed(), 0, 128, 0, np),
              staging_.copy_engine(np));
    }
  }

  // trn1 / trn2 (and trn3 per-token): the codes (nibbles unpacked, per-token signs flipped)
  // transposed into qt [D, S x stride] and decoded to bf16 (or kept as fp8 codes on trn3).
  void q_operand(int np, std::int64_t S, std::int64_t stride, tile& raw, tile& exps, tile& qscale,
                 tile& qt) {
    window codes(raw, 0, np, 0, S * db);
    tile unpacked;
    if constexpr (fp4) {
      unpacked = c_.sbuf("Q codes", dtype::u8, np, S * D);
      c_.unpack_nibbles(window(unpacked), codes);
      codes = window(unpacked);
    }
    if constexpr (per_token)
      if (q_.scales) c_.flip_signs(codes, window(qscale), D);
    qt = c_.sbuf("Q^T", operand_type, D, S * stride);
    if (S * stride > np * S) c_.memset(window(qt), 0.0f);
    if constexpr (fp8_operands) {
      staging_.transpose_codes(
          codes, nullptr, np, S, qt, [&](std::int64_t s) { return s * stride; }, 1);
    } else if constexpr (decode_first) {
      tile values;
      if constexpr (mx_format) {
        values = c_.sbuf("Q scale values", dtype::bf16, np, S * sb);
        c_.decode_scales(window(values), window(exps, 0, np, 0, S * sb));
      }
      tile decoded = c_.sbuf("Q decoded", dtype::bf16, np, std::min(S, decode_slots) * D);
      staging_.decode_transpose(
          codes, np, S, qt, [&](std::int64_t s) { return s * stride; }, 1,
          mx_format ? &values : nullptr, decoded);
    } else {
      // The Q codes pass through staging_.integer_codes() / exps_t_ (free between key chunks).
      for (std::int64_t s0 = 0; s0 < S; s0 += chunk_ / stride) {
        const std::int64_t n = std::min(S - s0, chunk_ / stride);
        const window part(*codes.t, 0, np, s0 * D, n * D);
        staging_.transpose_codes(
            part, mx_format ? &exps : nullptr, np, n, staging_.integer_codes(),
            [&](std::int64_t s) { return s * stride; }, 1, s0);
        tile piece = c_.sbuf("Q^T piece", dtype::bf16, D, n * stride);
        staging_.decode_operand(piece, n * stride);
        c_.copy(window(qt, 0, D, s0 * stride, n * stride), window(piece));
      }
    }
  }

  core<Gen>& c_;
  const rows_view<Format>& q_;
  std::int64_t chunk_;
  operand_staging<Gen, Format>& staging_;
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
