// Backend tags (zero-size, compile-time) and the dispatch point every kernel goes through.
#pragma once

#include <type_traits>

#include "../config.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace backend {

// The host CPU: SIMD micro-kernels chosen from the target's instruction set, and threads
// through the caller's executor.
struct host {};

// NeuronCore generations: trn1 / inf2 (NeuronCore-v2), trn2 (v3), trn3 (v4).
struct trn1 {};
struct trn2 {};
struct trn3 {};
template <class Gen>
inline constexpr bool is_neuron_generation_v =
    std::is_same_v<Gen, trn1> || std::is_same_v<Gen, trn2> || std::is_same_v<Gen, trn3>;

// Generation Gen with some of its model constants replaced: Traits derives from
// neuron_backend::traits<Gen> and redefines the constants to try. For what-if studies of the
// constants no document states (the model marks them "derived"): backend::neuron<what_if<trn3,
// T>> costs the same schedule under T's values.
template <class Gen, class Traits>
struct what_if {};
template <class Gen, class Traits>
inline constexpr bool is_neuron_generation_v<what_if<Gen, Traits>> = is_neuron_generation_v<Gen>;

// A tile-faithful host model of the NeuronCore schedule for generation Gen (backend/neuron/):
// it runs on the host and reports what the schedule costs; it is not device execution.
template <class Gen>
struct neuron {
  static_assert(is_neuron_generation_v<Gen>, "mqalogits: backend::neuron<trn1 | trn2 | trn3>");
  using generation = Gen;
};

}  // namespace backend

// Each backend specialises this with a static `run(q, plan, weights, out, options)`. The primary
// template fails loudly, so an unsupported backend is a compile error, not a silent fallback.
template <class Backend>
struct backend_kernels {
  static_assert(
      dependent_false<Backend>,
      "mqalogits: no kernels for this backend (backend::neuron needs <mqalogits/neuron.hpp>)");
};

template <class B>
inline constexpr bool is_backend_v = false;
template <>
inline constexpr bool is_backend_v<backend::host> = true;
template <class Gen>
inline constexpr bool is_backend_v<backend::neuron<Gen>> = true;
template <class B>
concept backend_tag = is_backend_v<B>;

MQALOGITS_NAMESPACE_END
