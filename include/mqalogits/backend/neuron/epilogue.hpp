// The epilogue: a tile of fp32 logits cast to the output type (RNE for bf16), -inf in masked
// columns when the output is clean, and written by one DMA over each row's candidate columns;
// -inf outside them. Its values reach the caller through the logits_sink, fed the same fp32
// scores, and the output type only through the sink: this stage is compiled once per plan,
// not per weight, logit or output type.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>

#include "../../config.hpp"
#include "../../std_abi.hpp"
#include "../../variant/plan.hpp"
#include "chunks.hpp"
#include "core.hpp"
#include "logits_sink.hpp"
#include "memory.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace neuron_backend {

// Query rows of one head sum: `rows` rows from row_begin, their heads on partitions from p0,
// their logits in head-sum columns col .. col + rows - 1 of each key group; their chunk's keys
// [k0, k0 + nk) and its valid flags.
struct sum_part {
  std::int64_t row_begin;
  int rows, p0, col;
  std::int64_t k0, nk;
  const unsigned char* valid;
};

template <class Gen, class Plan>
class epilogue {
  static constexpr float minus_inf = -std::numeric_limits<float>::infinity();

 public:
  // `columns`: the logits of one tile per row; `partition_columns`: those of a keys-on-partitions
  // head sum (decode; 0: none).
  epilogue(core<Gen>& c, const Plan& plan, logits_sink& output, const chunk_layout& layout,
           std::int64_t columns, std::int64_t partition_columns)
      : c_(c), plan_(plan), output_(output), layout_(layout), clean_(output.clean()) {
    if (partition_columns > 0) {
      out_part_ =
          c_.sbuf("logits out (keys on partitions)", output_.type(), 128, partition_columns);
      mask_ = c_.sbuf("key mask (keys on partitions)", dtype::u8, 128, partition_columns);
    }
    out_tile_ = c_.sbuf("logits out", output_.type(), 128, columns);
  }

  // -inf in every column outside a row's candidate range: a DMA from a constant SBUF row (the
  // values are the output policy's begin).
  void fill_outside() {
    if (c_.computes()) output_.begin();
    auto t = c_.dma();
    const std::int64_t cols = plan_.num_cols(), bytes = output_.element_bytes();
    for (std::int64_t r = 0; r < plan_.num_rows(); ++r) {
      const row_keys k = plan_.row(r);
      const std::int64_t c0 = k.empty() ? cols : k.key_begin - k.col_offset;
      const std::int64_t c1 = k.empty() ? cols : k.key_end - k.col_offset;
      if (c0 > 0) t.row(c0 * bytes);
      if (cols > c1) t.row((cols - c1) * bytes);
    }
  }

  // fp32 logits [R, n] (PSUM or SBUF) of rows [r0, r0 + R), keys [k0, k0 + n) with their valid
  // flags: cast to the output type (RNE for bf16) with -inf on
  // masked keys when clean (VectorE's predicated copy), or, with nothing to mask, by ScalarE's
  // identity activation (the cast evacuations alternate engines, as AWS's decode kernels do);
  // then one DMA with a row per output row over its candidate columns. The values themselves
  // reach the caller through the output policy (its consume), fed the same fp32 scores; this
  // function carries their cost. `cols` (empty: the identity) gives key i's column in `logits`
  // when it holds padding slots: the cast copy reads through it and skips them (VectorE).
  void write(const window& logits, const unsigned char* valid, std::int64_t r0, std::int64_t R,
             std::int64_t k0, std::span<const std::int32_t> cols = {}) {
    const std::int64_t nk = cols.empty() ? logits.nc : static_cast<std::int64_t>(cols.size());
    const window o(out_tile_, 0, static_cast<int>(R), 0, nk);
    const bool masked =
        clean_ && std::find_if(valid, valid + nk, [](auto v) { return v == 0; }) != valid + nk;
    if (masked || !cols.empty())
      c_.select(o, logits, cols.empty() ? nullptr : cols.data(), masked ? valid : nullptr,
                minus_inf);
    else
      c_.activation(o, logits, activation_fn::identity);
    detail::vector<float> row;  // a row's fp32 scores in key order, for the output policy
    auto t = c_.dma();
    for (std::int64_t r = 0; r < R; ++r) {
      const row_keys rk = plan_.row(r0 + r);
      const std::int64_t lo = std::max(k0, rk.key_begin), hi = std::min(k0 + nk, rk.key_end);
      if (lo >= hi) continue;
      t.row((hi - lo) * output_.element_bytes());
      if (!c_.computes()) continue;
      const float* scores = &logits.at(r, lo - k0);
      if (!cols.empty()) {
        row.resize(static_cast<std::size_t>(hi - lo));
        for (std::int64_t i = lo; i < hi; ++i)
          row[static_cast<std::size_t>(i - lo)] =
              logits.at(r, cols[static_cast<std::size_t>(i - k0)]);
        scores = row.data();
      }
      output_.consume(r0 + r, lo - rk.col_offset, scores, valid + (lo - k0), hi - lo);
    }
  }

