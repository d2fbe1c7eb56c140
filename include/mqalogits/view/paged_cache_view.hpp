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
//
// Tokens have `head_dim` elements: Format::head_dim (128) unless a head_dim_t is given,
//   paged_cache_view<mxfp8> cache(bytes, pages, 64, head_dim_t{64});  // 64 + 4 bytes per token
// and the default page stride follows it (page_kv * bytes_per_token()).
template <class Format>
struct paged_cache_view {
  using format = Format;
  // Bytes per token at the format's own head dim; bytes_per_token() is the view's.
  static constexpr int token_bytes = Format::data_bytes + Format::scale_bytes;

  const std::uint8_t* base = nullptr;  // [num_pages, page_stride] bytes
  std::int64_t num_pages = 0;
  std::int32_t page_kv = 64;        // tokens per page
  int head_dim = Format::head_dim;  // elements per token: 128, 64 or 32
  std::int64_t page_stride = 0;     // bytes between pages

  constexpr paged_cache_view() = default;
  paged_cache_view(const void* cache, std::int64_t pages, std::int32_t tokens_per_page,
                   std::int64_t page_stride_bytes = 0)
      : base(static_cast<const std::uint8_t*>(cache)),
        num_pages(pages),
        page_kv(tokens_per_page),
        page_stride(page_stride_bytes ? page_stride_bytes
                                      : std::int64_t{tokens_per_page} * token_bytes) {}
  paged_cache_view(const void* cache, std::int64_t pages, std::int32_t tokens_per_page,
                   head_dim_t dim, std::int64_t page_stride_bytes = 0)
      : base(static_cast<const std::uint8_t*>(cache)),
        num_pages(pages),
        page_kv(tokens_per_page),
        head_dim(dim.value),
        page_stride(page_stride_bytes
                        ? page_stride_bytes
                        : std::int64_t{tokens_per_page} *
                              (Format::data_bytes_for(dim.value) + Format::scale_bytes)) {}

  // Data bytes and data + scale bytes of one token at this view's head dim.
  std::int64_t data_bytes() const { return Format::data_bytes_for(head_dim); }
  std::int64_t bytes_per_token() const { return data_bytes() + Format::scale_bytes; }
  const std::uint8_t* page(std::int64_t p) const { return base + p * page_stride; }
  const std::uint8_t* data(std::int64_t p, std::int64_t slot) const {
    return page(p) + slot * data_bytes();
  }
  const std::uint8_t* scale(std::int64_t p, std::int64_t slot) const {
    return page(p) + std::int64_t{page_kv} * data_bytes() + slot * Format::scale_bytes;
  }
};

namespace detail {
// The same cache seen as another head-dim binding of its format, member by member as rebind_rows.
template <class To, class From>
paged_cache_view<To> rebind_cache(const paged_cache_view<From>& v) {
  paged_cache_view<To> r;
  r.base = v.base;
  r.num_pages = v.num_pages;
  r.page_kv = v.page_kv;
  r.page_stride = v.page_stride;
  r.head_dim = v.head_dim;
  return r;
}
}  // namespace detail

static_assert(std::is_trivially_copyable_v<paged_cache_view<mxfp8>>);

MQALOGITS_NAMESPACE_END
