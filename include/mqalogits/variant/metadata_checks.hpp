// Checks the metadata functions share: they read the caller's int32 or int64 arrays (lengths,
// ks / ke, block tables, sparse indices) before any kernel runs, so they must reject null
// pointers and strides whose byte offsets overflow before the first read.
#pragma once

#include <cstdint>
#include <span>

#include "../config.hpp"
#include "../error.hpp"
#include "../view/checks.hpp"
#include "../view/index_array.hpp"
#include "../view/matrix_view.hpp"

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
