// Paged-sparse variant: selected blocks of a paged cache. Column b*B + o of row q is context
// position idx[q][b] * B + o, valid iff b < nb, idx >= 0, position < len and position <
// max_blocks * page_kv, with nb = min(cap, ceil(max(0, len) / B)).
//
// First/reuse protocol: the first kernel call with a metadata object gathers the selected KV
// bytes into it (the snapshot); later calls reuse the snapshot with new Q and weights, whatever
// the cache holds by then. Regenerate the metadata when the KV contents change.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "../config.hpp"
#include "../error.hpp"
#include "../view/matrix_view.hpp"
#include "../view/paged_cache_view.hpp"
#include "metadata_checks.hpp"
#include "plan.hpp"
#include "sparse.hpp"

MQALOGITS_NAMESPACE_BEGIN

class paged_sparse_mqa_metadata {
 public:
  paged_sparse_mqa_metadata() = default;
  // A moved-from metadata is empty, as a default-constructed one: the kernel rejects it.
  paged_sparse_mqa_metadata(paged_sparse_mqa_metadata&& o) noexcept { *this = std::move(o); }
  paged_sparse_mqa_metadata& operator=(paged_sparse_mqa_metadata&& o) noexcept {
    if (this == &o) return *this;
    rows_ = std::exchange(o.rows_, 0);
    cap_ = std::exchange(o.cap_, 0);
    block_ = std::exchange(o.block_, 0);
    max_blocks_ = std::exchange(o.max_blocks_, 0);
    page_kv_ = std::exchange(o.page_kv_, 0);
    lens_ = std::move(o.lens_);
    block_page_ = std::move(o.block_page_);
    idx_ = std::move(o.idx_);
    o.lens_.clear();
    o.block_page_.clear();
    o.idx_.clear();
    snap_ = std::move(o.snap_);
    return *this;
  }

  std::int64_t num_rows() const { return rows_; }
  std::int64_t capacity() const { return cap_; }
  std::int64_t sparse_block_kv() const { return block_; }
  std::int32_t page_kv() const { return page_kv_; }
  std::int64_t max_blocks() const { return max_blocks_; }
  std::int64_t num_cols() const { return cap_ * block_; }
  std::int64_t context_len(std::int64_t r) const { return lens_[static_cast<std::size_t>(r)]; }
  std::int64_t num_blocks(std::int64_t r) const {
    return detail::selected_blocks(context_len(r), block_, cap_);
  }
  // Context position of column k of row r, or -1 when the column is masked.
  std::int64_t position(std::int64_t r, std::int64_t k) const {
    const std::int64_t idx = idx_[static_cast<std::size_t>(r * cap_ + k / block_)];
    if (idx < 0) return -1;
    const std::int64_t p = idx * block_ + k % block_;
    return (p < context_len(r) && p / page_kv_ < max_blocks_) ? p : -1;  // no overflow
  }
  // Whether selected block b of row r is read: b < num_blocks(r), its index is not -1 and its
  // first position lies inside the context and the block table. A block of sparse_block_kv
  // positions never straddles two pages (page_kv is a multiple of it).
  bool block_used(std::int64_t r, std::int64_t b) const {
    if (b >= num_blocks(r)) return false;
    const std::int64_t idx = idx_[static_cast<std::size_t>(r * cap_ + b)];
    return idx >= 0 && idx * block_ < context_len(r) && idx * block_ / page_kv_ < max_blocks_;
  }
  // The block-table slot and the page a used block reads (the metadata keeps only these entries
  // of the caller's table, not the whole table).
  std::int64_t block_table_slot(std::int64_t r, std::int64_t b) const {
    return idx_[static_cast<std::size_t>(r * cap_ + b)] * block_ / page_kv_;
  }
  std::int32_t block_page(std::int64_t r, std::int64_t b) const {
    return block_page_[static_cast<std::size_t>(r * cap_ + b)];
  }

  // Bytes the metadata keeps besides the snapshot: its copies of the lengths, of the selection
  // and of one block-table entry per selected block (never the caller's whole table).
  std::size_t metadata_bytes() const {
    return (lens_.size() + block_page_.size() + idx_.size()) * sizeof(std::int32_t);
  }

  bool has_snapshot() const { return snap_ && snap_->ready.load(std::memory_order_acquire); }
  // Token bytes held by the snapshot: sparse_block_kv x token_bytes per used block (0 before
  // the first call).
  std::size_t snapshot_bytes() const { return has_snapshot() ? snap_->bytes.size() : 0; }

