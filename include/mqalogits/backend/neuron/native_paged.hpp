// A Neuron-native paged K cache for trn3, as AWS's MXFP8 decode attention keeps its cache
// (attention_mxfp8_tkg: [num_blocks, 32, 160] words), and the paged decode over it.
//
// Block: 128 tokens laid out as nc_matmul_mx reads its moving operand, so a block reaches SBUF
// by DMA already transposed and packed, with no TensorE transpose or VectorE copy:
//   32 rows (partitions) x [128 words | 128 scale bytes]
//   row p, word t: dims 4p .. 4p + 3 of token t (4 e4m3 codes = 4 bytes, 4 e2m1 codes = 2 bytes)
//   rows 0..3, scale byte t: the UE8M0 scale of dims 32g .. 32g + 31 of token t (g = row); the
//   scale columns of rows 4..31 are zero
// For MXFP8 a row is 640 bytes (160 words of 4 bytes), for MXFP4 384.
//
//   auto native = neuron_backend::to_native_paged_cache(cache, block_table, context_lens);
//   neuron_backend::fp8_fp4_paged_mqa_logits_native(backend::neuron<backend::trn3>{}, q, native,
//                                                   weights, context_lens, max_context_len, out);
//
// The converter copies each request's first max(context_lens[b]) positions from the DeepGEMM
// page layout into fresh native blocks (its own block table); positions past a request's
// context are zero.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../../check/block_table.hpp"
#include "../../check/call.hpp"
#include "../../check/extent.hpp"
#include "../../check/output_width.hpp"
#include "../../check/shapes.hpp"
#include "../../config.hpp"
#include "../../error.hpp"
#include "../../output/kernel_outputs.hpp"
#include "../../std_abi.hpp"
#include "../../variant/plan.hpp"
#include "../../view/matrix_view.hpp"
#include "../../view/paged_cache_view.hpp"
#include "../backend.hpp"
#include "schedule.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

template <class Format>
struct native_paged_cache {
  static_assert(is_mx_format_v<Format>, "mqalogits: the native layout holds MX formats");
  static_assert(Format::head_dim == 128, "mqalogits: the native layout holds rows of 128");
  static constexpr std::int64_t block_tokens = 128;
  static constexpr int rows = Format::head_dim / mx_pack;  // 32 partitions
  static constexpr std::int64_t word_bytes = mx_pack * Format::data_type::bits / 8;
  static constexpr std::int64_t row_bytes = block_tokens * word_bytes + block_tokens;
  static constexpr std::int64_t block_bytes = rows * row_bytes;

  detail::vector<std::uint8_t> bytes;  // [num_blocks, 32, row_bytes]
  detail::vector<std::int32_t> table;  // [requests, max_blocks], -1 past a request's blocks
  detail::vector<std::int64_t> keys;   // [requests] positions converted per request
  std::int64_t requests = 0, max_blocks = 0, num_blocks = 0;

  const std::uint8_t* block(std::int64_t i) const { return bytes.data() + i * block_bytes; }
};

