// Packed decode passes (packed-Q eviction).
//
// One query row of H = 64 heads fills half of TensorE's 128 columns, half of the PSUM
// partitions its relu evacuation reads and half of the head sum's 128 contraction partitions.
// So chunks whose single pass has at most 64 partitions are packed, as AWS's MXFP8 decode
// packs its queries: each takes its own column tile of the PE array for its score matmuls
// (nc_matmul's tile_position: 2 x 64 columns, 4 x 32 on v3 and later), so its scores land on
// its own PSUM partitions, and one relu evacuation, one fp32 head sum over all the pack's
// partitions (block-diagonal weights) and one epilogue serve the whole pack. The chunks are
// consecutive in run order: other requests', or further chunks of one request (a 65536-key
// request pairs its own chunks). Each keeps its K^T resident until the pack runs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>

#include "../../config.hpp"
#include "../../format/mx.hpp"
#include "../../std_abi.hpp"
#include "../../variant/plan.hpp"
#include "chunks.hpp"
#include "core.hpp"
#include "decode_pass.hpp"
#include "epilogue.hpp"
#include "key_stream.hpp"
#include "memory.hpp"
#include "operand_kind.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

template <class Gen, class Format, class Plan>
class packed_decode {
  using kind = operand_kind<Gen, Format>;
  using tr = traits<Gen>;
  using query_pass = typename decode_pass<Gen, Format, Plan>::query_pass;
  static constexpr bool mx = kind::mx;
  static constexpr bool native = requires { requires Plan::native_mx_layout; };
  static constexpr std::int64_t quadrant_step = native ? 128 : quadrant_tile;

 public:
  packed_decode(core<Gen>& c, key_stream<Gen, Format, Plan>& keys,
                decode_pass<Gen, Format, Plan>& decode, std::int64_t heads)
      : c_(c),
        keys_(keys),
        decode_(decode),
        heads_(heads),
        pack_w_(c_.sbuf("weights (packed passes)", dtype::fp32, 128, max_head_sum_rows)) {}

  // Partitions of one packed pass for an item: its pass rounded up to a column tile (64, or 32
  // on v3 and later); 0 when it is not packed (per-token scales, several passes, P > 64).
  int slot_of(const work_item& item) const {
    const std::int64_t rows = item.row_end - item.row_begin, P = rows * heads_;
    if (rows > decode_rows_per_pass(heads_)) return 0;
    const std::int64_t stride = mx ? P + (P & 1) : P;
    for (int slot = tr::pe_column_tile; slot <= 64; slot *= 2)
      if (stride <= slot) return slot;
    return 0;
  }

  // Loads the chunk's keys and Q into the next slot of the pack; a full pack runs. A chunk that
  // scores with its keys on partitions (decode_pass::keys_on_partitions) runs at once instead,
  // and the pack keeps its chunks.
  void add(const work_item& item, std::int64_t k0, std::int64_t nk, int slot) {
    if (decode_.keys_on_partitions(item, nk, true)) {
      keys_.load(item.group, k0, nk);
      decode_.run_keys_on_partitions(item, k0, nk);
      return;
    }
    if (packed_ > 0 && slot != pack_slot_) flush();
    pack_slot_ = slot;
    if (pack_.size() == packed_) {
      packed_chunk pc;
      pc.kt = c_.sbuf("K^T (packed chunk)", keys_.operand().type(), keys_.operand().partitions(),
                      keys_.operand().free());
      if constexpr (mx)
        pc.kt_scales = c_.sbuf("K^T scales (packed chunk)", dtype::u8,
                               keys_.operand_scales().partitions(), keys_.operand_scales().free());
      pack_.push_back(std::move(pc));
    }
    packed_chunk& pc = pack_[packed_++];
    keys_.load(item.group, k0, nk);
    keys_.hand_over(pc.kt, pc.kt_scales);
    pc.valid.assign(keys_.valid().begin(), keys_.valid().end());
    pc.k0 = k0;
    pc.nk = nk;
    pc.kcols = decode_.key_columns(nk);
    // Q is resident where an earlier slot of the pack, or this slot's last chunk, has its rows.
    const auto holds = [&](const query_pass& p) {
      return p.partitions > 0 && p.row_begin == item.row_begin && p.row_end == item.row_end;
    };
    pc.q_slot = packed_ - 1;
    for (std::size_t s = 0; s + 1 < packed_ && pc.q_slot == packed_ - 1; ++s)
      if (pack_[s].q_slot == s && holds(pack_[s].pass)) pc.q_slot = s;
    if (pc.q_slot == packed_ - 1 && !holds(pc.pass))
      pc.pass = decode_.load_pass(item.row_begin, item.row_end, false);
    if (static_cast<int>(packed_) * slot == common_traits::partitions) flush();
  }

