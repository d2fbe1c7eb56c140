// VectorE: copies, predicated selects, accumulations, reductions and its 32 x 32 transpose, fp32
// inside, rounding to nearest even when writing bf16.
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

template <class Gen>
class vector_engine {
  using traits_type = traits<Gen>;
  using rules = engine_rules<Gen>;

 public:
  explicit vector_engine(instruction_ledger<Gen>& ledger) : ledger_(ledger) {}

  void memset(const window& out, float value) {
    rules::check_partition_start(out);
    if (ledger_.computes())
      for (std::int64_t p = 0; p < out.np; ++p)
        for (std::int64_t i = 0; i < out.nc; ++i) out.at(p, i) = store_as(out.type(), value);
    ledger_.vector_instruction(out.nc, 1, is_narrow(out.type()), false);
  }
  // out = in (PSUM -> SBUF evacuation or a cast), lane by lane for x4 elements: VectorE's
  // tensor_copy, or (`on`) ScalarE's identity activation, whose fp32 data path carries one value
  // per element, not x4 words.
  void copy(const window& out, const window& in,
            elementwise_engine on = elementwise_engine::vector) {
    rules::check_same_shape(out, in);
    rules::check(dtype_lanes(out.type()) == dtype_lanes(in.type()), "copy keeps the lanes");
    const int lanes = dtype_lanes(in.type());
    rules::check(
        on == elementwise_engine::vector || (on == elementwise_engine::scalar && lanes == 1),
        "a copy runs on VectorE, or on ScalarE for one value per element");
    if (ledger_.computes())
      for (std::int64_t p = 0; p < in.np; ++p)
        for (std::int64_t i = 0; i < in.nc; ++i)
          for (int j = 0; j < lanes; ++j) out.at(p, i, j) = store_as(out.type(), in.at(p, i, j));
    const std::int64_t before = ledger_.counts().scalar.cycles;
    ledger_.evacuation(in.nc, is_narrow(in.type()) && is_narrow(out.type()),
                       in.space() == memory::psum, on);
    if (on == elementwise_engine::scalar) {
      ++ledger_.counts().scalar_copies;
      ledger_.counts().scalar_copy_cycles += ledger_.counts().scalar.cycles - before;
    }
  }
  // acc = in * scalar[p] + (first ? 0 : acc), the per-partition scalar a [P, 1] tile (NKI's
  // scalar_tensor_tensor: two tensor inputs).
  // On GpSimd (`on`): one element per lane per cycle, 2N for two inputs, SBUF operands only.
  void scale_add(const window& acc, const window& in, const window& scalar, write_mode mode,
                 elementwise_engine on = elementwise_engine::vector) {
    const bool first = mode == write_mode::overwrite;
    rules::check_same_shape(acc, in);
    rules::check(scalar.np == in.np && scalar.nc == 1, "scale_add scalar is [P, 1]");
    rules::check(on != elementwise_engine::scalar, "scale_add runs on VectorE or GpSimd");
    rules::check(on != elementwise_engine::gpsimd ||
                     (in.space() == memory::sbuf && acc.space() == memory::sbuf),
                 "GpSimd reads and writes SBUF only");
    if (ledger_.computes())
      for (std::int64_t p = 0; p < in.np; ++p) {
        const float s = scalar.at(p, 0);
        for (std::int64_t i = 0; i < in.nc; ++i) {
          const float v = in.at(p, i) * s;
          acc.at(p, i) = store_as(acc.type(), first ? 0.0f + v : acc.at(p, i) + v);
        }
      }
    if (on == elementwise_engine::gpsimd)
      ledger_.gpsimd_elementwise(in.nc, first ? 1 : 2);
    else
      ledger_.vector_instruction(in.nc, first ? 1 : 2,
                                 is_narrow(in.type()) && is_narrow(acc.type()),
                                 in.space() == memory::psum);
  }
  // out[p, i] = valid[i] ? in[p, src[i]] : fill, lane by lane: a predicated copy reading its
  // input through an access pattern (src: a column map, null for the identity) with a column
  // mask shared by all partitions (null: every column valid). The epilogue's cast and -inf,
  // and the staging copies of the MX layout. Two inputs when masked. Unmasked, between SBUF
  // tiles, it may run on GpSimd (`on`: tensor_copy through the same access pattern) where the
  // generation gives GpSimd its own SBUF port.
  void select(const window& out, const window& in, const std::int32_t* src,
              const unsigned char* valid, float fill,
              elementwise_engine on = elementwise_engine::vector) {
    rules::check(out.np == in.np && dtype_lanes(out.type()) == dtype_lanes(in.type()),
                 "select keeps partitions and lanes");
    rules::check(on == elementwise_engine::vector ||
                     (on == elementwise_engine::gpsimd && !valid && in.space() == memory::sbuf &&
                      out.space() == memory::sbuf && !traits_type::sbuf_vector_gpsimd_exclusive),
                 "a select runs on VectorE, or unmasked between SBUF tiles on GpSimd (trn2 on)");
    rules::check_partition_start(out);
    rules::check_partition_start(in);
    const int lanes = dtype_lanes(in.type());
    if (ledger_.computes())
      for (std::int64_t p = 0; p < out.np; ++p)
        for (std::int64_t i = 0; i < out.nc; ++i)
          for (int j = 0; j < lanes; ++j)
            out.at(p, i, j) =
                store_as(out.type(), !valid || valid[i] ? in.at(p, src ? src[i] : i, j) : fill);
    if (on == elementwise_engine::gpsimd)
      ledger_.gpsimd_elementwise(out.nc, 1);
    else
      ledger_.vector_instruction(out.nc, valid ? 2 : 1,
                                 is_narrow(in.type()) && is_narrow(out.type()),
                                 in.space() == memory::psum);
  }
  // out[p, i] = mask[p, i] ? in[p, i] : fill, lane by lane: a predicated copy with a u8 mask
  // tile of the same shape (tensor_tensor: two inputs).
  void select_where(const window& out, const window& in, const window& mask, float fill) {
    rules::check_same_shape(out, in);
    rules::check_same_shape(out, mask);
    rules::check(mask.type() == dtype::u8 && dtype_lanes(out.type()) == dtype_lanes(in.type()),
                 "select_where takes a u8 mask and keeps the lanes");
    const int lanes = dtype_lanes(in.type());
    if (ledger_.computes())
      for (std::int64_t p = 0; p < out.np; ++p)
        for (std::int64_t i = 0; i < out.nc; ++i)
          for (int j = 0; j < lanes; ++j)
            out.at(p, i, j) = store_as(out.type(), mask.at(p, i) != 0.0f ? in.at(p, i, j) : fill);
    ledger_.vector_instruction(out.nc, 2, is_narrow(in.type()) && is_narrow(out.type()),
                               in.space() == memory::psum);
  }
  // out = a * |b| elementwise (tensor_tensor; b read through its access pattern).
  void multiply_abs(const window& out, const window& a, const window& b) {
    rules::check_same_shape(out, a);
    rules::check_same_shape(out, b);
    if (ledger_.computes())
      for (std::int64_t p = 0; p < out.np; ++p)
        for (std::int64_t i = 0; i < out.nc; ++i)
          out.at(p, i) = store_as(out.type(), a.at(p, i) * std::fabs(b.at(p, i)));
    ledger_.vector_instruction(out.nc, 2, false,
                               a.space() == memory::psum || b.space() == memory::psum);
  }
  // out = relu(in) x w elementwise, w read through its access pattern (e.g. one row of weights
  // repeated along the free axis): NKI's scalar_tensor_tensor (max with 0, then multiply by a
  // second tensor), two inputs. relu keeps NaN, as the activation's does.
  void relu_multiply(const window& out, const window& in, const window& w) {
    rules::check_same_shape(out, in);
    rules::check_same_shape(out, w);
    rules::check_partition_start(out);
    rules::check_partition_start(in);
    if (ledger_.computes())
      for (std::int64_t p = 0; p < in.np; ++p)
        for (std::int64_t i = 0; i < in.nc; ++i) {
          float v = in.at(p, i);
          if (v < 0.0f) v = 0.0f;
          out.at(p, i) = store_as(out.type(), v * w.at(p, i));
        }
    ledger_.vector_instruction(in.nc, 2, false,
                               in.space() == memory::psum || w.space() == memory::psum);
  }
  // out[p, c] = in[p, c x n] + ... + in[p, c x n + n - 1] in fp32, in that order (a
  // tensor_reduce over the inner of two free dimensions), SBUF to SBUF: on VectorE or GpSimd,
  // whichever would finish it first (instruction_ledger::sbuf_step).
  void sum_runs(const window& out, const window& in, std::int64_t n) {
    rules::check(n >= 1 && out.np == in.np && in.nc == out.nc * n,
                 "sum_runs reduces runs of n columns, one output column each");
    rules::check(in.space() == memory::sbuf && out.space() == memory::sbuf,
                 "sum_runs reads and writes SBUF (GpSimd may run it)");
    rules::check_partition_start(out);
    rules::check_partition_start(in);
    if (ledger_.computes())
      for (std::int64_t p = 0; p < out.np; ++p)
        for (std::int64_t c = 0; c < out.nc; ++c) {
          float acc = 0.0f;
          for (std::int64_t h = 0; h < n; ++h) acc += in.at(p, c * n + h);
          out.at(p, c) = store_as(out.type(), acc);
        }
    ledger_.sbuf_step(in.nc, 1, false);
  }
  // Whether every element of `in` is finite (a tensor_reduce to one flag per partition, read
  // back by the schedule). Cost-only runs have no values: they take the finite path.
  bool all_finite(const window& in) {
    rules::check_partition_start(in);
    bool ok = true;
    if (ledger_.computes())
      for (std::int64_t p = 0; p < in.np && ok; ++p)
        for (std::int64_t i = 0; i < in.nc && ok; ++i) ok = std::isfinite(in.at(p, i));
    ledger_.vector_instruction(in.nc, 1, false, in.space() == memory::psum);
    return ok;
  }
  // VectorE's 32 x 32 transpose: out [F, P] = in [P, F]^T with P, F <= 32, within one
  // quadrant; exact for every value (NaN and Inf included).
  void transpose32(const window& out, const window& in) {
    rules::check(in.np <= 32 && in.nc <= 32 && out.np == in.nc && out.nc == in.np,
                 "VectorE transposes [<= 32 x <= 32] into [F, P]");
    rules::check(in.p0 / 32 == out.p0 / 32 && in.p0 % 32 == 0 && out.p0 % 32 == 0,
                 "VectorE transposes within one 32-partition quadrant");
    if (ledger_.computes())
      for (std::int64_t p = 0; p < in.np; ++p)
        for (std::int64_t f = 0; f < in.nc; ++f) out.at(f, p) = in.at(p, f);
    ledger_.vector_instruction(32, 1, is_narrow(in.type()) && is_narrow(out.type()),
                               in.space() == memory::psum);
    ++ledger_.counts().vector_transposes;
  }
  // A VectorE instruction of `elements` per partition and `inputs` inputs whose result the
  // caller computes (a compare whose outcome feeds a host-side selection, e.g. top-k).
  void vector_elementwise(std::int64_t elements, int inputs) {
    ledger_.vector_instruction(elements, inputs, false, false);
  }
  // An elementwise step over SBUF on VectorE or GpSimd, whichever would finish it first
  // (instruction_ledger::sbuf_step).
  void sbuf_step(std::int64_t n, int inputs, bool narrow) { ledger_.sbuf_step(n, inputs, narrow); }

 private:
  instruction_ledger<Gen>& ledger_;
};

}  // namespace neuron_backend
MQALOGITS_NAMESPACE_END
