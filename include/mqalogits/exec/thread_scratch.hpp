// Scratch that a kernel call borrows from the calling thread and hands back when it returns,
// so the thread's later calls reuse it and a warm call allocates nothing. One item per nesting
// depth: a kernel called from inside another call's task (on the same thread) gets its own.
// Items are taken and handed back in LIFO order, which scoped use guarantees.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "../config.hpp"
#include "../std_abi.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace detail {

// A borrowed T, taken on the first get() (so an object that never needs it takes nothing).
template <class T>
class thread_scratch {
 public:
  thread_scratch() = default;
  thread_scratch(const thread_scratch&) = delete;
  thread_scratch& operator=(const thread_scratch&) = delete;
  thread_scratch(thread_scratch&& o) noexcept : item_(std::exchange(o.item_, nullptr)) {}
  thread_scratch& operator=(thread_scratch&&) = delete;
  ~thread_scratch() {
    if (item_) --stack().depth;
  }

  T& get() {
    if (!item_) {
      in_use& s = stack();
      if (s.depth == s.items.size()) s.items.push_back(std::make_unique<T>());
      item_ = s.items[s.depth++].get();
    }
    return *item_;
  }

 private:
  struct in_use {
    detail::vector<std::unique_ptr<T>> items;
    std::size_t depth = 0;
  };
  static in_use& stack() {
    thread_local in_use s;
    return s;
  }
  T* item_ = nullptr;
};

}  // namespace detail
MQALOGITS_NAMESPACE_END
