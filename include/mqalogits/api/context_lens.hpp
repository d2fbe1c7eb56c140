// Upstream's one-length-per-request form of the paged kernels' context_lens.
//
// The paged kernels take context_lens [B, next_n]: query row j of request b sees the positions
// t < context_lens[b][j]. DeepGEMM also accepts a 1-D context_lens [B] (one length per request,
// the whole context including the request's next_n new tokens), where its query rows are causal
// among themselves: row j sees t <= context_lens[b] - next_n + j. expand_context_lens writes that
// 1-D form as the 2-D one,
//
//   out[b][j] = clamp(context_lens[b] - next_n + j + 1, 0, context_lens[b]),
//
// so the row's last (j = next_n - 1) length is the request's. The schedule of a request follows
// its longest row, so upstream's schedule table made from the 1-D lengths (as [B, 1]) is the one
// made from the expanded lengths, and the kernel accepts either.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "../config.hpp"
#include "../error.hpp"
#include "../view/index_array.hpp"
#include "../view/matrix_view.hpp"

MQALOGITS_NAMESPACE_BEGIN

// context_lens [B] -> out [B, next_n] (out.rows == B, out.cols == next_n >= 1). A negative length
// is copied as is, so the kernel's own check names it.
template <index_value I>
void expand_context_lens(std::span<const I> context_lens, matrix_view<I> out) {
  constexpr const char* where = "expand_context_lens";
  detail::require(out.cols >= 1 && out.rows == static_cast<std::int64_t>(context_lens.size()),
                  where, [&](auto& m) {
                    m << "out is [" << out.rows << ", " << out.cols << "] for "
                      << context_lens.size() << " lengths: expected [B, next_n >= 1]";
                  });
  const std::int64_t next_n = out.cols;
  for (std::int64_t b = 0; b < out.rows; ++b) {
    const std::int64_t len = context_lens[static_cast<std::size_t>(b)];
    for (std::int64_t j = 0; j < next_n; ++j)
      out(b, j) =
          static_cast<I>(len < 0 ? len : std::clamp<std::int64_t>(len - next_n + j + 1, 0, len));
  }
}

MQALOGITS_NAMESPACE_END
