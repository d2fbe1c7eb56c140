// What the four entry points share: the public call contract (check/call.hpp, and the checks
// every surface states once: check/block_table.hpp, check/output_width.hpp, check/require.hpp;
// check/refusal.hpp, their non-throwing form) and the hand-off to the backend, so each entry point
// holds only its variant's own checks.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../check/block_table.hpp"
#include "../check/call.hpp"
#include "../check/output_width.hpp"
#include "../check/refusal.hpp"
#include "../check/require.hpp"
#include "../config.hpp"
#include "../exec/options.hpp"
#include "../output/logits_row.hpp"
#include "../view/matrix_view.hpp"
#include "../view/rows_view.hpp"
#include "default_backend.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace detail {

// The kernels are compiled per head dim: Q is handed over as its format bound to its rows' head
// dim (checked supported, and equal to K's, by the entry point); the plan's keys are addresses,
// whatever the head dim.
template <class Backend, class Format, class Plan, class W, class Output>
void dispatch(const rows_view<Format>& q, const Plan& plan, const matrix_view<const W>& w,
              Output& output, const options& opt) {
  static_assert(is_backend_v<Backend>, "mqalogits: the first argument must be a backend tag");
  with_head_dim_of<Format>(q.head_dim, [&]<class F>() {
    backend_kernels<Backend>::run(rebind_rows<F>(q), plan, w, output, opt);
  });
}

}  // namespace detail
MQALOGITS_NAMESPACE_END