  // The pack's scores, tile by tile: each chunk's matmuls into its column tile, then one relu
  // evacuation of all of them; then the head sum and epilogue of the pack.
  void flush() {
    if (packed_ == 0) return;
    detail::vector<sum_part> parts;
    std::int64_t kcols = 0;
    int R = 0;
    for (std::size_t s = 0; s < packed_; ++s) {
      const packed_chunk& pc = pack_[s];
      const query_pass& pass = pack_[pc.q_slot].pass;
      const int rows = static_cast<int>(pass.row_end - pass.row_begin);
      parts.push_back({pass.row_begin, rows, static_cast<int>(s) * pack_slot_, R, pc.k0, pc.nk,
                       pc.valid.data()});
      R += rows;
      kcols = std::max(kcols, pc.kcols);
    }
    const int P = parts.back().p0 + parts.back().rows * static_cast<int>(heads_);
    load_pack_weights(parts);
    const std::int64_t step = mx ? quadrant_step : key_tile;
    for (std::int64_t c0 = 0; c0 < kcols; c0 += step) {
      // The chunks with columns here issue their matmuls together, each in its column tile.
      int together = 0;
      for (std::size_t s = 0; s < packed_; ++s) together += c0 < pack_[s].kcols;
      for (std::size_t s = 0; s < packed_; ++s) {
        packed_chunk& pc = pack_[s];
        if (c0 < pc.kcols)
          decode_.score_matmul(pack_[pc.q_slot].pass, parts[s].p0, pc.kt, pc.kt_scales, c0,
                               std::min(step, pc.kcols - c0), together);
      }
      // A chunk with fewer columns leaves earlier scores in its partitions past them: their
      // relu is never written out, and reaches no other row (see head_sum_chunk).
      decode_.evacuate_relu(decode_.relu_chunk(), P, mx ? mx_pack * c0 : c0,
                            std::min(step, kcols - c0));
    }
    decode_.head_sum_chunk(parts, window(pack_w_, 0, P, 0, R), R, mx ? mx_pack * kcols : kcols);
    packed_ = 0;
  }

 private:
  struct packed_chunk {
    query_pass pass;
    std::int64_t k0 = 0, nk = 0, kcols = 0;
    std::size_t q_slot = 0;  // the slot whose pass holds this chunk's Q (one request's chunks)
    tile kt, kt_scales;      // swapped in from kt_ / kt_scales_ after loading
    detail::vector<unsigned char> valid;
  };

  // The block-diagonal weights of the pack in pack_w_: part i's rows on its partitions and
  // columns, zeros elsewhere (kept while the pack holds the same rows).
  void load_pack_weights(std::span<const sum_part> parts) {
    detail::vector<std::int64_t> rows;
    for (const sum_part& p : parts) rows.push_back(p.row_begin);
    if (rows == pack_w_rows_) return;
    pack_w_rows_ = rows;
    c_.memset(window(pack_w_), 0.0f);
    for (const sum_part& p : parts)
      decode_.load_weights(window(pack_w_, p.p0, p.rows * static_cast<int>(heads_), p.col, p.rows),
                           p.row_begin, p.row_begin + p.rows);
  }

  core<Gen>& c_;
  key_stream<Gen, Format, Plan>& keys_;
  decode_pass<Gen, Format, Plan>& decode_;
  std::int64_t heads_;
  // The pack: its chunks, how many are in use, their partitions each, the weights and the rows
  // they hold.
  tile pack_w_;
  detail::vector<packed_chunk> pack_;
  std::size_t packed_ = 0;
  int pack_slot_ = 0;
  detail::vector<std::int64_t> pack_w_rows_;
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
