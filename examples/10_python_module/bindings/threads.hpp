// Part of the Python module's unit bindings.cpp (its parts in order, each including the one
// before): the kernels' thread pools: one per thread count, per calling Python thread, rebuilt in a
// forked child.
#pragma once

#include "outputs.hpp"

namespace mqalogits_python {
namespace {

// num_threads=None: thread_pool::default_threads() (OMP_NUM_THREADS when set, else the CPUs
// this process may run on). The package's wrapper passes torch.get_num_threads() instead when the
// call has torch tensors, the count the torch op library always uses.
int threads_of(const char* where, std::optional<int> n) {
  if (!n) return ml::thread_pool::default_threads();
  if (*n < 1) fail(where, "num_threads = " + std::to_string(*n) + " must be >= 1");
  return *n;
}

// The pools of the last few thread counts used, made on first use and kept while in use
// (engines call these kernels every decode step; a pool per call would spawn threads per call).
// A call takes an idle pool of its count: while one Python thread's call runs on a pool, a call
// from another thread gets a second pool of that count (made then, kept for the next time), so
// calls from several threads run at once instead of queueing on one pool; their threads then
// share the CPUs. A new pool evicts the least recently used ones until at most max_pools pools and
// (besides the newest) at most 2 x the cores' threads remain; an evicted pool ends once no
// running call holds it. However many distinct counts a process passes, the idle threads stay
// bounded by the largest recent count plus 2 x the cores.
constexpr std::size_t max_pools = 4;

// The cache, on the heap and never destroyed: a child made by fork() (os.fork(), multiprocessing)
// gets a fresh one (the at-fork handler below), since the parent's may have been locked or
// half-updated by another thread at the fork, and its pools' workers do not exist there. The
// parent's pools are left to the child's exit, where an inherited pool neither waits nor joins.
struct pool_cache {
  std::mutex mutex;
  std::vector<std::pair<int, std::shared_ptr<ml::thread_pool>>> pools;  // most recent last
};
std::atomic<pool_cache*> pools_now{nullptr};

void fresh_pool_cache_in_child() noexcept {
  pools_now.store(new (std::nothrow) pool_cache, std::memory_order_relaxed);
}

// Made when the module is loaded (one thread, under the import lock), so no lock of a first use
// can be inherited held.
[[maybe_unused]] const bool pool_cache_made = [] {
  pools_now.store(new pool_cache, std::memory_order_release);
  ::pthread_atfork(nullptr, nullptr, &fresh_pool_cache_in_child);
  return true;
}();

pool_cache& pool_cache_now() {
  pool_cache* c = pools_now.load(std::memory_order_acquire);
  if (!c) throw std::bad_alloc();  // the child could not allocate its cache
  return *c;
}

std::shared_ptr<ml::thread_pool> pool_of(int n) {
  pool_cache& cache = pool_cache_now();
  auto& pools = cache.pools;
  std::vector<std::shared_ptr<ml::thread_pool>> evicted;  // end (join their threads) unlocked
  std::lock_guard lock(cache.mutex);
  // Idle: held by the cache alone (a running call holds a second reference until it returns).
  auto it = std::find_if(pools.begin(), pools.end(),
                         [&](const auto& p) { return p.first == n && p.second.use_count() == 1; });
  std::shared_ptr<ml::thread_pool> pool;
  if (it != pools.end()) {
    pool = it->second;
    pools.erase(it);
  } else {
    pool = std::make_shared<ml::thread_pool>(n);
  }
  pools.emplace_back(n, pool);
  const i64 cap = 2 * static_cast<i64>(std::max(1u, std::thread::hardware_concurrency()));
  const auto others = [&] {
    i64 t = 0;
    for (std::size_t i = 0; i + 1 < pools.size(); ++i) t += pools[i].first;
    return t;
  };
  while (pools.size() > 1 && (pools.size() > max_pools || others() > cap)) {
    evicted.push_back(std::move(pools.front().second));
    pools.erase(pools.begin());
  }
  return pool;
}

// Upstream's row strides: SM90 / SM100 tile KV by 256 and pad rows to 1024 bytes.
constexpr i64 upstream_block_kv = 256;
i64 upstream_stride(const char* where, const char* what, i64 cols_to_cover, logits_type t) {
  return align_up(where, what, cols_to_cover, 1024 / (t == logits_type::f32 ? 4 : 2));
}

}  // namespace
}  // namespace mqalogits_python
