// The neuron model's cost rules per generation on hand-computed cases, example 09's lines and
// their ordering, the instruction mix of AWS's sparse-attention indexer, LNC = 2, cost-only
// captures and the exact top-k entry point.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <regex>
#include <string>
#include <vector>

#include <mqalogits/neuron.hpp>

#include "support/error_of.hpp"

#include "../../examples/09_neuron_schedule/shapes.hpp"
#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"

namespace ml = mqalogits;
namespace nb = ml::neuron_backend;
namespace rnd = ref::rand;
using ml::backend::trn1;
using ml::backend::trn2;
using ml::backend::trn3;
using nb::dtype;

namespace {

// The documented figures, typed in independently of traits.hpp from the engine tables of the
// architecture guides: clocks (TensorE, ScalarE, VectorE, GpSimd); elements per partition per
// cycle: VectorE fp32 (other types), VectorE bf16 copy within SBUF (trn2's 4x performance
// mode), VectorE bf16 two-input (trn2's 2x), ScalarE bf16; passes of a 32-bit TensorE
// transpose; per-core DMA bandwidth and fixed cost per DMA; software DGE on GpSimd.
struct documented {
  double tensor_hz, scalar_hz, vector_hz, gpsimd_hz, vector_fp32, vector_bf16_copy, vector_bf16_tt,
      scalar_bf16;
  std::int64_t transpose32_passes;
  double dma_bw, dma_fixed;
  bool gather_on_gpsimd, trn1_ports;
};
template <class G>
documented facts();
template <>
documented facts<trn1>() {
  return {2.8e9, 1.4e9, 1.12e9, 1.4e9, 1, 1, 1, 1, 4, 272e9, 1.3e-6, false, true};
}
template <>
documented facts<trn2>() {
  return {2.4e9, 1.2e9, 0.96e9, 1.2e9, 2, 4, 2, 1, 2, 368e9, 1.3e-6, true, false};
}
template <>
documented facts<trn3>() {
  return {2.4e9, 1.2e9, 1.2e9, 1.2e9, 2, 4, 4, 2, 2, 528e9, 1.3e-6, true, false};
}

}  // namespace

TEMPLATE_TEST_CASE("neuron cost rules: TensorE max(N, 64) cycles, fp32 4 passes, fp8 as bf16",
                   "[neuron]", trn1, trn2, trn3) {
  using G = TestType;
  const documented d = facts<G>();
  nb::core<G> c;
  nb::tile st = c.sbuf("st", dtype::bf16, 128, 8), mv = c.sbuf("mv", dtype::bf16, 128, 300);
  nb::tile out = c.psum("out", 8, 300);
  c.matmul(nb::window(out), st, mv);
  CHECK(c.counters().tensor.cycles == 300);
  c.matmul(nb::window(out, 0, 8, 0, 10), st, nb::window(mv, 0, 128, 0, 10));
  CHECK(c.counters().tensor.cycles == 300 + 64);  // MM_INIT_LATENCY floor
  nb::tile st32 = c.sbuf("st32", dtype::fp32, 128, 8), mv32 = c.sbuf("mv32", dtype::fp32, 128, 300);
  c.matmul(nb::window(out), st32, mv32);
  CHECK(c.counters().tensor.cycles == 364 + 4 * 300);
  CHECK(c.counters().tensor.seconds == Approx((364 + 1200) / d.tensor_hz));
  // TensorE transposes: max(P, 64) cycles; 32-bit elements 4 passes, 2 in trn2 / trn3's
  // transpose mode.
  nb::tile t_in = c.sbuf("t in", dtype::bf16, 100, 128), t32 = c.sbuf("t32", dtype::fp32, 100, 128);
  nb::tile t_out = c.psum("t out", 128, 100);
  const std::int64_t before = c.counters().tensor.cycles;
  c.transpose(t_out, t_in);
  c.transpose(t_out, t32);
  CHECK(c.counters().tensor.cycles - before == 100 + d.transpose32_passes * 100);
  // The moving free size: one fp32 PSUM bank on trn1 / trn2, 4096 fp32 on trn3.
  if constexpr (std::is_same_v<G, trn3>) {
    nb::core<G> c3;
    nb::tile st3 = c3.sbuf("st", dtype::bf16, 128, 8),
             wide = c3.sbuf("wide", dtype::bf16, 128, 4096);
    nb::tile wide_out = c3.psum("wide out", 8, 4096);  // 8 PSUM banks
    CHECK_NOTHROW(c3.matmul(nb::window(wide_out), st3, wide));
    CHECK(c3.counters().tensor.cycles == 4096);
    // fp8 (native e4m3fn): double row doubles the contraction, not the columns, so a matmul
    // contracting over 128 partitions costs what bf16 does.
    nb::tile s8 = c.sbuf("s8", dtype::fp8, 128, 8), m8 = c.sbuf("m8", dtype::fp8, 128, 300);
    const std::int64_t b8 = c.counters().tensor.cycles;
    c.matmul(nb::window(out), s8, m8);
    CHECK(c.counters().tensor.cycles - b8 == 300);
    c.matmul(nb::window(out, 0, 8, 0, 10), s8, nb::window(m8, 0, 128, 0, 10));
    CHECK(c.counters().tensor.cycles - b8 == 300 + 64);
  } else {
    nb::tile wide = c.sbuf("wide", dtype::bf16, 128, 513);
    CHECK(check::error_of([&] { (void)c.psum("wide out", 8, 513); }).find("2 KiB bank") !=
          std::string::npos);
    nb::tile s8 = c.sbuf("s8", dtype::fp8, 128, 8), m8 = c.sbuf("m8", dtype::fp8, 128, 300);
    CHECK(check::error_of([&] { c.matmul(nb::window(out), s8, m8); }).find("e4m3fn") !=
          std::string::npos);  // EVRF051: e4m3fn is not a usable type before trn3
  }
}

TEMPLATE_TEST_CASE("neuron cost rules: ScalarE / VectorE clocks, widths, two-input 2N", "[neuron]",
                   trn1, trn2, trn3) {
  using G = TestType;
  const documented d = facts<G>();
  nb::core<G> c;
  nb::tile f = c.sbuf("f", dtype::fp32, 128, 1000), g = c.sbuf("g", dtype::fp32, 128, 1000);
  nb::tile b = c.sbuf("b", dtype::bf16, 128, 1000), b2 = c.sbuf("b2", dtype::bf16, 128, 1000);
  nb::tile s = c.sbuf("s", dtype::fp32, 128, 1);
  auto cycles = [](double n, double rate) {
    return 60 + static_cast<std::int64_t>(std::ceil(n / rate));
  };
  c.copy(g, f);  // fp32: 128 (trn1) or 256 (trn2, trn3) elements per cycle
  const auto fp32_copy = cycles(1000, d.vector_fp32);
  CHECK(c.counters().vector.cycles == fp32_copy);
  c.copy(b2, b);  // bf16 within SBUF: trn2's 4x performance mode, trn3's 512 per cycle
  const auto bf16_copy = cycles(1000, d.vector_bf16_copy);
  CHECK(c.counters().vector.cycles == fp32_copy + bf16_copy);
  c.scale_add(g, f, s, nb::write_mode::accumulate);  // scalar_tensor_tensor: two tensor inputs, ~2N
  const auto fp32_tt = cycles(2000, d.vector_fp32);
  CHECK(c.counters().vector.cycles == fp32_copy + bf16_copy + fp32_tt);
  c.scale_add(b2, b, s, nb::write_mode::accumulate);  // bf16 tensor_tensor: trn2's 2x mode
  const auto bf16_tt = cycles(2000, d.vector_bf16_tt);
  const auto all = fp32_copy + bf16_copy + fp32_tt + bf16_tt;
  CHECK(c.counters().vector.cycles == all);
  CHECK(c.counters().vector.seconds == Approx(static_cast<double>(all) / d.vector_hz));
  c.gpsimd_elementwise(1000, 1);  // GpSimd: 128 per cycle at its own clock
  CHECK(c.counters().gpsimd.seconds == Approx(1060 / d.gpsimd_hz));
  c.activation(b2, b, nb::activation_fn::relu);
  c.activation(g, f, nb::activation_fn::relu);
  const auto bf16_act = 60 + static_cast<std::int64_t>(std::ceil(1000 / d.scalar_bf16));
  CHECK(c.counters().scalar.cycles == bf16_act + 1060);
  CHECK(c.counters().scalar.seconds == Approx((bf16_act + 1060) / d.scalar_hz));
}

