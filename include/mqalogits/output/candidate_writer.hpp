// How a row of candidate blocks is written once its best blocks are known (candidate_blocks.hpp):
// blocks scoring -inf dropped, the rest in the order asked for, padded as asked.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>

#include "../config.hpp"
#include "../std_abi.hpp"
#include "topk_key.hpp"

MQALOGITS_NAMESPACE_BEGIN

// The order of a row's selected blocks.
enum class candidate_order {
  ascending,  // by block id, as the sparse kernels' metadata takes them (sglang)
  score,      // best first, ties to the lower id (vLLM)
};
// What fills a row past its selected blocks.
enum class candidate_padding {
  minus_one,    // -1
  repeat_last,  // the row's last selected block (how engines pad the sparse selection)
};

namespace detail {

struct candidate_writer {
  candidate_order order = candidate_order::ascending;
  candidate_padding padding = candidate_padding::minus_one;

  // (Block ids are the selection's columns already.)
  std::int32_t operator()(std::int64_t, std::int32_t block) const { return block; }

  // Distinct block ids in ascending order: through a bitmap of the ids' range where that is
  // small against their count (a row's candidates usually cover a good part of its blocks), a
  // comparison sort otherwise. The bitmap is the thread's, kept for its later rows.
  static void sort_ids(std::int32_t* ids, std::int64_t n) {
    if (n < 2) return;
    const std::int32_t top = *std::max_element(ids, ids + n);
    const std::size_t words = static_cast<std::size_t>(top) / 64 + 1;
    if (words > 16 * static_cast<std::size_t>(n)) {
      std::sort(ids, ids + n);
      return;
    }
    thread_local detail::vector<std::uint64_t> bits;
    bits.assign(words, 0);
    for (std::int64_t i = 0; i < n; ++i)
      bits[static_cast<std::size_t>(ids[i]) / 64] |= std::uint64_t{1} << (ids[i] % 64);
    std::int64_t out = 0;
    for (std::size_t w = 0; w < words; ++w)
      for (std::uint64_t b = bits[w]; b != 0; b &= b - 1)
        ids[out++] =
            static_cast<std::int32_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(b)));
  }

  // keys: the row's m best blocks, best first.
  void write_row(std::int64_t, const std::uint64_t* keys, std::int64_t m, std::int32_t* idx, float*,
                 std::int64_t n) const {
    std::int64_t kept = 0;
    for (std::int64_t i = 0; i < m; ++i)
      if (topk_key::value(keys[i]) != -std::numeric_limits<float>::infinity())
        idx[kept++] = topk_key::column(keys[i]);
    if (order == candidate_order::ascending) sort_ids(idx, kept);
    const std::int32_t pad =
        padding == candidate_padding::repeat_last && kept > 0 ? idx[kept - 1] : -1;
    std::fill(idx + kept, idx + n, pad);
  }
};

}  // namespace detail
MQALOGITS_NAMESPACE_END