  // Logits with their keys on partitions (decode_pass::head_sum_chunk): head [np, U x R] holds
  // padded column i x U + u of a part's row r at (i, u x R + col + r). They are cast on all np
  // partitions, U x R elements each (ScalarE, or, to write -inf on masked keys when clean,
  // VectorE's predicated copy with a mask tile built by an iota and a compare), then written by
  // one DMA: per partition and row, each run of consecutive keys in the row's range is one
  // descriptor.
  void write_keys_on_partitions(tile& head, std::span<const sum_part> parts, std::int64_t ncols,
                                std::int64_t U, int R) {
    const int np = static_cast<int>((ncols + U - 1) / U);
    const std::int64_t width = U * R;
    const window in(head, 0, np, 0, width), o(out_part_, 0, np, 0, width);
    bool masked = false;
    for (const sum_part& part : parts)
      for (std::int64_t k = 0; clean_ && k < part.nk && !masked; ++k) masked = !part.valid[k];
    if (masked) {
      if (c_.computes())
        for (const sum_part& part : parts)
          for (int i = 0; i < np; ++i)
            for (std::int64_t u = 0; u < U; ++u) {
              const std::int64_t k = layout_.key_at(i * U + u, part.nk);
              for (int r = 0; r < part.rows; ++r)
                mask_.at(i, u * R + part.col + r) = k >= 0 && part.valid[k];
            }
      c_.gpsimd_elementwise(width, 1);  // iota
      c_.vector_elementwise(width, 2);  // compare against the valid range
      c_.select_where(o, in, window(mask_, 0, np, 0, width), minus_inf);
    } else {
      c_.activation(o, in, activation_fn::identity);
    }
    auto t = c_.dma();
    for (const sum_part& part : parts)
      for (int r = 0; r < part.rows; ++r) write_partition_runs(t, head, part, r, np, ncols, U, R);
  }

 private:
  // Row r of a part from `head` to the output: per partition, each run of consecutive keys in
  // the row's range is one descriptor (and one consume of the output policy).
  template <class Transfer>
  void write_partition_runs(Transfer& t, tile& head, const sum_part& part, int r, int np,
                            std::int64_t ncols, std::int64_t U, int R) {
    const row_keys rk = plan_.row(part.row_begin + r);
    const std::int64_t lo = std::max<std::int64_t>(0, rk.key_begin - part.k0);
    const std::int64_t hi = std::min(part.nk, rk.key_end - part.k0);
    detail::vector<float> run;
    for (int i = 0; i < np && lo < hi; ++i) {
      std::int64_t start = -1, prev = -1;
      const auto flush = [&] {
        if (start < 0) return;
        const std::int64_t n = prev - start + 1;
        t.row(n * output_.element_bytes());
        if (c_.computes())
          output_.consume(part.row_begin + r, part.k0 + start - rk.col_offset, run.data(),
                          part.valid + start, n);
        start = -1;
        run.clear();
      };
      for (std::int64_t u = 0; u < U && i * U + u < ncols; ++u) {
        const std::int64_t k = layout_.key_at(i * U + u, part.nk);
        if (k < lo || k >= hi || (start >= 0 && k != prev + 1)) flush();
        if (k < lo || k >= hi) continue;
        if (start < 0) start = k;
        prev = k;
        if (c_.computes()) run.push_back(head.at(i, u * R + part.col + r));
      }
      flush();
    }
  }

  core<Gen>& c_;
  const Plan& plan_;
  logits_sink& output_;
  const chunk_layout& layout_;
  bool clean_;
  tile out_part_, mask_, out_tile_;
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