TEMPLATE_TEST_CASE("neuron cost rules: an unmasked select between SBUF tiles may run on GpSimd",
                   "[neuron]", trn1, trn2, trn3) {
  using G = TestType;
  nb::core<G> c;
  nb::tile in = c.sbuf("in", dtype::fp32, 128, 32), out = c.sbuf("out", dtype::fp32, 128, 128);
  std::vector<std::int32_t> map(128);
  for (int i = 0; i < 128; ++i) map[static_cast<std::size_t>(i)] = i % 32;  // four copies
  std::vector<unsigned char> valid(128, 1);
  for (int p = 0; p < 128; ++p)
    for (int i = 0; i < 32; ++i) in.at(p, i) = static_cast<float>(p * 32 + i);
  const auto gpsimd = nb::elementwise_engine::gpsimd;
  if constexpr (nb::traits<G>::sbuf_vector_gpsimd_exclusive) {  // trn1: one SBUF port
    CHECK_THROWS_AS(c.select(out, in, map.data(), nullptr, 0.0f, gpsimd), ml::error);
  } else {
    // GpSimd: one element per lane per cycle at its clock, nothing on VectorE.
    c.select(out, in, map.data(), nullptr, 0.0f, gpsimd);
    CHECK(c.counters().gpsimd.cycles == 60 + 128);
    CHECK(c.counters().vector.cycles == 0);
    for (int p = 0; p < 128; p += 37)
      for (int i = 0; i < 128; i += 13) CHECK(out.at(p, i) == in.at(p, i % 32));
    // A masked select (two inputs) stays on VectorE, as does one reading PSUM.
    CHECK_THROWS_AS(c.select(out, in, map.data(), valid.data(), 0.0f, gpsimd), ml::error);
    nb::tile ps = c.psum("ps", 128, 32);
    CHECK_THROWS_AS(c.select(out, ps, map.data(), nullptr, 0.0f, gpsimd), ml::error);
  }
}

TEMPLATE_TEST_CASE("neuron cost rules: a copy out of PSUM on ScalarE or VectorE", "[neuron]", trn1,
                   trn2, trn3) {
  using G = TestType;
  const documented d = facts<G>();
  nb::core<G> c;
  nb::tile p = c.psum("p", 128, 100);
  nb::tile b = c.sbuf("b", dtype::bf16, 128, 100), u = c.sbuf("u", dtype::u8, 128, 100);
  nb::tile x = c.sbuf("x", dtype::fp8x4, 128, 100), x2 = c.sbuf("x2", dtype::fp8x4, 128, 100);
  for (std::int64_t i = 0; i < 100; ++i) p.at(3, i) = static_cast<float>(255 - i);
  c.copy(b, p, nb::elementwise_engine::scalar);  // ScalarE's identity activation: fp32 in
  c.copy(u, p, nb::elementwise_engine::scalar);
  CHECK(c.counters().vector.instructions == 0);
  CHECK(c.counters().scalar.cycles == 2 * (60 + 100));  // 128 fp32 elements per cycle
  CHECK(c.counters().scalar.seconds == Approx(2 * 160 / d.scalar_hz));
  CHECK(c.counters().scalar_psum_seconds == Approx(2 * 160 / d.scalar_hz));
  for (std::int64_t i = 0; i < 100; ++i) {
    CHECK(b.at(3, i) == static_cast<float>(255 - i));
    CHECK(u.at(3, i) == static_cast<float>(255 - i));
  }
  c.copy(b, p);  // VectorE's tensor_copy, at its fp32 width
  CHECK(c.counters().vector.cycles ==
        60 + static_cast<std::int64_t>(std::ceil(100 / d.vector_fp32)));
  // x4 words: ScalarE carries one value per element.
  CHECK(check::error_of([&] {
          c.copy(x2, x, nb::elementwise_engine::scalar);
        }).find("a copy runs on VectorE, or on ScalarE for one value per element") !=
        std::string::npos);
  CHECK(check::error_of([&] {
          c.copy(b, p, nb::elementwise_engine::gpsimd);
        }).find("a copy runs on VectorE") != std::string::npos);
}

TEMPLATE_TEST_CASE("neuron cost: decode's copies out of PSUM go to the engine free first",
                   "[neuron]", trn1, trn2, trn3) {
  using G = TestType;
  // 8 requests of 8192 keys: per 4 x 128 keys (trn3) or per block slot (trn1 / trn2) the
  // transposes' copies; the relu evacuations are ScalarE's other work.
  const nb::report r = neuron_shapes::paged_decode<G, ml::mxfp8>(8, 8192);
  INFO(r.summary());
  if constexpr (nb::traits<G>::psum_read_exclusive) {
    // trn1: ScalarE and VectorE share the PSUM port, so the copies stay on VectorE.
    CHECK(r.scalar_copies == 0);
  } else if constexpr (!nb::traits<G>::mx_matmul) {
    // trn2: the transposes of four key slots share a PSUM bank and leave it in one copy (a
    // two-level access pattern: the slots' columns 1 apart, the pages' a block apart), on
    // ScalarE or VectorE, whichever is free first: VectorE decodes the keys, so ScalarE takes
    // them and stays below it. The decode's steps go to GpSimd or VectorE, whichever is free
    // first: the two end level.
    CHECK(r.scalar_copies < r.matmul_transpose / 3);
    CHECK(r.scalar_copies > r.matmul_transpose / 5);
    CHECK(r.scalar.seconds < r.vector.seconds);
    CHECK(r.gpsimd.seconds == Approx(r.vector.seconds).epsilon(0.05));
  } else {
    // trn3: half the transposes are the x4 words (VectorE); ScalarE takes part of the scale
    // bytes' copies, and the two engines end within about one request's work of each other
    // (VectorE alone took them: 403 against ScalarE's 249 us at 64 x 8192).
    CHECK(r.scalar_copies > 0);
    CHECK(r.scalar_copies < r.matmul_transpose / 2);
    CHECK(r.scalar.seconds == Approx(r.vector.seconds).epsilon(0.2));
  }
}

TEMPLATE_TEST_CASE("neuron cost rules: DMA fixed cost + bytes / bandwidth, small rows, gathers",
                   "[neuron]", trn1, trn2, trn3) {
  using G = TestType;
  const documented d = facts<G>();
  nb::core<G> c;
  nb::tile big = c.sbuf("big", dtype::u8, 128, 4096);
  std::vector<std::uint8_t> src(4096, 7);
  {
    auto t = c.dma();
    for (int p = 0; p < 128; ++p) t.bytes_in(big, p, 0, src.data(), 4096);
  }
  const nb::report& r = c.counters();
  CHECK(r.dma_transfers == 1);
  CHECK(r.dma_descriptors == 128);
  CHECK(r.dma_inefficient_descriptors == 0);
  CHECK(r.dma_bytes == 128 * 4096);
  // 16 queues overlap the fixed cost; each descriptor costs 512 B of bandwidth.
  const double big_s = d.dma_fixed / 16 + (128.0 * 4096 + 128 * 512) / d.dma_bw;
  CHECK(r.dma_seconds == Approx(big_s));
  CHECK(big.at(5, 100) == 7.0f);
  // The same bytes in 128 B rows: 32x the descriptors, each overhead-bound.
  {
    auto t = c.dma();
    for (int p = 0; p < 128; ++p)
      for (int i = 0; i < 32; ++i) t.bytes_in(big, p, i * 128, src.data(), 128);
  }
  CHECK(c.counters().dma_small_descriptors == 128 * 32);
  const double small_s = d.dma_fixed / 16 + (128.0 * 4096 + 4096 * 512) / d.dma_bw;
  CHECK(c.counters().dma_seconds == Approx(big_s + small_s));
  CHECK(small_s > 3 * (big_s - d.dma_fixed / 16));
  // A gather of 10 blocks: on trn2 / trn3 one indirect DMA whose descriptors GpSimd writes
  // (software DGE); trn1 has no indirect DMA, so each block is a DMA with its own fixed cost.
  {
    auto t = c.gather(10);
    for (int p = 0; p < 10; ++p) t.bytes_in(big, p, 0, src.data(), 4096);
  }
  CHECK(c.counters().dma_gathers == 1);
  CHECK(c.counters().dma_gathered_blocks == 10);
  CHECK(c.counters().gpsimd.cycles == (d.gather_on_gpsimd ? 60 + 16 * 10 : 0));
  const double gather_s =
      (d.gather_on_gpsimd ? 1 : 10) * d.dma_fixed / 16 + (10.0 * 4096 + 10 * 512) / d.dma_bw;
  CHECK(c.counters().dma_seconds == Approx(big_s + small_s + gather_s));
}

TEMPLATE_TEST_CASE("neuron cost rules: trn1's shared PSUM and SBUF ports", "[neuron]", trn1, trn2,
                   trn3) {
  using G = TestType;
  const documented d = facts<G>();
  nb::core<G> c;
  nb::tile ps = c.psum("ps", 128, 500);
  nb::tile a = c.sbuf("a", dtype::fp32, 128, 500), b = c.sbuf("b", dtype::fp32, 128, 500);
  c.activation(nb::window(a, 0, 128, 0, 400), nb::window(ps, 0, 128, 0, 400),
               nb::activation_fn::relu);  // ScalarE reads PSUM: 460 cycles
  c.copy(b, ps);                          // VectorE reads PSUM: 60 + 500 / its fp32 width
  const double vector_s = (60 + 500 / d.vector_fp32) / d.vector_hz, scalar_s = 460 / d.scalar_hz;
  const nb::report& r = c.counters();
  CHECK(r.scalar_psum_seconds == Approx(scalar_s));
  CHECK(r.vector_psum_seconds == Approx(vector_s));
  nb::report::limit l[nb::report::num_limits];
  r.limits(l);
  const double serial = scalar_s + vector_s;
  CHECK(l[5].seconds == Approx(d.trn1_ports ? serial : 0.0));
  CHECK(r.estimated_seconds() == Approx(d.trn1_ports ? serial : std::max(scalar_s, vector_s)));
  CHECK(std::string(r.bound_by()) == (d.trn1_ports          ? "PSUM-read(ScalarE+VectorE)"
                                      : vector_s > scalar_s ? "VectorE"
                                                            : "ScalarE"));
}

