// The paged-sparse plans the kernel runs: one reads the cache it is given (reread), the other
// the metadata's snapshot.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "../view/paged_cache_view.hpp"
#include "paged_sparse_metadata.hpp"
#include "plan.hpp"
#include "sparse.hpp"

MQALOGITS_NAMESPACE_BEGIN

// Reads the current bytes of the cache (the reread protocol).
template <class Format>
class paged_sparse_plan : public detail::selected_blocks_plan<paged_sparse_mqa_metadata> {
 public:
  paged_sparse_plan(const paged_cache_view<Format>& cache, const paged_sparse_mqa_metadata& meta,
                    bool skip_repeats = false)
      : selected_blocks_plan(meta, skip_repeats), cache_(cache) {}

  key_ref key(std::int64_t r, std::int64_t k) const {
    const std::int64_t p = meta_->position(r, k);
    if (p < 0 || skipped(r, k)) return {};
    const std::int64_t page = meta_->block_page(r, k / meta_->sparse_block_kv());
    const std::int64_t slot = p % meta_->page_kv();
    return {cache_.data(page, slot), cache_.scale(page, slot)};
  }

 private:
  paged_cache_view<Format> cache_;
};

// Reads the metadata's snapshot, never the cache (the snapshot protocol).
template <class Format>
class paged_sparse_snapshot_plan : public detail::selected_blocks_plan<paged_sparse_mqa_metadata> {
 public:
  explicit paged_sparse_snapshot_plan(const paged_sparse_mqa_metadata& meta,
                                      bool skip_repeats = false)
      : selected_blocks_plan(meta, skip_repeats) {}

  key_ref key(std::int64_t r, std::int64_t k) const {
    const std::uint8_t* t = meta_->snapshot_token(r, k);
    if (!t || skipped(r, k)) return {};
    return {t, t + meta_->snapshot_data_bytes()};
  }
};

MQALOGITS_NAMESPACE_END
