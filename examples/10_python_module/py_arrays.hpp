// How the module's Python units (bindings.cpp, ops_bindings.cpp) take numpy arrays: errors as
// ValueError naming the call and the argument, arrays viewed in place (never converted, which
// would copy), dtype and shape named in messages. The package's __init__.py has already turned
// CPU torch tensors into numpy views of the same bytes.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

namespace mqalogits_python {

namespace py = pybind11;

[[noreturn]] inline void fail(const char* where, const std::string& what) {
  throw py::value_error(std::string(where) + ": " + what);
}

inline std::string dtype_name(const py::array& a) {
  return py::str(a.dtype()).cast<std::string>();
}

inline std::string shape_of(const py::array& a) {
  std::string s = "[";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + "]";
}

// The argument as a numpy array, without a conversion that would copy it. Its elements must be
// in the machine's byte order: the views read them in place.
inline py::array as_array(const char* where, const char* name, const py::handle& obj) {
  if (!py::isinstance<py::array>(obj))
    fail(where, std::string(name) + " must be a numpy array or a CPU torch tensor, not " +
                    py::str(py::type::of(obj)).cast<std::string>());
  auto a = py::reinterpret_borrow<py::array>(obj);
  if (!a.dtype().attr("isnative").cast<bool>())
    fail(where, std::string(name) + " has dtype " + dtype_name(a) +
                    " in the other byte order (big-endian); convert it with "
                    ".astype(a.dtype.newbyteorder('='))");
  return a;
}

template <class T>
bool has_dtype(const py::array& a) {
  return a.dtype().is(py::dtype::of<T>());
}

}  // namespace mqalogits_python
