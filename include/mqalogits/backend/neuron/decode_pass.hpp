// Decode (paged, sparse, paged-sparse; one query row or a request's next_n rows): heads on PSUM
// partitions, floor(128 / H) query rows per pass: S [rows x H, n] = matmul(stationary Q^T,
// moving K^T); ScalarE relu while evacuating S into the chunk's relu scores (fp32: bf16 relu
// scores would cost 2^-9 of the accuracy contract's M, over its 2^-14 budget). The weighted
// head sum puts the keys on its output partitions: per 128 keys one fp32 matmul of the relu
// columns as stationary against the block-diagonal weights ([rows x H, rows], w[r, h] at
// (r x H + h, r)) as moving (head_sum_chunk), and the epilogue runs on all 128 partitions
// (epilogue::write_keys_on_partitions). fp8_per_token keeps [rows, n] head sums, scaled per key.
// Chunks whose pass has at most 64 partitions share the head sum with others (packed_decode).
// trn3's MX dense prefill may run these passes too (schedule.hpp: when they end the call sooner
// than prefill_pass): a tile of up to 128 query tokens is its passes of decode_rows_per_pass
// rows, each pass taking the TensorE head sum or scoring with its keys on partitions, whichever
// would end sooner, and its relu evacuations going to ScalarE or VectorE (engine_choice::relu):
// the floor's rate for the fp32 head sum, which the query tokens on partitions (prefill_pass)
// cannot reach, at the price of a DMA descriptor per (token, head) of Q and the weights.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

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
#include "weights_ref.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

template <class Gen, class Format, class Plan>
class decode_pass {
  using kind = operand_kind<Gen, Format>;
  static constexpr bool per_token = kind::per_token, mx = kind::mx;
  static constexpr int sb = kind::sb, D = kind::D;
  static constexpr std::int64_t score_step = kind::score_step;
  static constexpr bool native = requires { requires Plan::native_mx_layout; };
  // Columns per quadrant matmul: 128 (4 x 128 keys); native: one 128-token block per quadrant.
  static constexpr std::int64_t quadrant_step = native ? 128 : quadrant_tile;
  // Chunks may score with their keys on partitions (run_keys_on_partitions): trn3 MX, K^T in
  // padded order.
  static constexpr bool scores_on_keys = mx && !per_token && !native;

 public:
  static constexpr std::int64_t acc_step = score_step;
  // The chunk's relu scores in K^T's padded key order (up to 4 padding slots per block and the
  // last tile's 4 x 128 columns), and the columns of its keys-on-partitions head sum.
  static std::int64_t relu_columns(const chunk_layout& l) {
    return (l.rows * l.slots + mx_pack + score_step - 1) / score_step * score_step;
  }
  static std::int64_t head_sum_columns(const chunk_layout& l) {
    return per_token ? 0 : relu_columns(l) / 128 * max_head_sum_rows;
  }

  decode_pass(core<Gen>& c, query_staging<Gen, Format>& queries,
              key_stream<Gen, Format, Plan>& keys, epilogue<Gen, Plan>& out, const weights_ref& w,
              const chunk_layout& layout)
      : c_(c),
        queries_(queries),
        keys_(keys),
        epilogue_(out),
        w_(w),
        layout_(layout),
        heads_(w.cols),
        // Constant shapes: an overflow is a compile error (fits_sbuf_v / fits_psum_v).
        relu_(c.template sbuf<shape<dtype::fp32, 128, acc_step>>("relu(scores)")),
        scores_(c.template psum<shape<dtype::fp32, 128, score_step>, psum_buffers>("scores")),
        logits_(c.template sbuf<shape<dtype::fp32, 128, acc_step>>("logits")) {
    // fp8_per_token sums [rows, n] tiles by rows; the others the whole chunk's relu scores with
    // the keys on the output partitions.
    if constexpr (per_token) {
      head_ = c_.template psum<shape<dtype::fp32, 128, score_step>, psum_buffers>("head sum");
    } else {
      relu_chunk_ = c_.sbuf("relu(scores) of a chunk", dtype::fp32, 128, relu_columns(layout));
      head_ = c_.psum("head sum (keys on partitions)", 128, head_sum_columns(layout), dtype::fp32,
                      psum_buffers);
    }
    if constexpr (scores_on_keys) {
      const std::int64_t steps = (key_columns(layout.chunk) + 127) / 128;
      products_ =
          c_.sbuf("relu(scores) x w (keys on partitions)", dtype::fp32, 128, steps * mx_pack * 128);
      key_sums_ =
          c_.sbuf("head sums (keys on partitions)", dtype::fp32, 128, head_sum_columns(layout));
      w_rows_ = c_.sbuf("weights (on every partition)", dtype::fp32, 128, 128);
    }
  }

