// The limits of the paged kernel: worker count of its schedule, page size, context length.
#pragma once

#include <cstdint>

#include "../config.hpp"

MQALOGITS_NAMESPACE_BEGIN

// The most runs a paged schedule may be cut into: far above any core count (upstream passes the
// GPU's SM count, 132 on an H800), low enough that the schedule stays a few kilobytes.
inline constexpr int max_paged_workers = 4096;
// Page sizes of the paged kernel: every size from 1 (sglang on HIP) to 1024.
inline constexpr std::int64_t max_page_kv = 1024;
// The longest context the paged kernel takes, whether lengths come as int32 or int64: DeepGEMM's
// int32 lengths. A longer one is an error, not a length cut short.
inline constexpr std::int64_t max_paged_context_len = INT32_MAX;

inline bool supported_page_kv(std::int64_t page_kv) {
  return page_kv >= 1 && page_kv <= max_page_kv;
}

MQALOGITS_NAMESPACE_END
