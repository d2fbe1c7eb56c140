// Part of the Python module's unit bindings.cpp (its parts in order, each including the one
// before; this first one the headers every part uses): the arrays' checks the kernels' arguments go
// through: dtypes, ranks, contiguity, index arrays (int64 narrowed to int32 where it fits) and the
// matrix views over them.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "../bindings_common.hpp"
#include "../py_arrays.hpp"

namespace mqalogits_python {
namespace {

template <class T>
void require_dtype(const char* where, const char* name, const py::array& a, const char* want) {
  if (!has_dtype<T>(a))
    fail(where, std::string(name) + " has dtype " + dtype_name(a) + ", expected " + want);
}

void require_ndim(const char* where, const char* name, const py::array& a, int ndim,
                  const char* shape) {
  if (a.ndim() != ndim)
    fail(where, std::string(name) + " has shape " + shape_of(a) + ", expected " + shape);
}

// Trailing dimensions dense in memory (upstream's is_contiguous), leading one any stride.
bool inner_contiguous(const py::array& a) {
  py::ssize_t expect = a.itemsize();
  for (py::ssize_t i = a.ndim() - 1; i >= 1; --i) {
    if (a.shape(i) != 1 && a.strides(i) != expect) return false;
    expect *= a.shape(i);
  }
  return true;
}
bool contiguous(const py::array& a) {
  return inner_contiguous(a) &&
         (a.ndim() == 0 || a.shape(0) <= 1 || a.strides(0) == a.itemsize() * [&] {
           py::ssize_t n = 1;
           for (py::ssize_t i = 1; i < a.ndim(); ++i) n *= a.shape(i);
           return n;
         }());
}
void require_contiguous(const char* where, const char* name, const py::array& a) {
  if (!contiguous(a))
    fail(where, std::string(name) + " must be C-contiguous (views are built without copies)");
}

// Inputs the library never sees: the int64 index arrays (it reads their int32 copies) and the
// schedule_meta array (read into a schedule object first). A kernel call records them (a
// kernel_call_scope is open while its arguments are converted), and run_kernel checks its
// outputs against them, as the library checks every array it sees itself.
struct unseen_input {
  const char* name;
  std::uintptr_t begin, end;
};
thread_local std::vector<unseen_input> unseen_inputs;
thread_local bool in_kernel_call = false;
struct kernel_call_scope {
  kernel_call_scope() {
    unseen_inputs.clear();
    in_kernel_call = true;
  }
  ~kernel_call_scope() {
    unseen_inputs.clear();
    in_kernel_call = false;
  }
  kernel_call_scope(const kernel_call_scope&) = delete;
  kernel_call_scope& operator=(const kernel_call_scope&) = delete;
};

// Index arrays (lengths, block tables, ks / ke, indices) are int32 or int64 (torch's default
// integer type, and what vLLM's and sglang's CPU kernels take). int32 is read in place; int64 is
// narrowed (each value checked to fit) into one of a few per-thread buffers reused across calls,
// so a warm call allocates nothing: the kernels are compiled for int32 indices only, which keeps
// the module's build time at half of what a second index type would cost. The buffers are
// O(rows) integers, read once; the logits the kernels compute are O(rows x keys x heads).
// int64 [rows, cols] with rows `stride` elements apart -> a dense int32 [rows, cols] buffer.
const i32* narrowed(const char* where, const char* name, const std::int64_t* v, i64 rows, i64 cols,
                    i64 stride) {
  constexpr std::size_t ring = 16;  // more index arrays than any call takes
  thread_local std::vector<i32> buffers[ring];
  thread_local std::size_t next = 0;
  std::vector<i32>& b = buffers[next++ % ring];
  b.resize(static_cast<std::size_t>(std::max<i64>(rows * cols, 1)));
  if (in_kernel_call && rows > 0 && cols > 0) {
    const auto begin = reinterpret_cast<std::uintptr_t>(v);
    unseen_inputs.push_back(
        {name, begin, begin + static_cast<std::uintptr_t>(((rows - 1) * stride + cols) * 8)});
  }
  for (i64 r = 0; r < rows; ++r)
    for (i64 c = 0; c < cols; ++c) {
      const std::int64_t x = v[r * stride + c];
      if (x < INT32_MIN || x > INT32_MAX)
        fail(where, std::string(name) + " (int64) holds " + std::to_string(x) + " at [" +
                        std::to_string(r) + "][" + std::to_string(c) + "], outside int32");
      b[static_cast<std::size_t>(r * cols + c)] = static_cast<i32>(x);
    }
  return b.data();
}

void require_index_dtype(const char* where, const char* name, const py::array& a) {
  if (!has_dtype<i32>(a) && !has_dtype<std::int64_t>(a))
    fail(where, std::string(name) + " has dtype " + dtype_name(a) + ", expected int32 or int64");
}

// A 1-D int32 or int64 array as an int32 span.
std::span<const i32> int_span(const char* where, const char* name, const py::handle& obj) {
  const py::array a = as_array(where, name, obj);
  require_index_dtype(where, name, a);
  require_ndim(where, name, a, 1, "1-D");
  require_contiguous(where, name, a);
  const auto n = static_cast<std::size_t>(a.shape(0));
  if (has_dtype<std::int64_t>(a))
    return {narrowed(where, name, static_cast<const std::int64_t*>(a.data()), 1, a.shape(0), 0), n};
  return {static_cast<const i32*>(a.data()), n};
}

// The row stride, in elements of `item` bytes, of a 2-D array whose rows are dense: any stride,
// in whole elements, that keeps the rows apart. A stride of 0 (np.broadcast_to), one below the
// row's bytes (overlapping rows, np.lib.stride_tricks) or a negative one (a[::-1]) is refused:
// the view would describe rows x cols elements of smaller storage, or storage before the first
// row.
i64 dense_rows_stride(const char* where, const char* name, const py::array& a, py::ssize_t item) {
  require_ndim(where, name, a, 2, "2-D");
  if (a.shape(1) > 1 && a.strides(1) != item)
    fail(where, std::string(name) + " has column stride " + std::to_string(a.strides(1)) +
                    " bytes: its rows must be dense (stride(1) == itemsize " +
                    std::to_string(item) + ")");
  const i64 row_bytes = a.shape(1) * item;
  if (a.shape(0) > 1 && (a.strides(0) < row_bytes || a.strides(0) % item != 0))
    fail(where, std::string(name) + " has row stride " + std::to_string(a.strides(0)) +
                    " bytes for rows of " + std::to_string(row_bytes) +
                    " bytes: rows must not overlap or run backwards (no broadcast or negative "
                    "strides; np.ascontiguousarray copies it), and the stride must be whole "
                    "elements");
  return a.shape(0) > 1 ? a.strides(0) / item : a.shape(1);
}

// That array as a matrix_view of T (stored as Storage: bf16 as uint16 bits).
template <class T, class Storage = T>
ml::matrix_view<const T> matrix(const char* where, const char* name, const py::array& a) {
  const i64 stride = dense_rows_stride(where, name, a, static_cast<py::ssize_t>(sizeof(Storage)));
  return ml::matrix_view<const T>(reinterpret_cast<const T*>(a.data()), a.shape(0), a.shape(1),
                                  stride);
}

ml::matrix_view<const i32> int_matrix(const char* where, const char* name, const py::handle& obj) {
  const py::array a = as_array(where, name, obj);
  require_index_dtype(where, name, a);
  const bool wide = has_dtype<std::int64_t>(a);
  if (a.ndim() == 1) {  // [B] is [B, 1]
    require_contiguous(where, name, a);
    if (wide)
      return {narrowed(where, name, static_cast<const std::int64_t*>(a.data()), 1, a.shape(0), 0),
              a.shape(0), 1};
    return {static_cast<const i32*>(a.data()), a.shape(0), 1};
  }
  if (!wide) return matrix<i32>(where, name, a);
  const i64 stride = dense_rows_stride(where, name, a, 8);
  return {narrowed(where, name, static_cast<const std::int64_t*>(a.data()), a.shape(0), a.shape(1),
                   stride),
          a.shape(0), a.shape(1)};
}

}  // namespace
}  // namespace mqalogits_python
