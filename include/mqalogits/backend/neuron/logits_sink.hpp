// Where the schedule's logits go. The logit type and the output policy change no instruction,
// only the cast's target type, the bytes each output descriptor moves and where the values land,
// so the schedule sees them through this interface; the adaptor per output type (kernels.hpp)
// is all that is compiled per type.
#pragma once

#include <cstdint>

#include "../../config.hpp"
#include "dtype.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

class logits_sink {
 public:
  logits_sink(dtype type, std::int64_t element_bytes, bool clean)
      : type_(type), element_bytes_(element_bytes), clean_(clean) {}
  logits_sink(const logits_sink&) = delete;
  logits_sink& operator=(const logits_sink&) = delete;

  dtype type() const { return type_; }  // the cast's target: fp32 or bf16
  std::int64_t element_bytes() const { return element_bytes_; }
  bool clean() const { return clean_; }  // -inf in masked and uncovered columns
  // The values of every column outside a row's candidate range (the output policy's begin).
  virtual void begin() = 0;
  // Scores of row `row` from column `col`: n fp32 values and their valid flags.
  virtual void consume(std::int64_t row, std::int64_t col, const float* scores,
                       const unsigned char* valid, std::int64_t n) = 0;

 protected:
  ~logits_sink() = default;

 private:
  dtype type_;
  std::int64_t element_bytes_;
  bool clean_;
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
