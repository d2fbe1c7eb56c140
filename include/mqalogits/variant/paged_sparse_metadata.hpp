// The paged-sparse metadata: the protocol it was made for, its copies of the lengths, of the
// selection and of the block-table entries the selection reads, and (snapshot protocol) the
// selected keys' bytes, gathered on the first call.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>

#include "../check/block_table.hpp"
#include "../config.hpp"
#include "../error.hpp"
#include "../std_abi.hpp"
#include "../view/index_array.hpp"
#include "../view/matrix_view.hpp"
#include "../view/paged_cache_view.hpp"
#include "paged_sparse_snapshot.hpp"
#include "reset_on_move.hpp"
#include "sparse.hpp"

MQALOGITS_NAMESPACE_BEGIN

enum class paged_sparse_protocol {
  reread,    // every call reads the cache it is given (DeepGEMM)
  snapshot,  // the first call gathers the selected keys, later calls reuse them
};

class paged_sparse_mqa_metadata;
namespace detail {
template <index_value I>
paged_sparse_mqa_metadata make_paged_sparse_metadata(std::span<const I>, matrix_view<const I>,
                                                     std::span<const I>, std::int32_t,
                                                     matrix_view<const I>, std::int64_t,
                                                     paged_sparse_protocol);
}  // namespace detail

class paged_sparse_mqa_metadata {
 public:
  std::int64_t num_rows() const { return f_->rows; }
  std::int64_t capacity() const { return f_->cap; }
  std::int64_t sparse_block_kv() const { return f_->block; }
  std::int32_t page_kv() const { return f_->page_kv; }
  std::int64_t max_blocks() const { return f_->max_blocks; }
  std::int64_t num_cols() const { return f_->cap * f_->block; }
  paged_sparse_protocol protocol() const { return f_->protocol; }
  std::int64_t context_len(std::int64_t r) const { return f_->lens[static_cast<std::size_t>(r)]; }
  std::int64_t num_blocks(std::int64_t r) const {
    return detail::selected_blocks(context_len(r), f_->block, f_->cap);
  }
  // Context position of column k of row r, or -1 when the column is masked.
  std::int64_t position(std::int64_t r, std::int64_t k) const {
    const std::int64_t idx = f_->idx[static_cast<std::size_t>(r * f_->cap + k / f_->block)];
    if (k / f_->block >= num_blocks(r) || idx < 0) return -1;
    const std::int64_t p = idx * f_->block + k % f_->block;
    return (p < context_len(r) && p / f_->page_kv < f_->max_blocks) ? p : -1;  // no overflow
  }
  // Whether selected block b of row r repeats an earlier entry of the row (its positions are
  // already covered): the fused top-k treats its columns as masked, the logits keep them.
  bool repeats(std::int64_t r, std::int64_t b) const {
    return !f_->repeated.empty() && f_->repeated[static_cast<std::size_t>(r * f_->cap + b)];
  }
  // Whether selected block b of row r is read: b < num_blocks(r), its index is not -1 and its
  // first position lies inside the context and the block table. A block of sparse_block_kv
  // positions never straddles two pages (page_kv is a multiple of it).
  bool block_used(std::int64_t r, std::int64_t b) const {
    if (b >= num_blocks(r)) return false;
    const std::int64_t idx = f_->idx[static_cast<std::size_t>(r * f_->cap + b)];
    return idx >= 0 && idx * f_->block < context_len(r) &&
           idx * f_->block / f_->page_kv < f_->max_blocks;
  }
  // The block-table slot and the page a used block reads (the metadata keeps only these entries
  // of the caller's table, not the whole table).
  std::int64_t block_table_slot(std::int64_t r, std::int64_t b) const {
    return f_->idx[static_cast<std::size_t>(r * f_->cap + b)] * f_->block / f_->page_kv;
  }
  std::int64_t block_page(std::int64_t r, std::int64_t b) const {
    return f_->block_page[static_cast<std::size_t>(r * f_->cap + b)];
  }

  // The first row whose context is longer than its block table (context_lens[row] >
  // max_blocks * page_kv), or -1: the kernel rejects such metadata unless the call sets
  // options::truncate_long_contexts (which masks the positions past the table).
  std::int64_t long_context_row() const { return f_->long_row; }

  // Bytes the metadata keeps besides the snapshot: its copies of the lengths, of the selection
  // and of one block-table entry per selected block (never the caller's whole table).
  std::size_t metadata_bytes() const {
    return (f_->lens.size() + f_->block_page.size() + f_->idx.size()) * sizeof(std::int64_t);
  }

  // Checks that `cache` has the geometry the metadata was made for: its page_kv, and a page for
  // every block-table entry the selection reads (a reread call checks this on every cache).
  template <class Format>
  void check_cache(const char* where, const paged_cache_view<Format>& cache) const {
    using detail::require;
    require(cache.page_kv == f_->page_kv, where, [&](auto& m) {
      m << "cache page_kv = " << cache.page_kv << " but the metadata was made for " << f_->page_kv;
    });
    for (const page_entry& e : {f_->lowest, f_->highest})
      if (e.row >= 0) check::block_table_page(where, e.row, e.slot, e.page, cache.num_pages);
  }

