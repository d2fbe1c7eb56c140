// The output must not share a byte with any buffer the call reads: the kernels write logits (or
// -inf) while they still read Q, KV, weights, lengths and block tables, so an overlap would feed
// scores back in as inputs (wrong logits, or a block-table entry overwritten after it was
// checked). Each entry point checks the byte range of the output view against the byte range of
// every input view, after the views' own checks (their extents are known to fit in int64).
#pragma once

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

// Throws when the output's bytes meet any input's. The output is the call's output policy: one
// that writes a logits view (view()) is checked; a policy without one writes nothing the call
// reads.
template <class Output>
void check_no_overlap(const char* where, const Output& output,
                      std::initializer_list<byte_range> inputs) {
  if constexpr (requires { range_of("logits", output.view()); }) {
    const byte_range o = range_of("logits", output.view());
    if (o.empty()) return;
    for (const byte_range& in : inputs)
      require(in.empty() || in.end <= o.begin || o.end <= in.begin, where, [&](auto& m) {
        m << "logits [" << static_cast<std::uint64_t>(o.begin) << ", "
          << static_cast<std::uint64_t>(o.end) << ") overlap " << in.name << " ["
          << static_cast<std::uint64_t>(in.begin) << ", " << static_cast<std::uint64_t>(in.end)
          << "): the output must not share a byte with an input";
      });
  }
}

}  // namespace detail
MQALOGITS_NAMESPACE_END
