// Key streaming: a chunk of keys from HBM into the matmul operand K^T, the head dimension on
// partitions and the keys in their natural order along the free axis (trn3 MX: four keys to a
// column, one per quadrant, in K^T's padded order).
//
// A chunk's blocks are loaded one per partition row, by one DMA of their codes and one of their
// scales (a gather for block tables and sparse blocks, plain DMA for dense rows), as AWS's
// paged decode loads its cache; a page of 128 or 256 tokens goes as its 2 or 4 runs of 64
// tokens (chunks.hpp), each on a partition row of its own, or as runs of 128 where a decode
// chooses them (kernel::choose_layout). TensorE then puts the head dimension on
// partitions, and strided copies put the keys back in their natural order. The stage also holds the
// chunk's valid flags (masked keys score a zero row and their columns become -inf) and, per token,
// the K scales as one row in key order, applied to the head-summed logits.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "../../config.hpp"
#include "../../format/mx.hpp"
#include "../../std_abi.hpp"
#include "../../variant/plan.hpp"
#include "chunks.hpp"
#include "core.hpp"
#include "memory.hpp"
#include "operand_kind.hpp"
#include "operand_staging.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

template <class Gen, class Format, class Plan>
class key_stream {
  using kind = operand_kind<Gen, Format>;
  static constexpr bool mx_format = kind::mx_format, per_token = kind::per_token, mx = kind::mx;
  static constexpr bool fp4 = kind::fp4, fp8_operands = kind::fp8_operands;
  static constexpr bool decode_first = kind::decode_first;
  static constexpr dtype word_type = kind::word_type, operand_type = kind::operand_type;
  static constexpr int db = kind::db, sb = kind::sb, D = kind::D, words = kind::words;
  static constexpr int used_scales = kind::used_scales;
  static constexpr std::int64_t decode_slots = kind::decode_slots;
  // Keys stored in the Neuron-native MX layout (native_paged.hpp): whole blocks by DMA.
  static constexpr bool native = requires { requires Plan::native_mx_layout; };

 public:
  key_stream(core<Gen>& c, const Plan& plan, const chunk_layout& layout,
             operand_staging<Gen, Format>& staging)
      : c_(c), plan_(plan), layout_(layout), staging_(staging) {
    allocate_tiles();
    valid_.resize(static_cast<std::size_t>(layout_.chunk));
  }

  tile& operand() { return kt_; }                // K^T
  tile& operand_scales() { return kt_scales_; }  // K^T's UE8M0 scales (trn3 MX)
  // The chunk's valid flags, one per key (padded order on trn3 MX).
  const detail::vector<unsigned char>& valid() const { return valid_; }
  // K^T as the next chunk's operand (a packed decode keeps this one's): the tiles swapped with
  // `kt` and `kt_scales`, and no keys resident.
  void hand_over(tile& kt, tile& kt_scales) {
    std::swap(kt_, kt);
    if constexpr (mx) std::swap(kt_scales_, kt_scales);
    resident_ = {};
  }
  // fp8_per_token: dst [rows, n] = src x |K scale| of chunk columns [c0, c0 + n), n <= 512: the
  // scale row broadcast to the rows by a matmul with a ones stationary.
  void apply_key_scales(const window& dst, const window& src, std::int64_t c0) {
    const int rows = dst.np;
    const std::int64_t n = dst.nc;
    const window b(staging_.broadcast(), 0, rows, 0, n);
    c_.matmul(b, window(ones_, 0, 1, 0, rows), window(k_scale_row_, 0, 1, c0, n),
              matmul_kind::broadcast);
    c_.multiply_abs(dst, src, b);
  }

