// The checks of an index array (lengths, ks / ke, block tables, sparse indices) that the
// metadata functions read before any kernel runs: no null pointer with entries, and the
// natural alignment of its int32 or int64 elements, before the first read.
#pragma once

#include <cstdint>
#include <span>

#include "../config.hpp"
#include "../error.hpp"
#include "../view/index_array.hpp"
#include "../view/matrix_view.hpp"
#include "extent.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace detail {

template <index_value I>
void check_index_span(const char* where, const char* name, std::span<const I> s) {
  require(s.empty() || s.data(), where,
          [&](auto& msg) { msg << name << " is null with " << s.size() << " entries"; });
  check_aligned(where, name, s.data(), alignof(I));
}

}  // namespace detail
MQALOGITS_NAMESPACE_END
