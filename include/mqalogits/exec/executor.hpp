// The executor seam: kernels hand independent tasks to a parallel_for-shaped executor. Engines
// plug in their own pool; a serial executor and a small pool ship with the library.
#pragma once

#include <concepts>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "../config.hpp"

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

// What an executor must offer: run task(i) for every i in [0, n), in any order and on any
// threads, returning when all are done; and say how many tasks it runs at once.
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

MQALOGITS_NAMESPACE_END
