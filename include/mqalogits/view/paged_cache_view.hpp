// Non-owning view over a paged KV cache.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../config.hpp"
#include "../format/mx.hpp"

MQALOGITS_NAMESPACE_BEGIN

// Logical shape [num_pages, page_kv, 1, token_bytes] uint8 with token_bytes = data_bytes +
// scale_bytes, but each page is physically laid out as all data rows, then all scale rows:
//
//   page p at base + p * page_stride:
//   +---------------------------------+----------------------------------+---------+
//   | page_kv x data_bytes (slot-major) | page_kv x scale_bytes (slot-major) | padding |
//   +---------------------------------+----------------------------------+---------+
//
// page_stride >= page_kv * token_bytes (upstream pads it to a multiple of 512 bytes).
template <class Format>
struct paged_cache_view {
  using format = Format;
  static constexpr int token_bytes = Format::data_bytes + Format::scale_bytes;

  const std::uint8_t* base = nullptr;  // [num_pages, page_stride] bytes
  std::int64_t num_pages = 0;
  std::int32_t page_kv = 64;     // tokens per page
  std::int64_t page_stride = 0;  // bytes between pages

  constexpr paged_cache_view() = default;
  paged_cache_view(const void* cache, std::int64_t pages, std::int32_t tokens_per_page,
                   std::int64_t page_stride_bytes = 0)
      : base(static_cast<const std::uint8_t*>(cache)),
        num_pages(pages),
        page_kv(tokens_per_page),
        page_stride(page_stride_bytes ? page_stride_bytes
                                      : std::int64_t{tokens_per_page} * token_bytes) {}

  const std::uint8_t* page(std::int64_t p) const { return base + p * page_stride; }
  const std::uint8_t* data(std::int64_t p, std::int64_t slot) const {
    return page(p) + slot * Format::data_bytes;
  }
  const std::uint8_t* scale(std::int64_t p, std::int64_t slot) const {
    return page(p) + std::int64_t{page_kv} * Format::data_bytes + slot * Format::scale_bytes;
  }
};

static_assert(std::is_trivially_copyable_v<paged_cache_view<mxfp8>>);

MQALOGITS_NAMESPACE_END
