// The four kernels scheduled on the NeuronCore model (core.hpp).
//
// Keys arrive in chunks, one block of consecutive keys per partition row, as AWS's paged decode
// loads its cache (attention_tkg: many blocks per indirect DMA, one block per partition): a
// block is a page (paged), a selected block (sparse, paged-sparse) or 32 consecutive tokens
// (dense: 4 KiB of MXFP8 codes, the efficient DMA row). A chunk is at most 128 blocks and 8192
// keys (4096 for blocks of 128 keys or more, to fit trn1's SBUF), loaded by one DMA of its
// codes and one of its scales. TensorE then puts the head dimension (the contraction) on
// partitions, and strided copies put the keys back in their natural order along the free axis.
// A head dim D below 128 uses D partitions for the contraction (the matmuls, their cost and
// the transposes follow from it); on trn3's MX matmul, whose operands span whole 32-partition
// quadrants, a row of D / 4 words is padded with zero words (and zero exponents) to one quadrant.
//
// Formats, per generation:
// - trn1 / trn2 have no e4m3fn or e2m1 type: codes x scales are decoded to bf16 by integer
//   instructions (core::decode_codes). trn2 decodes where the codes arrive (a block per
//   partition, each UE8M0 exponent decoded once and read along its 32 codes by a broadcast
//   access pattern) and transposes the bf16 values, bit-exact on its TensorE (decode_first).
//   trn1's TensorE is not bit-accurate on NaN / Inf, so it transposes the codes and exponents as
//   integers, spreads the exponents to their 32 partitions by a 0/1 matmul and decodes after.
//   Every code times a power of two is exact in bf16, so the bf16 matmul loses nothing.
// - trn3 multiplies MXFP8 / MXFP4 natively (nc_matmul_mx): x4-packed words on 32 partitions, the
//   scales in the quadrant's rows. Four consecutive keys of a block go to the four quadrants
//   (quadrant j holds keys 4c + j), so four row-tiled 32-partition matmuls cover 4 x 128 keys.
// - fp8_per_token: the Q scale is folded into the weights and the K scale applied to the
//   head-summed row (relu(s x d) = |s| relu(sign(s) d): the sign flips the codes), so the codes
//   go through bf16 matmuls (trn1 / trn2) or fp8 "double row" matmuls (trn3, native e4m3fn)
//   instead of fp32 passes.
//
// Decode (paged, sparse, paged-sparse; one query row or a request's next_n rows): heads on PSUM
//   partitions, floor(128 / H) query rows per pass: S [rows x H, n] = matmul(stationary Q^T,
//   moving K^T); ScalarE relu while evacuating S into the chunk's relu scores (fp32: bf16 relu
//   scores would cost 2^-9 of the accuracy contract's M, over its 2^-14 budget). The weighted
//   head sum puts the keys on its output partitions: per 128 keys one fp32 matmul of the relu
//   columns as stationary against the block-diagonal weights ([rows x H, rows], w[r, h] at
//   (r x H + h, r)) as moving (head_sum_chunk), and the epilogue runs on all 128 partitions
//   (epilogue_partitions). Chunks whose pass has at most 64 partitions (one row of H = 64) are
//   packed, two (four of H <= 32 on v3 and later) to the PE array's column tiles, and share
//   one relu evacuation, one head sum over 128 contraction partitions and one epilogue
//   (packed-Q eviction, run_pack). fp8_per_token keeps [rows, n] head sums, scaled per key.
// Prefill (dense): query tokens on partitions, up to 128 rows: per head h,
//   S_h [rows, n] = matmul(stationary Q_h^T, moving K^T), relu on evacuation, acc += relu *
//   w[:, h] (a per-partition scalar), heads in order; each pass on the engine that would finish
//   it first (ScalarE / VectorE, VectorE / GpSimd).
// Epilogue (`epilogue`, prefill and per-token decode): casts a tile's fp32 logits to the output
// type (RNE for bf16) with -inf in masked columns; one DMA writes each row's candidate columns.
// -inf outside them when clean_logits.
// PSUM: every streaming tile is double-buffered (psum_buffers), and all of them fit the 8 banks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "../../config.hpp"
#include "../../error.hpp"
#include "../../exec/executor.hpp"
#include "../../exec/options.hpp"
#include "../../format/bf16.hpp"
#include "../../format/mx.hpp"
#include "../../output/logits_row.hpp"
#include "../../std_abi.hpp"
#include "../../variant/dense.hpp"
#include "../../variant/paged.hpp"
#include "../../variant/paged_sparse.hpp"
#include "../../variant/plan.hpp"
#include "../../view/matrix_view.hpp"
#include "../../view/rows_view.hpp"
#include "../backend.hpp"
#include "core.hpp"
#include "report.hpp"
#include "topk.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// Moving columns of one score matmul: one PSUM bank of fp32.
inline constexpr std::int64_t key_tile = 512;
// Columns of one row-tiled MX matmul (trn3): four of them cover 4 x 128 keys in one PSUM bank.
// Every streaming PSUM tile of a kernel (scores, head sum, transposes, the broadcast) is
// double-buffered, as the estimate's overlapped engines need, and the four of them take all
// 8 banks that way; 4 x 256 keys (two banks for scores and head sum) would need 12.
inline constexpr std::int64_t quadrant_tile = 128;
// PSUM buffers of each streaming tile: TensorE writes one while ScalarE / VectorE drain the other.
inline constexpr int psum_buffers = 2;
// Keys per partition row of a dense chunk: 32 rows of 128 codes, 4 KiB (efficient DMA rows).
inline constexpr std::int64_t contiguous_block = 32;
// Query rows per prefill item: one per partition.
inline constexpr std::int64_t prefill_rows = common_traits::partitions;

// Keys per chunk for blocks of `block` keys: up to 128 blocks, 8192 keys (4096 for blocks of
// >= 128 keys, whose 16-32 KiB rows would not leave room on trn1).
constexpr std::int64_t chunk_keys(std::int64_t block) {
  return std::min<std::int64_t>(128, (block >= 128 ? 4096 : 8192) / block) * block;
}
// Rows of one keys-on-partitions head sum: a pass's (at most 4) or a pack's (at most 4 passes of
// one row, or 2 of two rows of H = 32).
inline constexpr int max_head_sum_rows = 4;
// Query rows per decode pass: two (H = 64) or four (H = 32) rows share one score matmul; other
// head counts run one row per pass, so that every row's heads start on a partition the
// access-pattern rules allow (needed by the NaN-exact head sum, see `decode`).
constexpr std::int64_t decode_rows_per_pass(std::int64_t heads) {
  return heads == 32 || heads == 64 ? common_traits::partitions / heads : 1;
}

// The scale codecs the model has kernels for, asked of the codec: UE8M0 bytes per 32 elements
// (MX, is_mx_format_v), or one scale for the whole row (applied to the head-summed row).
template <class Scale, int Block, int HeadDim>
inline constexpr bool runs_scale_codec_v =
    (Scale::ue8m0_bytes && Block == mx_scale_block) || Block == HeadDim;
template <class Format>
inline constexpr bool runs_format_v =
    runs_scale_codec_v<typename Format::scale_type, Format::scale_block, Format::head_dim>;

// The weights [rows, heads] as the schedule reads them. Their element type changes no
// instruction, only the bytes each DMA descriptor moves and the conversion to fp32, so it is
// known here by its size and a conversion: one schedule serves every weight type.
struct weights_ref {
  const void* data = nullptr;
  std::int64_t rows = 0, cols = 0, stride = 0;  // in elements
  std::int64_t element_bytes = 0;
  float (*load)(const void* data, std::int64_t index) = nullptr;  // element `index` as fp32

