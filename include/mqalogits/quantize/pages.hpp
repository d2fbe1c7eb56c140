// Writing keys into a paged KV cache through a slot mapping (vLLM's slot_mapping): token i goes
// to slot = page * page_kv + offset, a negative slot skips the token (padding). The page layout is
// paged_cache_view's: page_kv data rows, then page_kv scale rows, then padding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <span>
#include <type_traits>

#include "../check/overlap.hpp"
#include "../check/shapes.hpp"
#include "../config.hpp"
#include "../error.hpp"
#include "../view/matrix_view.hpp"
#include "../view/paged_cache_view.hpp"
#include "../view/rows_view.hpp"
#include "rows.hpp"

MQALOGITS_NAMESPACE_BEGIN

// Bytes one page of Format uses (page_kv tokens of Format::head_dim, or of `dim`); a page stride
// may be larger (padding).
namespace detail {
template <class Format>
constexpr void check_page_head_dim(const char* where, int head_dim) {
  if (!is_head_dim_of<Format>(head_dim))
    require(false, where, [&](auto& m) {
      m << "head_dim = " << head_dim << " is not supported by " << Format::name;
    });
}
}  // namespace detail

// A head dim the format has no layout for is an error (whatever kernels the build compiles).
template <class Format>
constexpr std::int64_t page_bytes(std::int32_t page_kv, head_dim_t dim = {Format::head_dim}) {
  detail::check_page_head_dim<Format>("page_bytes", dim.value);
  return std::int64_t{page_kv} * (Format::data_bytes_for(dim.value) + Format::scale_bytes);
}
// page_bytes rounded up to a multiple of `alignment` bytes (upstream pads to 512); page_kv >= 1
// and alignment >= 1, else mqalogits::error.
template <class Format>
constexpr std::int64_t aligned_page_stride(std::int32_t page_kv, head_dim_t dim,
                                           std::int64_t alignment = 512) {
  detail::check_page_head_dim<Format>("aligned_page_stride", dim.value);
  const std::int64_t bytes = page_bytes<Format>(page_kv, dim);
  detail::require(page_kv >= 1 && alignment >= 1 && alignment <= INT64_MAX - bytes,
                  "aligned_page_stride", [&](auto& m) {
                    m << "page_kv = " << page_kv << ", alignment = " << alignment
                      << ": need page_kv >= 1 and alignment >= 1";
                  });
  return (bytes + alignment - 1) / alignment * alignment;
}
template <class Format>
constexpr std::int64_t aligned_page_stride(std::int32_t page_kv, std::int64_t alignment = 512) {
  return aligned_page_stride<Format>(page_kv, head_dim_t{Format::head_dim}, alignment);
}

// A writable paged cache: the same layout as paged_cache_view, over the engine's own bytes
// (tokens of Format::head_dim elements unless a head_dim_t is given, as for the view).
template <class Format>
struct mutable_paged_cache {
  std::uint8_t* base = nullptr;  // [num_pages, page_stride] bytes
  std::int64_t num_pages = 0;
  std::int32_t page_kv = 64;
  std::int64_t page_stride = 0;
  int head_dim = Format::head_dim;

  constexpr mutable_paged_cache() = default;
  mutable_paged_cache(void* cache, std::int64_t pages, std::int32_t tokens_per_page,
                      std::int64_t page_stride_bytes = 0)
      : base(static_cast<std::uint8_t*>(cache)),
        num_pages(pages),
        page_kv(tokens_per_page),
        page_stride(page_stride_bytes ? page_stride_bytes : page_bytes<Format>(tokens_per_page)) {}
  mutable_paged_cache(void* cache, std::int64_t pages, std::int32_t tokens_per_page, head_dim_t dim,
                      std::int64_t page_stride_bytes = 0)
      : base(static_cast<std::uint8_t*>(cache)),
        num_pages(pages),
        page_kv(tokens_per_page),
        page_stride(page_stride_bytes ? page_stride_bytes
                                      : page_bytes<Format>(tokens_per_page, dim)),
        head_dim(dim.value) {}