TEST_CASE("neuron model: trn3 MX matmul layout rules (x4 on 32 partitions, quadrant scales)",
          "[neuron]") {
  nb::core<trn3> c;
  rnd::engine rng(31);
  // Q: 2 columns, K: 3 columns, 128-wide contraction packed 4 per partition in quadrant 1.
  nb::tile q = c.sbuf("q", dtype::fp8x4, 64, 2), k = c.sbuf("k", dtype::fp8x4, 64, 3);
  nb::tile qs = c.sbuf("qs", dtype::u8, 64, 2), ks = c.sbuf("ks", dtype::u8, 64, 3);
  for (int p = 32; p < 64; ++p)
    for (int j = 0; j < 4; ++j) {
      for (int m = 0; m < 2; ++m) q.at(p, m, j) = ml::e4m3_values[rnd::uniform(rng, 0, 0x7E)];
      for (int n = 0; n < 3; ++n) k.at(p, n, j) = ml::e4m3_values[rnd::uniform(rng, 0x80, 0xFE)];
    }
  for (int b = 0; b < 4; ++b) {
    for (int m = 0; m < 2; ++m) qs.at(32 + b, m) = static_cast<float>(rnd::uniform(rng, 120, 134));
    for (int n = 0; n < 3; ++n) ks.at(32 + b, n) = static_cast<float>(rnd::uniform(rng, 120, 134));
  }
  nb::tile out = c.psum("out", 2, 3);
  c.matmul_mx(out, nb::window(q, 32, 32, 0, 2), nb::window(qs, 32, 4, 0, 2),
              nb::window(k, 32, 32, 0, 3), nb::window(ks, 32, 4, 0, 3));
  for (int m = 0; m < 2; ++m)
    for (int n = 0; n < 3; ++n) {
      double exact = 0, mag = 0;
      for (int p = 0; p < 32; ++p)
        for (int j = 0; j < 4; ++j) {
          const int dim = 4 * p + j, blk = dim / 32;
          const double v =
              double(q.at(32 + p, m, j)) * std::ldexp(1.0, int(qs.at(32 + blk, m)) - 127) *
              double(k.at(32 + p, n, j)) * std::ldexp(1.0, int(ks.at(32 + blk, n)) - 127);
          exact += v;
          mag += std::fabs(v);
        }
      CHECK(std::fabs(out.at(m, n) - exact) <= std::ldexp(mag, -20));
    }
  // One 32-partition matmul is a quarter of max(N, 64): four run at once (row tiling).
  CHECK(c.counters().tensor.cycles == 16);
  CHECK(c.counters().matmul_flops == 2 * 128 * 2 * 3);
  // The rules: even stationary free size, a multiple of 32 partitions from a quadrant, scales in
  // the operand's quadrant rows.
  nb::tile q3 = c.sbuf("q3", dtype::fp8x4, 32, 3), qs3 = c.sbuf("qs3", dtype::u8, 4, 3);
  nb::tile out3 = c.psum("out3", 3, 3);
  CHECK(check::error_of([&] {
          c.matmul_mx(out3, q3, qs3, nb::window(k, 32, 32, 0, 3), nb::window(ks, 32, 4, 0, 3));
        }).find("even") != std::string::npos);
  CHECK(check::error_of([&] {
          c.matmul_mx(out, nb::window(q, 0, 16, 0, 2), nb::window(qs, 0, 2, 0, 2),
                      nb::window(k, 0, 16, 0, 3), nb::window(ks, 0, 2, 0, 3));
        }).find("multiple of 32") != std::string::npos);
  CHECK(check::error_of([&] {
          c.matmul_mx(out, nb::window(q, 32, 32, 0, 2), nb::window(qs, 0, 4, 0, 2),
                      nb::window(k, 32, 32, 0, 3), nb::window(ks, 32, 4, 0, 3));
        }).find("quadrant rows") != std::string::npos);
  nb::tile b16 = c.sbuf("b16", dtype::bf16, 32, 2);
  CHECK_THROWS_AS(c.matmul_mx(out, b16, nb::window(qs, 0, 4, 0, 2), nb::window(k, 32, 32, 0, 3),
                              nb::window(ks, 32, 4, 0, 3)),
                  ml::error);
  // Column tiling: two matmuls issued together in distinct column tiles run in parallel, each
  // charged half of its 16 cycles; their tiles must fit the 128 PE columns (2 columns take one
  // 32-column tile: four fit, five do not).
  const std::int64_t before = c.counters().tensor.cycles;
  c.matmul_mx(out, nb::window(q, 32, 32, 0, 2), nb::window(qs, 32, 4, 0, 2),
              nb::window(k, 32, 32, 0, 3), nb::window(ks, 32, 4, 0, 3), nb::write_mode::overwrite,
              2);
  CHECK(c.counters().tensor.cycles - before == 8);
  CHECK(check::error_of([&] {
          c.matmul_mx(out, nb::window(q, 32, 32, 0, 2), nb::window(qs, 32, 4, 0, 2),
                      nb::window(k, 32, 32, 0, 3), nb::window(ks, 32, 4, 0, 3),
                      nb::write_mode::overwrite, 5);
        }).find("column tiles") != std::string::npos);
}

TEST_CASE("neuron model: a two-level access pattern places runs evenly apart", "[neuron]") {
  nb::core<trn2> c;
  nb::tile src = c.sbuf("src", dtype::fp32, 2, 6), dst = c.sbuf("dst", dtype::fp32, 2, 12);
  for (int p = 0; p < 2; ++p)
    for (int i = 0; i < 6; ++i) src.at(p, i) = static_cast<float>(10 * p + i);
  // Two runs of three elements four apart, the second run one column after the first: element
  // i lands at column (i % 3) x 4 + i / 3, as a slot's keys do in K^T (pages a block apart).
  c.copy(nb::window(dst, 0, 2, 0, 6, 4, 3, 1), src);
  for (int p = 0; p < 2; ++p)
    for (int i = 0; i < 6; ++i) CHECK(dst.at(p, i % 3 * 4 + i / 3) == src.at(p, i));
  CHECK(c.counters().vector.instructions + c.counters().scalar.instructions == 1);
  // A pattern whose last run reaches past the tile is refused.
  CHECK(check::error_of([&] {
          c.copy(nb::window(dst, 0, 2, 0, 6, 4, 3, 4), src);
        }).find("past the end") != std::string::npos);
}

TEST_CASE("neuron model: trn1's TensorE transpose refuses NaN, trn2's takes it", "[neuron]") {
  nb::core<trn1> c1;
  nb::core<trn2> c2;
  nb::tile a1 = c1.sbuf("a", dtype::bf16, 4, 4), o1 = c1.psum("o", 4, 4);
  nb::tile a2 = c2.sbuf("a", dtype::bf16, 4, 4), o2 = c2.psum("o", 4, 4);
  a1.at(1, 2) = a2.at(1, 2) = std::numeric_limits<float>::quiet_NaN();
  CHECK(check::error_of([&] { c1.transpose(o1, a1); }).find("not bit-accurate") !=
        std::string::npos);
  c2.transpose(o2, a2);
  CHECK(std::isnan(o2.at(2, 1)));
  // VectorE's 32 x 32 transpose is exact everywhere.
  nb::tile v = c1.sbuf("v", dtype::bf16, 32, 32);
  c1.transpose32(nb::window(v, 0, 4, 0, 4), a1);
  CHECK(std::isnan(v.at(2, 1)));
}

