// A value that a move leaves in its default state. Metadata objects keep their fields in one
// reset_on_move<fields> member, so their defaulted moves leave the source empty, exactly like a
// default-constructed object that every kernel rejects with a named error, instead of holding a
// stale row count over moved-out vectors.
#pragma once

#include <utility>

#include "../config.hpp"

MQALOGITS_NAMESPACE_BEGIN

template <class T>
class reset_on_move {
 public:
  reset_on_move() = default;
  reset_on_move(const reset_on_move&) = default;
  reset_on_move& operator=(const reset_on_move&) = default;
  reset_on_move(reset_on_move&& o) noexcept : value_(std::exchange(o.value_, T{})) {}
  reset_on_move& operator=(reset_on_move&& o) noexcept {
    if (this != &o) value_ = std::exchange(o.value_, T{});
    return *this;
  }

  T* operator->() { return &value_; }
  const T* operator->() const { return &value_; }
  T& operator*() { return value_; }
  const T& operator*() const { return value_; }

 private:
  T value_{};
};

MQALOGITS_NAMESPACE_END