  // The relu scores of a chunk (or a pack of chunks) with its keys in K^T's padded order.
  tile& relu_chunk() { return relu_chunk_; }

  // A pass: query rows [row_begin, row_end), their heads on `partitions` partitions.
  struct query_pass {
    std::int64_t row_begin = 0, row_end = 0, partitions = 0, stride = 0;
    tile qt, qsc, w;  // Q^T [D, rows x H (even)], its scales, block-diagonal weights
  };

  // The pass of query rows [a, end): Q^T (with its scales on trn3 MX) and, when `weights`, the
  // block-diagonal weights [rows x H, rows] (a packed pass takes its weights in pack_w_).
  query_pass load_pass(std::int64_t a, std::int64_t end, bool weights) {
    const std::int64_t rows = end - a, P = rows * heads_;
    query_pass pass;
    pass.row_begin = a;
    pass.row_end = end;
    pass.partitions = P;
    pass.stride = mx ? P + (P & 1) : P;
    tile qscale;
    queries_.load(a * heads_, static_cast<int>(P), 1, pass.stride, pass.qt, pass.qsc, qscale);
    if (weights) {
      pass.w = c_.sbuf("weights (block-diagonal)", dtype::fp32, P, rows);
      c_.memset(window(pass.w), 0.0f);
      load_weights(window(pass.w), a, end);
      if constexpr (per_token)
        if (queries_.has_scales())
          c_.multiply_abs(window(pass.w), window(pass.w),
                          window(qscale, 0, static_cast<int>(P), 0, rows, 0));
    }
    return pass;
  }

  // w[r, h] of rows [a, end) onto partition (r - a) x H + h, column r - a of dst: one DMA.
  void load_weights(const window& dst, std::int64_t a, std::int64_t end) {
    auto t = c_.dma();
    for (std::int64_t r = a; r < end; ++r)
      for (std::int64_t h = 0; h < heads_; ++h) {
        const float v = c_.computes() ? w_.at(r, h) : 0.0f;
        t.values_in(dst, (r - a) * heads_ + h, r - a, &v, 1, dma_row::part_of_block);
        t.row(w_.element_bytes);
      }
  }

  // K^T columns holding a chunk of nk keys: x4 columns of padded slots on trn3 MX (native:
  // whole 128-token blocks, four to a column block), one per key elsewhere.
  std::int64_t key_columns(std::int64_t nk) const {
    return native ? (nk + 4 * quadrant_step - 1) / (4 * quadrant_step) * quadrant_step
           : mx   ? (layout_.padded(nk - 1) + mx_pack) / mx_pack
                  : nk;
  }

