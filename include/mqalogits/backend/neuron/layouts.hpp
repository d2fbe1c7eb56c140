// Alternatives the schedule could take, each costed on the model itself (a cost-only core
// issuing the instructions), so that a choice between them is the model's arithmetic, not an
// assertion. Example 09 prints them.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../config.hpp"
#include "core.hpp"
#include "report.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// The busy time of a decode head sum and its epilogue for one chunk of `keys` keys and `rows`
// query rows of `heads` heads (rows x heads <= 128; bf16 logits, nothing masked), in the two
// layouts a schedule could give it, each the sum of its TensorE, ScalarE and DMA time:
// - keys on the output partitions (what the schedule runs): U = ceil(keys / 128) fp32 matmuls
//   of the relu columns u, u + U, ... as stationary against the weights [rows x heads, rows],
//   4 x max(rows, 64) cycles each; one cast of U x rows elements on up to 128 partitions; a
//   descriptor per partition and row (U keys each);
// - one partition per row (the keys along the moving side): a matmul of the weights as
//   stationary against up to 512 relu columns, 4 x max(columns, 64) cycles; a cast of `keys`
//   elements on `rows` partitions; one descriptor per row.
struct head_sum_layout_costs {
  double keys_on_partitions_s = 0, row_per_partition_s = 0;
};

template <class Gen>
head_sum_layout_costs head_sum_layouts(std::int64_t keys, int rows, int heads) {
  const int P = rows * heads;
  const auto busy = [](core<Gen>& c) {
    const report& r = c.counters();
    return r.tensor.seconds + r.scalar.seconds + r.dma_seconds;
  };
  head_sum_layout_costs out;
  {
    core<Gen> c(false);
    tile relu = c.sbuf("relu(scores)", dtype::fp32, P, keys);
    tile w = c.sbuf("weights", dtype::fp32, P, rows);
    const std::int64_t U = (keys + 127) / 128;
    const int np = static_cast<int>((keys + U - 1) / U);
    tile sum = c.psum("head sum", 128, U * rows);
    tile cast = c.sbuf("logits", dtype::bf16, 128, U * rows);
    for (std::int64_t u = 0; u < U; ++u) {
      const int m = static_cast<int>((keys - u + U - 1) / U);
      c.matmul(window(sum, 0, m, u * rows, rows), window(relu, 0, P, u, m, U), window(w),
               matmul_kind::head_sum);
    }
    c.activation(window(cast, 0, np, 0, U * rows), window(sum, 0, np, 0, U * rows),
                 activation_fn::identity);
    {
      auto t = c.dma();
      for (int r = 0; r < rows; ++r)
        for (int i = 0; i < np; ++i) t.row(std::min(U, keys - i * U) * 2);
    }
    out.keys_on_partitions_s = busy(c);
  }
  {
    core<Gen> c(false);
    tile relu = c.sbuf("relu(scores)", dtype::fp32, P, keys);
    tile w = c.sbuf("weights", dtype::fp32, P, rows);
    constexpr std::int64_t step = 512;  // one PSUM bank of fp32
    tile sum = c.psum("head sum", rows, step);
    tile cast = c.sbuf("logits", dtype::bf16, rows, keys);
    for (std::int64_t k0 = 0; k0 < keys; k0 += step) {
      const std::int64_t n = std::min(step, keys - k0);
      c.matmul(window(sum, 0, rows, 0, n), window(w), window(relu, 0, P, k0, n),
               matmul_kind::head_sum);
      c.activation(window(cast, 0, rows, k0, n), window(sum, 0, rows, 0, n),
                   activation_fn::identity);
    }
    {
      auto t = c.dma();
      for (int r = 0; r < rows; ++r) t.row(keys * 2);
    }
    out.row_per_partition_s = busy(c);
  }
  return out;
}

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