namespace {

// The reference's OCP decoders (written from the bit layouts, not from the library's tables).
float e4m3fn(int b) {
  return static_cast<float>(ref::e4m3(static_cast<std::uint8_t>(b)));
}
float e2m1(int n) {
  return static_cast<float>(ref::e2m1(static_cast<std::uint8_t>(n)));
}
float ue8m0(int s) {
  return static_cast<float>(ref::ue8m0(static_cast<std::uint8_t>(s)));
}
// A bf16 bit pattern's value.
float bf16_value(std::uint32_t bits) {
  return std::bit_cast<float>(bits << 16);
}
float as_bf16(float v) {
  return ml::to_float(ml::from_float<ml::bf16>(v));
}
bool same_value(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

}  // namespace

TEST_CASE("neuron model: the integer decode sequences are exact for every code", "[neuron]") {
  // e4m3fn: the signed byte's (x << 4) & 0x87F0 is the bf16 pattern of the code times 2^-120,
  // subnormals included; only the NaN codes need the predicated copy.
  for (int b = 0; b < 256; ++b) {
    const auto x = static_cast<std::int32_t>(static_cast<std::int8_t>(b));
    const float v =
        bf16_value(static_cast<std::uint32_t>((x * 16) & 0x87F0)) * std::ldexp(1.0f, 120);
    INFO("code " << b);
    if ((b & 0x7F) == 0x7F)
      CHECK(std::isnan(e4m3fn(b)));
    else
      CHECK(v == e4m3fn(b));
  }
  // e2m1 in the high half of a byte: (y << 2) & 0x81C0 is the code times 2^-126.
  for (int n = 0; n < 16; ++n) {
    const auto y = static_cast<std::int32_t>(static_cast<std::int8_t>(n << 4));
    const float v =
        bf16_value(static_cast<std::uint32_t>((y * 4) & 0x81C0)) * std::ldexp(1.0f, 126);
    INFO("code " << n);
    CHECK(v == e2m1(n));
  }
}

TEMPLATE_TEST_CASE("neuron cost rules: MX codes decode in four instructions, NaN codes in five",
                   "[neuron]", trn1, trn2) {
  using G = TestType;
  nb::core<G> c;
  // Four rows of 128 codes per partition, each with its four UE8M0 exponents, as they arrive.
  const int n = 512, rows = n / 128;
  nb::tile codes = c.sbuf("codes", dtype::u8, 128, n), out = c.sbuf("out", dtype::bf16, 128, n);
  nb::tile exps = c.sbuf("exps", dtype::u8, 128, rows * 4);
  nb::tile scales = c.sbuf("scales", dtype::bf16, 128, rows * 4);
  rnd::engine rng(41);
  auto byte = [&] { return rnd::uniform(rng, 0, 255); };
  for (int p = 0; p < 128; ++p) {
    for (int i = 0; i < n; ++i) {
      int b = byte();
      if ((b & 0x7F) == 0x7F) b ^= 1;  // no NaN code yet
      codes.at(p, i) = static_cast<float>(b);
    }
    for (int j = 0; j < rows * 4; ++j)
      exps.at(p, j) = static_cast<float>(j == 0 ? 0 : j == 1 ? 254 : rnd::uniform(rng, 100, 150));
  }
  exps.at(7, 2) = 255;  // a NaN scale
  auto instructions = [&] {
    return c.counters().vector.instructions + c.counters().gpsimd.instructions;
  };
  // The scales: 2^(e - 127), e = 0, 254 and 255 (NaN) included, in three one-input steps.
  c.decode_scales(scales, exps);
  CHECK(instructions() == nb::scale_decode_instructions);
  for (int p = 0; p < 128; ++p)
    for (int j = 0; j < rows * 4; ++j)
      CHECK(same_value(scales.at(p, j), ue8m0(static_cast<int>(exps.at(p, j)))));
  // Codes x scales (code i of a row reads its row's scale i / 32 through a broadcast access
  // pattern): the bits, the re-bias, the scale and the NaN-code flag.
  const nb::window sw(scales);
  const nb::block_scales by_row{.values = &sw, .row = 128, .per_row = 4};
  auto expect = [&](auto value_of) {
    for (int p = 0; p < 128; p += 7)
      for (int i = 0; i < n; ++i) {
        const float s = scales.at(p, i / 128 * 4 + i % 128 / 32);
        INFO("partition " << p << " code " << i);
        CHECK(same_value(out.at(p, i), as_bf16(value_of(p, i) * s)));
      }
  };
  auto before = instructions();
  c.template decode_codes<ml::mxfp8>(out, codes, by_row);
  CHECK(instructions() - before == 4);
  expect([&](int p, int i) { return e4m3fn(static_cast<int>(codes.at(p, i))); });
  // A NaN code anywhere: the predicated copy runs too, and the code decodes to NaN.
  codes.at(5, 7) = 0xFF;
  before = instructions();
  c.template decode_codes<ml::mxfp8>(out, codes, by_row);
  CHECK(instructions() - before == 5);
  CHECK(std::isnan(out.at(5, 7)));
  // Exponents of the codes' own shape (trn1's spread) are decoded per code: three steps more.
  nb::tile spread = c.sbuf("spread", dtype::u8, 128, n);
  for (int p = 0; p < 128; ++p)
    for (int i = 0; i < n; ++i) spread.at(p, i) = exps.at(p, i / 128 * 4 + i % 128 / 32);
  const nb::window ew(spread);
  before = instructions();
  c.template decode_codes<ml::mxfp8>(out, codes, {.exps = &ew});
  CHECK(instructions() - before == 5 + nb::scale_decode_instructions);
  expect([&](int p, int i) { return e4m3fn(static_cast<int>(codes.at(p, i))); });
  // e2m1: two nibble steps over the bytes, then the bits, the re-bias and the scale.
  nb::tile packed = c.sbuf("packed", dtype::u8, 128, n / 2);
  for (int p = 0; p < 128; ++p)
    for (int i = 0; i < n / 2; ++i) packed.at(p, i) = static_cast<float>(byte());
  before = instructions();
  c.unpack_nibbles(codes, packed);
  c.template decode_codes<ml::mxfp4>(out, codes, by_row);
  CHECK(instructions() - before == 5);
  expect([&](int p, int i) {
    const int b = static_cast<int>(packed.at(p, i / 2));
    return e2m1(i % 2 ? b >> 4 : b & 0xF);
  });
}

// ---- example 09 ----

namespace {

template <class G>
void check_lines(const std::vector<neuron_shapes::shape_line>& lines) {
  const documented d = facts<G>();
  const std::regex format(
      R"(^neuron (trn1|trn2|trn3) ([a-z0-9-]+) ([A-Za-z0-9/x]+) estimate ([0-9]+\.[0-9]{2}) us bound (\S+) roofline ([0-9]+\.[0-9]{2}) us$)");
  for (const auto& l : lines) {
    INFO(l.line);
    std::smatch m;
    REQUIRE(std::regex_match(l.line, m, format));
    CHECK(m[1] == nb::traits<G>::name);
    CHECK(std::stod(m[4]) == Approx(l.report.estimated_seconds() * 1e6).margin(0.006));
    // The bound the counts imply, from the documented clocks.
    const nb::report& r = l.report;
    std::vector<std::pair<std::string, double>> limits = {
        {"DMA", r.dma_seconds},
        {"TensorE", static_cast<double>(r.tensor.cycles) / d.tensor_hz},
        {"ScalarE", static_cast<double>(r.scalar.cycles) / d.scalar_hz},
        {"VectorE", static_cast<double>(r.vector.cycles) / d.vector_hz},
        {"GpSimd", r.gpsimd.seconds}};
    if (d.trn1_ports) {
      limits.push_back(
          {"PSUM-read(ScalarE+VectorE)", r.scalar_psum_seconds + r.vector_psum_seconds});
      limits.push_back({"SBUF(VectorE+GpSimd)", r.vector.seconds + r.gpsimd.seconds});
    }
    const auto top = std::max_element(limits.begin(), limits.end(),
                                      [](auto& a, auto& b) { return a.second < b.second; });
    CHECK(m[5] == top->first);
    CHECK(std::stod(m[4]) == Approx(top->second * 1e6).margin(0.006));
    // The roofline: no schedule beats it, and it is at least the time to move the bytes every
    // schedule must move and to run the score matmuls at TensorE's peak (typed in here: Q rows
    // of 132 B and fp32 weights, each request's 8192 keys of 132 B once, bf16 logits out; per
    // key and head 2 x 128 flops at 128 x 128 MACs per cycle, 4x for trn3's MX matmul).
    const double roof = std::stod(m[6]);
    CHECK(roof <= std::stod(m[4]) + 0.01);
    if (l.line.find("paged-decode-mxfp8 64x8192") != std::string::npos) {
      const double bytes = 64.0 * 64 * (132 + 4) + 64.0 * 8192 * 132 + 64.0 * 8192 * 2;
      const double macs = 128.0 * 128 * (std::is_same_v<G, trn3> ? 4 : 1);
      const double tensor = 64.0 * 8192 * 64 * 128 / (macs * d.tensor_hz);
      const int cores = l.line.find("lnc2") != std::string::npos ? 2 : 1;
      CHECK(roof * cores >= Approx(bytes / d.dma_bw * 1e6).epsilon(1e-3));
      CHECK(roof * cores >= Approx(tensor * 1e6).epsilon(1e-3));
    }
  }
}

}  // namespace

TEMPLATE_TEST_CASE("neuron cost rules: a head sum with the keys on its output partitions",
                   "[neuron]", trn1, trn2, trn3) {
  using Gen = TestType;
  // relu [64 heads, 1024 keys] x w [64 heads, 1 row]. Keys along the moving side: two matmuls
  // of 512 columns (one PSUM bank each), 4 x 512 cycles each (fp32). Keys on the output
  // partitions: 8 matmuls of stationary [64, 128] (columns u, u + 8, ...) against w as moving,
  // 4 x max(1, 64) cycles each, and partition i holds keys 8i .. 8i + 7.
  nb::core<Gen> c;
  nb::tile relu = c.sbuf("relu", dtype::fp32, 64, 1024), w = c.sbuf("w", dtype::fp32, 64, 1);
  for (int h = 0; h < 64; ++h) {
    w.at(h, 0) = 0.25f * static_cast<float>(h % 5) - 0.5f;
    for (int k = 0; k < 1024; ++k) relu.at(h, k) = static_cast<float>((h * 7 + k * 3) % 11);
  }
  nb::tile out = c.psum("out", 128, 8);
  for (int u = 0; u < 8; ++u)
    c.matmul(nb::window(out, 0, 128, u, 1), nb::window(relu, 0, 64, u, 128, 8), nb::window(w),
             nb::matmul_kind::head_sum);
  const std::int64_t partitioned = c.counters().tensor.cycles;
  CHECK(partitioned == 8 * 4 * 64);
  for (int i = 0; i < 128; ++i)
    for (int u = 0; u < 8; ++u) {
      float sum = 0;
      for (int h = 0; h < 64; ++h) sum += relu.at(h, 8 * i + u) * w.at(h, 0);
      CHECK(out.at(i, u) == sum);
    }
  nb::core<Gen> d;
  nb::tile relu2 = d.sbuf("relu", dtype::fp32, 64, 1024), w2 = d.sbuf("w", dtype::fp32, 64, 1);
  nb::tile row = d.psum("row", 1, 512);
  for (int t = 0; t < 2; ++t)
    d.matmul(nb::window(row), nb::window(w2), nb::window(relu2, 0, 64, 512 * t, 512),
             nb::matmul_kind::head_sum);
  CHECK(d.counters().tensor.cycles == 2 * 4 * 512);
  CHECK(2 * partitioned == d.counters().tensor.cycles);
}

TEST_CASE("neuron cost: decode's head sum and epilogue with the keys on all 128 partitions",
          "[neuron]") {
  // One request of 8192 keys (128 pages of 64), H = 64, trn3 MXFP8: the chunk's relu scores
  // [64, 8192] go through 64 head-sum matmuls (fp32, 4 x 64 cycles each), which leave 64 keys
  // on each of the 128 partitions; the cast is one ScalarE instruction of 64 elements (not
  // 8192 on one partition) and the logits leave in 128 descriptors of 64 bf16.
  const nb::report r = neuron_shapes::paged_decode<trn3, ml::mxfp8>(1, 8192);
  INFO(r.summary());
  CHECK(r.matmul_head_sum == 64);
  // Scores: 16 tiles of four row-tiled MX matmuls of 128 columns (32 cycles each), one relu
  // evacuation of 512 keys per tile; head sum; Q's word and scale transposes, the 16 groups'.
  const std::int64_t word_transpose = nb::traits<trn3>::pe_fp32_transpose_passes * 128;
  CHECK(r.tensor.cycles == 16 * 4 * 32 + 64 * 4 * 64 + (2 * 64 + 64) + 16 * (word_transpose + 128));
  // ScalarE: 16 relu evacuations and the cast, besides the scale copies it takes from VectorE.
  CHECK(r.scalar.instructions - r.scalar_copies == 16 + 1);
  CHECK(r.scalar.cycles - r.scalar_copy_cycles == 16 * (60 + 512) + (60 + 64));
  // Logits: 128 descriptors of 128 B (and no -inf fill: the row covers every column).
  CHECK(r.dma_bytes - 8192 * 2 == 64 * 132 + 64 * 4 + 128 * 8192 + 128 * 256);
}

TEST_CASE(
    "neuron cost: trn3 decode chunks score with their keys on partitions where that ends "
    "sooner",
    "[neuron]") {
  // 64 requests of 8192 keys, H = 64, trn3 MXFP8: every chunk takes 16 x 4 row-tiled MX score
  // matmuls either way (Q^T as stationary, or K^T's columns as stationary with the keys on the
  // output partitions). 40 chunks go with their keys on partitions (VectorE: relu x w as the
  // scores leave PSUM, then the reduce over the heads on VectorE or GpSimd; no head-sum
  // matmul), the other 24 are packed in pairs, 64 fp32 head-sum matmuls per pair.
  const nb::report r = neuron_shapes::paged_decode<trn3, ml::mxfp8>(64, 8192);
  INFO(r.summary());
  CHECK(r.matmul_score == 64 * 16 * 4);
  CHECK(r.matmul_head_sum == 12 * 64);
  // The choice balances TensorE against VectorE and GpSimd (within 3%), 1.14x of the floor.
  const double lo = std::min({r.tensor.seconds, r.vector.seconds, r.gpsimd.seconds});
  const double hi = std::max({r.tensor.seconds, r.vector.seconds, r.gpsimd.seconds});
  CHECK(hi < 1.031 * lo);
  CHECK(r.estimated_seconds() <= 1.2 * r.floor_seconds());
}

TEST_CASE("neuron cost: decode packs two requests' passes into one head sum", "[neuron]") {
  // Two requests of 8192 keys, H = 64, trn3 MXFP8. Each request's pass fills 64 partitions, so
  // the two are packed: request 1's score matmuls take the PE array's second column tile (PSUM
  // partitions 64..127) and run beside request 0's (column tiling: each charged half of its 32
  // cycles), and per 4 x 128 keys one relu evacuation reads all 128 partitions; the head sum
  // takes 64 fp32 matmuls of stationary relu [128, 128 keys] against the weights [128, 2] as
  // moving (4 x max(2, 64) cycles each), not 64 per request.
  const nb::report r = neuron_shapes::paged_decode<trn3, ml::mxfp8>(2, 8192);
  INFO(r.summary());
  CHECK(r.matmul_head_sum == 64);
  CHECK(r.matmul_score == 2 * 16 * 4);
  const std::int64_t word_transpose = nb::traits<trn3>::pe_fp32_transpose_passes * 128;
  const std::int64_t q_transposes = 2 * 64 + 64, k_transposes = 16 * (word_transpose + 128);
  CHECK(r.tensor.cycles == 2 * 16 * 4 * 16 + 64 * 4 * 64 + 2 * q_transposes + 2 * k_transposes);
  // ScalarE: 16 relu evacuations of 512 keys (both requests at once), one cast of the 64 keys
  // x 2 requests on each partition.
  CHECK(r.scalar.instructions - r.scalar_copies == 16 + 1);
  CHECK(r.scalar.cycles - r.scalar_copy_cycles == 16 * (60 + 512) + (60 + 2 * 64));
  // Unpacked, each request would take the single-request counts: twice the head-sum cycles,
  // and its score matmuls alone in the PE array.
  const nb::report one = neuron_shapes::paged_decode<trn3, ml::mxfp8>(1, 8192);
  CHECK(2 * one.tensor.cycles - r.tensor.cycles == 64 * 4 * 64 + 16 * 4 * 32);
  CHECK(2 * (one.scalar.cycles - one.scalar_copy_cycles) -
            (r.scalar.cycles - r.scalar_copy_cycles) ==
        16 * (60 + 512) + 60);
}

TEMPLATE_TEST_CASE("neuron cost rules: a matmul's output starts at a PE column tile", "[neuron]",
                   trn1, trn2, trn3) {
  // Column tiling: 2 x 64 PE columns on trn1, 4 x 32 on trn2 / trn3. A stationary of 32 columns
  // writes PSUM from partition 64 everywhere, from 32 or 96 only on v3 and later; the result is
  // the plain product, at the plain cost.
  using Gen = TestType;
  nb::core<Gen> c;
  nb::tile st = c.sbuf("st", dtype::fp32, 16, 32), mv = c.sbuf("mv", dtype::fp32, 16, 8);
  for (int k = 0; k < 16; ++k) {
    for (int m = 0; m < 32; ++m) st.at(k, m) = static_cast<float>((k + 2 * m) % 7) - 3.0f;
    for (int n = 0; n < 8; ++n) mv.at(k, n) = static_cast<float>((3 * k + n) % 5) - 2.0f;
  }
  nb::tile out = c.psum("out", 128, 8);
  c.matmul(nb::window(out, 64, 32, 0, 8), nb::window(st), nb::window(mv));
  CHECK(c.counters().tensor.cycles == 4 * 64);
  for (int m = 0; m < 32; ++m)
    for (int n = 0; n < 8; ++n) {
      float sum = 0;
      for (int k = 0; k < 16; ++k) sum += st.at(k, m) * mv.at(k, n);
      CHECK(out.at(64 + m, n) == sum);
    }
  if constexpr (nb::traits<Gen>::pe_column_tile == 64)
    CHECK_THROWS_WITH(c.matmul(nb::window(out, 32, 32, 0, 8), nb::window(st), nb::window(mv)),
                      Catch::Contains("column tile"));
  else
    CHECK_NOTHROW(c.matmul(nb::window(out, 96, 32, 0, 8), nb::window(st), nb::window(mv)));
}

TEST_CASE("neuron cost: the decode head sum's two layouts, compared on the model", "[neuron]") {
  // One row of H = 64 on trn3, 16 keys. Keys on partitions: one fp32 matmul of 4 x max(1, 64)
  // cycles, a cast of 1 element on 16 partitions (fp32 in: 1 per cycle), 16 descriptors of
  // 2 B. One partition per row: 4 x max(16, 64) cycles, a cast of 16 elements, 1 descriptor.
  using tr = nb::traits<trn3>;
  const auto dma = [](double bytes, double descriptors) {
    return tr::dma_fixed_s / tr::dma_queues +
           (bytes + descriptors * tr::dma_descriptor_overhead_bytes) / tr::dma_bytes_per_s;
  };
  const auto t = nb::head_sum_layouts<trn3>(16, 1, 64);
  CHECK(t.keys_on_partitions_s ==
        Approx(4 * 64 / tr::tensor_hz + (60 + 1) / tr::scalar_hz + dma(32, 16)));
  CHECK(t.row_per_partition_s ==
        Approx(4 * 64 / tr::tensor_hz + (60 + 16) / tr::scalar_hz + dma(32, 1)));
  CHECK(t.row_per_partition_s < t.keys_on_partitions_s);  // the descriptors decide, barely
  // 8192 keys: 64 matmuls of 4 x 64 cycles against 16 of 4 x 512, and a cast of 64 elements
  // against 8192: keys on partitions wins by more than 2x, from about 100 keys on.
  const auto long_chunk = nb::head_sum_layouts<trn3>(8192, 1, 64);
  CHECK(2 * long_chunk.keys_on_partitions_s < long_chunk.row_per_partition_s);
  const auto t128 = nb::head_sum_layouts<trn2>(128, 1, 64);
  CHECK(t128.keys_on_partitions_s < t128.row_per_partition_s);
}

TEST_CASE("example 09: line format, implied bound, trn3 below trn2 for MX decode", "[neuron]") {
  const auto l1 = neuron_shapes::lines<trn1>();
  const auto l2 = neuron_shapes::lines<trn2>();
  const auto l3 = neuron_shapes::lines<trn3>();
  check_lines<trn1>(l1);
  check_lines<trn2>(l2);
  check_lines<trn3>(l3);
  REQUIRE(l2.size() == 8);
  REQUIRE(l3.size() == 11);              // and three decodes over the native cache layout
  for (std::size_t i = 0; i < 4; ++i) {  // the four MXFP8 / MXFP4 decode lines
    INFO(l2[i].line << "\n" << l3[i].line);
    CHECK(l3[i].report.estimated_seconds() < l2[i].report.estimated_seconds());
  }
  // The decode shapes read every key once: 64 x 8192 and 1 x 65536 keys of 132 (MXFP8) bytes.
  CHECK(l3[0].report.dma_bytes >= 64 * 8192 * 132);
  CHECK(l3[2].report.dma_bytes >= 65536 * 132);
  // 128 pages of 64 tokens per indirect DMA: two gathers (codes, scales) per 8192 keys.
  CHECK(l3[0].report.dma_gathers == 2 * 64);
  CHECK(l3[0].report.dma_gathered_blocks == 2 * 64 * 128);
  // The last three: pages of 128 and 256 tokens, and 32 heads x 2 tokens per request on pages
  // of 128: the same keys, read once, in half or a quarter as many gathered blocks.
  for (const auto* l : {&l2, &l3}) {
    const auto& back = *l;
    const std::size_t n = back.size();
    INFO(back[n - 3].line << "\n" << back[n - 2].line << "\n" << back[n - 1].line);
    CHECK(back[n - 3].line.find("64x8192/H64/page128") != std::string::npos);
    CHECK(back[n - 2].line.find("64x8192/H64/page256") != std::string::npos);
    CHECK(back[n - 1].line.find("64x8192/H32/page128/next2") != std::string::npos);
    for (std::size_t i = n - 3; i < n; ++i) CHECK(back[i].report.dma_bytes >= 64 * 8192 * 132);
    CHECK(back[n - 3].report.dma_gathered_blocks == back[0].report.dma_gathered_blocks / 2);
    CHECK(back[n - 2].report.dma_gathered_blocks == back[0].report.dma_gathered_blocks / 4);
    // Each page read as its runs of 64 or 128 tokens, one per partition row: at most as many
    // descriptors as pages of 64, and the decode within 1.15x of theirs.
    for (std::size_t i = n - 3; i < n - 1; ++i) {
      CHECK(back[i].report.dma_descriptors <= back[0].report.dma_descriptors);
      CHECK(back[i].report.estimated_seconds() <= 1.15 * back[0].report.estimated_seconds());
    }
  }
  CHECK(l2[0].report.summary().find("verdict: trn2: bound by") != std::string::npos);
  // The native layout (trn3): the same keys, no K transposes (only Q's 2 per request), but
  // 32 rows of 640 B per 128-token block instead of one 8 KiB row per 64-token page.
  const nb::report& deepgemm = l3[0].report;
  const nb::report& native = l3[5].report;
  CHECK(native.matmul_transpose == 2 * 64);
  CHECK(deepgemm.matmul_transpose > 10 * native.matmul_transpose);
  CHECK(native.dma_descriptors > deepgemm.dma_descriptors);
  CHECK(native.matmul_score == deepgemm.matmul_score);  // both: 128-column quadrant matmuls
  // Both gather by software DGE on GpSimd, one descriptor per partition row: the native
  // layout's 32 rows per 128 tokens cost GpSimd more than one row per 64-token page, enough to
  // make it the slower layout.
  CHECK(native.gpsimd.seconds > 4 * deepgemm.gpsimd.seconds);
  CHECK(std::string(native.bound_by()) == "GpSimd");
  CHECK(native.estimated_seconds() > deepgemm.estimated_seconds());
}

TEST_CASE("neuron LNC = 2 splits the queries over two cores, trn1 has one", "[neuron]") {
  const auto one = neuron_shapes::paged_decode<trn3, ml::mxfp8>(8, 1024);
  const auto two = neuron_shapes::paged_decode<trn3, ml::mxfp8>(8, 1024, {.logical_cores = 2});
  CHECK(two.logical_cores == 2);
  // The same work, split; each core chooses which of its chunks score with their keys on
  // partitions (their weights loaded onto every partition), so the bytes and the balance differ
  // a little.
  CHECK(two.dma_bytes == Approx(one.dma_bytes).epsilon(0.05));
  CHECK(two.matmul_score == one.matmul_score);
  CHECK(two.estimated_seconds() == Approx(one.estimated_seconds() / 2).epsilon(0.1));
  CHECK(check::error_of([] {
          (void)neuron_shapes::paged_decode<trn1, ml::mxfp8>(2, 128, {.logical_cores = 2});
        }).find("logical_cores = 2 is not supported") != std::string::npos);
}

TEST_CASE("neuron cost-only capture counts the same schedule and leaves the output alone",
          "[neuron]") {
  rnd::engine rng(41);
  const std::int64_t num_q = 5, H = 16, N = 700;
  const auto q = rnd::rows<ml::mxfp4>(rng, num_q * H);
  const auto kv = rnd::rows<ml::mxfp4>(rng, N);
  const auto w = rnd::weights<float>(rng, num_q, H);
  const std::vector<std::int32_t> ks(num_q, 3), ke(num_q, static_cast<std::int32_t>(N - 1));
  ml::logits_buffer<float> out(num_q, N), untouched(num_q, N);
  for (std::int64_t r = 0; r < num_q; ++r)
    for (std::int64_t c = 0; c < N; ++c) untouched(r, c) = 42.0f;
  nb::report full, dry;
  {
    nb::capture cap(full);
    ml::fp8_fp4_mqa_logits(ml::backend::neuron<trn2>{}, q.view(), kv.view(), w.view(), ks, ke, N,
                           out.view());
  }
  {
    nb::capture cap(dry, {.cost_only = true});
    ml::fp8_fp4_mqa_logits(ml::backend::neuron<trn2>{}, q.view(), kv.view(), w.view(), ks, ke, N,
                           untouched.view());
  }
  CHECK(dry.summary() == full.summary());
  CHECK(untouched(2, 100) == 42.0f);
  CHECK(out(2, 100) != 42.0f);
}

// A cost-only call whose layout a trial chose adopts the trial's counts instead of running the
// schedule again: they match a computed call's, where the schedule runs.
TEMPLATE_TEST_CASE(
    "neuron cost-only capture adopts the chosen layout's trial, as counted when computed",
    "[neuron]", trn2, trn3) {
  using Gen = TestType;
  rnd::engine rng(43);
  // Paged decode, requests short enough to try runs of 32, 16 and 8 tokens.
  const std::int64_t B = 3, H = 64, page = 64, max_len = 700, blocks = 12;
  const auto q = rnd::rows<ml::mxfp8>(rng, B * H);
  const auto cache = rnd::paged_cache<ml::mxfp8>(rng, B * blocks, page);
  const auto w = rnd::weights<float>(rng, B, H);
  const auto lens = rnd::context_lens(rng, B, 1, max_len, 300);
  const auto table = rnd::block_table(rng, lens, blocks, page, B * blocks);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page, 1);
  ml::logits_buffer<ml::bf16> out(B, max_len);
  nb::report full, dry;
  for (const bool cost_only : {false, true}) {
    nb::capture cap(cost_only ? dry : full, {.cost_only = cost_only});
    ml::fp8_fp4_paged_mqa_logits(ml::backend::neuron<Gen>{}, q.view(), cache.view(), w.view(),
                                 lens.view(), table.view(), schedule, max_len, out.view());
  }
  CHECK(dry.summary() == full.summary());
  // trn3's MX prefill: prefill_pass's layout or decode_pass's, by trial.
  if constexpr (nb::traits<Gen>::mx_matmul) {
    const std::int64_t num_q = 130, N = 600;
    const auto pq = rnd::rows<ml::mxfp8>(rng, num_q * H);
    const auto kv = rnd::rows<ml::mxfp8>(rng, N);
    const auto pw = rnd::weights<float>(rng, num_q, H);
    const std::vector<std::int32_t> ks(num_q, 0), ke(num_q, static_cast<std::int32_t>(N));
    ml::logits_buffer<float> logits(num_q, N);
    nb::report pfull, pdry;
    for (const bool cost_only : {false, true}) {
      nb::capture cap(cost_only ? pdry : pfull, {.cost_only = cost_only});
      ml::fp8_fp4_mqa_logits(ml::backend::neuron<Gen>{}, pq.view(), kv.view(), pw.view(), ks, ke, N,
                             logits.view());
    }
    CHECK(pdry.summary() == pfull.summary());
  }
}