  std::int64_t data_bytes() const { return Format::data_bytes_for(head_dim); }
  std::uint8_t* data(std::int64_t page, std::int64_t slot) const {
    return base + page * page_stride + slot * data_bytes();
  }
  std::uint8_t* scale(std::int64_t page, std::int64_t slot) const {
    return base + page * page_stride + std::int64_t{page_kv} * data_bytes() +
           slot * Format::scale_bytes;
  }
  paged_cache_view<Format> view() const {
    return paged_cache_view<Format>(base, num_pages, page_kv, head_dim_t{head_dim}, page_stride);
  }
};

namespace detail {

// `sources`: the byte ranges of the rows to store; neither they nor the slot mapping may share a
// byte with the cache (the stores would overwrite what is still to be read).
template <class Format, class Slot>
void check_slot_mapping(const char* where, std::span<const Slot> slots, std::int64_t rows,
                        const mutable_paged_cache<Format>& cache,
                        std::initializer_list<byte_range> sources) {
  check_head_dim<Format>(where, "cache", cache.head_dim);
  const std::int64_t used = page_bytes<Format>(cache.page_kv, head_dim_t{cache.head_dim});
  require(static_cast<std::int64_t>(slots.size()) == rows, where, [&](auto& m) {
    m << "slot_mapping has " << slots.size() << " entries for " << rows << " tokens";
  });
  require(slots.empty() || slots.data(), where,
          [&](auto& m) { m << "slot_mapping is null with " << slots.size() << " entries"; });
  check_aligned(where, "slot_mapping", slots.data(), alignof(Slot));
  require(cache.page_kv >= 1 && cache.num_pages >= 0 && cache.page_stride >= used &&
              (cache.num_pages == 0 || cache.base),
          where, [&](auto& m) {
            m << "cache: " << cache.num_pages << " pages of " << cache.page_kv
              << " tokens, page_stride " << cache.page_stride << " (needs >= " << used << ")";
          });
  require(extent_fits(cache.num_pages, cache.page_stride, used), where, [&](auto& m) {
    m << "cache byte extent overflows: " << cache.num_pages << " pages x stride "
      << cache.page_stride;
  });
  const byte_range written =
      cache.num_pages > 0
          ? make_range("cache", cache.base, (cache.num_pages - 1) * cache.page_stride + used)
          : byte_range{"cache"};
  const byte_range mapping = make_range("slot_mapping", slots.data(),
                                        static_cast<std::int64_t>(slots.size() * sizeof(Slot)));
  for (const byte_range& in : sources)
    require(disjoint(in, written), where, [&](auto& m) {
      m << in.name << " [" << static_cast<std::uint64_t>(in.begin) << ", "
        << static_cast<std::uint64_t>(in.end) << ") overlap the cache ["
        << static_cast<std::uint64_t>(written.begin) << ", "
        << static_cast<std::uint64_t>(written.end) << "): the rows to store must not share a "
        << "byte with the cache";
    });
  require(disjoint(mapping, written), where, [&](auto& m) {
    m << "slot_mapping [" << static_cast<std::uint64_t>(mapping.begin) << ", "
      << static_cast<std::uint64_t>(mapping.end) << ") overlap the cache ["
      << static_cast<std::uint64_t>(written.begin) << ", "
      << static_cast<std::uint64_t>(written.end) << ")";
  });
  std::int64_t capacity = 0;
  require(!__builtin_mul_overflow(cache.num_pages, std::int64_t{cache.page_kv}, &capacity), where,
          [&](auto& m) {
            m << "cache of " << cache.num_pages << " pages x " << cache.page_kv
              << " tokens overflows";
          });
  // A signed slot below 0 is padding (skipped); an unsigned slot has no such value, so every
  // one must name a slot of the cache (UINT64_MAX is not "-1").
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const bool inside = std::is_signed_v<Slot> ? static_cast<std::int64_t>(slots[i]) < capacity
                                               : static_cast<std::uint64_t>(slots[i]) <
                                                     static_cast<std::uint64_t>(capacity);
    require(inside, where, [&](auto& m) {
      m << "slot_mapping[" << i << "] = " << slots[i]
        << " is past the cache (num_pages * page_kv = " << capacity << ")";
    });
  }
}

