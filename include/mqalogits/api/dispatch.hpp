// What the four entry points share: the Q / weights / output checks and the hand-off to the
// backend, so each entry point holds only its variant's own checks.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../backend/default.hpp"
#include "../config.hpp"
#include "../exec/options.hpp"
#include "../view/matrix_view.hpp"
#include "../view/rows_view.hpp"
#include "overlap.hpp"
#include "validate.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace detail {

// Checks Q [rows * H rows], weights [rows, H] and out [rows, cols]; H comes from the weights.
template <class Format, class W, class O>
void check_q_weights_out(const char* where, const rows_view<Format>& q,
                         const matrix_view<const W>& w, const matrix_view<O>& out,
                         std::int64_t rows, std::int64_t cols) {
  check_heads(where, w.cols);
  check_matrix(where, "weights", w, rows, w.cols);
  std::int64_t q_rows = 0;
  require(!__builtin_mul_overflow(rows, w.cols, &q_rows), where,
          [&](auto& m) { m << rows << " rows x " << w.cols << " heads overflows"; });
  check_rows(where, "q", q, q_rows);
  check_matrix(where, "logits", out, rows, cols);
}

template <class Backend, class Format, class Plan, class W, class O>
void dispatch(const rows_view<Format>& q, const Plan& plan, const matrix_view<const W>& w,
              const matrix_view<O>& out, const options& opt) {
  static_assert(is_backend_v<Backend>, "mqalogits: the first argument must be a backend tag");
  backend_kernels<Backend>::run(q, plan, w, out, opt);
}

}  // namespace detail
MQALOGITS_NAMESPACE_END