  // The logits of the item's query rows against keys [k0, k0 + nk), the chunk K^T holds.
  void run(const work_item& item, std::int64_t k0, std::int64_t nk) {
    if (keys_on_partitions(item, nk, false)) {
      run_keys_on_partitions(item, k0, nk);
      return;
    }
    load_decode_q(item.row_begin, item.row_end);
    const std::int64_t kcols = key_columns(nk);
    const std::int64_t step = mx ? quadrant_step : key_tile;
    for (query_pass& pass : passes_) {
      if constexpr (Plan::prefill && scores_on_keys)
        if (keys_on_partitions(pass.row_end - pass.row_begin, nk, false)) {
          spread_weights(pass.row_begin, pass.row_end);
          scores_on_keys_pass(pass, k0, nk);
          continue;
        }
      const int P = static_cast<int>(pass.partitions);
      for (std::int64_t c0 = 0; c0 < kcols; c0 += step) {
        const std::int64_t n = std::min(step, kcols - c0);
        score_matmul(pass, 0, keys_.operand(), keys_.operand_scales(), c0, n);
        if constexpr (per_token) {
          evacuate_relu(relu_, P, 0, n);
          per_token_tile(pass, k0, nk, c0, n);
        } else {
          evacuate_relu(relu_chunk_, P, mx ? mx_pack * c0 : c0, n,
                        Plan::prefill ? engine_choice<Gen>::relu(c_, mx ? mx_pack * n : n)
                                      : elementwise_engine::scalar);
        }
      }
      if constexpr (!per_token) {
        const int rows = static_cast<int>(pass.row_end - pass.row_begin);
        const sum_part part{pass.row_begin, rows, 0, 0, k0, nk, keys_.valid().data()};
        head_sum_chunk({&part, 1}, window(pass.w), rows, mx ? mx_pack * kcols : kcols);
      }
    }
  }

  // Whether the chunk's scores go with its keys on partitions and its head sum on VectorE
  // (run_keys_on_partitions) rather than heads on partitions and the head sum on TensorE: trn3
  // MX with one pass of query rows, and whichever way would end sooner given what the engines
  // have queued (list scheduling, as engine_choice does): TensorE's fp32 head sum and ScalarE's
  // relu of the chunk (`packed`: shared with another chunk), or VectorE's relu x w and the head
  // reduce (VectorE or GpSimd).
  bool keys_on_partitions(const work_item& item, std::int64_t nk, bool packed) {
    return keys_on_partitions(item.row_end - item.row_begin, nk, packed);
  }
  // The same for a pass of `rows` query rows. A prefill pass's relu evacuation may go to ScalarE
  // or VectorE (engine_choice::relu), whichever would end it sooner.
  bool keys_on_partitions(std::int64_t rows, std::int64_t nk, bool packed) {
    if constexpr (!scores_on_keys) {
      return false;
    } else {
      const std::int64_t P = rows * heads_;
      const std::int64_t kcols = key_columns(nk), U = (kcols + 127) / 128;
      if (rows > decode_rows_per_pass(heads_) || mx_pack * U * rows > head_sum_columns(layout_))
        return false;
      for (std::int64_t u = 0; u < U; ++u)  // K^T columns of step u, rounded up to even
        if ((even_columns(kcols, U, u) - 1) * U + u >= keys_.operand().free()) return false;
      using choice = engine_choice<Gen>;
      using tr = traits<Gen>;
      const report& r = c_.counters();
      const double share = packed ? 0.5 : 1.0, tiles = static_cast<double>(U);
      const double tensor_end = r.tensor.seconds + share * tiles * mx_pack * tr::pe_fp32_passes *
                                                       static_cast<double>(tr::pe_min_cycles) /
                                                       tr::tensor_hz;
      double relu_end =
          r.scalar.seconds + share * choice::engine_seconds(mx_pack * 128 * U, 1,
                                                            tr::scalar_other_rate, tr::scalar_hz);
      if constexpr (Plan::prefill)
        relu_end = std::min(relu_end,
                            r.vector.seconds + share * choice::engine_seconds(mx_pack * 128 * U, 1,
                                                                              tr::vector_other_rate,
                                                                              tr::vector_hz));
      const std::int64_t n = mx_pack * U * P;  // products per partition
      const double vector =
          r.vector.seconds + choice::engine_seconds(n, 2, tr::vector_other_rate, tr::vector_hz);
      const double reduce_v = choice::engine_seconds(n, 1, tr::vector_other_rate, tr::vector_hz);
      const double reduce_g = choice::engine_seconds(n, 1, 1.0, tr::gpsimd_hz);
      const double kp_end = std::min(std::max(vector + reduce_v, r.gpsimd.seconds),
                                     std::max(vector, r.gpsimd.seconds + reduce_g));
      return kp_end < std::max(tensor_end, relu_end);
    }
  }

