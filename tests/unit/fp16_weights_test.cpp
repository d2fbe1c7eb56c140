// fp16 weights (upstream SM100): the decode to fp32 is exact for every one of the 65536 codes,
// and a kernel given fp16 weights returns what it returns for the same values held as fp32.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>

#include <mqalogits/neuron.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/kernel_check.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;

TEST_CASE("fp16: every code decodes exactly to fp32", "[format][fp16]") {
  std::int64_t nan = 0, subnormal = 0;
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {
    const auto h = ml::fp16::from_bits(static_cast<std::uint16_t>(b));
    const float got = ml::to_float(h);
    const double want = ref::weight(h);
    INFO("fp16 bits 0x" << std::hex << b);
    if (std::isnan(want)) {
      ++nan;
      CHECK(std::isnan(got));
      continue;
    }
    subnormal += (b & 0x7C00u) == 0 && (b & 0x3FFu) != 0;
    CHECK(static_cast<double>(got) == want);
    CHECK(std::signbit(got) == ((b & 0x8000u) != 0));  // -0 stays -0
  }
  CHECK(nan == 2 * 1023);
  CHECK(subnormal == 2 * 1023);
  static_assert(ml::fp16::from_bits(0x3C00).to_float() == 1.0f);
  static_assert(ml::fp16::from_bits(0x0001).to_float() == 0x1p-24f);
  static_assert(ml::fp16::from_bits(0x7BFF).to_float() == 65504.0f);
}

TEMPLATE_TEST_CASE("fp16 weights: the same logits as fp32 weights of the same values",
                   "[fp16][dense]", ml::backend::host, ml::backend::neuron<ml::backend::trn2>) {
  using F = ml::mxfp8;
  rnd::engine rng(97);
  const std::int64_t num_q = 5, H = 32, N = 300;
  const auto q = rnd::rows<F>(rng, num_q * H);
  const auto kv = rnd::rows<F>(rng, N);
  auto w16 = rnd::weights<ml::fp16>(rng, num_q, H);
  // The edges: the smallest subnormal, the largest finite values, -0 and NaN (row 4).
  w16(0, 0) = ml::fp16::from_bits(0x0001);
  w16(1, 1) = ml::fp16::from_bits(0x7BFF);
  w16(2, 2) = ml::fp16::from_bits(0x8000);
  w16(3, 3) = ml::fp16::from_bits(0xFBFF);
  w16(4, 4) = ml::fp16::from_bits(0x7E01);
  auto w32 = rnd::matrix<float>(num_q, H);
  for (std::int64_t r = 0; r < num_q; ++r)
    for (std::int64_t h = 0; h < H; ++h) w32(r, h) = ml::to_float(w16(r, h));
  std::vector<std::int32_t> ks(num_q, 0), ke(num_q, static_cast<std::int32_t>(N));
  ke[1] = 170, ks[2] = 33;
  const ref::result expected =
      ref::dense(q.view(), kv.view(), w16.view(), std::span(ks), std::span(ke), 0);
  CHECK(check::nan_count(expected) > 0);
  ml::logits_buffer<float> a(num_q, N), b(num_q, N);
  ml::fp8_fp4_mqa_logits(TestType{}, q.view(), kv.view(), w16.view(),
                         std::span<const std::int32_t>(ks), std::span<const std::int32_t>(ke), 0,
                         a.view());
  ml::fp8_fp4_mqa_logits(TestType{}, q.view(), kv.view(), w32.view(),
                         std::span<const std::int32_t>(ks), std::span<const std::int32_t>(ke), 0,
                         b.view());
  CHECK(check::against(a, expected) == "");
  CHECK(check::bitwise_equal(a, b));
}
