// The logits row: each score rounded once to the output type (bf16 round-to-nearest-even, or
// fp32), -inf in every column that is not valid — what upstream's *_mqa_logits kernels write.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>

#include "../check/overlap.hpp"
#include "../check/shapes.hpp"
#include "../config.hpp"
#include "../exec/executor.hpp"
#include "../exec/options.hpp"
#include "../format/bf16.hpp"
#include "../variant/plan.hpp"
#include "../view/matrix_view.hpp"
#include "output.hpp"

MQALOGITS_NAMESPACE_BEGIN

template <logit_element O>
class logits_row_output {
 public:
  using element_type = O;

  // clean == false (upstream's engines): invalid columns are left as they are, unspecified;
  // the caller's top-k must then read only each row's valid range.
  logits_row_output(const matrix_view<O>& out, bool clean) : out_(out), clean_(clean) {}

  void check(const char* where, std::int64_t rows, std::int64_t cols) const {
    detail::check_matrix(where, "logits", out_, rows, cols);
  }

  // -inf in every column outside each row's candidate range, 64 rows per task.
  template <class Plan>
  void begin(const Plan& plan, std::int64_t /*tasks*/, const executor_ref& exec) const {
    if (!clean_) return;
    constexpr std::int64_t rows_per_task = 64;
    const std::int64_t tasks = (out_.rows + rows_per_task - 1) / rows_per_task;
    auto fill = [&](std::int64_t t) {
      const std::int64_t last = std::min(out_.rows, (t + 1) * rows_per_task);
      for (std::int64_t r = t * rows_per_task; r < last; ++r) {
        const row_keys k = plan.row(r);
        const std::int64_t c0 = k.empty() ? out_.cols : k.key_begin - k.col_offset;
        const std::int64_t c1 = k.empty() ? out_.cols : k.key_end - k.col_offset;
        O* row = out_.row(r);
        std::fill(row, row + c0, minus_infinity());
        std::fill(row + c1, row + out_.cols, minus_infinity());
      }
    };
    detail::checked_parallel_for(exec, tasks, fill);
  }

  void consume(std::int64_t /*task*/, std::int64_t row, std::int64_t col, const float* scores,
               const unsigned char* valid, std::int64_t n) const {
    O* dst = out_.row(row) + col;
    for (std::int64_t i = 0; i < n; ++i) {
      if (valid[i])
        dst[i] = from_float<O>(scores[i]);
      else if (clean_)
        dst[i] = minus_infinity();
    }
  }

  void finish(const executor_ref&) const {}

  const matrix_view<O>& view() const { return out_; }
  // The bytes this output writes (checked against the call's inputs).
  std::array<detail::byte_range, 1> written_ranges() const {
    return {detail::range_of("logits", out_)};
  }
  bool clean() const { return clean_; }

 private:
  static constexpr O minus_infinity() {
    return from_float<O>(-std::numeric_limits<float>::infinity());
  }

  matrix_view<O> out_;
  bool clean_;
};

// A logits view passed where a kernel takes its output.
template <logit_element O>
logits_row_output<O> to_output_policy(const matrix_view<O>& out, const options& opt) {
  return logits_row_output<O>(out, opt.clean_logits);
}

static_assert(output_policy<logits_row_output<float>>);

MQALOGITS_NAMESPACE_END
