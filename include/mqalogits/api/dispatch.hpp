// What the four entry points share: the Q / weights / output checks and the hand-off to the
// backend, so each entry point holds only its variant's own checks.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../backend/default.hpp"
#include "../config.hpp"
#include "../exec/options.hpp"
#include "../output/logits_row.hpp"
#include "../view/matrix_view.hpp"
#include "../view/rows_view.hpp"
#include "overlap.hpp"
#include "validate.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace detail {

// Checks Q [rows * H rows], weights [rows, H] and out [rows, cols]; H comes from the weights.
template <class Format, class W, class Output>
void check_q_weights_out(const char* where, const rows_view<Format>& q,
                         const matrix_view<const W>& w, const Output& output, std::int64_t rows,
                         std::int64_t cols) {
  check_heads(where, w.cols);
  check_matrix(where, "weights", w, rows, w.cols);
  std::int64_t q_rows = 0;
  require(!__builtin_mul_overflow(rows, w.cols, &q_rows), where,
          [&](auto& m) { m << rows << " rows x " << w.cols << " heads overflows"; });
  // Q's row count follows from the weights' shape: say so, or a weights mistake reads as a Q one.
  require(q.rows == q_rows, where, [&](auto& m) {
    m << "q has " << q.rows << " rows, but weights [" << w.rows << ", " << w.cols << "] need "
      << rows << " x " << w.cols << " = " << q_rows;
  });
  check_rows(where, "q", q, q_rows);
  output.check(where, rows, cols);
}

template <class Backend, class Format, class Plan, class W, class Output>
void dispatch(const rows_view<Format>& q, const Plan& plan, const matrix_view<const W>& w,
              Output& output, const options& opt) {
  static_assert(is_backend_v<Backend>, "mqalogits: the first argument must be a backend tag");
  backend_kernels<Backend>::run(q, plan, w, output, opt);
}

}  // namespace detail
MQALOGITS_NAMESPACE_END
