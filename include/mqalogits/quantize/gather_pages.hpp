// Gathering paged cache rows into contiguous rows, as a prefill step does before the dense
// kernel (vLLM's cp_gather_indexer_k_quant_cache): the tokens of each sequence, in order, through
// its block-table row. The bytes are copied unchanged, whatever the format (FP8 codes and their
// fp32 scale, MXFP4 nibbles and their UE8M0 bytes).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include "../check/overlap.hpp"
#include "../check/shapes.hpp"
#include "../config.hpp"
#include "../error.hpp"
#include "../view/index_array.hpp"
#include "../view/matrix_view.hpp"
#include "../view/paged_cache_view.hpp"

MQALOGITS_NAMESPACE_BEGIN

namespace detail {
// Caller-owned output rows: `rows` rows of `bytes` bytes, `stride` bytes apart.
inline byte_range check_out_rows(const char* where, const char* name, const std::uint8_t* p,
                                 std::int64_t rows, std::int64_t stride, std::int64_t bytes) {
  require(rows == 0 || p, where,
          [&](auto& m) { m << name << " is null with " << rows << " rows"; });
  require(stride >= bytes, where, [&](auto& m) {
    m << name << " row stride " << stride << " < row size " << bytes << " bytes";
  });
  require(extent_fits(rows, stride, bytes), where, [&](auto& m) {
    m << name << " byte extent overflows: " << rows << " rows x stride " << stride;
  });
  return rows > 0 ? make_range(name, p, (rows - 1) * stride + bytes) : byte_range{name};
}
}  // namespace detail

// Copies the cached tokens of a batch of sequences into rows: sequence b owns output rows
// [cu_seq_lens[b], cu_seq_lens[b + 1]), and its token j comes from slot j % page_kv of page
// block_table(b, j / page_kv). Row r gets the token's data bytes (cache.data_bytes()) at
// data + r * data_stride and its scale bytes (Format::scale_bytes: the fp32 scale, or the
// UE8M0 bytes) at scales + r * scale_stride: with packed strides, vLLM's dst_k [rows, data bytes]
// and dst_scale [rows, 4] bytes. Rows past cu_seq_lens[batch] are left as they are.
//
// cu_seq_lens has block_table.rows + 1 entries, starts at 0 and never decreases, and its last
// entry is at most `rows`; a sequence longer than its block-table row can hold, or a table entry
// it reads that names no page of the cache, is an error (never a read out of bounds). No output
// may share a byte with the cache, the table, cu_seq_lens or the other output. A data stride of
// 0 means packed.
template <class Format, index_value Table, index_value Cu>
void gather_from_pages(const paged_cache_view<Format>& cache, matrix_view<const Table> block_table,
                       std::span<const Cu> cu_seq_lens, std::uint8_t* data, std::uint8_t* scales,
                       std::int64_t rows, std::int64_t data_stride = 0,
                       std::int64_t scale_stride = Format::scale_bytes) {
  constexpr const char* where = "gather_from_pages";
  using detail::require;
  detail::check_cache(where, cache);
  detail::check_matrix_extent(where, "block_table", block_table);
  const std::int64_t batch = block_table.rows;
  require(batch >= 0 && block_table.cols >= 0, where, [&](auto& m) {
    m << "block_table shape [" << block_table.rows << ", " << block_table.cols << "]";
  });
  detail::check_span(where, "cu_seq_lens", cu_seq_lens, batch + 1);
  require(rows >= 0, where, [&](auto& m) { m << "rows = " << rows << " must be >= 0"; });
  const std::int64_t data_bytes = cache.data_bytes();
  if (data_stride == 0) data_stride = data_bytes;
  const detail::byte_range out_data =
      detail::check_out_rows(where, "data", data, rows, data_stride, data_bytes);
  const detail::byte_range out_scales =
      detail::check_out_rows(where, "scales", scales, rows, scale_stride, Format::scale_bytes);
  const detail::byte_range cache_bytes = detail::range_of("the cache", cache),
                           table = detail::range_of("block_table", block_table),
                           cu = detail::range_of("cu_seq_lens", cu_seq_lens);
  detail::check_outputs_disjoint(where, {out_data, out_scales}, {cache_bytes, table, cu});
  // Every sequence: its rows inside the output, its pages inside its table row and the cache.
  require(cu_seq_lens[0] == 0, where,
          [&](auto& m) { m << "cu_seq_lens[0] = " << cu_seq_lens[0] << " must be 0"; });
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t begin = cu_seq_lens[static_cast<std::size_t>(b)],
                       end = cu_seq_lens[static_cast<std::size_t>(b + 1)];
    require(end >= begin, where, [&](auto& m) {
      m << "cu_seq_lens decreases at " << b + 1 << ": " << begin << " then " << end;
    });
    require(end <= rows, where, [&](auto& m) {
      m << "cu_seq_lens[" << b + 1 << "] = " << end << " is past the " << rows << " output rows";
    });
    const std::int64_t pages = (end - begin + cache.page_kv - 1) / cache.page_kv;
    require(pages <= block_table.cols, where, [&](auto& m) {
      m << "sequence " << b << " has " << end - begin << " tokens: " << pages << " pages of "
        << cache.page_kv << ", but block_table has " << block_table.cols << " columns";
    });
    for (std::int64_t p = 0; p < pages; ++p) {
      const std::int64_t page = block_table(b, p);
      require(page >= 0 && page < cache.num_pages, where, [&](auto& m) {
        m << "block_table[" << b << ", " << p << "] = " << page << " is not a page of the cache ("
          << cache.num_pages << " pages)";
      });
    }
  }
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t begin = cu_seq_lens[static_cast<std::size_t>(b)],
                       end = cu_seq_lens[static_cast<std::size_t>(b + 1)];
    for (std::int64_t r = begin; r < end; ++r) {
      const std::int64_t j = r - begin, page = block_table(b, j / cache.page_kv),
                         slot = j % cache.page_kv;
      std::memcpy(data + r * data_stride, cache.data(page, slot),
                  static_cast<std::size_t>(data_bytes));
      std::memcpy(scales + r * scale_stride, cache.scale(page, slot), Format::scale_bytes);
    }
  }
}

MQALOGITS_NAMESPACE_END
