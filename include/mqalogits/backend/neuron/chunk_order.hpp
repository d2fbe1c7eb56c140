// The order in which one core runs a call's key chunks: the plan's work items merged into
// chunks of consecutive keys, the core's share of them (LNC = 2: the two cores split the
// queries: prefill row tiles, decode groups), prefill's sorted so that query tiles sharing their
// keys run back to back.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "../../config.hpp"
#include "../../std_abi.hpp"
#include "../../variant/plan.hpp"
#include "chunks.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// One chunk to run: keys [k0, k0 + nk) of items[item].
struct key_chunk {
  std::size_t item;
  std::int64_t k0, nk;
};

struct chunk_order {
  detail::vector<work_item> items;   // consecutive items of one group, rows and keys merged
  detail::vector<key_chunk> chunks;  // in the order they run

  template <class Plan>
  chunk_order(const Plan& plan, std::int64_t chunk, int part, int parts) {
    work_list work;
    plan.fill_work(tiling{Plan::prefill ? prefill_rows : 8, chunk}, work);
    // Consecutive work items of one group, rows and contiguous keys form one item.
    for (const work_item& it : work.items) {
      if (!items.empty()) {
        work_item& last = items.back();
        if (last.group == it.group && last.row_begin == it.row_begin &&
            last.row_end == it.row_end && last.key_end == it.key_begin &&
            it.key_end - last.key_begin <= chunk) {
          last.key_end = it.key_end;
          continue;
        }
      }
      items.push_back(it);
    }
    // This core's chunks of at most `chunk` keys, in item order.
    for (std::size_t i = 0; i < items.size(); ++i) {
      const work_item& ch = items[i];
      const std::int64_t owner = Plan::prefill ? ch.row_begin / prefill_rows : ch.group;
      if (owner % parts != part) continue;
      for (std::int64_t k0 = ch.key_begin; k0 < ch.key_end; k0 += chunk)
        chunks.push_back({i, k0, std::min(chunk, ch.key_end - k0)});
    }
    // Prefill: the query tiles that start at the same key of one group share their keys, so
    // the longest runs first and the K^T it leaves resident serves the others (decoded once,
    // not once per 128-query tile).
    if constexpr (Plan::prefill)
      std::stable_sort(chunks.begin(), chunks.end(), [&](const key_chunk& a, const key_chunk& b) {
        const std::int64_t ga = items[a.item].group, gb = items[b.item].group;
        return ga != gb ? ga < gb : a.k0 != b.k0 ? a.k0 < b.k0 : a.nk > b.nk;
      });
  }
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