  // The chunk with its keys on partitions: per step u of the U = ceil(kcols / 128) steps, the
  // four row-tiled MX matmuls take K^T columns u, u + U, ... (quadrant j: padded keys 4 x
  // column + j) as stationary against Q^T as moving, so PSUM partition i holds padded keys
  // 4 U i .. 4 U i + 4 U - 1, a row's heads along the free axis; VectorE multiplies relu(scores)
  // by the row's weights as they leave PSUM (one two-input pass: no fp32 matmul, and the
  // evacuation is the relu), and a reduce over each row's heads leaves head_sum_chunk's layout
  // for the epilogue. A row sums only its own heads: a NaN or Inf score stays in its row.
  void run_keys_on_partitions(const work_item& item, std::int64_t k0, std::int64_t nk) {
    if constexpr (scores_on_keys)
      scores_on_keys_pass(load_row_weights(item.row_begin, item.row_end), k0, nk);
  }

 private:
  // run_keys_on_partitions of a pass whose Q^T is loaded and whose rows' weights are in w_rows_.
  void scores_on_keys_pass(query_pass& pass, std::int64_t k0, std::int64_t nk) {
    if constexpr (scores_on_keys) {
      const int P = static_cast<int>(pass.partitions);
      const int R = static_cast<int>(pass.row_end - pass.row_begin);
      const std::int64_t kcols = key_columns(nk), U = (kcols + 127) / 128;
      const int np = static_cast<int>((kcols + U - 1) / U);
      const std::int64_t per_bank = std::max<std::int64_t>(1, score_step / (mx_pack * P));
      tile &kt = keys_.operand(), &ks = keys_.operand_scales();
      for (std::int64_t u0 = 0; u0 < U; u0 += per_bank) {
        const std::int64_t nb = std::min(per_bank, U - u0);
        for (std::int64_t b = 0; b < nb; ++b) {
          const std::int64_t u = u0 + b;
          const int m = static_cast<int>(even_columns(kcols, U, u));
          for (int j = 0; j < mx_pack; ++j) {
            const int q0 = j * mx_quadrant;
            c_.matmul_mx(window(scores_, 0, m, (b * mx_pack + j) * P, P),
                         window(kt, q0, mx_quadrant, u, m, U), window(ks, q0, sb, u, m, U),
                         window(pass.qt, q0, mx_quadrant, 0, P), window(pass.qsc, q0, sb, 0, P));
          }
        }
        const std::int64_t n = nb * mx_pack * P;
        c_.relu_multiply(window(products_, 0, np, u0 * mx_pack * P, n),
                         window(scores_, 0, np, 0, n), window(w_rows_, 0, np, 0, n, 1, P, 0));
      }
      c_.sum_runs(window(key_sums_, 0, np, 0, mx_pack * U * R),
                  window(products_, 0, np, 0, mx_pack * U * P), heads_);
      const sum_part part{pass.row_begin, R, 0, 0, k0, nk, keys_.valid().data()};
      epilogue_.write_keys_on_partitions(key_sums_, {&part, 1}, mx_pack * kcols, mx_pack * U, R);
    }
  }

 public:
  // The pass's scores against K^T columns [c0, c0 + n) onto PSUM partitions [p0, p0 + stride):
  // one matmul (trn3 MX: four row-tiled ones). A packed pass (p0 > 0) puts its stationary in a
  // column tile of the PE array, whose outputs are those partitions; `together` passes of a pack
  // issue theirs back to back, in distinct column tiles, and run in parallel.
  void score_matmul(query_pass& pass, int p0, tile& kt, tile& kt_scales, std::int64_t c0,
                    std::int64_t n, int together = 1) {
    const int Ps = static_cast<int>(pass.stride);
    if constexpr (mx) {
      for (int j = 0; j < mx_pack; ++j) {
        const int q0 = j * mx_quadrant;
        c_.matmul_mx(window(scores_, p0, Ps, j * quadrant_tile, n),
                     window(pass.qt, q0, mx_quadrant, 0, Ps), window(pass.qsc, q0, sb, 0, Ps),
                     window(kt, q0, mx_quadrant, c0, n), window(kt_scales, q0, sb, c0, n),
                     write_mode::overwrite, together);
      }
    } else {
      c_.matmul(window(scores_, p0, Ps, 0, n), window(pass.qt, 0, D, 0, Ps),
                window(kt, 0, D, c0, n), matmul_kind::score, write_mode::overwrite, together);
    }
  }

