// The random inputs of one small valid call of each kernel, seeded: fixtures that break one
// argument at a time (bad input, hostile callers) derive from these and add their output and
// the kernel's own arguments (key ranges, indices, block table, metadata).
#pragma once

#include <cstdint>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"

namespace check {

// A call over rows of keys (dense, sparse): Q for rows x heads, kv_rows keys, the weights.
template <class Format, class W>
struct row_call_inputs {
  ref::rand::engine rng;
  ref::rand::owned_rows<Format> q, kv;
  ref::rand::owned_matrix<W> w;

  row_call_inputs(std::uint64_t seed, std::int64_t rows, std::int64_t heads, std::int64_t kv_rows)
      : rng(seed),
        q(ref::rand::rows<Format>(rng, rows * heads)),
        kv(ref::rand::rows<Format>(rng, kv_rows)),
        w(ref::rand::weights<W>(rng, rows, heads)) {}
};

// A call over a paged cache (paged, paged sparse): the cache, Q for rows x heads, the weights.
template <class Format, class W>
struct paged_call_inputs {
  ref::rand::engine rng;
  ref::rand::owned_paged_cache<Format> cache;
  ref::rand::owned_rows<Format> q;
  ref::rand::owned_matrix<W> w;

  paged_call_inputs(std::uint64_t seed, std::int64_t pages, std::int32_t page_kv, std::int64_t rows,
                    std::int64_t heads)
      : rng(seed),
        cache(ref::rand::paged_cache<Format>(rng, pages, page_kv)),
        q(ref::rand::rows<Format>(rng, rows * heads)),
        w(ref::rand::weights<W>(rng, rows, heads)) {}
};

}  // namespace check
