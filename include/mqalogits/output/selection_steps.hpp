// The vector steps a top-k selection streams scores through: admit_keys (the keys of the scores
// that rank above a threshold) and compact_at_least (the keys at or above a key, moved to the
// front), both over topk_key.hpp's keys and equal to its one-key-at-a-time versions.
//
// The host backend defines selection_steps for the instruction set the unit runs
// (backend/host/dispatch.hpp), whichever backend computed the scores: the selections are class
// templates, so they meet that definition where a kernel call instantiates them, and this layer
// names no backend.
#pragma once

#include <concepts>
#include <cstdint>

#include "../config.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace detail {

struct selection_steps;

template <class S>
concept selection_step_set = requires(const float* scores, const unsigned char* valid,
                                      std::int64_t n, std::uint64_t key, float bar,
                                      std::uint64_t* keys) {
  { S::admit_keys(scores, valid, n, n, key, bar, keys) } -> std::same_as<std::int64_t>;
  { S::compact_at_least(keys, n, key) } -> std::same_as<std::int64_t>;
};

}  // namespace detail
MQALOGITS_NAMESPACE_END
