// A declaration as the Python module's function: pybind11's m.def with the declared names,
// defaults, keyword-only marker and docstring. pybind11 checks at compile time that the function
// takes as many arguments as the declaration gives Python.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <utility>

#include "declaration.hpp"

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
void def_declared(py::module_& m, Fn&& fn, const char* doc, std::index_sequence<P...>,
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
  def_declared<D>(m, std::forward<Fn>(fn), doc.c_str(),
                  std::make_index_sequence<D.positional_count(python)>{},
                  std::make_index_sequence<D.keyword_count(python)>{});
}

}  // namespace mqalogits_bindings