// ---- AWS's sparse-attention indexer (trn3), replayed on the model ----

TEST_CASE("neuron model: the instruction mix of AWS's indexer structure", "[neuron]") {
  // Batch 1, S = 128 x n query tokens, bf16 K already transposed in HBM ([head_dim, T]), per
  // 128-query tile and K tile of W columns: per head one nc_matmul into a bf16 PSUM tile, one
  // ScalarE relu over the whole width, one VectorE scalar_tensor_tensor adding relu x w[:, h]
  // into an fp32 score row; then nisa.topk per 8 queries on GpSimd.
  constexpr std::int64_t n_tiles = 2, S = 128 * n_tiles, T = 8192, W = 4096, H = 64, K = 512;
  nb::core<trn3> c(false);  // counts only
  nb::tile kt = c.sbuf("K^T", dtype::bf16, 128, W), qt = c.sbuf("Q^T", dtype::bf16, 128, H * 128);
  nb::tile w = c.sbuf("w", dtype::fp32, 128, H), relu = c.sbuf("relu", dtype::bf16, 128, W);
  nb::tile score = c.sbuf("score", dtype::fp32, 128, T);
  nb::tile ps = c.psum("S", 128, W, dtype::bf16);
  for (std::int64_t qtile = 0; qtile < n_tiles; ++qtile) {
    for (std::int64_t k0 = 0; k0 < T; k0 += W) {
      {
        auto t = c.dma();  // the K tile: 128 rows of W bf16, contiguous in the transposed cache
        for (int p = 0; p < 128; ++p) t.row(W * 2);
      }
      for (std::int64_t h = 0; h < H; ++h) {
        c.matmul(nb::window(ps), nb::window(qt, 0, 128, h * 128, 128), kt);
        c.activation(relu, ps, nb::activation_fn::relu);
        c.scale_add(nb::window(score, 0, 128, k0, W), relu, nb::window(w, 0, 128, h, 1),
                    h == 0 ? nb::write_mode::overwrite : nb::write_mode::accumulate);
      }
    }
    c.topk_cost(128, T, K);
  }
  const nb::report& r = c.counters();
  const std::int64_t per_head = n_tiles * (T / W) * H;
  CHECK(r.matmul_score == per_head);
  CHECK(r.scalar.instructions == per_head);
  CHECK(r.vector.instructions == per_head);
  CHECK(r.topk_calls == S / 8);
  // Cycles the structure implies: max(W, 64) per matmul; relu over W bf16 at 2 per lane per
  // cycle (ScalarE, 256 / 128 lanes); the first head's tensor_scalar N, the others' two-input
  // 2N (fp32 accumulator: 256 elements per cycle, 2 per lane); topk 4T + K per call.
  CHECK(r.tensor.cycles == per_head * W);
  CHECK(r.scalar.cycles == per_head * (60 + W / 2));
  CHECK(r.vector.cycles == n_tiles * (T / W) * ((60 + W / 2) + (H - 1) * (60 + W)));
  CHECK(r.gpsimd.cycles == (S / 8) * (60 + 4 * T + K));
  CHECK(r.dma_transfers == n_tiles * (T / W));
  CHECK(r.dma_inefficient_descriptors == 0);  // 8 KiB rows
  // With H = 64, top-k on GpSimd (4T + K per 8 rows) binds; VectorE's fp32 accumulation (2N
  // per head at 2 per lane) comes second.
  CHECK(std::string(r.bound_by()) == "GpSimd");
  CHECK(r.vector.seconds > r.tensor.seconds);

  // The library's own prefill on the same structure (MXFP8 K, trn3, H = 64): decode's passes of
  // two query rows, the 128 partitions of their heads the stationary of four row-tiled MX
  // matmuls per 512 keys (128 columns each, so that the streaming PSUM tiles double-buffer in
  // the 8 banks): as many score matmuls as one per head and 512 keys of 128 rows. Then per pass
  // either one relu evacuation of the four (ScalarE or VectorE) and the fp32 head sum on TensorE
  // with 128 keys on its output partitions (16 matmuls for 2048 keys), or the scores with the
  // keys on partitions and VectorE's relu x w with a reduce over the heads (VectorE or GpSimd),
  // whichever would end sooner.
  rnd::engine rng(51);
  const std::int64_t N = 2048, Hl = 64, passes = S / 2;
  const auto q = rnd::rows<ml::mxfp8>(rng, S * Hl);
  const auto kv = rnd::rows<ml::mxfp8>(rng, N);
  const auto wl = rnd::weights<float>(rng, S, Hl);
  const std::vector<std::int32_t> ks(S, 0), ke(S, static_cast<std::int32_t>(N));
  ml::logits_buffer<float> out(S, N);
  nb::report lib;
  {
    nb::capture cap(lib, {.cost_only = true});
    ml::fp8_fp4_mqa_logits(ml::backend::neuron<trn3>{}, q.view(), kv.view(), wl.view(), ks, ke, N,
                           out.view());
  }
  INFO(lib.summary());
  const std::int64_t tiles = n_tiles * (N / 512) * Hl;
  CHECK(lib.matmul_score == 4 * tiles);
  CHECK(lib.matmul_head_sum % (N / 128) == 0);
  CHECK(lib.matmul_head_sum > 0);
  CHECK(lib.matmul_head_sum < passes * (N / 128));
  CHECK(lib.tensor_head_sum_cycles == 4 * 64 * lib.matmul_head_sum);
  // ScalarE keeps part of the relus and the epilogue casts; GpSimd some of the reduces.
  const std::int64_t tensor_passes = lib.matmul_head_sum / (N / 128);
  CHECK(lib.scalar.instructions - lib.scalar_copies > passes);
  CHECK(lib.scalar.instructions - lib.scalar_copies < tensor_passes * (N / 512) + passes);
  CHECK(lib.gpsimd.instructions > 0);
}

