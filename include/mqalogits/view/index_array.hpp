// Index arrays (ks / ke, context lengths, block tables, sparse block indices, request indices):
// int32 as DeepGEMM takes them, or int64 as many engines keep them. A call reads the caller's
// array in place, whichever the type; one call uses one index type.
#pragma once

#include <concepts>
#include <cstdint>
#include <ranges>
#include <span>
#include <type_traits>

#include "../config.hpp"

MQALOGITS_NAMESPACE_BEGIN

template <class T>
concept index_value = std::same_as<T, std::int32_t> || std::same_as<T, std::int64_t>;

// A contiguous array of int32 or int64 (std::vector, std::span, std::array, ...).
template <class R>
concept index_array =
    std::ranges::contiguous_range<const R&> && std::ranges::sized_range<const R&> &&
    index_value<std::remove_cv_t<std::ranges::range_value_t<const R&>>>;

template <index_array R>
using index_value_of = std::remove_cv_t<std::ranges::range_value_t<const R&>>;

template <index_array R>
std::span<const index_value_of<R>> index_span(const R& r) {
  return {std::ranges::data(r), std::ranges::size(r)};
}

MQALOGITS_NAMESPACE_END
