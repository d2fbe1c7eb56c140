// Prefill (dense): query tokens on partitions, up to 128 rows: per head h,
//   S_h [rows, n] = matmul(stationary Q_h^T, moving K^T), relu on evacuation, acc += relu *
//   w[:, h] (a per-partition scalar), heads in order; each pass on the engine that would finish
//   it first (ScalarE / VectorE, VectorE / GpSimd: engine_choice; on trn2 / trn3 the head's sum
//   may instead be an fp32 matmul of diag(w[:, h]) accumulating in PSUM, where TensorE, busy
//   only with the scores, would end it sooner). A tile's logits then go to the epilogue
//   (fp8_per_token: times |K scale| of each key first). trn3's MX prefill may run decode_pass's
//   layout instead (rows x heads on partitions), whichever ends the call sooner (schedule.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "../../config.hpp"
#include "../../format/mx.hpp"
#include "../../std_abi.hpp"
#include "../../variant/plan.hpp"
#include "chunks.hpp"
#include "core.hpp"
#include "engine_choice.hpp"
#include "epilogue.hpp"
#include "key_stream.hpp"
#include "memory.hpp"
#include "operand_kind.hpp"
#include "query_staging.hpp"
#include "traits.hpp"
#include "weights_ref.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

template <class Gen, class Format, class Plan>
class prefill_pass {
  using kind = operand_kind<Gen, Format>;
  static constexpr bool per_token = kind::per_token, mx = kind::mx;
  static constexpr int sb = kind::sb, D = kind::D;
  static constexpr std::int64_t score_step = kind::score_step;
  using tr = traits<Gen>;
  // trn2 / trn3: a head's weighted sum may run on TensorE, whose fp32 matmuls leave the other
  // engines the relu evacuations. (trn1 keeps it on VectorE: its TensorE is the busier engine.)
  static constexpr bool tensor_sum = !tr::psum_read_exclusive && !per_token;

 public:
  // A head's relu scores are accumulated over four score tiles (one PSUM bank each) per
  // instruction, and the epilogue casts as many: a quarter of their fixed costs.
  static constexpr std::int64_t acc_step = 4 * score_step;
  // With the head sum on TensorE two: its PSUM sum takes the two banks the stream leaves free
  // (two tiles of one bank on trn2, whose matmul writes at most one).
  static constexpr std::int64_t group_step = tensor_sum ? 2 * score_step : acc_step;
  // Columns of one PSUM tile of that sum: a matmul's largest output (one bank on trn2).
  static constexpr std::int64_t head_columns =
      std::min<std::int64_t>(group_step, tr::pe_max_moving_fp32);
  static constexpr std::size_t head_tiles = static_cast<std::size_t>(group_step / head_columns);

  prefill_pass(core<Gen>& c, query_staging<Gen, Format>& queries,
               key_stream<Gen, Format, Plan>& keys, epilogue<Gen, Plan>& out, const weights_ref& w)
      : c_(c),
        queries_(queries),
        keys_(keys),
        epilogue_(out),
        w_(w),
        heads_(w.cols),
        // Constant shapes: an overflow is a compile error (fits_sbuf_v / fits_psum_v).
        relu_(c.template sbuf<shape<dtype::fp32, 128, acc_step>>("relu(scores)")),
        scores_(c.template psum<shape<dtype::fp32, 128, score_step>, psum_buffers>("scores")),
        logits_(c.template sbuf<shape<dtype::fp32, 128, acc_step>>("logits")) {
    if constexpr (tensor_sum) {
      for (tile& t : head_) t = c.template psum<shape<dtype::fp32, 128, head_columns>>("head sum");
      ones_ = c.sbuf("ones", dtype::fp32, 128, 1);
      c.memset(window(ones_), 1.0f);
    }
  }

  // The logits of the item's query tile against keys [k0, k0 + nk), the chunk K^T holds.
  void run(const work_item& item, std::int64_t k0, std::int64_t nk) {
    const std::int64_t R = item.row_end - item.row_begin;
    load_prefill_q(item.row_begin, item.row_end);
    const int r = static_cast<int>(R), rs = static_cast<int>(pq_.stride);
    const std::int64_t kcols = mx ? (nk + mx_pack - 1) / mx_pack : nk;
    const std::int64_t group = (mx ? quadrant_tile : key_tile) * (group_step / score_step);
    auto keys_of = [&](std::int64_t cols) { return mx ? mx_pack * cols : cols; };
    for (std::int64_t g0 = 0; g0 < kcols; g0 += group) {
      const std::int64_t gn = std::min(group, kcols - g0), gkeys = keys_of(gn);
      const std::int64_t first = keys_of(g0);  // the group's first key in the chunk
      const window acc(logits_, 0, r, 0, gkeys);
      // A non-finite score reaches every row of its column through the diagonal's zeros
      // (0 x NaN), so a non-finite TensorE sum redoes the group with every head on VectorE.
      if (!sum_group(acc, r, rs, g0, gn, tensor_sum)) sum_group(acc, r, rs, g0, gn, false);
      if constexpr (per_token) apply_key_scales(acc, first);
      epilogue_.write(acc, keys_.valid().data() + first, item.row_begin, R, k0 + first);
    }
  }