TEMPLATE_TEST_CASE("neuron cost: prefill balances its elementwise passes over the engines",
                   "[neuron]", trn1, trn2, trn3) {
  using Gen = TestType;
  const nb::report r = neuron_shapes::dense_prefill<Gen, ml::mxfp8>(512, 4096);
  INFO(r.summary());
  if constexpr (nb::traits<Gen>::sbuf_vector_gpsimd_exclusive) {
    // trn1: VectorE and ScalarE cannot read PSUM at once, nor VectorE and GpSimd SBUF, so the
    // relus stay on ScalarE and the accumulations on VectorE.
    CHECK(r.gpsimd.instructions == 0);
    CHECK(r.vector.seconds > r.scalar.seconds);
  } else {
    // The engines that share the relus and the head sums end within a few instructions of each
    // other.
    if constexpr (nb::traits<Gen>::mx_matmul) {
      // trn3 runs decode's passes: per pass the relus on ScalarE or VectorE and the head sum on
      // TensorE, or VectorE's relu x w with keys on partitions: TensorE and VectorE end
      // together, ScalarE (the relus and casts only) a little before.
      const double top = std::max({r.tensor.seconds, r.scalar.seconds, r.vector.seconds});
      CHECK(r.tensor.seconds > 0.95 * top);
      CHECK(r.scalar.seconds > 0.9 * top);
      CHECK(r.vector.seconds > 0.95 * top);
    } else {
      // trn2: per head a relu over 512 keys and its sum, an accumulation on VectorE or GpSimd
      // (VectorE also decodes the keys) or a TensorE matmul of diag(w[:, h]): all four end
      // together, within 1.25x of the floor.
      const double top =
          std::max({r.tensor.seconds, r.scalar.seconds, r.vector.seconds, r.gpsimd.seconds});
      CHECK(r.matmul_head_sum > 0);
      CHECK(r.tensor.seconds > 0.95 * top);
      CHECK(r.gpsimd.seconds > 0.95 * top);
      CHECK(r.vector.seconds > 0.95 * top);
      CHECK(r.estimated_seconds() <= 1.25 * r.floor_seconds());
    }
  }
}

