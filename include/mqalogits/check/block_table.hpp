// The rule every paged surface applies to a block-table entry it will read: it names a page of
// the cache. Stated once, so a table that disagrees with its cache is refused with one message
// ("<where>: block_table[b][slot] = page is not a page (num_pages = n)") wherever it is read.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "../error.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace check {

inline void block_table_page(const char* where, std::int64_t b, std::int64_t slot,
                             std::int64_t page, std::int64_t num_pages) {
  detail::require(page >= 0 && page < num_pages, where, [&](auto& m) {
    m << "block_table[" << b << "][" << slot << "] = " << page
      << " is not a page (num_pages = " << num_pages << ")";
  });
}

}  // namespace check
MQALOGITS_NAMESPACE_END