  // The snapshot for Format, taken from `cache` on the first call (validating every block-table
  // entry it reads); later calls return the same snapshot. Safe to call from several threads:
  // one gathers, the others wait for it.
  template <class Format>
  void ensure_snapshot(const char* where, const paged_cache_view<Format>& cache) const {
    using detail::require;
    require(snap_ != nullptr, where,
            [](auto& m) { m << "metadata was not made by get_paged_sparse_mqa_logits_metadata"; });
    if (!has_snapshot()) {
      std::lock_guard lock(snap_->mutex);
      if (!snap_->ready.load(std::memory_order_relaxed)) take_snapshot(where, cache);
    }
    require(std::string_view(snap_->format) == Format::name, where, [&](auto& m) {
      m << "metadata holds a " << snap_->format << " snapshot, the call passes " << Format::name;
    });
  }

  // Snapshot bytes of column k of row r ([data | scale]), or null when the column is masked.
  const std::uint8_t* snapshot_token(std::int64_t r, std::int64_t k) const {
    const std::int64_t block = snap_->block_slot[static_cast<std::size_t>(r * cap_ + k / block_)];
    if (block < 0) return nullptr;
    const auto slot = static_cast<std::size_t>(block * block_ + k % block_);
    return snap_->valid[slot] ? snap_->bytes.data() + slot * snap_->token_bytes : nullptr;
  }

  friend paged_sparse_mqa_metadata get_paged_sparse_mqa_logits_metadata(
      std::span<const std::int32_t>, matrix_view<const std::int32_t>, std::int32_t,
      matrix_view<const std::int32_t>, std::int64_t);

 private:
  struct snapshot {
    std::mutex mutex;
    std::atomic<bool> ready{false};
    const char* format = nullptr;
    std::size_t token_bytes = 0;
    std::vector<std::int64_t> block_slot;  // [rows, cap] the used block's place in bytes, or -1
    std::vector<std::uint8_t> valid;       // [used blocks * sparse_block_kv] per token
    std::vector<std::uint8_t> bytes;       // [used blocks * sparse_block_kv, token_bytes]
  };

  template <class Format>
  void take_snapshot(const char* where, const paged_cache_view<Format>& cache) const {
    using detail::require;
    require(cache.page_kv == page_kv_, where, [&](auto& m) {
      m << "cache page_kv = " << cache.page_kv << " but the metadata was made for " << page_kv_;
    });
    // Validate every page the gather reads before touching anything; count the used blocks,
    // which alone size the snapshot (a selection of -1s holds no bytes, whatever the lengths).
    std::int64_t used = 0;
    for (std::int64_t r = 0; r < rows_; ++r)
      for (std::int64_t b = 0; b < num_blocks(r); ++b) {
        if (!block_used(r, b)) continue;
        const std::int64_t pg = block_page(r, b);
        require(pg >= 0 && pg < cache.num_pages, where, [&](auto& m) {
          m << "block_table[" << r << "][" << block_table_slot(r, b) << "] = " << pg
            << " is not a page (num_pages = " << cache.num_pages << ")";
        });
        ++used;
      }
    snapshot& s = *snap_;
    s.token_bytes = Format::data_bytes + Format::scale_bytes;
    s.block_slot.assign(static_cast<std::size_t>(rows_ * cap_), -1);
    s.valid.assign(static_cast<std::size_t>(used * block_), 0);
    s.bytes.assign(static_cast<std::size_t>(used * block_) * s.token_bytes, 0);
    std::int64_t next = 0;
    for (std::int64_t r = 0; r < rows_; ++r)
      for (std::int64_t b = 0; b < num_blocks(r); ++b) {
        if (!block_used(r, b)) continue;
        const std::int64_t block = next++, pg = block_page(r, b);
        s.block_slot[static_cast<std::size_t>(r * cap_ + b)] = block;
        for (std::int64_t o = 0; o < block_; ++o) {
          const std::int64_t p = position(r, b * block_ + o);
          if (p < 0) continue;
          const auto slot = static_cast<std::size_t>(block * block_ + o);
          std::uint8_t* dst = s.bytes.data() + slot * s.token_bytes;
          std::memcpy(dst, cache.data(pg, p % page_kv_), Format::data_bytes);
          std::memcpy(dst + Format::data_bytes, cache.scale(pg, p % page_kv_), Format::scale_bytes);
          s.valid[slot] = 1;
        }
      }
    s.format = Format::name;
    s.ready.store(true, std::memory_order_release);
  }

  std::int64_t rows_ = 0, cap_ = 0, block_ = 0, max_blocks_ = 0;
  std::int32_t page_kv_ = 0;
  std::vector<std::int32_t> lens_;
  std::vector<std::int32_t> block_page_;  // [rows, cap] the page of each used block, else 0
  std::vector<std::int32_t> idx_;
  std::unique_ptr<snapshot> snap_;
};

