// The weights [rows, heads] as the schedule reads them. Their element type changes no
// instruction, only the bytes each DMA descriptor moves and the conversion to fp32, so it is
// known here by its size and a conversion: one schedule serves every weight type.
#pragma once

#include <cstdint>

#include "../../config.hpp"
#include "../../format/bf16.hpp"
#include "../../view/matrix_view.hpp"
#include "dtype.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

struct weights_ref {
  const void* data = nullptr;
  std::int64_t rows = 0, cols = 0, stride = 0;  // in elements
  std::int64_t element_bytes = 0;
  float (*load)(const void* data, std::int64_t index) = nullptr;  // element `index` as fp32

  template <class W>
  explicit weights_ref(const matrix_view<const W>& w)
      : data(w.data),
        rows(w.rows),
        cols(w.cols),
        stride(w.stride),
        element_bytes(static_cast<std::int64_t>(sizeof(W))),
        load([](const void* p, std::int64_t i) { return to_float(static_cast<const W*>(p)[i]); }) {}
  float at(std::int64_t r, std::int64_t h) const {
    return data ? load(data, r * stride + h) : 0.0f;
  }
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
