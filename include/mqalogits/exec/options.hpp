// Per-call options shared by every kernel.
#pragma once

#include "../config.hpp"
#include "executor.hpp"

MQALOGITS_NAMESPACE_BEGIN

struct options {
  // Where the work runs; serial on the calling thread by default.
  executor_ref executor{};
  // false (upstream's engines): do not spend time writing -inf; invalid columns are then
  // unspecified and the caller's top-k must read only the valid range.
  bool clean_logits = true;
};

MQALOGITS_NAMESPACE_END