inline bool supported_sparse_page_kv(std::int64_t page_kv) {
  return page_kv == 64 || page_kv == 128;
}

// context_lens: [num_q]; block_table: [num_q, max_blocks]; sparse_kv_block_indices: [num_q, cap]
// with cap % (page_kv / sparse_block_kv) == 0; page_kv 64 or 128; sparse_block_kv 8 or 16.
inline paged_sparse_mqa_metadata get_paged_sparse_mqa_logits_metadata(
    std::span<const std::int32_t> context_lens, matrix_view<const std::int32_t> block_table,
    std::int32_t page_kv, matrix_view<const std::int32_t> sparse_kv_block_indices,
    std::int64_t sparse_block_kv) {
  constexpr const char* where = "get_paged_sparse_mqa_logits_metadata";
  using detail::require;
  detail::check_sparse_indices(where, sparse_kv_block_indices, sparse_block_kv);
  require(supported_sparse_page_kv(page_kv), where,
          [&](auto& m) { m << "page_kv = " << page_kv << " is not supported (64 or 128)"; });
  const std::int64_t rows = sparse_kv_block_indices.rows, cap = sparse_kv_block_indices.cols;
  require(cap % (page_kv / sparse_block_kv) == 0, where, [&](auto& m) {
    m << "capacity " << cap
      << " is not a multiple of page_kv / sparse_block_kv = " << page_kv / sparse_block_kv;
  });
  require(static_cast<std::int64_t>(context_lens.size()) == rows, where, [&](auto& m) {
    m << "context_lens has " << context_lens.size() << " entries, sparse_kv_block_indices has "
      << rows << " rows";
  });
  require(block_table.rows == rows && block_table.cols >= 1, where, [&](auto& m) {
    m << "block_table shape [" << block_table.rows << ", " << block_table.cols << "] must be ["
      << rows << ", max_blocks >= 1]";
  });
  require(rows == 0 || block_table.data, where,
          [&](auto& m) { m << "block_table is null with " << rows << " rows"; });
  require(block_table.stride >= block_table.cols, where, [&](auto& m) {
    m << "block_table stride " << block_table.stride << " < cols " << block_table.cols;
  });
  detail::check_matrix_extent(where, "block_table", block_table);  // overflowing extents
  detail::check_index_span(where, "context_lens", context_lens);
  for (std::size_t r = 0; r < context_lens.size(); ++r)
    require(context_lens[r] >= 0, where,
            [&](auto& m) { m << "context_lens[" << r << "] = " << context_lens[r] << " < 0"; });

  paged_sparse_mqa_metadata meta;
  meta.rows_ = rows;
  meta.cap_ = cap;
  meta.block_ = sparse_block_kv;
  meta.page_kv_ = page_kv;
  meta.max_blocks_ = block_table.cols;
  meta.lens_.assign(context_lens.begin(), context_lens.end());
  meta.idx_ = detail::copy_rows(sparse_kv_block_indices);
  // Only the block-table entries the selection reads: one per used block, not the whole table.
  meta.block_page_.assign(meta.idx_.size(), 0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t b = 0; b < meta.num_blocks(r); ++b)
      if (meta.block_used(r, b))
        meta.block_page_[static_cast<std::size_t>(r * cap + b)] =
            block_table(r, meta.block_table_slot(r, b));
  meta.snap_ = std::make_unique<paged_sparse_mqa_metadata::snapshot>();
  return meta;
}

// Reads the metadata's snapshot, never the cache.
template <class Format>
class paged_sparse_plan {
 public:
  explicit paged_sparse_plan(const paged_sparse_mqa_metadata& meta) : meta_(&meta) {}

  std::int64_t num_rows() const { return meta_->num_rows(); }
  std::int64_t num_cols() const { return meta_->num_cols(); }
  std::int64_t num_groups() const { return num_rows(); }
  row_span group_rows(std::int64_t r) const { return {r, r + 1}; }
  row_keys row(std::int64_t r) const {
    return {0, meta_->num_blocks(r) * meta_->sparse_block_kv(), 0};
  }
  key_ref key(std::int64_t r, std::int64_t k) const {
    const std::uint8_t* t = meta_->snapshot_token(r, k);
    if (!t) return {};
    return {t, t + Format::data_bytes};
  }
  void fill_work(const tiling& t, work_list& list) const { detail::split_work(*this, t, list); }
  static constexpr bool prefill = false;
  std::int64_t gather_block() const { return meta_->sparse_block_kv(); }  // one selected block

 private:
  const paged_sparse_mqa_metadata* meta_;
};

MQALOGITS_NAMESPACE_END