TEST_CASE("neuron cost: trn3's MX prefill takes whichever layout ends the call sooner",
          "[neuron]") {
  // A short causal prefill keeps the query tokens on partitions (prefill_pass): decode's passes
  // of two rows would load Q and the weights a (token, head) row per descriptor and write the
  // logits in short runs, 511 us at 1024 x 1024 / H64 against 299 us. Its TensorE head sums
  // are matmuls of diag(w[:, h]) against up to 512 keys, 4 x 512 cycles when full.
  const nb::report shorter = neuron_shapes::dense_prefill<trn3, ml::mxfp8>(1024, 1024);
  INFO(shorter.summary());
  CHECK(shorter.matmul_head_sum > 0);
  CHECK(shorter.tensor_head_sum_cycles > 4 * 64 * shorter.matmul_head_sum);
  CHECK(shorter.dma_transfers < 1024 / 2);  // decode's passes: a few per pass of two rows
  CHECK(shorter.single_core_seconds() < 0.7 * 511e-6);
  // A long one takes decode's passes, whose head sum puts 128 keys on TensorE's output
  // partitions (4 x 64 cycles per matmul): 2595 us at 4096 x 4096 / H64 against prefill_pass's
  // 2951 us.
  const nb::report longer = neuron_shapes::dense_prefill<trn3, ml::mxfp8>(4096, 4096);
  INFO(longer.summary());
  CHECK(longer.matmul_head_sum > 0);
  CHECK(longer.tensor_head_sum_cycles == 4 * 64 * longer.matmul_head_sum);
  CHECK(longer.dma_transfers > 4096 / 2);
  CHECK(longer.single_core_seconds() < 0.97 * 2951e-6);
}