// A cache insert's source k [tokens, D] (D the cache's head dim) and its slot mapping: null data,
// a stride below a row, misalignment, overflowing extents, slots past the cache and k sharing a
// byte with the cache, each named as such before any byte is written.
template <class T, class Slot, std::size_t Extent, class Format>
void check_cache_insert(const char* where, matrix_view<T> k, std::span<Slot, Extent> slot_mapping,
                        const mutable_paged_cache<Format>& cache) {
  check_head_dim<Format>(where, "cache", cache.head_dim);
  require(k.cols == cache.head_dim && k.rows >= 0, where, [&](auto& m) {
    m << "k shape [" << k.rows << ", " << k.cols << "] must be [tokens, " << cache.head_dim
      << "] (the cache's head_dim)";
  });
  check_matrix(where, "k", k, k.rows, k.cols);
  check_slot_mapping(where, std::span<const std::remove_const_t<Slot>>(slot_mapping), k.rows, cache,
                     {range_of("k", k)});
}

}  // namespace detail

// Quantises k [n, D] (fp32 or bf16; D the cache's head dim) straight into the cache: token i to
// slot_mapping[i] (int32 or int64; negative = skip). Every argument is checked before any byte is
// written. `scaling` picks fp8_per_token's scale rule; vllm_indexer_k_scaling() writes the bytes
// vLLM's indexer_k_quant_and_cache writes. row_rotation::hadamard stores each token's
// Walsh-Hadamard rotation (DeepSeek-V4's K, hadamard.hpp), rotated and quantised in one pass.
template <class Format, class T, class Slot, std::size_t Extent>
requires(quantize_input<std::remove_const_t<T>>&& std::is_integral_v<
         std::remove_const_t<Slot>>) void store_into_pages(matrix_view<T> k,
                                                           std::span<Slot, Extent> slot_mapping,
                                                           const mutable_paged_cache<Format>& cache,
                                                           const per_token_scaling& scaling = {},
                                                           row_rotation rotation =
                                                               row_rotation::none) {
  constexpr const char* where = "store_into_pages";
  detail::check_scaling<Format>(where, scaling);
  detail::check_rotation(where, rotation);
  detail::check_cache_insert(where, k, slot_mapping, cache);
  with_head_dim_of<Format>(cache.head_dim, [&]<class F>() {
    float rotated[F::head_dim];
    for (std::int64_t i = 0; i < k.rows; ++i) {
      const std::int64_t slot = slot_mapping[static_cast<std::size_t>(i)];
      if (slot < 0) continue;
      const std::int64_t page = slot / cache.page_kv, offset = slot % cache.page_kv;
      if (rotation == row_rotation::none) {
        quantize_row<F>(k.row(i), cache.data(page, offset), cache.scale(page, offset), scaling);
        continue;
      }
      load_hadamard_rotated<F::head_dim>(k.row(i), rotated);
      quantize_row<F>(rotated, cache.data(page, offset), cache.scale(page, offset), scaling);
    }
  });
}

// Copies already-quantised rows (data + scale bytes) into the cache through the slot mapping.
template <class Format, class Slot, std::size_t Extent>
requires std::is_integral_v<std::remove_const_t<Slot>>
void store_into_pages(const rows_view<Format>& rows, std::span<Slot, Extent> slot_mapping,
                      const mutable_paged_cache<Format>& cache) {
  constexpr const char* where = "store_into_pages";
  detail::require(rows.rows >= 0 && (rows.rows == 0 || (rows.data && rows.scales)), where,
                  [&](auto& m) { m << "rows are null with " << rows.rows << " rows"; });
  detail::check_rows(where, "rows", rows, rows.rows);  // strides, overflowing extents
  detail::check_same_head_dim(where, "cache", cache.head_dim, rows.head_dim);
  detail::check_slot_mapping(
      where, std::span<const std::remove_const_t<Slot>>(slot_mapping), rows.rows, cache,
      {detail::data_range_of("rows", rows), detail::scale_range_of("rows scales", rows)});
  for (std::int64_t i = 0; i < rows.rows; ++i) {
    const std::int64_t slot = slot_mapping[static_cast<std::size_t>(i)];
    if (slot < 0) continue;
    const std::int64_t page = slot / cache.page_kv, offset = slot % cache.page_kv;
    std::memcpy(cache.data(page, offset), rows.row(i), static_cast<std::size_t>(rows.data_bytes()));
    std::memcpy(cache.scale(page, offset), rows.scale(i), Format::scale_bytes);
  }
}

MQALOGITS_NAMESPACE_END
