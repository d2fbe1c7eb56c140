// The contract every entry point ends its checks with, stated once and public so that other
// surfaces (a backend's own entry points, bindings, op libraries) refuse a call with the same
// message: after a call's own arguments (its lengths, index arrays, metadata, cache), Q, the
// weights and the output must agree, the keys must have Q's head dim, and no byte an output
// writes may be one the call reads or another output writes. Every check throws mqalogits::error
// "<where>: ..." before anything is written.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>

#include "../config.hpp"
#include "../view/matrix_view.hpp"
#include "../view/rows_view.hpp"
#include "overlap.hpp"
#include "shapes.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace check {

// The keys a call reads, as its messages name them ("kv", "cache"), with their head dim.
struct keys {
  const char* name;
  int head_dim;
};

// The buffers a call reads besides Q and the weights, by name: range_of(name, view) for
// matrices, spans and caches, data_range_of / scale_range_of for rows' codes and scales,
// make_range(name, pointer, bytes) for any other storage.
using input_range = detail::byte_range;
using detail::data_range_of;
using detail::make_range;
using detail::range_of;
using detail::scale_range_of;

// q: [rows * H] rows of a supported head dim equal to the keys'; w: [rows, H], 1..max_heads
// heads; output: [rows, cols] (the kernel output policy: its check() and written_ranges()); no
// output byte over q, its scales, w, any of `inputs`, or another output.
template <class Format, class W, class Output, std::same_as<input_range>... Inputs>
void logits_call(const char* where, const rows_view<Format>& q, const matrix_view<const W>& w,
                 const Output& output, std::int64_t rows, std::int64_t cols, keys k,
                 const Inputs&... inputs) {
  detail::check_q_weights_out(where, q, w, output, rows, cols);
  detail::check_same_head_dim(where, k.name, k.head_dim, q.head_dim);
  const input_range read[] = {detail::data_range_of("q", q), detail::scale_range_of("q scales", q),
                              detail::range_of("weights", w), inputs...};
  const auto written = output.written_ranges();
  detail::check_outputs_disjoint(where, std::span<const input_range>(written),
                                 std::span<const input_range>(read));
}

}  // namespace check
MQALOGITS_NAMESPACE_END
