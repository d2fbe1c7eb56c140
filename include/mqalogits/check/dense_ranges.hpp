// The dense kernel's rows must fit its output: a non-empty token range [ks, ke) past the KV rows
// (ke > N) or longer than the output's max_seqlen_k columns would lose tokens without a word, so
// both are errors unless the caller opts in to truncation (options::truncate_long_contexts), which
// keeps the tokens below N and, with max_seqlen_k > 0, the first max_seqlen_k columns of each row.
#pragma once

#include <cstdint>
#include <span>

#include "../config.hpp"
#include "../error.hpp"
#include "../view/index_array.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace detail {

// ks, ke: one entry per row, already checked for size and alignment. max_seqlen_k == 0 is the
// full-width mode, where every token below N has its column.
template <index_value I>
void check_dense_ranges_fit(const char* where, std::span<const I> ks, std::span<const I> ke,
                            std::int64_t num_kv, std::int64_t max_seqlen_k) {
  for (std::size_t r = 0; r < ke.size(); ++r) {
    const std::int64_t start = ks[r], end = ke[r];
    if (end <= start) continue;  // no tokens, none to lose
    require(end <= num_kv, where, [&](auto& m) {
      m << "cu_seq_len_k_end[" << r << "] = " << end << " is past the " << num_kv
        << " rows of kv (options::truncate_long_contexts clamps it to " << num_kv << ")";
    });
    if (max_seqlen_k == 0) continue;
    std::int64_t length;  // overflows only for a start far below 0: longer than any output
    const bool too_long = __builtin_sub_overflow(end, start, &length) || length > max_seqlen_k;
    require(!too_long, where, [&](auto& m) {
      m << "cu_seq_len_k_start[" << r << "] = " << start << ", cu_seq_len_k_end[" << r
        << "] = " << end << ": the row's tokens do not fit max_seqlen_k = " << max_seqlen_k
        << " columns (pass max_seqlen_k >= cu_seq_len_k_end - cu_seq_len_k_start; "
           "options::truncate_long_contexts keeps the first "
        << max_seqlen_k << ")";
    });
  }
}

}  // namespace detail
MQALOGITS_NAMESPACE_END
