// A small fixed-size thread pool implementing the executor concept.
#pragma once

#if defined(__linux__)
#include <sched.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

#include "../config.hpp"
#include "../error.hpp"
#include "../std_abi.hpp"
#include "executor.hpp"
#include "fork_epoch.hpp"

MQALOGITS_NAMESPACE_BEGIN

namespace detail {
// For tests only: when >= 1, the pool constructor's start of that worker (1 = the first) fails
// as an exhausted system does (std::system_error, EAGAIN). -1: never.
inline std::atomic<int> thread_pool_fail_start_at{-1};

// What std::thread throws when the system cannot start one: std::system_error (EAGAIN). With
// libstdc++ through its own out-of-line thrower, as std::thread does: std::system_error's inline
// constructor builds a std::string, instantiations of a name shared with units built for other
// instruction sets (std_abi.hpp).
[[noreturn]] inline void throw_thread_start_error() {
#if defined(__GLIBCXX__)
  std::__throw_system_error(EAGAIN);
#else
  throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                          "thread_pool: cannot start a worker thread");
#endif
}

// OMP_NUM_THREADS's first entry ("8" or "8,2" for nested levels) when it is a count in
// [1, 4096] with nothing but digits, else 0 (unset, empty or malformed: ignored, as libgomp does).
inline int omp_num_threads() {
  const char* v = std::getenv("OMP_NUM_THREADS");
  if (!v) return 0;
  while (*v == ' ' || *v == '\t') ++v;
  long n = 0;
  const char* p = v;
  for (; *p >= '0' && *p <= '9' && n <= 4096; ++p) n = n * 10 + (*p - '0');
  while (*p == ' ' || *p == '\t') ++p;
  if (p == v || (*p != '\0' && *p != ',') || n < 1 || n > 4096) return 0;
  return static_cast<int>(n);
}

// now + spin, or the clock's last time point when that is later than the clock can say (a spin
// of microseconds::max() means "spin until the next call"; now + spin would overflow).
inline std::chrono::steady_clock::time_point spin_deadline(
    std::chrono::steady_clock::time_point now, std::chrono::microseconds spin) {
  using clock = std::chrono::steady_clock;
  const auto left = clock::time_point::max() - now;  // >= 0: now is not past the last point
  if (spin >= std::chrono::duration_cast<std::chrono::microseconds>(left))
    return clock::time_point::max();
  return now + std::chrono::duration_cast<clock::duration>(spin);
}
}  // namespace detail