  template <class W>
  explicit weights_ref(const matrix_view<const W>& w)
      : data(w.data),
        rows(w.rows),
        cols(w.cols),
        stride(w.stride),
        element_bytes(static_cast<std::int64_t>(sizeof(W))),
        load([](const void* p, std::int64_t i) { return to_float(static_cast<const W*>(p)[i]); }) {}
  float at(std::int64_t r, std::int64_t h) const {
    return data ? load(data, r * stride + h) : 0.0f;
  }
};

// Where the schedule's logits go. The logit type and the output policy change no instruction,
// only the cast's target type, the bytes each output descriptor moves and where the values land,
// so the schedule sees them through this interface; the adaptor per output type (kernels.hpp)
// is all that is compiled per type.
class logits_sink {
 public:
  logits_sink(dtype type, std::int64_t element_bytes, bool clean)
      : type_(type), element_bytes_(element_bytes), clean_(clean) {}
  logits_sink(const logits_sink&) = delete;
  logits_sink& operator=(const logits_sink&) = delete;

  dtype type() const { return type_; }  // the cast's target: fp32 or bf16
  std::int64_t element_bytes() const { return element_bytes_; }
  bool clean() const { return clean_; }  // -inf in masked and uncovered columns
  // The values of every column outside a row's candidate range (the output policy's begin).
  virtual void begin() = 0;
  // Scores of row `row` from column `col`: n fp32 values and their valid flags.
  virtual void consume(std::int64_t row, std::int64_t col, const float* scores,
                       const unsigned char* valid, std::int64_t n) = 0;

 protected:
  ~logits_sink() = default;

 private:
  dtype type_;
  std::int64_t element_bytes_;
  bool clean_;
};

// The schedule of one call on one core, for a generation, format and plan: weights and outputs
// of every type reach it through weights_ref and logits_sink.
template <class Gen, class Format, class Plan>
class kernel {
  static_assert(variant_plan<Plan>, "mqalogits neuron model: Plan is not a variant plan");
  using tr = traits<Gen>;
  static_assert(
      runs_scale_codec_v<typename Format::scale_type, Format::scale_block, Format::head_dim>,
      "mqalogits neuron model: no kernel for this scale codec (it reads UE8M0 bytes per "
      "32 elements or one scale per row)");
  static constexpr bool mx_format = is_mx_format_v<Format>;
  static constexpr bool per_token = !mx_format;                // one scale per row
  static constexpr bool packs = !Plan::prefill && !per_token;  // decode passes may be packed
  static constexpr bool mx = tr::mx_matmul && mx_format;       // trn3 MX matmul
  static constexpr bool fp4 = Format::data_type::bits == 4;
  static constexpr bool fp8_operands = per_token && tr::native_e4m3fn;  // trn3 fp8_per_token
  // trn2 decodes the codes where they arrive, a block per partition row, each UE8M0 exponent
  // decoded once to its bf16 value and read by a broadcast access pattern along its 32 codes,
  // then transposes the bf16 values, which its TensorE moves bit-exactly (NaN and Inf too): no
  // exponent transposes, no spreading matmuls, and every decode step reads SBUF, so GpSimd can
  // take any of them. trn1, whose transposes are not bit-accurate on NaN / Inf, transposes the
  // integer codes and exponents, spreads the exponents by a 0/1 matmul and decodes after.
  static constexpr bool decode_first = !mx && !fp8_operands && tr::exact_pe_transpose;
  static constexpr std::int64_t decode_slots = 2048 / Format::head_dim;  // per decode: 2048 codes
  static constexpr dtype word_type = fp4 ? dtype::fp4x4 : dtype::fp8x4;
  // The matmul operand: x4 words (trn3 MX), fp8 codes (trn3 per-token) or decoded bf16.
  static constexpr dtype operand_type = mx ? word_type : fp8_operands ? dtype::fp8 : dtype::bf16;
  static constexpr int db = Format::data_bytes, sb = Format::scale_bytes;
  static constexpr int D = Format::head_dim;          // the contraction: partitions of K^T and Q^T
  static constexpr int words = D / mx_pack;           // x4 words per row
  static constexpr int used_scales = Format::blocks;  // exponents of a row's 4-byte field in use
  static constexpr std::int64_t score_step = mx ? mx_pack * quadrant_tile : key_tile;
  // Prefill accumulates a head's relu scores over four score tiles (one PSUM bank each) per
  // instruction, and its epilogue casts as many: a quarter of their fixed costs.
  static constexpr std::int64_t acc_step = Plan::prefill ? 4 * score_step : score_step;
  static constexpr std::int64_t transpose_group = 4;  // [D, <= 128] transposes per PSUM bank
  // Keys stored in the Neuron-native MX layout (native_paged.hpp): whole blocks by DMA.
  static constexpr bool native = requires { requires Plan::native_mx_layout; };
  static_assert(!native || mx, "mqalogits neuron model: the native MX layout needs trn3 and MX");
  // Columns per quadrant matmul: 128 (4 x 128 keys); native: one 128-token block per quadrant.
  static constexpr std::int64_t quadrant_step = native ? 128 : quadrant_tile;
  static constexpr float minus_inf = -std::numeric_limits<float>::infinity();

 public:
  kernel(core<Gen>& c, const rows_view<Format>& q, const Plan& plan, const weights_ref& w,
         logits_sink& output, int part, int parts)
      : c_(c),
        q_(q),
        plan_(plan),
        w_(w),
        output_(output),
        clean_(output.clean()),
        part_(part),
        parts_(parts),
        heads_(w.cols),
        block_(plan.gather_block() > 0 ? plan.gather_block() : contiguous_block),
        chunk_(chunk_keys(block_)),
        rows_(chunk_ / block_),
        slots_(mx ? (block_ + mx_pack - 1) / mx_pack * mx_pack : block_),
        // Streaming tiles of constant shape: an overflow is a compile error (fits_sbuf_v /
        // fits_psum_v).
        relu_(c.template sbuf<shape<dtype::fp32, 128, acc_step>>("relu(scores)")),
        scores_(c.template psum<shape<dtype::fp32, 128, score_step>, psum_buffers>("scores")) {
    allocate_decode_tiles();
    allocate_key_tiles();
    tp_ = c_.psum("transpose", 128, transpose_group * 128, dtype::fp32, psum_buffers);
    logits_ = c_.template sbuf<shape<dtype::fp32, 128, acc_step>>("logits");
    out_tile_ = output_.type() == dtype::fp32
                    ? c_.template sbuf<shape<dtype::fp32, 128, acc_step>>("logits out")
                    : c_.template sbuf<shape<dtype::bf16, 128, acc_step>>("logits out");
    valid_.resize(static_cast<std::size_t>(chunk_));
  }

 private:
  // Decode's head-sum tiles: fp8_per_token sums [rows, n] tiles by rows; the others the whole
  // chunk's relu scores with the keys on the output partitions.
  void allocate_decode_tiles() {
    if constexpr (!Plan::prefill && per_token) {
      head_ = c_.template psum<shape<dtype::fp32, 128, score_step>, psum_buffers>("head sum");
    } else if constexpr (!Plan::prefill) {
      // The chunk's relu scores in K^T's padded key order (up to 4 padding slots per block and
      // the last tile's 4 x 128 columns), and the keys-on-partitions head sum and epilogue.
      const std::int64_t cols =
          (rows_ * slots_ + mx_pack + score_step - 1) / score_step * score_step;
      const std::int64_t width = cols / 128 * max_head_sum_rows;
      relu_chunk_ = c_.sbuf("relu(scores) of a chunk", dtype::fp32, 128, cols);
      head_ = c_.psum("head sum (keys on partitions)", 128, width, dtype::fp32, psum_buffers);
      out_part_ = c_.sbuf("logits out (keys on partitions)", output_.type(), 128, width);
      mask_ = c_.sbuf("key mask (keys on partitions)", dtype::u8, 128, width);
      pack_w_ = c_.sbuf("weights (packed passes)", dtype::fp32, 128, max_head_sum_rows);
    }
  }

