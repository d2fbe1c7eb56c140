// How the schedule cuts keys into chunks and PSUM tiles, and where a chunk's keys sit in K^T.
//
// Keys arrive in chunks, one row of consecutive keys per partition, as AWS's paged decode loads
// its cache (attention_tkg: many blocks per indirect DMA, one block per partition): a row is a
// page (paged), a selected block (sparse, paged-sparse) or 32 consecutive tokens (dense: 4 KiB
// of MXFP8 codes, the efficient DMA row). A page of more than 64 tokens whose size is a multiple
// of 64 is read as its runs of 64 contiguous tokens, one per partition row (the run at page_base
// + j x 64 tokens is a descriptor of its own), so that a chunk of such pages fills the 128
// partitions as pages of 64 do. A decode may read runs of 128 tokens instead (a page of 128
// whole, a page of 256 as its halves), one row each: half the gather descriptors, a DMA
// descriptor writing one partition row, but half the rows per chunk. kernel::choose_layout takes
// whichever ends the call sooner. A chunk is at most 128 rows and 8192 keys (4096 for rows of
// 128 keys or more on trn1, whose SBUF would not hold their 16-32 KiB rows twice), so runs of
// 128 fill 64 rows on trn2 / trn3, TensorE's shortest full-rate transpose.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../config.hpp"
#include "traits.hpp"

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

// Keys per partition row of a gathered run: the run a page of more than 64 tokens is cut into.
inline constexpr std::int64_t page_run = 64;
// Keys per partition row for pages (or selected blocks) of `page` keys: a page, or its runs of
// page_run keys where it is a multiple of them.
constexpr std::int64_t run_keys(std::int64_t page) {
  return page > page_run && page % page_run == 0 ? page_run : page;
}

// Keys per chunk for blocks of `block` keys on a core of `sbuf_partition_bytes` per partition:
// up to 128 blocks, 8192 keys (4096 for blocks of >= 128 keys where SBUF is below trn2's).
constexpr std::int64_t chunk_keys(std::int64_t block, std::int64_t sbuf_partition_bytes) {
  const bool small = block >= 128 && sbuf_partition_bytes < 224 * 1024;
  return std::min<std::int64_t>(128, (small ? 4096 : 8192) / block) * block;
}
// Rows of one keys-on-partitions head sum: a pass's (at most 4) or a pack's (at most 4 passes of
// one row, or 2 of two rows of H = 32).
inline constexpr int max_head_sum_rows = 4;
// Query rows per decode pass: two (H = 64) or four (H = 32) rows share one score matmul; other
// head counts run one row per pass, so that every row's heads start on a partition the
// access-pattern rules allow (needed by the NaN-exact head sum, see decode_pass.hpp).
constexpr std::int64_t decode_rows_per_pass(std::int64_t heads) {
  return heads == 32 || heads == 64 ? common_traits::partitions / heads : 1;
}

// The chunk geometry of one call: keys per block (one partition row), per chunk, blocks
// (partition rows) per chunk, `page`, keys per gathered page (a multiple of the block; 0 for
// dense rows), and `slots`, key slots per block in K^T: the block rounded up to the 4 keys of
// one x4 column on trn3's MX matmul (the extra slots hold zero words), the block elsewhere.
struct chunk_layout {
  std::int64_t block = 0, chunk = 0, rows = 0, slots = 0, page = 0;
  bool padded_order = false;  // K^T holds padding slots (trn3 MX, not the native layout)
  // A prefill's passes: query tokens on partitions (prefill_pass), or rows x heads on partitions
  // as a decode's (decode_pass: trn3's MX prefill, when they end the call sooner).
  bool token_passes = false;

  // A chunk's key o at its column in K^T's padded order.
  std::int64_t padded(std::int64_t o) const { return o / block * slots + o % block; }
  // The key of the chunk at padded column pc of K^T, or -1 for a padding slot or past nk.
  std::int64_t key_at(std::int64_t pc, std::int64_t nk) const {
    const std::int64_t k =
        !padded_order ? pc : (pc % slots < block ? pc / slots * block + pc % slots : nk);
    return k < nk ? k : -1;
  }
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
