// A declaration as the Python module's function: pybind11's m.def with the declared names,
// defaults, keyword-only marker and docstring, for a function of the declared arguments
// (def_op: pybind11 checks at compile time that it takes as many as the declaration gives
// Python) or for a body that reads them by name (def_op_reading: the function is written from
// the declaration).
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "declared_args.hpp"

namespace mqalogits_bindings {

namespace py = pybind11;

// A default's schema text as the Python value it means.
inline py::object python_value(const std::string& text) {
  if (text == "None") return py::none();
  if (text == "True" || text == "False") return py::bool_(text == "True");
  if (text.size() >= 2 && text.front() == '"') return py::str(text.substr(1, text.size() - 2));
  if (text.find('.') != std::string::npos) return py::float_(std::stod(text));
  return py::int_(std::stoll(text));
}

// The I-th Python argument of D: py::arg when required, else py::arg_v with its default.
template <const op_declaration& D, std::size_t I>
auto python_arg() {
  constexpr const param& a = D.at(python, I);
  if constexpr (a.required())
    return py::arg(a.name);
  else
    return py::arg_v(a.name, python_value(a.default_on(python)));
}

template <const op_declaration& D, class Fn, std::size_t... P, std::size_t... K>
void def_with_args(py::module_& m, Fn&& fn, const char* doc, std::index_sequence<P...>,
                   std::index_sequence<K...>) {
  constexpr std::size_t positional = sizeof...(P);
  if constexpr (sizeof...(K) == 0)
    m.def(D.name, std::forward<Fn>(fn), python_arg<D, P>()..., doc);
  else
    m.def(D.name, std::forward<Fn>(fn), python_arg<D, P>()..., py::kw_only(),
          python_arg<D, positional + K>()..., doc);
}

// m.def of the op D declares, bound to fn.
template <const op_declaration& D, class Fn>
void def_op(py::module_& m, Fn&& fn) {
  static_assert((D.on & python) != 0, "the op is not declared for Python");
  static const std::string doc = D.docstring();
  def_with_args<D>(m, std::forward<Fn>(fn), doc.c_str(),
                   std::make_index_sequence<D.positional_count(python)>{},
                   std::make_index_sequence<D.keyword_count(python)>{});
}

// The C++ type a Python argument of each declared kind arrives as: a Python object where the
// body checks what it may be (arrays, tuples, None, dtypes), else the plain value.
template <arg_kind K>
constexpr auto python_param() {
  if constexpr (K == arg_kind::integer)
    return std::type_identity<std::int64_t>{};
  else if constexpr (K == arg_kind::boolean)
    return std::type_identity<bool>{};
  else if constexpr (K == arg_kind::text)
    return std::type_identity<std::string>{};
  else if constexpr (K == arg_kind::real)
    return std::type_identity<double>{};
  else
    return std::type_identity<py::object>{};
}
// The thread count, the module's own argument, is converted by pybind11 (its messages name the
// type the argument takes).
template <const op_declaration& D, std::size_t I>
using python_type =
    std::conditional_t<same_text(D.at(python, I).name, "num_threads"), std::optional<int>,
                       typename decltype(python_param<kind_of(D.at(python, I).type)>())::type>;

template <const op_declaration& D, class Body, std::size_t... I>
auto python_function(std::index_sequence<I...>) {
  return [](const python_type<D, I>&... a) {
    return Body{}(declared_args<D, python, python_type<D, I>...>(a...));
  };
}

// m.def of the op D declares, its body reading the call's arguments by name (arg<"name">(args)):
// the function's parameters are written from the declaration.
template <const op_declaration& D, class Body>
void def_op_reading(py::module_& m, Body) {
  def_op<D>(m, python_function<D, Body>(std::make_index_sequence<D.count(python)>{}));
}

}  // namespace mqalogits_bindings