// ---- top-k ----

namespace {

// The exact selection: a stable sort of the valid fp32 logits (NaN first, then descending).
std::vector<std::int32_t> expected_topk(const std::vector<float>& x,
                                        const std::vector<std::uint8_t>& ok, std::int64_t k) {
  std::vector<std::int32_t> idx;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (ok.empty() || ok[i]) idx.push_back(static_cast<std::int32_t>(i));
  std::stable_sort(idx.begin(), idx.end(), [&](std::int32_t a, std::int32_t b) {
    const bool na = std::isnan(x[a]), nb2 = std::isnan(x[b]);
    if (na != nb2) return na;
    return !na && x[a] > x[b];
  });
  idx.resize(static_cast<std::size_t>(k), -1);
  return idx;
}

}  // namespace

TEMPLATE_TEST_CASE("neuron top-k: exact selection, ties, NaN, padding, cost", "[neuron]", trn1,
                   trn2, trn3) {
  rnd::engine rng(61);
  const std::int64_t rows = 11, cols = GENERATE(37, 9000), k = GENERATE(1, 16, 40);
  INFO("cols " << cols << " k " << k);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  std::vector<std::uint8_t> valid(x.size());
  const float inf = std::numeric_limits<float>::infinity();
  for (std::size_t i = 0; i < x.size(); ++i) {
    // Few distinct values (ties), values one bf16 step apart (the threshold pass), specials.
    const auto u = rnd::uniform(rng, 0, 99);
    x[i] = u < 3    ? std::numeric_limits<float>::quiet_NaN()
           : u < 6  ? inf
           : u < 9  ? -inf
           : u < 50 ? static_cast<float>(rnd::uniform(rng, -4, 4))
                    : 1.0f + static_cast<float>(rnd::uniform(rng, 0, 8)) * 0x1p-10f;
    valid[i] = rnd::chance(rng, 0.9) ? 1 : 0;
  }
  for (std::int64_t c = 0; c < cols; ++c)
    valid[static_cast<std::size_t>(10 * cols + c)] = c < 3;  // 3 valid
  ml::matrix_view<const float> lv(x.data(), rows, cols);
  ml::matrix_view<const std::uint8_t> vv(valid.data(), rows, cols);
  std::vector<std::int32_t> idx(static_cast<std::size_t>(rows * k), 7);
  std::vector<float> val(static_cast<std::size_t>(rows * k), 7.0f);
  nb::report rep;
  {
    nb::capture cap(rep);
    nb::topk<TestType>(lv, vv, k, ml::matrix_view<std::int32_t>(idx.data(), rows, k),
                       ml::matrix_view<float>(val.data(), rows, k));
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::vector<float> row(x.begin() + r * cols, x.begin() + (r + 1) * cols);
    const std::vector<std::uint8_t> ok(valid.begin() + r * cols, valid.begin() + (r + 1) * cols);
    const auto want = expected_topk(row, ok, k);
    for (std::int64_t j = 0; j < k; ++j) {
      INFO("row " << r << " j " << j);
      REQUIRE(idx[static_cast<std::size_t>(r * k + j)] == want[static_cast<std::size_t>(j)]);
      const float v = val[static_cast<std::size_t>(r * k + j)];
      if (want[j] < 0)
        CHECK((std::isinf(v) && v < 0));
      else if (std::isnan(row[want[j]]))
        CHECK(std::isnan(v));
      else
        CHECK(v == row[want[j]]);
    }
  }
  // Row 10 has 3 valid columns: the rest is -1 / -inf.
  if (k > 3) CHECK(idx[static_cast<std::size_t>(10 * k + 3)] == -1);
  // nisa.topk: one call per 8 rows over their keys (rows of up to 32768 columns).
  CHECK(rep.topk_calls == (rows + 7) / 8);
  CHECK(rep.calls == 1);
  // Without a mask every column counts; without values only indices are written.
  std::vector<std::int32_t> idx2(static_cast<std::size_t>(rows * k));
  nb::topk<TestType>(lv, {}, k, ml::matrix_view<std::int32_t>(idx2.data(), rows, k), {});
  const std::vector<float> row0(x.begin(), x.begin() + cols);
  CHECK(idx2[0] == expected_topk(row0, {}, k)[0]);
  // Bad input: a named error before anything is written.
  std::vector<std::int32_t> idx3(static_cast<std::size_t>(rows * k), 9);
  CHECK(check::error_of([&] {
          nb::topk<TestType>(lv, vv, 0, ml::matrix_view<std::int32_t>(idx3.data(), rows, 0), {});
        }).find("k = 0 must be >= 1") != std::string::npos);
  CHECK(check::error_of([&] {
          nb::topk<TestType>(lv, vv, k, ml::matrix_view<std::int32_t>(idx3.data(), rows - 1, k),
                             {});
        }).find("indices [") != std::string::npos);
  CHECK(idx3[0] == 9);
  // Outputs over the logits, the mask or each other: a named error, nothing written (rows were
  // written while later rows of the logits were still read).
  std::vector<float> x2 = x;
  const std::vector<float> x2_before = x2;
  const ml::matrix_view<const float> lv2(x2.data(), rows, cols);
  CHECK(check::error_of([&] {
          nb::topk<TestType>(lv2, vv, k,
                             ml::matrix_view<std::int32_t>(
                                 reinterpret_cast<std::int32_t*>(x2.data()) + cols, rows, k),
                             {});
        }).find("overlap logits") != std::string::npos);
  CHECK(std::memcmp(x2.data(), x2_before.data(), x2.size() * sizeof(float)) == 0);  // NaNs too
  CHECK(check::error_of([&] {
          nb::topk<TestType>(
              lv, vv, k, ml::matrix_view<std::int32_t>(idx3.data(), rows, k),
              ml::matrix_view<float>(reinterpret_cast<float*>(idx3.data()), rows, k));
        }).find("values [") != std::string::npos);
  CHECK(idx3[0] == 9);
}

// k up to the row length: the selection streams the row through SBUF, so no k is refused.
TEMPLATE_TEST_CASE("neuron top-k: k up to the row length", "[neuron]", trn1, trn2, trn3) {
  rnd::engine rng(62);
  const std::int64_t rows = 3, cols = 30000, k = GENERATE(22529, 29999, 30000);
  INFO("k " << k);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (float& v : x) v = static_cast<float>(rnd::uniform(rng, -3000, 3000)) * 0.25f;
  std::vector<std::uint8_t> valid(x.size(), 1);
  valid[5] = 0;  // row 0 has one column fewer than k = cols: its last index is -1
  std::vector<std::int32_t> idx(static_cast<std::size_t>(rows * k), 7);
  std::vector<float> val(static_cast<std::size_t>(rows * k), 7.0f);
  nb::topk<TestType>(ml::matrix_view<const float>(x.data(), rows, cols),
                     ml::matrix_view<const std::uint8_t>(valid.data(), rows, cols), k,
                     ml::matrix_view<std::int32_t>(idx.data(), rows, k),
                     ml::matrix_view<float>(val.data(), rows, k));
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::vector<float> row(x.begin() + r * cols, x.begin() + (r + 1) * cols);
    const std::vector<std::uint8_t> ok(valid.begin() + r * cols, valid.begin() + (r + 1) * cols);
    const auto want = expected_topk(row, ok, k);
    std::int64_t wrong = 0;
    for (std::int64_t j = 0; j < k; ++j) {
      const auto i = static_cast<std::size_t>(r * k + j);
      const float v = val[i];
      wrong += idx[i] != want[static_cast<std::size_t>(j)] ||
               (want[j] < 0 ? !(std::isinf(v) && v < 0) : v != row[want[j]]);
    }
    INFO("row " << r);
    CHECK(wrong == 0);
  }
}

namespace {
// trn2 with one derived constant replaced: each DMA descriptor costs 1024 bytes of bandwidth.
struct trn2_dearer_descriptors : nb::traits<trn2> {
  static constexpr std::int64_t dma_descriptor_overhead_bytes = 1024;
};
}  // namespace

TEST_CASE("neuron what-if: a generation with one constant replaced changes only what it costs",
          "[neuron]") {
  using dearer = ml::backend::what_if<trn2, trn2_dearer_descriptors>;
  STATIC_REQUIRE(ml::backend::is_neuron_generation_v<dearer>);
  const nb::report model = neuron_shapes::paged_decode<trn2, ml::mxfp8>(4, 2048);
  const nb::report what_if = neuron_shapes::paged_decode<dearer, ml::mxfp8>(4, 2048);
  CHECK(std::string(what_if.generation) == "trn2");
  REQUIRE(model.dma_descriptors > 0);
  CHECK(what_if.dma_descriptors == model.dma_descriptors);
  // 512 more bytes of bandwidth per descriptor, and nothing else moves.
  const double extra =
      static_cast<double>(model.dma_descriptors) * 512.0 / nb::traits<trn2>::dma_bytes_per_s;
  CHECK(what_if.dma_seconds == Approx(model.dma_seconds + extra).epsilon(1e-12));
  CHECK(what_if.tensor.cycles == model.tensor.cycles);
  CHECK(what_if.scalar.cycles == model.scalar.cycles);
  CHECK(what_if.vector.cycles == model.vector.cycles);
  CHECK(what_if.gpsimd.cycles == model.gpsimd.cycles);
}
