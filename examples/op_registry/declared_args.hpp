// An op's arguments as its declaration names them: each surface turns a declaration into a
// function whose parameters are the declared arguments (their C++ types chosen per surface from
// the declared schema types) and hands the op's body one `declared_args` object, which the body
// reads by name, `arg<"topk">(args)`. A name the declaration does not give that surface is a
// compile-time error, so a new argument is declared once and read where it is used.
#pragma once

#include <algorithm>
#include <cstddef>
#include <tuple>

#include "declaration.hpp"

namespace mqalogits_bindings {

// A string literal as a template argument (an argument's name).
template <std::size_t N>
struct name_literal {
  char text[N];
  constexpr name_literal(const char (&s)[N]) { std::copy_n(s, N, text); }  // NOLINT: implicit
};

constexpr bool same_text(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

// The kinds of declared types, aliasing marks ("(a!)") aside.
enum class arg_kind {
  tensor,
  optional_tensor,
  tensor_list,
  optional_tensor_list,
  integer,
  optional_integer,
  boolean,
  text,
  optional_text,
  real,
  scalar_type,
  custom_class
};

constexpr bool starts_with(const char* s, const char* prefix) {
  while (*prefix != '\0' && *s == *prefix) ++s, ++prefix;
  return *prefix == '\0';
}
constexpr bool ends_with(const char* s, const char* suffix) {
  std::size_t n = 0, m = 0;
  while (s[n] != '\0') ++n;
  while (suffix[m] != '\0') ++m;
  return n >= m && same_text(s + n - m, suffix);
}

constexpr arg_kind kind_of(const char* type) {
  if (starts_with(type, "Tensor")) {
    if (ends_with(type, "?[]")) return arg_kind::optional_tensor_list;
    if (ends_with(type, "[]")) return arg_kind::tensor_list;
    return ends_with(type, "?") ? arg_kind::optional_tensor : arg_kind::tensor;
  }
  if (same_text(type, "int")) return arg_kind::integer;
  if (same_text(type, "int?")) return arg_kind::optional_integer;
  if (same_text(type, "bool")) return arg_kind::boolean;
  if (same_text(type, "str")) return arg_kind::text;
  if (same_text(type, "str?")) return arg_kind::optional_text;
  if (same_text(type, "float")) return arg_kind::real;
  if (same_text(type, "ScalarType")) return arg_kind::scalar_type;
  if (starts_with(type, "class:")) return arg_kind::custom_class;
  throw "a declared type this registry does not know";  // a compile-time error where used
}

// The position of `name` among the arguments surface S takes (their count when it takes none).
template <const op_declaration& D, surface S>
constexpr std::size_t index_of(const char* name) {
  for (std::size_t i = 0; i < D.count(S); ++i)
    if (same_text(D.at(S, i).name, name)) return i;
  return D.count(S);
}

// One call's arguments (references to the surface function's parameters, for the call's length).
template <const op_declaration& D, surface S, class... A>
class declared_args {
 public:
  explicit declared_args(const A&... a) : values_(a...) {}

  template <name_literal Name>
  static constexpr bool has() {
    return index_of<D, S>(Name.text) < sizeof...(A);
  }

  template <name_literal Name>
  const auto& get() const {
    constexpr std::size_t i = index_of<D, S>(Name.text);
    static_assert(i < sizeof...(A), "the op's declaration gives this surface no such argument");
    return std::get<i>(values_);
  }

 private:
  std::tuple<const A&...> values_;
};

// args' argument `Name`.
template <name_literal Name, class Args>
const auto& arg(const Args& args) {
  return args.template get<Name>();
}

}  // namespace mqalogits_bindings
