// No output may share a byte with any buffer the call reads, nor with another output: the
// kernels write logits (or -inf, or a row's top-k indices and values) while they still read Q,
// KV, weights, lengths and block tables, so an overlap would feed results back in as inputs
// (wrong logits, or a block-table entry overwritten after it was checked and then read), and
// top-k indices sharing bytes with their values would overwrite each other. Each entry point
// checks the byte range of every buffer its output writes against the byte range of every input
// view and of the other outputs, after the views' own checks (their extents are known to fit in
// int64).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>

#include "../config.hpp"
#include "../error.hpp"
#include "../view/index_array.hpp"
#include "../view/matrix_view.hpp"
#include "../view/paged_cache_view.hpp"
#include "../view/rows_view.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace detail {

// Bytes [begin, end) of a view, as addresses; empty when the view has no elements.
struct byte_range {
  const char* name = "";
  std::uintptr_t begin = 0, end = 0;
  bool empty() const { return end <= begin; }
};

inline byte_range make_range(const char* name, const void* p, std::int64_t bytes) {
  if (!p || bytes <= 0) return {name, 0, 0};
  const auto b = reinterpret_cast<std::uintptr_t>(p);
  std::uintptr_t e;
  if (__builtin_add_overflow(b, static_cast<std::uintptr_t>(bytes), &e)) e = UINTPTR_MAX;
  return {name, b, e};
}

// From the first byte of row 0 to the last byte of the last row: the bytes between rows are in
// the range too (a view may not interleave its rows with another buffer's).
template <class T>
byte_range range_of(const char* name, const matrix_view<T>& v) {
  if (v.rows <= 0 || v.cols <= 0) return {name, 0, 0};
  const auto size = static_cast<std::int64_t>(sizeof(T));
  return make_range(name, v.data, ((v.rows - 1) * v.stride + v.cols) * size);
}
template <index_value I>
byte_range range_of(const char* name, std::span<const I> s) {
  return make_range(name, s.data(), static_cast<std::int64_t>(s.size() * sizeof(I)));
}
template <class Format>
byte_range data_range_of(const char* name, const rows_view<Format>& v) {
  if (v.rows <= 0) return {name, 0, 0};
  return make_range(name, v.data, (v.rows - 1) * v.data_stride + v.data_bytes());
}
template <class Format>
byte_range scale_range_of(const char* name, const rows_view<Format>& v) {
  if (v.rows <= 0 || !v.scales) return {name, 0, 0};
  return make_range(name, v.scales, (v.rows - 1) * v.scale_stride + Format::scale_bytes);
}
template <class Format>
byte_range range_of(const char* name, const paged_cache_view<Format>& c) {
  if (c.num_pages <= 0) return {name, 0, 0};
  return make_range(
      name, c.base,
      (c.num_pages - 1) * c.page_stride + std::int64_t{c.page_kv} * c.bytes_per_token());
}

inline bool disjoint(const byte_range& a, const byte_range& b) {
  return a.empty() || b.empty() || a.end <= b.begin || b.end <= a.begin;
}

// Throws when one of `outputs` (buffers a call writes) meets one of `inputs` (buffers it reads),
// or another of `outputs`; empty ranges meet nothing.
inline void check_outputs_disjoint(const char* where, std::span<const byte_range> outputs,
                                   std::span<const byte_range> inputs) {
  auto fail = [&](const byte_range& o, const byte_range& in, const char* what) {
    require(false, where, [&](auto& m) {
      m << o.name << " [" << static_cast<std::uint64_t>(o.begin) << ", "
        << static_cast<std::uint64_t>(o.end) << ") overlap " << in.name << " ["
        << static_cast<std::uint64_t>(in.begin) << ", " << static_cast<std::uint64_t>(in.end)
        << "): " << what;
    });
  };
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const byte_range& o = outputs[i];
    if (o.empty()) continue;
    for (const byte_range& in : inputs)
      if (!disjoint(o, in)) fail(o, in, "an output must not share a byte with an input");
    for (std::size_t j = i + 1; j < outputs.size(); ++j)
      if (!disjoint(o, outputs[j]))
        fail(o, outputs[j], "the outputs of a call must not share a byte");
  }
}
inline void check_outputs_disjoint(const char* where, std::span<const byte_range> outputs,
                                   std::initializer_list<byte_range> inputs) {
  check_outputs_disjoint(where, outputs,
                         std::span<const byte_range>(inputs.begin(), inputs.size()));
}
inline void check_outputs_disjoint(const char* where, std::initializer_list<byte_range> outputs,
                                   std::initializer_list<byte_range> inputs) {
  check_outputs_disjoint(where, std::span<const byte_range>(outputs.begin(), outputs.size()),
                         inputs);
}

// The same for a kernel's output policy, which names its buffers with written_ranges() (the
// logits view; the top-k indices and values).
template <class Output>
void check_no_overlap(const char* where, const Output& output,
                      std::initializer_list<byte_range> inputs) {
  const auto outputs = output.written_ranges();
  check_outputs_disjoint(where, std::span<const byte_range>(outputs.data(), outputs.size()),
                         inputs);
}

}  // namespace detail
MQALOGITS_NAMESPACE_END