// The positions each request keeps, max_j context_lens[b][j] capped at the block table's
// capacity, after checking the shapes, the lengths and every block-table entry they read.
template <class Format>
detail::vector<std::int64_t> native_request_keys(const paged_cache_view<Format>& cache,
                                                 matrix_view<const std::int32_t> block_table,
                                                 matrix_view<const std::int32_t> context_lens) {
  constexpr const char* where = "neuron_backend::to_native_paged_cache";
  using mqalogits::detail::require;
  require(cache.head_dim == Format::head_dim, where, [&](auto& m) {
    m << "cache head_dim = " << cache.head_dim << ": the native layout holds rows of "
      << Format::head_dim;
  });
  // The cache's geometry, as every paged entry point checks it, before a page is read.
  mqalogits::detail::check_cache(where, cache);
  require(context_lens.cols >= 1 && block_table.rows == context_lens.rows, where, [&](auto& m) {
    m << "context_lens [" << context_lens.rows << ", " << context_lens.cols << "] and block_table ["
      << block_table.rows << ", " << block_table.cols << "] must have one row per request";
  });
  mqalogits::detail::check_matrix_extent(where, "context_lens", context_lens);
  mqalogits::detail::check_matrix_extent(where, "block_table", block_table);
  const std::int64_t B = context_lens.rows,
                     capacity = block_table.cols * std::int64_t{cache.page_kv};
  detail::vector<std::int64_t> keys(static_cast<std::size_t>(B));
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t j = 0; j < context_lens.cols; ++j) {
      require(context_lens(b, j) >= 0, where, [&](auto& m) {
        m << "context_lens[" << b << "][" << j << "] = " << context_lens(b, j) << " < 0";
      });
      keys[static_cast<std::size_t>(b)] =
          std::max<std::int64_t>(keys[static_cast<std::size_t>(b)], context_lens(b, j));
    }
    keys[b] = std::min(keys[b], capacity);
    for (std::int64_t p = 0; p < (keys[b] + cache.page_kv - 1) / cache.page_kv; ++p)
      check::block_table_page(where, b, p, block_table(b, p), cache.num_pages);
  }
  return keys;
}

// Converts the positions [0, max_j context_lens[b][j]) of each request b from a DeepGEMM paged
// cache (block_table [B, max_blocks_in], page_kv tokens per page) into the native layout.
template <class Format>
native_paged_cache<Format> to_native_paged_cache(const paged_cache_view<Format>& cache,
                                                 matrix_view<const std::int32_t> block_table,
                                                 matrix_view<const std::int32_t> context_lens) {
  using native = native_paged_cache<Format>;
  const detail::vector<std::int64_t> keys = native_request_keys(cache, block_table, context_lens);
  const std::int64_t B = context_lens.rows;
  native out;
  out.requests = B;
  out.keys = keys;
  for (std::int64_t b = 0; b < B; ++b)
    out.max_blocks =
        std::max(out.max_blocks, (keys[b] + native::block_tokens - 1) / native::block_tokens);
  out.max_blocks = std::max<std::int64_t>(out.max_blocks, 1);
  out.table.assign(static_cast<std::size_t>(B * out.max_blocks), -1);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = 0; j * native::block_tokens < keys[b]; ++j)
      out.table[static_cast<std::size_t>(b * out.max_blocks + j)] =
          static_cast<std::int32_t>(out.num_blocks++);
  out.bytes.assign(static_cast<std::size_t>(out.num_blocks * native::block_bytes), 0);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t pos = 0; pos < keys[static_cast<std::size_t>(b)]; ++pos) {
      const std::int64_t page = block_table(b, pos / cache.page_kv), slot = pos % cache.page_kv;
      const std::uint8_t* data = cache.data(page, slot);
      const std::uint8_t* scales = cache.scale(page, slot);
      const std::int64_t blk =
          out.table[static_cast<std::size_t>(b * out.max_blocks + pos / native::block_tokens)];
      const std::int64_t t = pos % native::block_tokens;
      std::uint8_t* base = out.bytes.data() + blk * native::block_bytes;
      for (int p = 0; p < native::rows; ++p)
        std::memcpy(base + p * native::row_bytes + t * native::word_bytes,
                    data + p * native::word_bytes, native::word_bytes);
      for (int g = 0; g < Format::blocks; ++g)
        base[g * native::row_bytes + native::block_tokens * native::word_bytes + t] = scales[g];
    }
  return out;
}

// The decode plan over a native cache: rows (b, j) of request b share its blocks; column j is
// context position j, valid iff j < context_lens[b][j'] and j < the converted capacity.
template <class Format>
class native_paged_plan {
 public:
  using cache_type = native_paged_cache<Format>;
  // The neuron schedule loads these keys as whole native blocks (no transposes).
  static constexpr bool native_mx_layout = true;