 private:
  // The scores of K^T columns [g0, g0 + gn) for every head and their weighted head sum into acc.
  // Each head's sum goes to TensorE (`tensor`: an fp32 matmul of diag(w[:, h]) against the relu
  // scores, accumulated in PSUM) or to VectorE / GpSimd, whichever would end it sooner given what
  // the engines have queued. False when a TensorE sum came out non-finite.
  bool sum_group(const window& acc, int r, int rs, std::int64_t g0, std::int64_t gn, bool tensor) {
    const std::int64_t step = mx ? quadrant_tile : key_tile;  // K^T columns of a score tile
    auto keys_of = [&](std::int64_t cols) { return mx ? mx_pack * cols : cols; };
    const std::int64_t gkeys = keys_of(gn);
    bool on_tensor = false, on_vector = false;
    for (std::int64_t h = 0; h < heads_; ++h) {
      for (std::int64_t c0 = g0; c0 < g0 + gn; c0 += step) {
        const std::int64_t n = std::min(step, g0 + gn - c0), keys = keys_of(n);
        const std::int64_t at = keys_of(c0 - g0);  // its relu scores' column in the group
        if constexpr (mx) {
          for (int j = 0; j < mx_pack; ++j) {
            const int q0 = j * mx_quadrant;
            const window sc(scores_, 0, rs, j * quadrant_tile, n);
            c_.matmul_mx(sc, window(pq_.qt, q0, mx_quadrant, h * rs, rs),
                         window(pq_.qsc, q0, sb, h * rs, rs),
                         window(keys_.operand(), q0, mx_quadrant, c0, n),
                         window(keys_.operand_scales(), q0, sb, c0, n));
          }
          // Quadrant j holds keys 4c + j: one relu evacuation of the four, in key order.
          c_.activation_2d(window(relu_, 0, r, at, 1), mx_pack, 1, window(scores_, 0, r, 0, 1),
                           quadrant_tile, mx_pack, n, activation_fn::relu,
                           engine_choice<Gen>::relu(c_, keys));
        } else {
          const window sc(scores_, 0, r, 0, n);
          c_.matmul(sc, window(pq_.qt, 0, D, h * rs, r), window(keys_.operand(), 0, D, c0, n));
          c_.activation(window(relu_, 0, r, at, n), sc, activation_fn::relu, nullptr,
                        engine_choice<Gen>::relu(c_, keys));
        }
      }
      const window relu(relu_, 0, r, 0, gkeys);
      if (tensor && sum_on_tensor(gkeys, on_vector)) {
        const write_mode mode = on_tensor ? write_mode::accumulate : write_mode::overwrite;
        for (std::int64_t i = 0; i < gkeys; i += key_tile) {  // one PSUM bank per matmul
          const std::int64_t n = std::min(key_tile, gkeys - i);
          c_.matmul(window(head_[i / head_columns], 0, r, i % head_columns, n),
                    window(pq_.diag, 0, r, h * r, r), window(relu_, 0, r, i, n),
                    matmul_kind::head_sum, mode);
        }
        on_tensor = true;
      } else {
        const write_mode mode = on_vector ? write_mode::accumulate : write_mode::overwrite;
        c_.scale_add(acc, relu, window(pq_.w, 0, r, h, 1), mode,
                     engine_choice<Gen>::accumulate(c_, gkeys, mode));
        on_vector = true;
      }
    }
    if (!on_tensor) return true;
    for (std::int64_t i = 0; i < gkeys; i += head_columns)
      if (!c_.all_finite(
              window(head_[i / head_columns], 0, r, 0, std::min(head_columns, gkeys - i))))
        return false;
    for (std::int64_t i = 0; i < gkeys; i += head_columns) {
      const std::int64_t n = std::min(head_columns, gkeys - i);
      const window sum(head_[i / head_columns], 0, r, 0, n), part(*acc.t, acc.p0, r, acc.c0 + i, n);
      if (on_vector)  // GpSimd cannot read PSUM
        c_.scale_add(part, sum, window(ones_, 0, r, 0, 1), write_mode::accumulate);
      else
        c_.activation(part, sum, activation_fn::identity, nullptr, engine_choice<Gen>::copy(c_, n));
    }
    return true;
  }

