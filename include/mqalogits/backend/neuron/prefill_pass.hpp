// Prefill (dense) on trn1 / trn2 and trn3's fp8_per_token: query tokens on partitions, up to 128
//   rows: per head h, S_h [rows, n] = matmul(stationary Q_h^T, moving K^T), relu on evacuation,
//   acc += relu * w[:, h] (a per-partition scalar), heads in order; each pass on the engine that
//   would finish it first (ScalarE / VectorE, VectorE / GpSimd: engine_choice). A tile's logits
//   then go to the epilogue (fp8_per_token: times |K scale| of each key first). trn3's MX
//   prefill runs decode_pass instead (schedule.hpp): with rows x heads on partitions its fp32
//   head sum on TensorE puts 128 keys on the output partitions, half the cycles per relu score
//   of a matmul of diag(w[:, h]) here.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../config.hpp"
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
  static constexpr bool per_token = kind::per_token;
  static constexpr int D = kind::D;
  static_assert(!kind::mx, "mqalogits neuron model: trn3's MX prefill runs decode_pass");
  static constexpr std::int64_t score_step = kind::score_step;

 public:
  // A head's relu scores are accumulated over four score tiles (one PSUM bank each) per
  // instruction, and the epilogue casts as many: a quarter of their fixed costs.
  static constexpr std::int64_t acc_step = 4 * score_step;

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
        logits_(c.template sbuf<shape<dtype::fp32, 128, acc_step>>("logits")) {}

  // The logits of the item's query tile against keys [k0, k0 + nk), the chunk K^T holds.
  void run(const work_item& item, std::int64_t k0, std::int64_t nk) {
    const std::int64_t R = item.row_end - item.row_begin;
    load_prefill_q(item.row_begin, item.row_end);
    const int r = static_cast<int>(R), rs = static_cast<int>(pq_.stride);
    for (std::int64_t first = 0; first < nk; first += acc_step) {
      const std::int64_t gkeys = std::min(acc_step, nk - first);
      const window acc(logits_, 0, r, 0, gkeys);
      sum_group(acc, r, rs, first, gkeys);
      if constexpr (per_token) apply_key_scales(acc, first);
      epilogue_.write(acc, keys_.valid().data() + first, item.row_begin, R, k0 + first);
    }
  }

 private:
  // The scores of keys [g0, g0 + gn) for every head and their weighted head sum into acc, each
  // head's relu on ScalarE or VectorE and its sum on VectorE or GpSimd, whichever would end it
  // sooner (engine_choice).
  void sum_group(const window& acc, int r, int rs, std::int64_t g0, std::int64_t gn) {
    for (std::int64_t h = 0; h < heads_; ++h) {
      for (std::int64_t c0 = g0; c0 < g0 + gn; c0 += key_tile) {
        const std::int64_t n = std::min(key_tile, g0 + gn - c0);
        const window sc(scores_, 0, r, 0, n);
        c_.matmul(sc, window(pq_.qt, 0, D, h * rs, r), window(keys_.operand(), 0, D, c0, n));
        c_.activation(window(relu_, 0, r, c0 - g0, n), sc, activation_fn::relu, nullptr,
                      engine_choice<Gen>::relu(c_, n));
      }
      const window relu(relu_, 0, r, 0, gn);
      const write_mode mode = h == 0 ? write_mode::overwrite : write_mode::accumulate;
      c_.scale_add(acc, relu, window(pq_.w, 0, r, h, 1), mode,
                   engine_choice<Gen>::accumulate(c_, gn, mode));
    }
  }

  struct prefill_q {
    std::int64_t row_begin = -1, row_end = -1, stride = 0;
    tile qt, qsc, w;  // Q^T [D, H x stride] (heads major), (unused) scales, weights [rows, H]
  };

  void load_prefill_q(std::int64_t r0, std::int64_t r1) {
    if (pq_.row_begin == r0 && pq_.row_end == r1) return;  // resident from the last chunk
    pq_ = prefill_q{};
    const std::int64_t R = r1 - r0, H = heads_;
    const int r = static_cast<int>(R);
    pq_.row_begin = r0;
    pq_.row_end = r1;
    pq_.stride = R;
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
  prefill_q pq_;
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