  native_paged_plan(const cache_type& cache, matrix_view<const std::int32_t> lens,
                    std::int64_t cols)
      : cache_(&cache), lens_(lens), cols_(cols) {}

  std::int64_t num_rows() const { return lens_.rows * lens_.cols; }
  std::int64_t num_cols() const { return cols_; }
  std::int64_t num_groups() const { return lens_.rows; }
  row_span group_rows(std::int64_t b) const { return {b * lens_.cols, (b + 1) * lens_.cols}; }
  row_keys row(std::int64_t r) const {
    const std::int64_t len = lens_(r / lens_.cols, r % lens_.cols);
    return {0, std::min({len, cache_->keys[static_cast<std::size_t>(r / lens_.cols)], cols_}), 0};
  }
  // Native keys have no per-token rows: a valid key points at its block.
  key_ref key(std::int64_t b, std::int64_t k) const {
    const std::uint8_t* blk = block_of(b, k / cache_type::block_tokens);
    return {blk, blk};
  }
  const std::uint8_t* block_of(std::int64_t b, std::int64_t j) const {
    const std::int32_t id = cache_->table[static_cast<std::size_t>(b * cache_->max_blocks + j)];
    return id < 0 ? nullptr : cache_->block(id);
  }
  void fill_work(const tiling& t, work_list& list) const { detail::split_work(*this, t, list); }
  static constexpr bool prefill = false;
  std::int64_t gather_block() const { return cache_type::block_tokens; }

 private:
  const cache_type* cache_;
  matrix_view<const std::int32_t> lens_;
  std::int64_t cols_;
};

// Paged decode over a native cache (trn3): q [B * next_n * H] rows, weights [B * next_n, H],
// context_lens [B, next_n] (as given to the converter), out [B * next_n, max_context_len].
template <class Gen, class Format, weight_input WT, output_argument Out>
void fp8_fp4_paged_mqa_logits_native(backend::neuron<Gen>, const rows_view<Format>& q,
                                     const native_paged_cache<Format>& cache,
                                     matrix_view<WT> weights,
                                     matrix_view<const std::int32_t> context_lens,
                                     std::int64_t max_context_len, Out out,
                                     const options& opt = {}) {
  static_assert(traits<Gen>::mx_matmul,
                "mqalogits: the native MX cache layout is nc_matmul_mx's operand (trn3)");
  constexpr const char* where = "fp8_fp4_paged_mqa_logits_native";
  using mqalogits::detail::require;
  const matrix_view<const std::remove_const_t<WT>> w = weights;
  const std::int64_t B = context_lens.rows, next_n = context_lens.cols;
  require(next_n >= 1 && B == cache.requests, where, [&](auto& m) {
    m << "context_lens shape [" << B << ", " << next_n << "] must be [" << cache.requests
      << " requests of the cache, next_n >= 1]";
  });
  mqalogits::detail::check_matrix(where, "context_lens", context_lens, B, next_n);
  check::max_context_len(where, max_context_len);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = 0; j < next_n; ++j)
      require(context_lens(b, j) >= 0, where, [&](auto& m) {
        m << "context_lens[" << b << "][" << j << "] = " << context_lens(b, j) << " < 0";
      });
  auto output = to_output_policy(out, opt);
  // The contract of every entry point (check/call.hpp), the native cache's storage as its input.
  check::logits_call(
      where, q, w, output, B * next_n, max_context_len, {"cache", Format::head_dim},
      check::range_of("context_lens", context_lens),
      check::make_range("cache", cache.bytes.data(), static_cast<std::int64_t>(cache.bytes.size())),
      check::make_range("cache block table", cache.table.data(),
                        static_cast<std::int64_t>(cache.table.size() * sizeof(std::int32_t))));
  const native_paged_plan<Format> plan(cache, context_lens, max_context_len);
  backend_kernels<backend::neuron<Gen>>::run(q, plan, w, output, opt);
}

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