  // Per-call tiles sized by the chunk (runtime: an overflow is a named error): the blocks as
  // loaded, and the operand K^T with its staging.
  void allocate_key_tiles() {
    if constexpr (!native) {  // native blocks go straight to K^T
      raw_ = mx             ? c_.sbuf("K words", word_type, rows_, block_ * words)
             : fp8_operands ? c_.sbuf("K codes", dtype::fp8, rows_, block_ * db)
                            : c_.sbuf("K bytes", dtype::u8, rows_, block_ * db);
      if constexpr (mx_format) exps_ = c_.sbuf("K scales", dtype::u8, rows_, block_ * sb);
      if constexpr (decode_first && mx_format)
        scale_values_ = c_.sbuf("K scale values", dtype::bf16, rows_, block_ * sb);
    }
    if constexpr (per_token) {
      k_scale_ = c_.sbuf("K scales", dtype::fp32, rows_, block_);
      k_scale_row_ = c_.sbuf("K scale row", dtype::fp32, 1, chunk_);
      ones_ = c_.sbuf("ones", dtype::fp32, 1, 128);
      c_.memset(window(ones_), 1.0f);
    }
    if constexpr (mx) {
      kt_ = c_.sbuf("K^T", word_type, 128, rows_ * slots_ / mx_pack);
      kt_scales_ = c_.sbuf("K^T scales", dtype::u8, 128, rows_ * slots_ / mx_pack);
      stage_ = c_.sbuf("scale staging", dtype::u8, 128, 128);
      tpx_ = c_.psum("transpose (words)", 128, 128, word_type, psum_buffers);
      if (!native && (words < mx_quadrant || slots_ != block_))
        stage_words_ = c_.sbuf("word staging", word_type, rows_, 128);
    } else {
      if constexpr (fp4) codes_ = c_.sbuf("K codes", dtype::u8, rows_, block_ * D);
      kt_ = c_.sbuf("K^T", operand_type, D, chunk_);
      if constexpr (decode_first)
        decoded_ = c_.sbuf("K decoded", dtype::bf16, rows_, std::min(block_, decode_slots) * D);
      else if constexpr (!fp8_operands)
        codes_t_ = c_.sbuf("K^T codes", dtype::bf16, D, chunk_);
      if constexpr (mx_format && !decode_first) {
        exps_t_ = c_.sbuf("K^T exponents", dtype::bf16, 4, chunk_);
        spread_ = c_.sbuf("exponent spread", dtype::bf16, 4, D);
        // 0/1 matrix spreading exponent row b to the 32 partitions of its scale block (rows of
        // the 4-byte field past D / 32 spread nowhere).
        c_.memset(window(spread_), 0.0f);
        if (c_.computes())
          for (int d = 0; d < D; ++d) spread_.at(d / scale_block, d) = 1.0f;
      }
      if constexpr ((mx_format && !decode_first) || per_token)
        bcast_ = c_.psum("broadcast", 128, key_tile, dtype::fp32, psum_buffers);
    }
  }

