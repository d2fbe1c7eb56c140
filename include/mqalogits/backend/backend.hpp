// Backend tags (zero-size, compile-time) and the dispatch point every kernel goes through.
#pragma once

#include "../config.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace backend {

// The host CPU: SIMD micro-kernels chosen from the target's instruction set, and threads
// through the caller's executor.
struct host {};

}  // namespace backend

// Each backend specialises this with a static `run(q, plan, weights, out, options)`. The primary
// template fails loudly, so an unsupported backend is a compile error, not a silent fallback.
template <class Backend>
struct backend_kernels {
  static_assert(dependent_false<Backend>,
                "mqalogits: no kernels for this backend (is its header included?)");
};

template <class B>
inline constexpr bool is_backend_v = false;
template <>
inline constexpr bool is_backend_v<backend::host> = true;

MQALOGITS_NAMESPACE_END
