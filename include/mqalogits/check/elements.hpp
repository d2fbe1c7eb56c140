// The element types the entry points take for weights and logits; any other is a compile-time
// error at the call.
#pragma once

#include <type_traits>

#include "../config.hpp"
#include "../format/bf16.hpp"
#include "../format/fp16.hpp"

MQALOGITS_NAMESPACE_BEGIN

// Weights: fp32 (upstream), bf16 (DeepGEMM-Ascend) or fp16 (upstream SM100); math is fp32.
template <class T>
concept weight_element =
    std::is_same_v<T, float> || std::is_same_v<T, bf16> || std::is_same_v<T, fp16>;
template <class T>
concept logit_element = std::is_same_v<T, float> || std::is_same_v<T, bf16>;
// A weights view's element type as the entry points deduce it (const or not).
template <class T>
concept weight_input = weight_element<std::remove_const_t<T>>;

MQALOGITS_NAMESPACE_END
