// The snapshot protocol's copy of the keys a paged-sparse selection reads, taken from the cache on
// the first kernel call and read by every later one instead of the cache.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <utility>

#include "../config.hpp"
#include "../std_abi.hpp"
#include "../view/paged_cache_view.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace detail {

// Each distinct block of the cache that some row selects is stored once, whole (its
// sparse_block_kv tokens lie in one page): memory is bounded by the distinct blocks read, never
// by rows x entries, however often a selection repeats a block. Which of its tokens a row sees is
// decided when reading (the metadata's position()), as with the reread protocol.
struct paged_sparse_snapshot {
  std::mutex mutex;
  std::atomic<bool> ready{false};
  const char* format = nullptr;
  int head_dim = 0;
  std::int64_t data_bytes = 0;
  std::size_t token_bytes = 0;
  detail::vector<std::int64_t> block_slot;  // [rows, cap] the used block's place in bytes, or -1
  detail::vector<std::uint8_t> bytes;       // [distinct used blocks * sparse_block_kv, token_bytes]

  // Gathers the blocks of `used`: (cache block, selection entry) pairs, the cache block numbered
  // page * (page_kv / block) + its place in the page, for a selection of `entries` entries of
  // `block` tokens each. Marks the snapshot ready.
  template <class Format>
  void take(const paged_cache_view<Format>& cache, std::int64_t block, std::int64_t entries,
            detail::vector<std::pair<std::int64_t, std::int64_t>> used) {
    const std::int64_t B = block, per_page = cache.page_kv / B;
    std::sort(used.begin(), used.end());
    std::int64_t distinct = 0;
    for (std::size_t i = 0; i < used.size(); ++i)
      distinct += i == 0 || used[i].first != used[i - 1].first;
    head_dim = cache.head_dim;
    data_bytes = cache.data_bytes();
    token_bytes = static_cast<std::size_t>(cache.bytes_per_token());
    block_slot.assign(static_cast<std::size_t>(entries), -1);
    bytes.assign(static_cast<std::size_t>(distinct * B) * token_bytes, 0);
    std::int64_t next = -1;
    for (std::size_t i = 0; i < used.size(); ++i) {
      if (i == 0 || used[i].first != used[i - 1].first) {
        ++next;
        const std::int64_t pg = used[i].first / per_page, first = used[i].first % per_page * B;
        for (std::int64_t o = 0; o < B; ++o) {
          std::uint8_t* dst = bytes.data() + static_cast<std::size_t>(next * B + o) * token_bytes;
          std::memcpy(dst, cache.data(pg, first + o), static_cast<std::size_t>(data_bytes));
          std::memcpy(dst + data_bytes, cache.scale(pg, first + o), Format::scale_bytes);
        }
      }
      block_slot[static_cast<std::size_t>(used[i].second)] = next;
    }
    format = Format::name;
    ready.store(true, std::memory_order_release);
  }
};

}  // namespace detail
MQALOGITS_NAMESPACE_END