// parallel_for hands out task indices through an atomic counter; the calling thread works too.
// One parallel_for runs at a time per pool (calls from several threads are serialised). A task
// that calls parallel_for on the pool it runs on (a kernel inside a kernel's task) runs that
// call inline on its own thread. The first exception thrown by a task is rethrown to the caller
// after all workers stop. The destructor waits for the calls in progress to return; pools that
// call each other in a cycle (a task of A calls B, a task of B calls A) deadlock.
//
// Across fork(): a pool made before the fork is inherited by the child without its workers. There
// it never blocks: each parallel_for runs on the calling thread (concurrency() says 1), and its
// destruction (at exit, for a static pool) neither waits for calls nor joins threads. Make a new
// pool in the child to run on several threads there.
class thread_pool {
 public:
  // threads >= 1 (the calling thread counts as one). If the system cannot start them all, the
  // constructor throws std::system_error after joining the workers it did start.
  //
  // spin: how long a worker keeps polling for the next parallel_for after it finishes one,
  // before it sleeps on a condition variable (0, the default: it sleeps at once). A sleeping
  // worker can take long to wake, above all on a virtual machine whose idle vCPU the host has
  // descheduled (hundreds of microseconds after 20 ms idle: bench pool/wake_after_idle), and
  // a call of a few milliseconds pays that in full. Spinning keeps a core busy between calls
  // instead, as OpenMP runtimes do by default; worth it when calls come every few milliseconds.
  explicit thread_pool(int threads = default_threads(),
                       std::chrono::microseconds spin = std::chrono::microseconds{0})
      : size_(threads), spin_(spin), fork_epoch_(detail::fork_epoch()), signals_() {
    detail::require(threads >= 1, "thread_pool",
                    [&](auto& m) { m << "threads = " << threads << " must be >= 1"; });
    detail::require(spin.count() >= 0, "thread_pool",
                    [&](auto& m) { m << "spin = " << spin.count() << " us must be >= 0"; });
    try {
      workers_.reserve(static_cast<std::size_t>(size_ - 1));
      for (int i = 1; i < size_; ++i) {
        if (i == detail::thread_pool_fail_start_at.load(std::memory_order_relaxed))
          detail::throw_thread_start_error();
        workers_.emplace_back([this] { worker_loop(); });
      }
    } catch (...) {
      stop_workers();
      signals_.~signals();
      throw;
    }
  }
  ~thread_pool() {
    if (inherited_by_fork()) {
      abandon_workers();
      return;
    }
    {
      std::unique_lock lock(mutex_);
      signals_.idle.wait(lock, [&] { return calls_ == 0; });
    }
    stop_workers();
    signals_.~signals();
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  // The default size: OMP_NUM_THREADS when it is set to a positive count (its first entry, as
  // OpenMP and torch read it; engines set it to share a machine between processes), else the
  // CPUs this thread may run on: its affinity mask where Linux reports it (taskset, a
  // container's cpuset), else the hardware's thread count; 1 when none is known. A pool of more
  // threads than the CPUs it may use only adds contention.
  static int default_threads() {
    if (const int n = detail::omp_num_threads(); n > 0) return n;
    return affinity_threads();
  }
  // The CPUs this thread may run on (the default without OMP_NUM_THREADS).
  static int affinity_threads() {
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
      return CPU_COUNT(&set);
#endif
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }

  int concurrency() const {
    return inherited_by_fork() ? 1 : size_;
  }

  void parallel_for(std::int64_t n, task_ref task) {
    if (n <= 0) return;
    // Nothing to share, nested (a task of this pool), or in a forked child: inline.
    if (size_ == 1 || n == 1 || working_on_ == this || inherited_by_fork()) {
      for (std::int64_t i = 0; i < n; ++i) task(i);
      return;
    }
    call_guard in_flight(*this);
    std::lock_guard call_lock(call_mutex_);
    job current(task, n);
    {
      std::lock_guard lock(mutex_);
      job_ = &current;
      generation_.fetch_add(1, std::memory_order_release);
    }
    signals_.wake.notify_all();
    work_on(current);
    spin_until_done(current);
    std::unique_lock lock(mutex_);
    signals_.done.wait(lock, [&] { return current.active.load(std::memory_order_relaxed) == 0; });
    job_ = nullptr;
    if (current.failure) std::rethrow_exception(current.failure);
  }

 private:
  struct job {
    job(task_ref t, std::int64_t count) : task(t), n(count) {}
    task_ref task;
    std::int64_t n;
    std::atomic<std::int64_t> next{0};
    // Workers inside work_on: changed under mutex_ (the condition variables' state), atomic so
    // that the caller can poll it without the lock.
    std::atomic<int> active{0};
    std::exception_ptr failure;
    std::mutex failure_mutex;
  };

  // Counts a call in progress for the destructor, and marks the calling thread as working for
  // this pool so that a nested call from one of its tasks runs inline.
  struct call_guard {
    explicit call_guard(thread_pool& p) : pool(p), outer(working_on_) {
      std::lock_guard lock(pool.mutex_);
      ++pool.calls_;
      working_on_ = &pool;
    }
    ~call_guard() {
      working_on_ = outer;
      std::lock_guard lock(pool.mutex_);
      // Under the lock: the destructor cannot see calls_ == 0 and free the pool before the
      // notify returns.
      if (--pool.calls_ == 0) pool.signals_.idle.notify_all();
    }
    thread_pool& pool;
    const thread_pool* outer;
  };

  static void work_on(job& j) {
    for (std::int64_t i; (i = j.next.fetch_add(1, std::memory_order_relaxed)) < j.n;) {
      try {
        j.task(i);
      } catch (...) {
        std::lock_guard lock(j.failure_mutex);
        if (!j.failure) j.failure = std::current_exception();
        j.next.store(j.n, std::memory_order_relaxed);  // stop handing out work
      }
    }
  }

  void worker_loop() {
    working_on_ = this;  // a worker only ever works for this pool
    std::uint64_t seen = 0;
    for (;;) {
      spin_until_posted(seen);
      job* j;
      {
        std::unique_lock lock(mutex_);
        signals_.wake.wait(lock, [&] {
          return stop_ || (job_ && generation_.load(std::memory_order_relaxed) != seen);
        });
        if (stop_) return;
        seen = generation_.load(std::memory_order_relaxed);
        j = job_;
        j->active.fetch_add(1, std::memory_order_relaxed);
      }
      work_on(*j);
      {
        std::lock_guard lock(mutex_);
        j->active.fetch_sub(1, std::memory_order_release);
      }
      signals_.done.notify_all();
    }
  }

  // Polls for a new job (or a stop) for up to spin_; the caller then waits under the lock as
  // without spinning, so this only saves the sleep.
  void spin_until_posted(std::uint64_t seen) const {
    if (spin_.count() == 0) return;
    const auto until = detail::spin_deadline(std::chrono::steady_clock::now(), spin_);
    while (generation_.load(std::memory_order_acquire) == seen &&
           std::chrono::steady_clock::now() < until)
      cpu_relax();
  }
  // The caller, its share of the job done, polls for the workers to finish theirs for up to
  // spin_ before it sleeps: a short call's last item then does not wait on a wake-up as well.
  void spin_until_done(const job& j) const {
    if (spin_.count() == 0) return;
    const auto until = detail::spin_deadline(std::chrono::steady_clock::now(), spin_);
    while (j.active.load(std::memory_order_acquire) != 0 &&
           std::chrono::steady_clock::now() < until)
      cpu_relax();
  }
  static void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  void stop_workers() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
      generation_.fetch_add(1, std::memory_order_release);  // ends every spin
    }
    signals_.wake.notify_all();
    for (auto& t : workers_) t.join();
  }

  // This object was made in a parent process and copied into a child by fork().
  bool inherited_by_fork() const noexcept {
    return detail::fork_epoch() != fork_epoch_;
  }

  // In a forked child the workers' threads do not exist: joining one would wait forever, and
  // destroying a joinable std::thread terminates. Their handles are overwritten with empty ones
  // (ending the old objects' lifetime without their destructors), so the vector frees its memory.
  void abandon_workers() noexcept {
    for (auto& t : workers_) ::new (static_cast<void*>(&t)) std::thread();
  }

  static inline thread_local const thread_pool* working_on_ = nullptr;

  int size_;
  std::chrono::microseconds spin_;
  std::uint64_t fork_epoch_;  // detail::fork_epoch() when the pool was made
  detail::vector<std::thread> workers_;
  std::mutex call_mutex_;
  std::mutex mutex_;
  // Destroyed by hand, and never in a forked child: there the parent's workers, absent, may
  // still count as waiters, and pthread_cond_destroy would wait for them forever.
  struct signals {
    std::condition_variable wake, done, idle;
  };
  union {
    signals signals_;
  };
  job* job_ = nullptr;
  // Bumped under mutex_ for each job and for the stop; atomic so that spinning workers can poll
  // it without the lock.
  std::atomic<std::uint64_t> generation_{0};
  int calls_ = 0;  // parallel_for calls in progress, guarded by mutex_
  bool stop_ = false;
};

static_assert(executor<thread_pool>);

MQALOGITS_NAMESPACE_END
