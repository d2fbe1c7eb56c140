// Standard-library templates under the library's ABI namespace.
//
// Every library entity sits in an inline namespace naming the instruction set the unit is
// compiled for (config.hpp), so two units built with different flags never share a library
// symbol. A standard template the headers instantiate on plain types is another matter:
// std::vector<float>::_M_default_append or std::sort(std::uint64_t*, ..., std::greater<>) is
// emitted (a weak symbol) under one name by a unit built with -march=native and by one built
// without, and the linker keeps one copy for both: the baseline unit may run AVX-512 code.
// So every standard template the library instantiates carries a type of the ABI namespace in its
// arguments, and its mangled name is the unit's own:
//   detail::vector<T>     std::vector<T, detail::allocator<T>>
//   detail::string        std::basic_string<char, std::char_traits<char>, detail::allocator<char>>
//   detail::less, greater comparators for std::sort, std::nth_element, ... (lambdas defined in
//                         the library are its own types too)
//   detail::array_delete  the deleter of std::unique_ptr<T[], detail::array_delete>
// Error messages are built in a char buffer (error.hpp), not with std::string / std::to_string.
// tests/abi (abi.isa_mix_same_code) checks that units built for different instruction sets
// share no name with different code.
#pragma once

#include <cstddef>
#include <new>
#include <string>
#include <vector>

#include "config.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace detail {

// std::allocator's behaviour (global operator new / delete, over-aligned types aligned), as a
// type of the ABI namespace. Stateless: every two compare equal.
template <class T>
struct allocator {
  using value_type = T;

  constexpr allocator() noexcept = default;
  template <class U>
  constexpr allocator(const allocator<U>&) noexcept {}

  [[nodiscard]] T* allocate(std::size_t n) {
    // (Containers never ask for more than max_size(); a wrapped size would throw bad_alloc.)
    const std::size_t bytes =
        n > static_cast<std::size_t>(-1) / sizeof(T) ? static_cast<std::size_t>(-1) : n * sizeof(T);
    if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__)
      return static_cast<T*>(::operator new (bytes, std::align_val_t{alignof(T)}));
    else
      return static_cast<T*>(::operator new(bytes));
  }
  // (Unsized: Clang declares the sized operator delete only with -fsized-deallocation.)
  void deallocate(T* p, std::size_t) noexcept {
    if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__)
      ::operator delete (p, std::align_val_t{alignof(T)});
    else
      ::operator delete(p);
  }
};
template <class T, class U>
constexpr bool operator==(const allocator<T>&, const allocator<U>&) noexcept {
  return true;
}

template <class T>
using vector = std::vector<T, allocator<T>>;
using string = std::basic_string<char, std::char_traits<char>, allocator<char>>;

// a < b and a > b, for the standard algorithms on plain types (std::less<> and std::greater<>
// would give those instantiations shared names).
struct less {
  template <class A, class B>
  constexpr bool operator()(const A& a, const B& b) const {
    return a < b;
  }
};
struct greater {
  template <class A, class B>
  constexpr bool operator()(const A& a, const B& b) const {
    return a > b;
  }
};

// delete[], for std::unique_ptr<T[], array_delete> (std::default_delete<T[]> is a shared name).
struct array_delete {
  template <class T>
  void operator()(T* p) const noexcept {
    delete[] p;
  }
};

}  // namespace detail
MQALOGITS_NAMESPACE_END
