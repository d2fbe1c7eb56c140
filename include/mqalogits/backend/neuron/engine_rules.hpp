// The rules every engine instruction checks before it runs: what a generation's access patterns
// allow (NKI's partition-start rules) and that operands agree in shape. A broken rule is a
// mqalogits::error naming the model's generation.
#pragma once

#include <cstdint>

#include "../../config.hpp"
#include "../../error.hpp"
#include "memory.hpp"
#include "traits.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

template <class Gen>
struct engine_rules {
  using traits_type = traits<Gen>;

  static void check(bool ok, const char* what) {
    detail::require(ok, detail::where3{"neuron model (", traits_type::name, ")"},
                    [&](auto& m) { m << what; });
  }
  // An instruction's partition range: more than 64 partitions start at 0; 33..64 at 0 or 64;
  // up to 32 at 0, 32, 64 or 96 (NKI access-pattern rules).
  static void check_partition_start(const window& w) {
    check(w.inside(), "an access pattern reaches past the end of its tile");
    const bool ok = w.np > 64 ? w.p0 == 0 : w.np > 32 ? (w.p0 == 0 || w.p0 == 64) : w.p0 % 32 == 0;
    detail::require(ok && w.p0 + w.np <= traits_type::partitions,
                    detail::where3{"neuron model (", traits_type::name, ")"}, [&](auto& m) {
                      m << "an access of " << w.np << " partitions cannot start at partition "
                        << w.p0;
                    });
  }
  static void check_same_shape(const window& a, const window& b) {
    check(a.np == b.np && a.nc == b.nc, "engine operands have different shapes");
    check_partition_start(a);
    check_partition_start(b);
  }
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
