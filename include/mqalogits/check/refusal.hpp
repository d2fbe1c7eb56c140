// The non-throwing form of a call's contract, for callers that ask before they call (CUTLASS's
// can_implement): refusal_of(fn) runs fn and returns the mqalogits::error it throws as a value,
// empty when it throws none. fn may be one contract check (check::logits_call, ...) or a whole
// call, which then also runs when it passes.
//
//   if (const auto r = ml::check::refusal_of([&] { ml::check::max_context_len("my_op", n); }))
//     log(r.what());  // "my_op: max_context_len = 0 must be > 0"
#pragma once

#include <cstddef>

#include "../config.hpp"
#include "../error.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace check {

class refusal {
 public:
  refusal() = default;
  // Keeps the first 1023 characters of `what` (the library's messages are shorter).
  explicit refusal(const char* what) {
    std::size_t n = 0;
    for (; what[n] && n + 1 < sizeof text_; ++n) text_[n] = what[n];
    text_[n] = '\0';
  }
  // True when the call was refused.
  explicit operator bool() const { return text_[0] != '\0'; }
  // "<where>: <what is wrong>", or "" when the call passed.
  const char* what() const { return text_; }

 private:
  char text_[1024] = {};
};

template <class Fn>
refusal refusal_of(Fn&& fn) {
  try {
    fn();
  } catch (const error& e) {
    return refusal(e.what());
  }
  return {};
}

}  // namespace check
MQALOGITS_NAMESPACE_END
