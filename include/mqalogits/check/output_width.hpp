// The width a call's logits are sized by, checked before anything sizes a buffer from it: the
// entry points check it, and so may a binding that allocates the output first, with the same
// message.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "../error.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace check {

// Dense: max_seqlen_k > 0 columns, or 0 for upstream's full width (a column per kv row).
inline void max_seqlen_k(const char* where, std::int64_t v) {
  detail::require(v >= 0, where, [&](auto& m) {
    m << "max_seqlen_k = " << v << " must be > 0 (or 0 for full width)";
  });
}

// Paged: max_context_len > 0 columns.
inline void max_context_len(const char* where, std::int64_t v) {
  detail::require(v > 0, where, [&](auto& m) { m << "max_context_len = " << v << " must be > 0"; });
}

}  // namespace check
MQALOGITS_NAMESPACE_END