 public:
  void run() {
    if (clean_ && part_ == 0) fill_outside();
    work_list work;
    plan_.fill_work(tiling{Plan::prefill ? prefill_rows : 8, chunk_}, work);
    // Consecutive items of one group, rows and contiguous keys form one chunk.
    detail::vector<work_item> chunks;
    for (const work_item& it : work.items) {
      if (!chunks.empty()) {
        work_item& last = chunks.back();
        if (last.group == it.group && last.row_begin == it.row_begin &&
            last.row_end == it.row_end && last.key_end == it.key_begin &&
            it.key_end - last.key_begin <= chunk_) {
          last.key_end = it.key_end;
          continue;
        }
      }
      chunks.push_back(it);
    }
    // The key chunks in the order they run: (item, first key, keys). LNC = 2: the two cores
    // split the queries (prefill row tiles, decode groups).
    detail::vector<key_chunk> order;
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      const work_item& ch = chunks[i];
      const std::int64_t owner = Plan::prefill ? ch.row_begin / prefill_rows : ch.group;
      if (owner % parts_ != part_) continue;
      for (std::int64_t k0 = ch.key_begin; k0 < ch.key_end; k0 += chunk_)
        order.push_back({i, k0, std::min(chunk_, ch.key_end - k0)});
    }
    // Prefill: the query tiles that start at the same key of one group share their keys, so
    // the longest runs first and the K^T it leaves resident serves the others (decoded once,
    // not once per 128-query tile).
    if constexpr (Plan::prefill)
      std::stable_sort(order.begin(), order.end(), [&](const key_chunk& a, const key_chunk& b) {
        const std::int64_t ga = chunks[a.item].group, gb = chunks[b.item].group;
        return ga != gb ? ga < gb : a.k0 != b.k0 ? a.k0 < b.k0 : a.nk > b.nk;
      });
    for (const key_chunk& kc : order) {
      const work_item& ch = chunks[kc.item];
      if constexpr (packs)
        if (const int slot = pack_slot(ch)) {
          pack_chunk(ch, kc.k0, kc.nk, slot);
          continue;
        }
      load_keys(ch.group, kc.k0, kc.nk);
      if constexpr (Plan::prefill)
        prefill(ch, kc.k0, kc.nk);
      else
        decode(ch, kc.k0, kc.nk);
    }
    if constexpr (packs) run_pack();
  }

 private:
  // ---- keys ----

  struct key_chunk {
    std::size_t item;
    std::int64_t k0, nk;
  };

  // Keys [k0, k0 + nk) of group g, block by block, into K^T (natural order along the free axis).
  // A prefill chunk whose keys K^T already holds (the same group and first key, no more keys)
  // only marks them.
  void load_keys(std::int64_t g, std::int64_t k0, std::int64_t nk) {
    const std::int64_t B = block_, R = (nk + B - 1) / B;
    const int r = static_cast<int>(R);
    const bool masked = mark_keys(g, k0, nk, R * B);
    if (Plan::prefill && resident_.group == g && resident_.k0 == k0 && nk <= resident_.nk) return;
    resident_ = {g, k0, nk};
    if constexpr (native) {
      load_native_blocks(g, k0, R);
      return;
    }
    if (masked) {  // masked keys score a zero row; their columns become -inf
      c_.memset(window(raw_, 0, r, 0, raw_.free()), 0.0f);
      if constexpr (mx_format) c_.memset(window(exps_, 0, r, 0, B * sb), 0.0f);
      if constexpr (per_token) c_.memset(window(k_scale_, 0, r, 0, B), 0.0f);
    }
    read_key_blocks(R);
    keys_to_operand(r);
  }

  // The plan's keys of slots [0, slots) of the chunk into keys_ / valid_; whether any is masked.
  bool mark_keys(std::int64_t g, std::int64_t k0, std::int64_t nk, std::int64_t slots) {
    bool masked = false;
    keys_.assign(static_cast<std::size_t>(slots), key_ref{});
    for (std::int64_t o = 0; o < slots; ++o) {
      const auto i = static_cast<std::size_t>(o);
      if (o < nk) keys_[i] = plan_.key(g, k0 + o);
      valid_[i] = keys_[i].valid();
      masked |= !valid_[i];
    }
    return masked;
  }

  // The R blocks holding at least one valid key, read whole, one per partition row: codes,
  // scales (and, per token, the scales again as one row in key order on partition 0). A gather
  // (indirect DMA) for block tables and sparse blocks, plain DMA for dense rows.
  void read_key_blocks(std::int64_t R) {
    const std::int64_t B = block_;
    detail::vector<unsigned char> read(static_cast<std::size_t>(R), 0);
    std::int64_t blocks = 0;
    for (std::int64_t p = 0; p < R; ++p) {
      for (std::int64_t s = 0; s < B; ++s)
        read[static_cast<std::size_t>(p)] |= valid_[static_cast<std::size_t>(p * B + s)];
      blocks += read[static_cast<std::size_t>(p)];
    }
    const bool indirect = plan_.gather_block() > 0;
    // One transfer over the read blocks: per_key(t, p, s, key) for the valid keys s of block p
    // (or for every slot), then the block's row of row_bytes.
    enum class slots { valid_keys, every_slot };
    const auto transfer = [&](std::int64_t row_bytes, slots which, auto per_key) {
      auto t = indirect ? c_.gather(blocks) : c_.dma();
      for (std::int64_t p = 0; p < R; ++p) {
        if (!read[static_cast<std::size_t>(p)]) continue;
        for (std::int64_t s = 0; s < B; ++s) {
          const key_ref& k = keys_[static_cast<std::size_t>(p * B + s)];
          if (which == slots::every_slot || k.valid()) per_key(t, p, s, k);
        }
        t.row(row_bytes);
      }
    };
    transfer(B * db, slots::valid_keys,
             [&](auto& t, std::int64_t p, std::int64_t s, const key_ref& k) {
               if constexpr (mx)
                 t.template words_in<Format>(window(raw_), p, s * words, k.data, words,
                                             dma_row::part_of_block);
               else if constexpr (fp8_operands)
                 t.template codes_in<Format>(window(raw_), p, s * db, k.data, db,
                                             dma_row::part_of_block);
               else
                 t.bytes_in(window(raw_), p, s * db, k.data, db, dma_row::part_of_block);
             });
    transfer(B * sb, slots::valid_keys,
             [&](auto& t, std::int64_t p, std::int64_t s, const key_ref& k) {
               if constexpr (per_token) {
                 const float v = Format::block_scale(k.scale, 0);
                 t.values_in(window(k_scale_), p, s, &v, 1, dma_row::part_of_block);
               } else {
                 t.bytes_in(window(exps_), p, s * sb, k.scale, sb, dma_row::part_of_block);
               }
             });
    if constexpr (per_token) {  // the K scales again, as one row in key order on partition 0
      transfer(B * sb, slots::every_slot,
               [&](auto& t, std::int64_t p, std::int64_t s, const key_ref& k) {
                 const float v = k.valid() ? Format::block_scale(k.scale, 0) : 0.0f;
                 // An infinite scale times the codes is NaN element-wise (0 x inf, +inf - inf)
                 // as the host decodes it, not sum(q c) x inf = +-inf.
                 const float f = std::isinf(v) ? std::numeric_limits<float>::quiet_NaN() : v;
                 t.values_in(window(k_scale_row_), 0, p * B + s, &f, 1, dma_row::part_of_block);
               });
    }
  }

  // The loaded blocks of r partition rows into the matmul operand K^T: MX words and scales
  // transposed into quadrants (trn3), else the codes transposed and decoded.
  void keys_to_operand(int r) {
    const std::int64_t B = block_;
    if constexpr (mx) {
      transpose_mx_keys(r, B);
    } else {
      window codes(raw_, 0, r, 0, B * db);
      if constexpr (fp4) {
        c_.unpack_nibbles(window(codes_, 0, r, 0, B * D), window(raw_, 0, r, 0, B * db));
        codes = window(codes_, 0, r, 0, B * D);
      }
      if constexpr (per_token) c_.flip_signs(codes, window(k_scale_, 0, r, 0, B), D);
      if constexpr (decode_first) {
        if constexpr (mx_format)
          c_.decode_scales(window(scale_values_, 0, r, 0, B * sb), window(exps_, 0, r, 0, B * sb));
        decode_transpose(
            codes, r, B, kt_, [&](std::int64_t s) { return s; }, B,
            mx_format ? &scale_values_ : nullptr, decoded_);
      } else {
        transpose_codes(
            codes, mx_format ? &exps_ : nullptr, r, B, fp8_operands ? kt_ : codes_t_,
            [&](std::int64_t s) { return s; }, B);
        if constexpr (!fp8_operands) decode_operand(kt_, r * B);
      }
    }
  }

  // Words of slots 4g .. 4g + 3 of each block side by side: one transpose puts them in the four
  // quadrants, and the copy writes column p x slots_ / 4 + g, so quadrant j column c holds slot
  // 4c + j of the padded order (block p, slot s at p x slots_ + s). Blocks whose size is not a
  // multiple of 4 end in a group whose missing slots are zero words (the staging copy's
  // predicate), and rows of fewer than 32 words are padded to one quadrant the same way.
  void transpose_mx_keys(int r, std::int64_t B) {
    const std::int64_t groups = slots_ / mx_pack;
    detail::vector<std::int32_t> map(128), word_map(128);
    detail::vector<unsigned char> is_scale(128), is_word(128);
    for (std::int64_t gq = 0; gq < groups; ++gq) {
      const bool whole = (gq + 1) * mx_pack <= B;  // the group's four slots are keys
      for (int i = 0; i < 128; ++i) {
        const std::int64_t slot = gq * mx_pack + i / mx_quadrant;
        const int lane = i % mx_quadrant;
        const std::int64_t key = std::min(slot, B - 1);
        is_word[static_cast<std::size_t>(i)] = slot < B && lane < words;
        word_map[static_cast<std::size_t>(i)] =
            static_cast<std::int32_t>(key * words + std::min(lane, words - 1));
        is_scale[static_cast<std::size_t>(i)] = slot < B && lane < used_scales;
        map[static_cast<std::size_t>(i)] =
            static_cast<std::int32_t>(key * sb + std::min(lane, sb - 1));
      }
      if (words == mx_quadrant && whole) {
        c_.transpose(window(tpx_, 0, 128, 0, r), window(raw_, 0, r, gq * 128, 128));
      } else {
        c_.select(window(stage_words_, 0, r, 0, 128), window(raw_, 0, r, 0, B * words),
                  word_map.data(), is_word.data(), 0.0f);
        c_.transpose(window(tpx_, 0, 128, 0, r), window(stage_words_, 0, r, 0, 128));
      }
      c_.copy(window(kt_, 0, 128, gq, r, groups), window(tpx_, 0, 128, 0, r));
      c_.select(window(stage_, 0, r, 0, 128), window(exps_, 0, r, 0, B * sb), map.data(),
                is_scale.data(), 0.0f);
      c_.transpose(window(tp_, 0, 128, 0, r), window(stage_, 0, r, 0, 128));
      c_.copy(window(kt_scales_, 0, 128, gq, r, groups), window(tp_, 0, 128, 0, r), copy_engine(r));
    }
  }

  // Native blocks [32, 128 words | 128 scale bytes] straight into K^T: block i to quadrant
  // i % 4, columns (i / 4) x 128 + t, its scale rows 0..3 into the quadrant's scale rows. One
  // gather of 32 rows per block.
  void load_native_blocks(std::int64_t g, std::int64_t k0, std::int64_t R) {
    using cache = typename Plan::cache_type;
    std::int64_t blocks = 0;
    for (std::int64_t i = 0; i < R; ++i)
      blocks += plan_.block_of(g, k0 / cache::block_tokens + i) != nullptr;
    auto t = c_.gather(blocks);
    for (std::int64_t i = 0; i < R; ++i) {
      const std::uint8_t* blk = plan_.block_of(g, k0 / cache::block_tokens + i);
      if (!blk) continue;
      const int q0 = static_cast<int>(i % mx_pack) * mx_quadrant;
      const std::int64_t col = (i / mx_pack) * cache::block_tokens;
      for (int p = 0; p < cache::rows; ++p) {
        const std::uint8_t* row = blk + p * cache::row_bytes;
        t.template packed_words_in<Format>(window(kt_), q0 + p, col, row, cache::block_tokens,
                                           dma_row::part_of_block);
        if (p < Format::blocks)
          t.bytes_in(window(kt_scales_), q0 + p, col, row + cache::block_tokens * cache::word_bytes,
                     cache::block_tokens, dma_row::part_of_block);
        t.row(cache::row_bytes);
      }
    }
  }

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

  // ---- queries ----

  // Loads Q rows [first, first + np x S) (S consecutive rows per partition) and builds the
  // operand: qt [D, S x stride] (slot s at columns s x stride; [128, ..] of padded quadrants on
  // trn3 MX), with scales qsc on trn3;
  // per-token Q scales (if any) flip the codes' signs and are returned in qscale [np, S].
  void load_q(std::int64_t first, int np, std::int64_t S, std::int64_t stride, tile& qt, tile& qsc,
              tile& qscale) {
    tile raw, exps;
    read_q(first, np, S, raw, exps, qscale);
    if constexpr (mx)
      q_operand_mx(np, S, stride, raw, exps, qt, qsc);
    else
      q_operand(np, S, stride, raw, exps, qscale, qt);
  }

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
    detail::vector<unsigned char> is_scale(128);
    detail::vector<unsigned char> is_word(128);
    for (int i = 0; i < 128; ++i) is_word[static_cast<std::size_t>(i)] = i % mx_quadrant < words;
    for (std::int64_t s = 0; s < S; ++s) {
      for (int i = 0; i < 128; ++i)
        map[static_cast<std::size_t>(i)] =
            static_cast<std::int32_t>(s * words + std::min(i % mx_quadrant, words - 1));
      // Full quadrants (D = 128) take every word; shorter rows are padded with zero words.
      c_.select(window(stage_w), window(raw), map.data(),
                words == mx_quadrant ? nullptr : is_word.data(), 0.0f);
      c_.transpose(window(tpx_, 0, 128, 0, np), window(stage_w));
      c_.copy(window(qt, 0, 128, s * stride, np), window(tpx_, 0, 128, 0, np));
      for (int i = 0; i < 128; ++i) {
        is_scale[static_cast<std::size_t>(i)] = i % mx_quadrant < used_scales;
        map[static_cast<std::size_t>(i)] =
            static_cast<std::int32_t>(s * sb + std::min(i % mx_quadrant, sb - 1));
      }
      c_.select(window(stage_, 0, np, 0, 128), window(exps), map.data(), is_scale.data(), 0.0f);
      c_.transpose(window(tp_, 0, 128, 0, np), window(stage_, 0, np, 0, 128));
      c_.copy(window(qsc, 0, 128, s * stride, np), window(tp_, 0, 128, 0, np), copy_engine(np));
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
      transpose_codes(
          codes, nullptr, np, S, qt, [&](std::int64_t s) { return s * stride; }, 1);
    } else if constexpr (decode_first) {
      tile values;
      if constexpr (mx_format) {
        values = c_.sbuf("Q scale values", dtype::bf16, np, S * sb);
        c_.decode_scales(window(values), window(exps, 0, np, 0, S * sb));
      }
      tile decoded = c_.sbuf("Q decoded", dtype::bf16, np, std::min(S, decode_slots) * D);
      decode_transpose(
          codes, np, S, qt, [&](std::int64_t s) { return s * stride; }, 1,
          mx_format ? &values : nullptr, decoded);
    } else {
      // The Q codes pass through codes_t_ / exps_t_ (free between key chunks).
      for (std::int64_t s0 = 0; s0 < S; s0 += chunk_ / stride) {
        const std::int64_t n = std::min(S - s0, chunk_ / stride);
        const window part(*codes.t, 0, np, s0 * D, n * D);
        transpose_codes(
            part, mx_format ? &exps : nullptr, np, n, codes_t_,
            [&](std::int64_t s) { return s * stride; }, 1, s0);
        tile piece = c_.sbuf("Q^T piece", dtype::bf16, D, n * stride);
        decode_operand(piece, n * stride);
        c_.copy(window(qt, 0, D, s0 * stride, n * stride), window(piece));
      }
    }
  }

  // ---- prefill: query tokens on partitions ----

  struct prefill_q {
    std::int64_t row_begin = -1, row_end = -1, stride = 0;
    tile qt, qsc, w;  // Q^T [D, H x stride] (heads major), scales, weights [rows, H]
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
    load_q(r0 * H, r, H, pq_.stride, pq_.qt, pq_.qsc, qscale);
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
      if (q_.scales) c_.multiply_abs(window(pq_.w), window(pq_.w), window(qscale));
  }

  void prefill(const work_item& item, std::int64_t k0, std::int64_t nk) {
    const std::int64_t R = item.row_end - item.row_begin;
    load_prefill_q(item.row_begin, item.row_end);
    const int r = static_cast<int>(R), rs = static_cast<int>(pq_.stride);
    const std::int64_t kcols = mx ? (nk + mx_pack - 1) / mx_pack : nk;
    const std::int64_t step = mx ? quadrant_tile : key_tile;  // K^T columns of a score tile
    const std::int64_t group = step * (acc_step / score_step);
    auto keys_of = [&](std::int64_t cols) { return mx ? mx_pack * cols : cols; };
    for (std::int64_t g0 = 0; g0 < kcols; g0 += group) {
      const std::int64_t gn = std::min(group, kcols - g0), gkeys = keys_of(gn);
      const std::int64_t first = keys_of(g0);  // the group's first key in the chunk
      const window acc(logits_, 0, r, 0, gkeys);
      for (std::int64_t h = 0; h < heads_; ++h) {
        for (std::int64_t c0 = g0; c0 < g0 + gn; c0 += step) {
          const std::int64_t n = std::min(step, g0 + gn - c0), keys = keys_of(n);
          const std::int64_t at = keys_of(c0 - g0);  // its relu scores' column in the group
          if constexpr (mx) {
            for (int j = 0; j < mx_pack; ++j) {
              const int q0 = j * mx_quadrant;
              const window sc(scores_, 0, rs, j * quadrant_tile, n);
              c_.matmul_mx(sc, window(pq_.qt, q0, mx_quadrant, h * rs, rs),
                           window(pq_.qsc, q0, sb, h * rs, rs), window(kt_, q0, mx_quadrant, c0, n),
                           window(kt_scales_, q0, sb, c0, n));
            }
            // Quadrant j holds keys 4c + j: one relu evacuation of the four, in key order.
            c_.activation_2d(window(relu_, 0, r, at, 1), mx_pack, 1, window(scores_, 0, r, 0, 1),
                             quadrant_tile, mx_pack, n, activation_fn::relu, relu_engine(keys));
          } else {
            const window sc(scores_, 0, r, 0, n);
            c_.matmul(sc, window(pq_.qt, 0, D, h * rs, r), window(kt_, 0, D, c0, n));
            c_.activation(window(relu_, 0, r, at, n), sc, activation_fn::relu, nullptr,
                          relu_engine(keys));
          }
        }
        const write_mode mode = h == 0 ? write_mode::overwrite : write_mode::accumulate;
        c_.scale_add(acc, window(relu_, 0, r, 0, gkeys), window(pq_.w, 0, r, h, 1), mode,
                     accumulate_engine(gkeys, mode));
      }
      if constexpr (per_token) apply_key_scales(acc, r, first);
      epilogue(acc, item.row_begin, R, k0 + first, first);
    }
  }

  // Prefill's two elementwise passes per head go to whichever engine would finish them first,
  // given what each has queued (list scheduling; a static schedule balances them the same
  // way): the relu evacuation of n scores per partition on ScalarE or VectorE, the weighted
  // accumulation on VectorE or GpSimd, at their documented widths. trn1 keeps them on ScalarE /
  // VectorE: its VectorE and ScalarE cannot read PSUM at once, nor VectorE and GpSimd SBUF.
  static double engine_seconds(std::int64_t elements, int inputs, double rate, double hz) {
    return static_cast<double>(common_traits::engine_fixed_cycles +
                               (inputs > 1 ? 2 : 1) * static_cast<std::int64_t>(std::ceil(
                                                          static_cast<double>(elements) / rate))) /
           hz;
  }
  // ScalarE or VectorE, whichever would finish a one-input pass over n elements first; `tie`
  // when both would finish together.
  elementwise_engine scalar_or_vector(std::int64_t n, elementwise_engine tie) {
    const report& r = c_.counters();
    const double on_scalar =
        r.scalar.seconds + engine_seconds(n, 1, tr::scalar_other_rate, tr::scalar_hz);
    const double on_vector =
        r.vector.seconds + engine_seconds(n, 1, tr::vector_other_rate, tr::vector_hz);
    if (on_scalar == on_vector) return tie;
    return on_scalar < on_vector ? elementwise_engine::scalar : elementwise_engine::vector;
  }
  elementwise_engine relu_engine(std::int64_t n) {
    if constexpr (tr::psum_read_exclusive) return elementwise_engine::scalar;
    return scalar_or_vector(n, elementwise_engine::scalar);
  }
  // The copies of transposed codes, exponents and scale bytes out of PSUM (fp32 there, integers
  // below 256: exact through ScalarE's fp32 data path) likewise: ScalarE's identity activation
  // or VectorE's tensor_copy, as AWS's kernels alternate their evacuations. trn1 keeps VectorE:
  // its ScalarE and VectorE cannot read PSUM at once. (The x4 words of trn3's MX operands stay
  // on VectorE: ScalarE carries one value per element.)
  elementwise_engine copy_engine(std::int64_t n) {
    if constexpr (tr::psum_read_exclusive) return elementwise_engine::vector;
    return scalar_or_vector(n, elementwise_engine::vector);
  }
  elementwise_engine accumulate_engine(std::int64_t n, write_mode mode) {
    if constexpr (tr::sbuf_vector_gpsimd_exclusive) return elementwise_engine::vector;
    const int inputs = mode == write_mode::overwrite ? 1 : 2;
    const report& r = c_.counters();
    const double on_vector =
        r.vector.seconds + engine_seconds(n, inputs, tr::vector_other_rate, tr::vector_hz);
    const double on_gpsimd = r.gpsimd.seconds + engine_seconds(n, inputs, 1.0, tr::gpsimd_hz);
    return on_gpsimd < on_vector ? elementwise_engine::gpsimd : elementwise_engine::vector;
  }

  // acc [rows, n] *= |K scale| of its columns: the scale row broadcast to the rows by a matmul
  // with a ones stationary.
  void apply_key_scales(const window& acc, int rows, std::int64_t c0) {
    for (std::int64_t i = 0; i < acc.nc; i += key_tile) {  // a PSUM bank of the row at a time
      const std::int64_t n = std::min(key_tile, acc.nc - i);
      const window b(bcast_, 0, rows, 0, n), part(*acc.t, acc.p0, rows, acc.c0 + i, n);
      c_.matmul(b, window(ones_, 0, 1, 0, rows), window(k_scale_row_, 0, 1, c0 + i, n),
                matmul_kind::broadcast);
      c_.multiply_abs(part, part, b);
    }
  }

  // ---- decode: heads on PSUM partitions ----

  struct decode_pass {
    std::int64_t row_begin = 0, row_end = 0, partitions = 0, stride = 0;
    tile qt, qsc, w;  // Q^T [D, rows x H (even)], its scales, block-diagonal weights
  };

  // Query rows of one head sum: `rows` rows from row_begin, their heads on partitions from p0,
  // their logits in head-sum columns col .. col + rows - 1 of each key group; their chunk's keys
  // [k0, k0 + nk) and its valid flags.
  struct sum_part {
    std::int64_t row_begin;
    int rows, p0, col;
    std::int64_t k0, nk;
    const unsigned char* valid;
  };

  // The pass of query rows [a, end): Q^T (with its scales on trn3 MX) and, when `weights`, the
  // block-diagonal weights [rows x H, rows] (a packed pass takes its weights in pack_w_).
  decode_pass load_pass(std::int64_t a, std::int64_t end, bool weights) {
    const std::int64_t rows = end - a, P = rows * heads_;
    decode_pass pass;
    pass.row_begin = a;
    pass.row_end = end;
    pass.partitions = P;
    pass.stride = mx ? P + (P & 1) : P;
    tile qscale;
    load_q(a * heads_, static_cast<int>(P), 1, pass.stride, pass.qt, pass.qsc, qscale);
    if (weights) {
      pass.w = c_.sbuf("weights (block-diagonal)", dtype::fp32, P, rows);
      c_.memset(window(pass.w), 0.0f);
      load_weights(window(pass.w), a, end);
      if constexpr (per_token)
        if (q_.scales)
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

  void load_decode_q(std::int64_t r0, std::int64_t r1) {
    if (dq_row_begin_ == r0 && dq_row_end_ == r1) return;  // resident from the last chunk
    passes_.clear();
    dq_row_begin_ = r0;
    dq_row_end_ = r1;
    const std::int64_t per = decode_rows_per_pass(heads_);
    for (std::int64_t a = r0; a < r1; a += per)
      passes_.push_back(load_pass(a, std::min(r1, a + per), true));
  }

  // K^T columns holding a chunk of nk keys: x4 columns of padded slots on trn3 MX (native:
  // whole 128-token blocks, four to a column block), one per key elsewhere.
  std::int64_t decode_kcols(std::int64_t nk) const {
    return native ? (nk + 4 * quadrant_step - 1) / (4 * quadrant_step) * quadrant_step
           : mx   ? (padded(nk - 1) + mx_pack) / mx_pack
                  : nk;
  }

  void decode(const work_item& item, std::int64_t k0, std::int64_t nk) {
    load_decode_q(item.row_begin, item.row_end);
    const std::int64_t kcols = decode_kcols(nk);
    const std::int64_t step = mx ? quadrant_step : key_tile;
    for (decode_pass& pass : passes_) {
      const int P = static_cast<int>(pass.partitions);
      for (std::int64_t c0 = 0; c0 < kcols; c0 += step) {
        const std::int64_t n = std::min(step, kcols - c0);
        score_matmul(pass, 0, kt_, kt_scales_, c0, n);
        if constexpr (per_token) {
          evacuate_relu(relu_, P, 0, n);
          per_token_tile(pass, k0, nk, c0, n);
        } else {
          evacuate_relu(relu_chunk_, P, mx ? mx_pack * c0 : c0, n);
        }
      }
      if constexpr (!per_token) {
        const int rows = static_cast<int>(pass.row_end - pass.row_begin);
        const sum_part part{pass.row_begin, rows, 0, 0, k0, nk, valid_.data()};
        head_sum_chunk({&part, 1}, window(pass.w), rows, mx ? mx_pack * kcols : kcols);
      }
    }
  }

  // The pass's scores against K^T columns [c0, c0 + n) onto PSUM partitions [p0, p0 + stride):
  // one matmul (trn3 MX: four row-tiled ones). A packed pass (p0 > 0) puts its stationary in a
  // column tile of the PE array, whose outputs are those partitions.
  void score_matmul(decode_pass& pass, int p0, tile& kt, tile& kt_scales, std::int64_t c0,
                    std::int64_t n) {
    const int Ps = static_cast<int>(pass.stride);
    if constexpr (mx) {
      for (int j = 0; j < mx_pack; ++j) {
        const int q0 = j * mx_quadrant;
        c_.matmul_mx(window(scores_, p0, Ps, j * quadrant_tile, n),
                     window(pass.qt, q0, mx_quadrant, 0, Ps), window(pass.qsc, q0, sb, 0, Ps),
                     window(kt, q0, mx_quadrant, c0, n), window(kt_scales, q0, sb, c0, n));
      }
    } else {
      c_.matmul(window(scores_, p0, Ps, 0, n), window(pass.qt, 0, D, 0, Ps),
                window(kt, 0, D, c0, n));
    }
  }

  // The relu of the scores on PSUM partitions [0, P), n columns (trn3 MX: n per quadrant), into
  // `relu` from column `at` in K^T's (padded) key order: one evacuation.
  void evacuate_relu(tile& relu, int P, std::int64_t at, std::int64_t n) {
    if constexpr (mx)  // quadrant j holds keys 4c + j (native: block 4 x (c / 128) + j, in order)
      c_.activation_2d(window(relu, 0, P, at, 1), native ? 1 : mx_pack, native ? n : 1,
                       window(scores_, 0, P, 0, 1), quadrant_tile, mx_pack, n, activation_fn::relu);
    else
      c_.activation(window(relu, 0, P, at, n), window(scores_, 0, P, 0, n), activation_fn::relu);
  }

  // ---- decode: packed passes (packed-Q eviction) ----

  // One query row of H = 64 heads fills half of TensorE's 128 columns, half of the PSUM
  // partitions its relu evacuation reads and half of the head sum's 128 contraction partitions.
  // So chunks whose single pass has at most 64 partitions are packed, as AWS's MXFP8 decode
  // packs its queries: each takes its own column tile of the PE array for its score matmuls
  // (nc_matmul's tile_position: 2 x 64 columns, 4 x 32 on v3 and later), so its scores land on
  // its own PSUM partitions, and one relu evacuation, one fp32 head sum over all the pack's
  // partitions (block-diagonal weights) and one epilogue serve the whole pack. The chunks are
  // consecutive in run order: other requests', or further chunks of one request (a 65536-key
  // request pairs its own chunks). Each keeps its K^T resident until the pack runs.
  struct packed_chunk {
    decode_pass pass;
    std::int64_t k0 = 0, nk = 0, kcols = 0;
    std::size_t q_slot = 0;  // the slot whose pass holds this chunk's Q (one request's chunks)
    tile kt, kt_scales;      // swapped in from kt_ / kt_scales_ after loading
    detail::vector<unsigned char> valid;
  };

  // Partitions of one packed pass for an item: its pass rounded up to a column tile (64, or 32
  // on v3 and later); 0 when it is not packed (per-token scales, several passes, P > 64).
  int pack_slot(const work_item& item) const {
    const std::int64_t rows = item.row_end - item.row_begin, P = rows * heads_;
    if (rows > decode_rows_per_pass(heads_)) return 0;
    const std::int64_t stride = mx ? P + (P & 1) : P;
    for (int slot = tr::pe_column_tile; slot <= 64; slot *= 2)
      if (stride <= slot) return slot;
    return 0;
  }

  // Loads the chunk's keys and Q into the next slot of the pack; a full pack runs.
  void pack_chunk(const work_item& item, std::int64_t k0, std::int64_t nk, int slot) {
    if (packed_ > 0 && slot != pack_slot_) run_pack();
    pack_slot_ = slot;
    if (pack_.size() == packed_) {
      packed_chunk pc;
      pc.kt = c_.sbuf("K^T (packed chunk)", kt_.type(), kt_.partitions(), kt_.free());
      if constexpr (mx)
        pc.kt_scales = c_.sbuf("K^T scales (packed chunk)", dtype::u8, kt_scales_.partitions(),
                               kt_scales_.free());
      pack_.push_back(std::move(pc));
    }
    packed_chunk& pc = pack_[packed_++];
    load_keys(item.group, k0, nk);
    std::swap(kt_, pc.kt);
    if constexpr (mx) std::swap(kt_scales_, pc.kt_scales);
    resident_ = {};
    pc.valid.assign(valid_.begin(), valid_.end());
    pc.k0 = k0;
    pc.nk = nk;
    pc.kcols = decode_kcols(nk);
    // Q is resident where an earlier slot of the pack, or this slot's last chunk, has its rows.
    const auto holds = [&](const decode_pass& p) {
      return p.partitions > 0 && p.row_begin == item.row_begin && p.row_end == item.row_end;
    };
    pc.q_slot = packed_ - 1;
    for (std::size_t s = 0; s + 1 < packed_ && pc.q_slot == packed_ - 1; ++s)
      if (pack_[s].q_slot == s && holds(pack_[s].pass)) pc.q_slot = s;
    if (pc.q_slot == packed_ - 1 && !holds(pc.pass))
      pc.pass = load_pass(item.row_begin, item.row_end, false);
    if (static_cast<int>(packed_) * slot == common_traits::partitions) run_pack();
  }

  // The pack's scores, tile by tile: each chunk's matmuls into its column tile, then one relu
  // evacuation of all of them; then the head sum and epilogue of the pack.
  void run_pack() {
    if (packed_ == 0) return;
    detail::vector<sum_part> parts;
    std::int64_t kcols = 0;
    int R = 0;
    for (std::size_t s = 0; s < packed_; ++s) {
      const packed_chunk& pc = pack_[s];
      const decode_pass& pass = pack_[pc.q_slot].pass;
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
      for (std::size_t s = 0; s < packed_; ++s) {
        packed_chunk& pc = pack_[s];
        if (c0 < pc.kcols)
          score_matmul(pack_[pc.q_slot].pass, parts[s].p0, pc.kt, pc.kt_scales, c0,
                       std::min(step, pc.kcols - c0));
      }
      // A chunk with fewer columns leaves earlier scores in its partitions past them: their
      // relu is never written out, and reaches no other row (see head_sum_chunk).
      evacuate_relu(relu_chunk_, P, mx ? mx_pack * c0 : c0, std::min(step, kcols - c0));
    }
    head_sum_chunk(parts, window(pack_w_, 0, P, 0, R), R, mx ? mx_pack * kcols : kcols);
    packed_ = 0;
  }

  // The block-diagonal weights of the pack in pack_w_: part i's rows on its partitions and
  // columns, zeros elsewhere (kept while the pack holds the same rows).
  void load_pack_weights(std::span<const sum_part> parts) {
    detail::vector<std::int64_t> rows;
    for (const sum_part& p : parts) rows.push_back(p.row_begin);
    if (rows == pack_w_rows_) return;
    pack_w_rows_ = rows;
    c_.memset(window(pack_w_), 0.0f);
    for (const sum_part& p : parts)
      load_weights(window(pack_w_, p.p0, p.rows * static_cast<int>(heads_), p.col, p.rows),
                   p.row_begin, p.row_begin + p.rows);
  }

  // fp8_per_token (K^T in natural order): the head sum of relu_'s n columns as [rows, n], times
  // |K scale| of each key (a ones-matmul broadcast of the scale row), then the epilogue.
  void per_token_tile(decode_pass& pass, std::int64_t k0, std::int64_t nk, std::int64_t c0,
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
    const window b(bcast_, 0, rows, 0, n), dst(logits_, 0, rows, 0, n);
    c_.matmul(b, window(ones_, 0, 1, 0, rows), window(k_scale_row_, 0, 1, c0, n),
              matmul_kind::broadcast);
    c_.multiply_abs(dst, sum, b);
    const std::int64_t written = std::min(c0 + n, nk) - c0;
    epilogue(window(logits_, 0, rows, 0, written), pass.row_begin, rows, k0 + c0, c0);
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
    epilogue_partitions(parts, ncols, U, R);
  }

  // A chunk's key o at its column in K^T's padded order, and the first key at or after a padded
  // column (the identity unless slots_ != block_).
  std::int64_t padded(std::int64_t o) const { return o / block_ * slots_ + o % block_; }
  std::int64_t natural(std::int64_t col) const {
    return col / slots_ * block_ + std::min(col % slots_, block_);
  }

  // ---- the epilogue ----

  // fp32 logits [R, n] (PSUM or SBUF) of rows [r0, r0 + R), keys [k0, k0 + n), the keys from
  // offset `first` of the loaded chunk: cast to the output type (RNE for bf16) with -inf on
  // masked keys when clean (VectorE's predicated copy), or, with nothing to mask, by ScalarE's
  // identity activation (the cast evacuations alternate engines, as AWS's decode kernels do);
  // then one DMA with a row per output row over its candidate columns. The values themselves
  // reach the caller through the output policy (its consume), fed the same fp32 scores; this
  // function carries their cost. `cols` (empty: the identity) gives key i's column in `logits`
  // when it holds padding slots: the cast copy reads through it and skips them (VectorE).
  void epilogue(const window& logits, std::int64_t r0, std::int64_t R, std::int64_t k0,
                std::int64_t first, std::span<const std::int32_t> cols = {}) {
    const std::int64_t nk = cols.empty() ? logits.nc : static_cast<std::int64_t>(cols.size());
    const unsigned char* valid = valid_.data() + first;
    const window o(out_tile_, 0, static_cast<int>(R), 0, nk);
    const bool masked =
        clean_ && std::find_if(valid, valid + nk, [](auto v) { return v == 0; }) != valid + nk;
    if (masked || !cols.empty())
      c_.select(o, logits, cols.empty() ? nullptr : cols.data(), masked ? valid : nullptr,
                minus_inf);
    else
      c_.activation(o, logits, activation_fn::identity);
    detail::vector<float> row;  // a row's fp32 scores in key order, for the output policy
    auto t = c_.dma();
    for (std::int64_t r = 0; r < R; ++r) {
      const row_keys rk = plan_.row(r0 + r);
      const std::int64_t lo = std::max(k0, rk.key_begin), hi = std::min(k0 + nk, rk.key_end);
      if (lo >= hi) continue;
      t.row((hi - lo) * output_.element_bytes());
      if (!c_.computes()) continue;
      const float* scores = &logits.at(r, lo - k0);
      if (!cols.empty()) {
        row.resize(static_cast<std::size_t>(hi - lo));
        for (std::int64_t i = lo; i < hi; ++i)
          row[static_cast<std::size_t>(i - lo)] =
              logits.at(r, cols[static_cast<std::size_t>(i - k0)]);
        scores = row.data();
      }
      output_.consume(r0 + r, lo - rk.col_offset, scores, valid + (lo - k0), hi - lo);
    }
  }

  // The key of the chunk at padded column pc of K^T, or -1 for a padding slot or past nk.
  std::int64_t key_at(std::int64_t pc, std::int64_t nk) const {
    const std::int64_t k =
        native || !mx ? pc : (pc % slots_ < block_ ? pc / slots_ * block_ + pc % slots_ : nk);
    return k < nk ? k : -1;
  }

  // Logits with their keys on partitions (head_sum_chunk): head_ [np, U x R] holds padded
  // column i x U + u of a part's row r at (i, u x R + col + r). They are cast on all np
  // partitions, U x R elements each (ScalarE, or, to write -inf on masked keys when clean,
  // VectorE's predicated copy with a mask tile built by an iota and a compare), then written by
  // one DMA: per partition and row, each run of consecutive keys in the row's range is one
  // descriptor.
  void epilogue_partitions(std::span<const sum_part> parts, std::int64_t ncols, std::int64_t U,
                           int R) {
    const int np = static_cast<int>((ncols + U - 1) / U);
    const std::int64_t width = U * R;
    const window in(head_, 0, np, 0, width), o(out_part_, 0, np, 0, width);
    bool masked = false;
    for (const sum_part& part : parts)
      for (std::int64_t k = 0; clean_ && k < part.nk && !masked; ++k) masked = !part.valid[k];
    if (masked) {
      if (c_.computes())
        for (const sum_part& part : parts)
          for (int i = 0; i < np; ++i)
            for (std::int64_t u = 0; u < U; ++u) {
              const std::int64_t k = key_at(i * U + u, part.nk);
              for (int r = 0; r < part.rows; ++r)
                mask_.at(i, u * R + part.col + r) = k >= 0 && part.valid[k];
            }
      c_.gpsimd_elementwise(width, 1);  // iota
      c_.vector_elementwise(width, 2);  // compare against the valid range
      c_.select_where(o, in, window(mask_, 0, np, 0, width), minus_inf);
    } else {
      c_.activation(o, in, activation_fn::identity);
    }
    auto t = c_.dma();
    for (const sum_part& part : parts)
      for (int r = 0; r < part.rows; ++r) write_partition_runs(t, part, r, np, ncols, U, R);
  }

  // Row r of a part from head_ to the output: per partition, each run of consecutive keys in
  // the row's range is one descriptor (and one consume of the output policy).
  template <class Transfer>
  void write_partition_runs(Transfer& t, const sum_part& part, int r, int np, std::int64_t ncols,
                            std::int64_t U, int R) {
    const row_keys rk = plan_.row(part.row_begin + r);
    const std::int64_t lo = std::max<std::int64_t>(0, rk.key_begin - part.k0);
    const std::int64_t hi = std::min(part.nk, rk.key_end - part.k0);
    detail::vector<float> run;
    for (int i = 0; i < np && lo < hi; ++i) {
      std::int64_t start = -1, prev = -1;
      const auto flush = [&] {
        if (start < 0) return;
        const std::int64_t n = prev - start + 1;
        t.row(n * output_.element_bytes());
        if (c_.computes())
          output_.consume(part.row_begin + r, part.k0 + start - rk.col_offset, run.data(),
                          part.valid + start, n);
        start = -1;
        run.clear();
      };
      for (std::int64_t u = 0; u < U && i * U + u < ncols; ++u) {
        const std::int64_t k = key_at(i * U + u, part.nk);
        if (k < lo || k >= hi || (start >= 0 && k != prev + 1)) flush();
        if (k < lo || k >= hi) continue;
        if (start < 0) start = k;
        prev = k;
        if (c_.computes()) run.push_back(head_.at(i, u * R + part.col + r));
      }
      flush();
    }
  }

  // -inf in every column outside a row's candidate range: a DMA from a constant SBUF row (the
  // values are the output policy's begin).
  void fill_outside() {
    if (c_.computes()) output_.begin();
    auto t = c_.dma();
    const std::int64_t cols = plan_.num_cols(), bytes = output_.element_bytes();
    for (std::int64_t r = 0; r < plan_.num_rows(); ++r) {
      const row_keys k = plan_.row(r);
      const std::int64_t c0 = k.empty() ? cols : k.key_begin - k.col_offset;
      const std::int64_t c1 = k.empty() ? cols : k.key_end - k.col_offset;
      if (c0 > 0) t.row(c0 * bytes);
      if (cols > c1) t.row((cols - c1) * bytes);
    }
  }

  core<Gen>& c_;
  const rows_view<Format>& q_;
  const Plan& plan_;
  const weights_ref& w_;
  logits_sink& output_;
  bool clean_;
  int part_, parts_;
  // slots_: key slots per block in K^T, the block rounded up to the 4 keys of one x4 column
  // on trn3's MX matmul (the extra slots hold zero words); block_ elsewhere.
  std::int64_t heads_, block_, chunk_, rows_, slots_;
  tile relu_, scores_, head_;
  tile relu_chunk_, out_part_, mask_;  // decode: the keys-on-partitions head sum and epilogue
  tile raw_, exps_, scale_values_, decoded_, codes_, k_scale_, k_scale_row_, ones_, kt_, kt_scales_,
      stage_, tpx_;
  tile stage_words_;  // trn3 MX rows of fewer than 32 words, padded to a quadrant
  tile codes_t_, exps_t_, spread_, bcast_, tp_, logits_, out_tile_;
  struct {
    std::int64_t group = -1, k0 = -1, nk = 0;
  } resident_;  // the keys K^T holds
  detail::vector<key_ref> keys_;
  detail::vector<unsigned char> valid_;
  prefill_q pq_;
  detail::vector<decode_pass> passes_;
  std::int64_t dq_row_begin_ = -1, dq_row_end_ = -1;
  // Decode's pack (packed passes): its chunks, how many are in use, their partitions each, the
  // weights and the rows they hold.
  detail::vector<packed_chunk> pack_;
  std::size_t packed_ = 0;
  int pack_slot_ = 0;
  tile pack_w_;
  detail::vector<std::int64_t> pack_w_rows_;
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