  // Whether a head's sum of n relu scores per row ends sooner on TensorE (fp32: 4 passes of
  // max(N, 64) cycles per bank of N keys) than as VectorE's or GpSimd's pass.
  bool sum_on_tensor(std::int64_t n, bool accumulating) {
    using choice = engine_choice<Gen>;
    const report& rep = c_.counters();
    double cycles = 0;
    for (std::int64_t i = 0; i < n; i += key_tile)
      cycles +=
          static_cast<double>(tr::pe_fp32_passes *
                              std::max<std::int64_t>(std::min(key_tile, n - i), tr::pe_min_cycles));
    const int inputs = accumulating ? 2 : 1;
    const double on_vector =
        rep.vector.seconds +
        choice::engine_seconds(n, inputs, tr::vector_other_rate, tr::vector_hz);
    const double on_gpsimd =
        rep.gpsimd.seconds + choice::engine_seconds(n, inputs, 1.0, tr::gpsimd_hz);
    return rep.tensor.seconds + cycles / tr::tensor_hz < std::min(on_vector, on_gpsimd);
  }

  struct prefill_q {
    std::int64_t row_begin = -1, row_end = -1, stride = 0;
    tile qt, qsc, w;  // Q^T [D, H x stride] (heads major), scales, weights [rows, H]
    tile diag;        // tensor_sum: diag(w[:, h]) at columns [h x rows, (h + 1) x rows)
  };

  void load_prefill_q(std::int64_t r0, std::int64_t r1) {
    if (pq_.row_begin == r0 && pq_.row_end == r1) return;  // resident from the last chunk
    pq_ = prefill_q{};
    const std::int64_t R = r1 - r0, H = heads_;
    const int r = static_cast<int>(R);
    pq_.row_begin = r0;
    pq_.row_end = r1;
    pq_.stride = mx ? R + (R & 1) : R;  // nc_matmul_mx: even stationary free size
    tile qscale;
    // Q rows of token t are its H head rows: slot h of partition t.
    queries_.load(r0 * H, r, H, pq_.stride, pq_.qt, pq_.qsc, qscale);
    pq_.w = c_.sbuf("weights", dtype::fp32, R, H);
    {
      auto t = c_.dma();
      detail::vector<float> row(static_cast<std::size_t>(H));
      for (std::int64_t i = 0; i < R; ++i) {
        for (std::int64_t h = 0; h < H && c_.computes(); ++h)
          row[static_cast<std::size_t>(h)] = w_.at(r0 + i, h);
        t.values_in(window(pq_.w), i, 0, row.data(), H, dma_row::part_of_block);
        t.row(H * w_.element_bytes);
      }
    }
    if constexpr (per_token)
      if (queries_.has_scales()) c_.multiply_abs(window(pq_.w), window(pq_.w), window(qscale));
    if constexpr (tensor_sum) {  // w[i, h] at (i, h x R + i): one DMA
      pq_.diag = c_.sbuf("weights (diagonal per head)", dtype::fp32, R, H * R);
      c_.memset(window(pq_.diag), 0.0f);
      auto t = c_.dma();
      for (std::int64_t i = 0; i < R; ++i)
        for (std::int64_t h = 0; h < H; ++h) {
          const float v = c_.computes() ? w_.at(r0 + i, h) : 0.0f;
          t.values_in(window(pq_.diag), i, h * R + i, &v, 1, dma_row::part_of_block);
          t.row(w_.element_bytes);
        }
    }
  }

  // acc [rows, n] *= |K scale| of its columns, a PSUM bank of the row at a time.
  void apply_key_scales(const window& acc, std::int64_t c0) {
    for (std::int64_t i = 0; i < acc.nc; i += key_tile) {
      const std::int64_t n = std::min(key_tile, acc.nc - i);
      const window part(*acc.t, acc.p0, acc.np, acc.c0 + i, n);
      keys_.apply_key_scales(part, part, c0 + i);
    }
  }

  core<Gen>& c_;
  query_staging<Gen, Format>& queries_;
  key_stream<Gen, Format, Plan>& keys_;
  epilogue<Gen, Plan>& epilogue_;
  const weights_ref& w_;
  std::int64_t heads_;
  tile relu_, scores_, logits_;
  tile head_[head_tiles], ones_;  // tensor_sum: the heads' sums on TensorE, a column of ones
  prefill_q pq_;
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