  bool has_snapshot() const { return f_->snap && f_->snap->ready.load(std::memory_order_acquire); }
  // Token bytes held by the snapshot: sparse_block_kv x token_bytes per distinct cache block the
  // selection reads (a block selected by many rows or entries is held once), 0 before the first
  // call and always 0 with the reread protocol. The snapshot also keeps one int64 per selection
  // entry (which held block it reads), as the metadata keeps its selection.
  std::size_t snapshot_bytes() const { return has_snapshot() ? f_->snap->bytes.size() : 0; }

  // The snapshot for Format, taken from `cache` on the first call (after check_cache); later
  // calls return the same snapshot. Safe to call from several threads: one gathers, the others
  // wait for it.
  template <class Format>
  void ensure_snapshot(const char* where, const paged_cache_view<Format>& cache) const {
    using detail::require;
    require(f_->snap != nullptr, where,
            [](auto& m) { m << "the metadata was made with the reread protocol, not snapshot"; });
    if (!has_snapshot()) {
      std::lock_guard lock(f_->snap->mutex);
      if (!f_->snap->ready.load(std::memory_order_relaxed)) {
        check_cache(where, cache);
        take_snapshot(cache);
      }
    }
    require(std::string_view(f_->snap->format) == Format::name, where, [&](auto& m) {
      m << "metadata holds a " << f_->snap->format << " snapshot, the call passes " << Format::name;
    });
    require(f_->snap->head_dim == cache.head_dim, where, [&](auto& m) {
      m << "metadata holds a snapshot of head_dim " << f_->snap->head_dim
        << ", the call passes a cache of head_dim " << cache.head_dim;
    });
  }
  // Data bytes of one snapshot token (its scale bytes follow them).
  std::int64_t snapshot_data_bytes() const { return f_->snap->data_bytes; }

  // Snapshot bytes of column k of row r ([data | scale]), or null when the column is masked.
  const std::uint8_t* snapshot_token(std::int64_t r, std::int64_t k) const {
    const detail::paged_sparse_snapshot& s = *f_->snap;
    const std::int64_t block = s.block_slot[static_cast<std::size_t>(r * f_->cap + k / f_->block)];
    if (block < 0 || position(r, k) < 0) return nullptr;
    const auto slot = static_cast<std::size_t>(block * f_->block + k % f_->block);
    return s.bytes.data() + slot * s.token_bytes;
  }

  template <index_value I>
  friend paged_sparse_mqa_metadata detail::make_paged_sparse_metadata(
      std::span<const I>, matrix_view<const I>, std::span<const I>, std::int32_t,
      matrix_view<const I>, std::int64_t, paged_sparse_protocol);

 private:
  struct page_entry {  // a block-table entry the selection reads; row -1: none
    std::int64_t row = -1, slot = 0, page = 0;
  };

  // The snapshot of the blocks the selection reads (paged_sparse_snapshot.hpp says how they are
  // held).
  template <class Format>
  void take_snapshot(const paged_cache_view<Format>& cache) const {
    const std::int64_t B = f_->block, per_page = f_->page_kv / B;
    detail::vector<std::pair<std::int64_t, std::int64_t>> used;  // (cache block, r * cap + b)
    for (std::int64_t r = 0; r < f_->rows; ++r)
      for (std::int64_t b = 0; b < num_blocks(r); ++b)
        if (block_used(r, b)) {
          const std::int64_t at = r * f_->cap + b;
          const std::int64_t in_page = f_->idx[static_cast<std::size_t>(at)] % per_page;
          used.emplace_back(block_page(r, b) * per_page + in_page, at);
        }
    f_->snap->take(cache, B, f_->rows * f_->cap, std::move(used));
  }

  struct fields {
    std::int64_t rows = 0, cap = 0, block = 0, max_blocks = 0;
    std::int32_t page_kv = 0;
    paged_sparse_protocol protocol = paged_sparse_protocol::reread;
    detail::vector<std::int64_t> lens;        // bounded (see detail::bounded)
    detail::vector<std::int64_t> block_page;  // [rows, cap] the page of each used block, else 0
    detail::vector<std::int64_t> idx;         // bounded (see detail::bounded_block)
    page_entry lowest, highest;               // the smallest and largest page the selection reads
    std::int64_t long_row = -1;               // see long_context_row()
    detail::vector<unsigned char> repeated;   // see repeats(); empty when no row repeats
    std::unique_ptr<detail::paged_sparse_snapshot> snap;  // snapshot protocol only
  };
  reset_on_move<fields> f_;  // a moved-from metadata is empty: the kernel rejects it
};

MQALOGITS_NAMESPACE_END
