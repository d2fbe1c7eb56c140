// Telling a child made by fork() from its parent. The child has a copy of the parent's memory,
// thread_pool objects included, but only the thread that called fork(): the pool's workers are
// gone, and its mutexes and condition variables may still record them (locked, or waited on).
// A pool made before a fork therefore behaves differently in the child (thread_pool.hpp).
#pragma once

#include <atomic>
#include <cstdint>

#include "../config.hpp"

#if __has_include(<pthread.h>)
#include <pthread.h>
#define MQALOGITS_HAS_PTHREAD_ATFORK 1
#else
#define MQALOGITS_HAS_PTHREAD_ATFORK 0
#endif

MQALOGITS_NAMESPACE_BEGIN
namespace detail {

// Forks this process has gone through since the library first asked: 0 in the parent, one more
// in each generation of children (fork() in a child of a child counts again).
inline std::atomic<std::uint64_t> forks_seen{0};
inline std::atomic<bool> fork_counter_registered{false};

inline void count_fork_in_child() noexcept {
  forks_seen.fetch_add(1, std::memory_order_relaxed);
}

// The current fork epoch. The first call registers the counter with pthread_atfork (each
// process image once; a child inherits the registration). A plain atomic flag instead of a
// function-local static: a fork while another thread held a static's initialisation lock would
// leave that lock held in the child forever.
inline std::uint64_t fork_epoch() noexcept {
#if MQALOGITS_HAS_PTHREAD_ATFORK
  if (!fork_counter_registered.load(std::memory_order_acquire) &&
      !fork_counter_registered.exchange(true, std::memory_order_acq_rel))
    ::pthread_atfork(nullptr, nullptr, &count_fork_in_child);
#endif
  return forks_seen.load(std::memory_order_relaxed);
}

}  // namespace detail
MQALOGITS_NAMESPACE_END
