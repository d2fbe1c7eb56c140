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
#include "matrix_view.hpp"

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

namespace detail {
template <class M>
struct index_matrix_value {};
template <class T>
requires index_value<std::remove_const_t<T>>
struct index_matrix_value<matrix_view<T>> {
  using type = std::remove_const_t<T>;
};
}  // namespace detail

// A matrix_view of int32 or int64, const or not (block tables, context lengths, selections).
template <class M>
concept index_matrix = requires {
  typename detail::index_matrix_value<std::remove_cvref_t<M>>::type;
};

template <index_matrix M>
using index_matrix_value_of = typename detail::index_matrix_value<std::remove_cvref_t<M>>::type;

MQALOGITS_NAMESPACE_END