  // Keys [k0, k0 + nk) of group g, block by block, into K^T (natural order along the free axis).
  // A prefill chunk whose keys K^T already holds (the same group and first key, no more keys)
  // only marks them.
  void load(std::int64_t g, std::int64_t k0, std::int64_t nk) {
    const std::int64_t B = layout_.block, R = (nk + B - 1) / B;
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
      if constexpr (mx_format) c_.memset(window(exps_, 0, r, 0, exps_.free()), 0.0f);
      if constexpr (per_token) c_.memset(window(k_scale_, 0, r, 0, B), 0.0f);
    }
    read_key_blocks(k0, R);
    keys_to_operand(r, nk);
  }

 private:
  // Per-call tiles sized by the chunk (runtime: an overflow is a named error): the blocks as
  // loaded, and the operand K^T with its staging.
  void allocate_tiles() {
    if constexpr (!native) {  // native blocks go straight to K^T
      raw_ = mx             ? c_.sbuf("K words", word_type, layout_.rows, layout_.block * words)
             : fp8_operands ? c_.sbuf("K codes", dtype::fp8, layout_.rows, layout_.block * db)
                            : c_.sbuf("K bytes", dtype::u8, layout_.rows, layout_.block * db);
      if constexpr (mx_format)
        exps_ = c_.sbuf("K scales", dtype::u8, layout_.rows,
                        mx ? layout_.slots / mx_pack * 128 : layout_.block * sb);
      // trn3 MX: the lanes no scale is loaded into (past a row's scale blocks, padding slots)
      // stay zero, so zero words meet a finite scale.
      if constexpr (mx) c_.memset(window(exps_), 0.0f);
      if constexpr (decode_first && mx_format)
        scale_values_ = c_.sbuf("K scale values", dtype::bf16, layout_.rows, layout_.block * sb);
    }
    if constexpr (per_token) {
      k_scale_ = c_.sbuf("K scales", dtype::fp32, layout_.rows, layout_.block);
      k_scale_row_ = c_.sbuf("K scale row", dtype::fp32, 1, layout_.chunk);
      ones_ = c_.sbuf("ones", dtype::fp32, 1, 128);
      c_.memset(window(ones_), 1.0f);
    }
    if constexpr (mx) {
      kt_ = c_.sbuf("K^T", word_type, 128, layout_.rows * layout_.slots / mx_pack);
      kt_scales_ = c_.sbuf("K^T scales", dtype::u8, 128, layout_.rows * layout_.slots / mx_pack);
      if (!native && (words < mx_quadrant || layout_.slots != layout_.block))
        stage_words_ = c_.sbuf("word staging", word_type, layout_.rows, 128);
    } else {
      if constexpr (fp4) codes_ = c_.sbuf("K codes", dtype::u8, layout_.rows, layout_.block * D);
      kt_ = c_.sbuf("K^T", operand_type, D, layout_.chunk);
      if constexpr (decode_first)
        decoded_ = c_.sbuf("K decoded", dtype::bf16, layout_.rows,
                           std::min(layout_.block, decode_slots) * D);
    }
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
  // scales (trn3 MX: key s's four at lane 32 x (s % 4) of its group of four slots, the group's
  // 128 lanes from column 128 x (s / 4), as the transposes take them; per token, the scales
  // again as one row in key order on partition 0). A gather
  // (indirect DMA) for block tables and sparse blocks, plain DMA for dense rows. A gather reads
  // `pages` pages, the runs of one page its descriptors (rows).
  void read_key_blocks(std::int64_t k0, std::int64_t R) {
    const std::int64_t B = layout_.block, page = std::max(layout_.page, B);
    detail::vector<unsigned char> read(static_cast<std::size_t>(R), 0);
    std::int64_t blocks = 0, last_page = -1;
    for (std::int64_t p = 0; p < R; ++p) {
      for (std::int64_t s = 0; s < B; ++s)
        read[static_cast<std::size_t>(p)] |= valid_[static_cast<std::size_t>(p * B + s)];
      if (read[static_cast<std::size_t>(p)] && (k0 + p * B) / page != last_page) {
        last_page = (k0 + p * B) / page;
        ++blocks;
      }
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
               } else if constexpr (mx) {
                 t.bytes_in(window(exps_), p, s / mx_pack * 128 + s % mx_pack * mx_quadrant,
                            k.scale, used_scales, dma_row::part_of_block);
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

  // The loaded blocks of r partition rows (nk keys) into the matmul operand K^T: MX words and
  // scales transposed into quadrants (trn3), else the codes transposed and decoded.
  void keys_to_operand(int r, std::int64_t nk) {
    const std::int64_t B = layout_.block;
    if constexpr (mx) {
      transpose_mx_keys(r, B, r == 1 ? std::min(nk, B) : B);
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
        staging_.decode_transpose(
            codes, r, B, kt_, [&](std::int64_t s) { return s; }, B,
            mx_format ? &scale_values_ : nullptr, decoded_);
      } else {
        staging_.transpose_codes(
            codes, mx_format ? &exps_ : nullptr, r, B,
            fp8_operands ? kt_ : staging_.integer_codes(), [&](std::int64_t s) { return s; }, B);
        if constexpr (!fp8_operands) staging_.decode_operand(kt_, r * B);
      }
    }
  }

  // Words of slots 4g .. 4g + 3 of each block side by side: one transpose puts them in the four
  // quadrants, and the copy writes column p x layout_.slots / 4 + g, so quadrant j column c holds
  // slot 4c + j of the padded order (block p, slot s at p x layout_.slots + s). Blocks whose size
  // is not a multiple of 4 end in a group whose missing slots are zero words (the staging copy's
  // predicate), and rows of fewer than 32 words are padded to one quadrant the same way. The
  // scales were loaded into the same lanes (read_key_blocks), so one transpose of the group's
  // 128 scale lanes puts each key's four on the first four partitions of its quadrant, where the
  // MX matmul reads them, with no staging copy. Four groups' transposes fill one PSUM bank
  // ([128, 4 x r]) and leave it in one copy for the words and one for the scales (a two-level
  // access pattern into K^T's columns): a quarter of the copies' fixed costs. Only the groups
  // holding the first `used` slots of each row are transposed: a chunk of one row (a request's
  // last few keys) takes as many transposes as its keys need, not its block's.
  void transpose_mx_keys(int r, std::int64_t B, std::int64_t used) {
    const std::int64_t groups = layout_.slots / mx_pack;
    const std::int64_t used_groups = (used + mx_pack - 1) / mx_pack;
    detail::vector<std::int32_t> word_map(128);
    detail::vector<unsigned char> is_word(128);
    constexpr std::int64_t per_bank = 4;
    for (std::int64_t g0 = 0; g0 < used_groups; g0 += per_bank) {
      const std::int64_t ng = std::min(per_bank, used_groups - g0);
      for (std::int64_t i = 0; i < ng; ++i) {
        const std::int64_t gq = g0 + i;
        const bool whole = (gq + 1) * mx_pack <= B;
        for (int l = 0; l < 128; ++l) {
          const std::int64_t slot = gq * mx_pack + l / mx_quadrant;
          const int lane = l % mx_quadrant;
          const std::int64_t key = std::min(slot, B - 1);
          is_word[static_cast<std::size_t>(l)] = slot < B && lane < words;
          word_map[static_cast<std::size_t>(l)] =
              static_cast<std::int32_t>(key * words + std::min(lane, words - 1));
        }
        if (words == mx_quadrant && whole) {
          c_.transpose(window(staging_.transposed_words(), 0, 128, i * r, r),
                       window(raw_, 0, r, gq * 128, 128));
        } else {
          c_.select(window(stage_words_, 0, r, 0, 128), window(raw_, 0, r, 0, B * words),
                    word_map.data(), is_word.data(), 0.0f);
          c_.transpose(window(staging_.transposed_words(), 0, 128, i * r, r),
                       window(stage_words_, 0, r, 0, 128));
        }
        c_.transpose(window(staging_.transposed(), 0, 128, i * r, r),
                     window(exps_, 0, r, gq * 128, 128));
      }
      c_.copy(window(kt_, 0, 128, g0, ng * r, groups, r, 1),
              window(staging_.transposed_words(), 0, 128, 0, ng * r));
      c_.copy(window(kt_scales_, 0, 128, g0, ng * r, groups, r, 1),
              window(staging_.transposed(), 0, 128, 0, ng * r), staging_.copy_engine(ng * r));
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

  core<Gen>& c_;
  const Plan& plan_;
  const chunk_layout& layout_;
  operand_staging<Gen, Format>& staging_;
  tile raw_, exps_, scale_values_, decoded_, codes_, k_scale_, k_scale_row_, ones_, kt_, kt_scales_;
  tile stage_words_;  // trn3 MX rows of fewer than 32 words, padded to a quadrant
  struct {
    std::int64_t group = -1, k0 = -1, nk = 0;
  } resident_;  // the keys K^T holds
  detail::vector<key_ref> keys_;
  detail::vector<unsigned char> valid_;
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