  // The relu of the scores on PSUM partitions [0, P), n columns (trn3 MX: n per quadrant), into
  // `relu` from column `at` in K^T's (padded) key order: one evacuation.
  void evacuate_relu(tile& relu, int P, std::int64_t at, std::int64_t n,
                     elementwise_engine on = elementwise_engine::scalar) {
    if constexpr (mx)  // quadrant j holds keys 4c + j (native: block 4 x (c / 128) + j, in order)
      c_.activation_2d(window(relu, 0, P, at, 1), native ? 1 : mx_pack, native ? n : 1,
                       window(scores_, 0, P, 0, 1), quadrant_tile, mx_pack, n, activation_fn::relu,
                       on);
    else
      c_.activation(window(relu, 0, P, at, n), window(scores_, 0, P, 0, n), activation_fn::relu,
                    nullptr, on);
  }

  // The head sum of a chunk (or of a pack of chunks) with its keys on the output partitions:
  // relu_chunk_ holds [P, ncols] (padded key order); U = ceil(ncols / 128) matmuls, matmul u
  // taking columns u, u + U, ... as stationary ([P, <= 128]) against the weights w [P, R] as
  // moving, so head_ (i, u x R + col + r) = logit of a part's row r at column i x U + u. Each
  // costs max(R, 64) cycles (4 passes: fp32) for up to 128 keys of every row, against
  // max(keys, 64) per row block with the keys along the moving side; and the epilogue works on
  // all 128 partitions.
  void head_sum_chunk(std::span<const sum_part> parts, const window& w, int R, std::int64_t ncols) {
    const int P = w.np, h = static_cast<int>(heads_);
    const std::int64_t U = (ncols + 127) / 128;
    const int np = static_cast<int>((ncols + U - 1) / U);
    const auto keys = [&](std::int64_t u) { return static_cast<int>((ncols - u + U - 1) / U); };
    for (std::int64_t u = 0; u < U; ++u)
      c_.matmul(window(head_, 0, keys(u), u * R, R), window(relu_chunk_, 0, P, u, keys(u), U), w,
                matmul_kind::head_sum);
    // A NaN or Inf score reaches every other row through its zero weight there (0 x NaN), so the
    // sums are all finite exactly when every score was: one reduce over the [np, U x R] result
    // decides, and where it fails each row takes a matmul of its own heads into its own column.
    if (R > 1 && !c_.all_finite(window(head_, 0, np, 0, U * R)))
      for (const sum_part& part : parts)
        for (int i = 0; i < part.rows; ++i)
          for (std::int64_t u = 0; u < U; ++u)
            c_.matmul(window(head_, 0, keys(u), u * R + part.col + i, 1),
                      window(relu_chunk_, part.p0 + i * h, h, u, keys(u), U),
                      window(*w.t, w.p0 + part.p0 + i * h, h, w.c0 + part.col + i, 1),
                      matmul_kind::head_sum);
    epilogue_.write_keys_on_partitions(head_, parts, ncols, U, R);
  }

