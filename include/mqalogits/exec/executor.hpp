// The executor seam: kernels hand independent tasks to a parallel_for-shaped executor. Engines
// plug in their own pool; a serial executor and a small pool ship with the library.
#pragma once

#include <atomic>
#include <concepts>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "../config.hpp"
#include "../error.hpp"

MQALOGITS_NAMESPACE_BEGIN

// A non-owning reference to a callable `void(std::int64_t)`; cheap to copy, never allocates.
class task_ref {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, task_ref> &&
             std::is_invocable_v<F&, std::int64_t>)
  task_ref(F& f) : object_(static_cast<const void*>(&f)), call_(&invoke<F>) {}  // NOLINT
  void operator()(std::int64_t i) const { call_(object_, i); }

 private:
  template <class F>
  static void invoke(const void* object, std::int64_t i) {
    (*static_cast<F*>(const_cast<void*>(object)))(i);
  }
  const void* object_;
  void (*call_)(const void*, std::int64_t);
};

// What an executor must offer, exactly:
//
// - parallel_for(n, task) calls task(i) exactly once for every i in [0, n) and for no other i,
//   in any order, on any threads, any number of them at once (the tasks are independent);
//   n <= 0 calls nothing.
// - It returns only after every task(i) it started has returned: the task and everything it
//   refers to live on the caller's stack and are gone once parallel_for returns.
// - If a task throws, it may skip the tasks not yet started, must still wait for the running
//   ones, and then rethrows one of the exceptions to its caller (or terminates); it never
//   swallows it.
// - parallel_for may be called from several threads at once, and a task may itself call a
//   kernel on the same executor (thread_pool runs such nested calls inline).
// - concurrency() says how many tasks it runs at once (>= 1); the kernels only use it as a hint.
//
// The kernels count the tasks that ran (two relaxed atomic adds each) and check every index, so
// an executor that skips an index, repeats one, or returns before a task has finished is
// reported as an mqalogits::error after the call (a task still running after the return is
// undefined behaviour all the same: its stack is gone), and one that passes an index outside [0, n) gets the error
// without the task running (no write outside the output). The output's contents are then
// unspecified, as after a task that throws: each element holds its old value, -inf or its
// final value.
template <class E>
concept executor = requires(E& e, std::int64_t n, task_ref task) {
  e.parallel_for(n, task);
  { e.concurrency() } -> std::convertible_to<int>;
};

// Runs every task on the calling thread, in order.
struct serial_executor {
  void parallel_for(std::int64_t n, task_ref task) const {
    for (std::int64_t i = 0; i < n; ++i) task(i);
  }
  int concurrency() const { return 1; }
};

// Type-erased reference to any executor, so kernel entry points need no executor template
// parameter. Defaults to serial execution.
class executor_ref {
 public:
  executor_ref() = default;
  template <class E>
    requires(executor<E> && !std::is_same_v<std::remove_cvref_t<E>, executor_ref>)
  executor_ref(E& e)  // NOLINT: implicit on purpose, so `{.executor = pool}` reads naturally
      : object_(&e),
        run_([](void* o, std::int64_t n, task_ref t) { static_cast<E*>(o)->parallel_for(n, t); }),
        concurrency_([](void* o) { return static_cast<int>(static_cast<E*>(o)->concurrency()); }) {}

  void parallel_for(std::int64_t n, task_ref task) const {
    if (!object_) {
      for (std::int64_t i = 0; i < n; ++i) task(i);
      return;
    }
    run_(object_, n, task);
  }
  int concurrency() const { return object_ ? concurrency_(object_) : 1; }

 private:
  void* object_ = nullptr;
  void (*run_)(void*, std::int64_t, task_ref) = nullptr;
  int (*concurrency_)(void*) = nullptr;
};

static_assert(executor<serial_executor> && executor<executor_ref>);

namespace detail {

// A 64-bit mix of an index (splitmix64's finaliser): the sum of mix(i) over the indices that ran
// equals the sum over [0, n) only when they are [0, n), bar a 2^-64 coincidence, so a skipped
// index made up for by a repeated one is caught as well as a plain miscount.
constexpr std::uint64_t task_mix(std::int64_t i) {
  std::uint64_t z = static_cast<std::uint64_t>(i) + 0x9E3779B97F4A7C15u;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
  return z ^ (z >> 31);
}

// executor.parallel_for(n, task) with the executor contract checked: an index outside [0, n)
// never reaches the task, and after the executor returns, every index must have run exactly
// once. A violation throws mqalogits::error naming the executor's fault. Allocates nothing.
template <class Task>
void checked_parallel_for(const executor_ref& executor, std::int64_t n, Task& task) {
  if (n <= 0) return;
  std::atomic<std::int64_t> ran{0}, outside{-1};
  std::atomic<std::uint64_t> mixed{0};
  std::atomic<bool> any_outside{false};
  auto checked = [&](std::int64_t i) {
    if (i < 0 || i >= n) [[unlikely]] {
      outside.store(i, std::memory_order_relaxed);
      any_outside.store(true, std::memory_order_relaxed);
      return;
    }
    task(i);
    mixed.fetch_add(task_mix(i), std::memory_order_relaxed);
    ran.fetch_add(1, std::memory_order_relaxed);
  };
  executor.parallel_for(n, checked);
  // The executor returned: by its contract every task has finished, so relaxed loads after its
  // own synchronisation (join, condition variable) see every task's adds. An executor that
  // returns early makes these loads race with its tasks; what they read is then only a hint.
  constexpr const char* where = "executor";
  require(!any_outside.load(std::memory_order_relaxed), where, [&](auto& m) {
    m << "parallel_for(" << n << ") called task(" << outside.load(std::memory_order_relaxed)
      << "), outside [0, " << n << "); the task was not run and the output is unspecified";
  });
  std::uint64_t expected = 0;
  for (std::int64_t i = 0; i < n; ++i) expected += task_mix(i);
  const std::int64_t count = ran.load(std::memory_order_relaxed);
  require(count == n && mixed.load(std::memory_order_relaxed) == expected, where, [&](auto& m) {
    m << "parallel_for(" << n << ") returned after " << count << " completed tasks"
      << (count == n ? ", not each index once" : "")
      << "; every index must run exactly once before it returns (the output is unspecified)";
  });
}

}  // namespace detail

MQALOGITS_NAMESPACE_END
