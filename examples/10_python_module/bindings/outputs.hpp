// Part of the Python module's unit bindings.cpp (its parts in order, each including the one
// before): new logits arrays, padded as upstream pads them.
#pragma once

#include "formats.hpp"

namespace mqalogits_python {
namespace {

logits_type logits_dtype_of(const char* where, const py::handle& obj) {
  const std::string s = py::str(obj).cast<std::string>();
  if (s == "torch.float32" || s == "torch.float" || s == "float32" ||
      s == "<class 'numpy.float32'>")
    return logits_type::f32;
  if (s == "torch.bfloat16" || s == "bfloat16") return logits_type::bf16;
  fail(where, "logits_dtype = " + s + " is not supported (float32 or bfloat16)");
}

// x rounded up to a multiple of a; an overflow is a ValueError naming the argument.
i64 align_up(const char* where, const char* what, i64 x, i64 a) {
  return ml::checked_round_up(where, what, x, a);
}

// A new [rows, cols] array of T (float, or uint16: bf16 bits) whose rows start `stride` elements
// apart, the first on a 1024-byte boundary (upstream allocates [rows, stride] and returns the
// [:, :cols] slice).
template <class T>
py::array new_logits(const char* where, const char* width_name, i64 rows, i64 cols, i64 stride) {
  constexpr i64 align_elems = 1024 / static_cast<i64>(sizeof(T));
  const i64 elements = ml::checked_add(
      where, width_name, ml::checked_mul(where, width_name, rows, stride), align_elems);
  py::array_t<T> storage(std::max<i64>(elements, 1));
  T* base = storage.mutable_data();
  const auto misalign = reinterpret_cast<std::uintptr_t>(base) % 1024;
  T* first = base + (misalign ? (1024 - misalign) / sizeof(T) : 0);
  return py::array(py::dtype::of<T>(), {rows, cols},
                   {stride * static_cast<i64>(sizeof(T)), static_cast<i64>(sizeof(T))}, first,
                   storage);
}

}  // namespace
}  // namespace mqalogits_python