 private:
  // fp8_per_token (K^T in natural order): the head sum of relu_'s n columns as [rows, n], times
  // |K scale| of each key (a ones-matmul broadcast of the scale row), then the epilogue.
  void per_token_tile(query_pass& pass, std::int64_t k0, std::int64_t nk, std::int64_t c0,
                      std::int64_t n) {
    const int P = static_cast<int>(pass.partitions);
    const int rows = static_cast<int>(pass.row_end - pass.row_begin);
    const window sum(head_, 0, rows, 0, n), relu(relu_, 0, P, 0, n);
    // One matmul for all rows of the pass. Its zero weights would carry a NaN or Inf score of
    // one row into the others (0 x NaN = NaN), so a tile holding one takes a matmul per row
    // instead, the last row first: row i's matmul writes partitions 0..i (its weights in
    // column i), and the rows below overwrite theirs afterwards.
    if (rows == 1 || c_.all_finite(relu)) {
      c_.matmul(sum, window(pass.w), relu, matmul_kind::head_sum);
    } else {
      const int h = static_cast<int>(heads_);
      for (int i = rows - 1; i >= 0; --i)
        c_.matmul(window(head_, 0, i + 1, 0, n), window(pass.w, i * h, h, 0, i + 1),
                  window(relu_, i * h, h, 0, n), matmul_kind::head_sum);
    }
    const window dst(logits_, 0, rows, 0, n);
    keys_.apply_key_scales(dst, sum, c0);
    const std::int64_t written = std::min(c0 + n, nk) - c0;
    epilogue_.write(window(logits_, 0, rows, 0, written), keys_.valid().data() + c0, pass.row_begin,
                    rows, k0 + c0);
  }

  // K^T columns of keys-on-partitions step u (u, u + U, ...), rounded up to the even stationary
  // free size the MX matmul needs (the extra column's keys are padding, never written out).
  static std::int64_t even_columns(std::int64_t kcols, std::int64_t U, std::int64_t u) {
    const std::int64_t n = (kcols - u + U - 1) / U;
    return n + (n & 1);
  }

  // Q^T of rows [r0, r1) with its scales, and their weights w[r, h] at column (r - r0) x H + h
  // of every partition (one DMA row per partition), for keys-on-partitions chunks.
  query_pass& load_row_weights(std::int64_t r0, std::int64_t r1) {
    if (row_pass_.row_begin == r0 && row_pass_.row_end == r1 && row_pass_.partitions > 0)
      return row_pass_;
    row_pass_ = load_pass(r0, r1, false);
    spread_weights(r0, r1);
    return row_pass_;
  }
  // The weights of rows [r0, r1) into w_rows_ (kept while it holds the same rows).
  void spread_weights(std::int64_t r0, std::int64_t r1) {
    if (w_rows_begin_ == r0 && w_rows_end_ == r1) return;
    w_rows_begin_ = r0;
    w_rows_end_ = r1;
    auto t = c_.dma();
    for (int p = 0; p < 128; ++p) {
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t h = 0; h < heads_; ++h) {
          const float v = c_.computes() ? w_.at(r, h) : 0.0f;
          t.values_in(window(w_rows_), p, (r - r0) * heads_ + h, &v, 1, dma_row::part_of_block);
        }
      t.row((r1 - r0) * heads_ * w_.element_bytes);
    }
  }

  void load_decode_q(std::int64_t r0, std::int64_t r1) {
    if (dq_row_begin_ == r0 && dq_row_end_ == r1) return;  // resident from the last chunk
    passes_.clear();
    dq_row_begin_ = r0;
    dq_row_end_ = r1;
    const std::int64_t per = decode_rows_per_pass(heads_);
    for (std::int64_t a = r0; a < r1; a += per)
      passes_.push_back(load_pass(a, std::min(r1, a + per), true));
  }

  core<Gen>& c_;
  query_staging<Gen, Format>& queries_;
  key_stream<Gen, Format, Plan>& keys_;
  epilogue<Gen, Plan>& epilogue_;
  const weights_ref& w_;
  const chunk_layout& layout_;
  std::int64_t heads_;
  tile relu_, scores_, logits_, head_, relu_chunk_;
  tile products_, key_sums_, w_rows_;  // keys-on-partitions chunks
  query_pass row_pass_;                // their Q^T
  detail::vector<query_pass> passes_;
  std::int64_t dq_row_begin_ = -1, dq_row_end_ = -1;
  std::int64_t w_rows_begin_ = -1, w_rows_end_ = -1;  // the rows whose weights w_rows_ holds
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
