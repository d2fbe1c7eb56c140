// ScalarE: the activation function of an elementwise pass (the usual way to evacuate PSUM),
// fp32 inside; the relu and identity evacuations may run on VectorE instead (`on`).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "../../config.hpp"
#include "../../format/bf16.hpp"
#include "../../format/mx.hpp"
#include "../../std_abi.hpp"
#include "dtype.hpp"
#include "engine_rules.hpp"
#include "instruction_ledger.hpp"
#include "memory.hpp"
#include "traits.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

enum class activation_fn : std::uint8_t { identity, relu };

template <class Gen>
class scalar_engine {
  using rules = engine_rules<Gen>;

 public:
  explicit scalar_engine(instruction_ledger<Gen>& ledger) : ledger_(ledger) {}

  // out = fn(in * scale[p]) for every partition p (scale: a [P, 1] tile, or null for 1), fp32
  // inside; the usual way to evacuate PSUM. relu keeps NaN.
  void activation(const window& out, const window& in, activation_fn fn,
                  const window* scale = nullptr,
                  elementwise_engine on = elementwise_engine::scalar) {
    rules::check_same_shape(out, in);
    rules::check(!scale || (scale->np == in.np && scale->nc == 1), "activation scale is [P, 1]");
    if (ledger_.computes())
      for (std::int64_t p = 0; p < in.np; ++p) {
        const float s = scale ? scale->at(p, 0) : 1.0f;
        for (std::int64_t i = 0; i < in.nc; ++i) {
          float v = scale ? in.at(p, i) * s : in.at(p, i);
          if (fn == activation_fn::relu && v < 0.0f) v = 0.0f;
          out.at(p, i) = store_as(out.type(), v);
        }
      }
    ledger_.evacuation(in.nc, is_narrow(in.type()) && is_narrow(out.type()),
                       in.space() == memory::psum, on);
  }

  // fn over `groups` blocks of n columns of `in` (block j from in.c0 + j x in_stride) into
  // `out`, element c of block j at out.c0 + c x out_step + j x out_group: one instruction with a
  // two-dimensional access pattern on each side (NKI access patterns have several free
  // dimensions), e.g. the four MX quadrant outputs of a tile evacuated in key order at once.
  void activation_2d(const window& out, std::int64_t out_step, std::int64_t out_group,
                     const window& in, std::int64_t in_stride, int groups, std::int64_t n,
                     activation_fn fn, elementwise_engine on = elementwise_engine::scalar) {
    rules::check(out.np == in.np && groups >= 1 && n >= 1 && out_step >= 1 && out_group >= 0 &&
                     in_stride >= n,
                 "activation_2d keeps partitions; blocks of n columns");
    rules::check(in.c0 + (groups - 1) * in_stride + n <= in.t->free() &&
                     out.c0 + (n - 1) * out_step + (groups - 1) * out_group < out.t->free(),
                 "activation_2d access pattern reaches past the end of its tile");
    rules::check_partition_start(window(*in.t, in.p0, in.np, in.c0, 1));
    rules::check_partition_start(window(*out.t, out.p0, out.np, out.c0, 1));
    if (ledger_.computes())
      for (std::int64_t p = 0; p < in.np; ++p)
        for (int j = 0; j < groups; ++j)
          for (std::int64_t c = 0; c < n; ++c) {
            float v = in.t->at(in.p0 + p, in.c0 + j * in_stride + c);
            if (fn == activation_fn::relu && v < 0.0f) v = 0.0f;
            out.t->at(out.p0 + p, out.c0 + c * out_step + j * out_group) = store_as(out.type(), v);
          }
    ledger_.evacuation(groups * n, is_narrow(in.type()) && is_narrow(out.type()),
                       in.space() == memory::psum, on);
  }

 private:
  instruction_ledger<Gen>& ledger_;
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
