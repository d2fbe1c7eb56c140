// vllm_indexer_k_scaling: the fp8_per_token bytes vLLM's indexer_k_quant_and_cache writes into its
// indexer K cache. The expected bytes are computed here as that kernel computes them, step by
// step in fp32 (amax by fmaxf of |x|, fmaxf(amax, 1e-4) / 448, optionally
// exp2f(ceilf(log2f(scale))), each code the saturating round-to-nearest-even e4m3 of x / scale),
// with a brute-force e4m3 search over the reference decoder.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <mqalogits/quantize.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/error_of.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;

namespace {

using ref::satfinite_e4m3;

struct vllm_row {
  std::vector<std::uint8_t> codes;
  float scale = 0;
};

// vLLM's amax of one token: fmaxf over |x| in fp32. The row is widened to fp32 first: GCC 12
// for AArch64 crashes (internal compiler error) vectorising the fmax reduction over bf16 loads.
template <class T>
float vllm_amax(const T* x) {
  float v[128];
  for (int i = 0; i < 128; ++i) v[i] = ml::to_float(x[i]);
  float amax = 0.0f;
  for (int i = 0; i < 128; ++i) amax = std::fmax(amax, std::fabs(v[i]));
  return amax;
}

// One token's write, as indexer_k_quant_and_cache computes it (one quant block of 128).
template <class T>
vllm_row vllm_write(const T* x, bool ue8m0) {
  const float amax = vllm_amax(x);
  float scale = std::fmax(amax, 1e-4f) / 448.0f;
  if (ue8m0) scale = std::exp2f(std::ceil(std::log2f(scale)));
  vllm_row r;
  r.scale = scale;
  for (int i = 0; i < 128; ++i) r.codes.push_back(satfinite_e4m3(ml::to_float(x[i]) / scale));
  return r;
}

// Rows meant to reach every branch: ordinary magnitudes, all zeros, amax under the 1e-4 floor,
// a NaN element, an infinite one, amax a power of two times 448 and a few ulps above that.
std::vector<float> test_rows(rnd::engine& rng, int random_rows) {
  std::vector<float> x;
  auto add = [&](auto fill) {
    for (int i = 0; i < 128; ++i) x.push_back(fill(i));
  };
  for (int r = 0; r < random_rows; ++r) {
    const float mag = std::ldexp(1.0f, static_cast<int>(rnd::uniform(rng, -20, 12)));
    add([&](int) { return std::uniform_real_distribution<float>(-mag, mag)(rng); });
  }
  add([](int) { return 0.0f; });
  add([](int i) { return (i % 3 - 1) * 3e-5f; });
  add([](int i) { return i == 7 ? std::numeric_limits<float>::quiet_NaN() : 0.25f * (i % 5); });
  add([](int i) { return i == 9 ? -std::numeric_limits<float>::infinity() : 1.0f; });
  add([](int i) { return i == 0 ? 448.0f * 0x1p-10f : 0x1p-12f * (i % 7); });
  const float above = std::nextafter(std::nextafter(448.0f * 0x1p-10f, 1.0f), 1.0f);
  add([&](int i) { return i == 3 ? -above : 0x1p-11f * (i % 4); });
  return x;
}

}  // namespace

TEMPLATE_TEST_CASE("vllm_indexer_k_scaling: store_into_pages writes vLLM's bytes", "[quantize]",
                   float, ml::bf16) {
  const bool ue8m0 = GENERATE(false, true);
  INFO((ue8m0 ? "UE8M0 scales" : "fp32 scales"));
  rnd::engine rng(4242);
  const std::vector<float> xf = test_rows(rng, 40);
  const auto rows = static_cast<std::int64_t>(xf.size() / 128);
  std::vector<TestType> x(xf.size());
  for (std::size_t i = 0; i < xf.size(); ++i) {
    if constexpr (std::is_same_v<TestType, float>)
      x[i] = xf[i];
    else
      x[i] = ml::bf16::from_float(xf[i]);
  }
  // vLLM's page of 64 tokens: 64 x 128 code bytes, then 64 fp32 scales (8448 bytes).
  constexpr std::int32_t page_kv = 64;
  const std::int64_t pages = (rows + page_kv - 1) / page_kv + 1;
  std::vector<std::uint8_t> bytes(
      static_cast<std::size_t>(pages * ml::page_bytes<ml::fp8_per_token>(page_kv)), 0xCD);
  const ml::mutable_paged_cache<ml::fp8_per_token> cache(bytes.data(), pages, page_kv);
  std::vector<std::int64_t> slots(static_cast<std::size_t>(rows));
  for (std::int64_t t = 0; t < rows; ++t) slots[t] = (t * 37 + 5) % (pages * page_kv);
  ml::store_into_pages(ml::matrix_view<const TestType>(x.data(), rows, 128),
                       std::span<const std::int64_t>(slots), cache,
                       ml::vllm_indexer_k_scaling(ue8m0));
  const auto direct = ml::quantize_rows<ml::fp8_per_token>(
      ml::matrix_view<const TestType>(x.data(), rows, 128), ml::vllm_indexer_k_scaling(ue8m0));

  bool rounded_down = false;  // the constructed "few ulps above" row keeps 2^-10 (UE8M0 only)
  for (std::int64_t t = 0; t < rows; ++t) {
    INFO("token " << t);
    const vllm_row want = vllm_write(x.data() + t * 128, ue8m0);
    const std::int64_t page = slots[t] / page_kv, slot = slots[t] % page_kv;
    float got_scale = 0;
    std::memcpy(&got_scale, cache.scale(page, slot), 4);
    CHECK(std::bit_cast<std::uint32_t>(got_scale) == std::bit_cast<std::uint32_t>(want.scale));
    CHECK(direct.token_scale(t) == got_scale);
    CHECK(std::memcmp(cache.data(page, slot), want.codes.data(), 128) == 0);
    CHECK(std::memcmp(direct.data.data() + t * 128, want.codes.data(), 128) == 0);
    if (ue8m0) {
      CHECK(std::bit_cast<std::uint32_t>(got_scale) % 0x800000u == 0);  // a power of two
      const float amax = vllm_amax(x.data() + t * 128);
      rounded_down |= got_scale < std::fmax(amax, 1e-4f) / 448.0f;
    }
  }
  if (ue8m0 && std::is_same_v<TestType, float>) CHECK(rounded_down);
  // The floor: an all-zero row's scale is 1e-4 / 448 (the default rule gives 1).
  const std::int64_t zero_row = rows - 6;
  CHECK(ml::fp8_per_token_scale(0.0f, ml::vllm_indexer_k_scaling()) == 1e-4f / 448.0f);
  CHECK(ml::fp8_per_token_scale(0.0f) == 1.0f);
  CHECK(direct.token_scale(zero_row) ==
        (ue8m0 ? std::exp2f(std::ceil(std::log2f(1e-4f / 448.0f))) : 1e-4f / 448.0f));
  // An infinite element: vLLM's scale is infinite (the default rule gives 1).
  CHECK(std::isinf(direct.token_scale(rows - 3)));
}

TEST_CASE("per_token_scaling: the default rule is unchanged and bad options are named errors",
          "[quantize]") {
  CHECK(ml::fp8_per_token_scale(448.0f) == 1.0f);
  CHECK(ml::fp8_per_token_scale(std::numeric_limits<float>::infinity()) == 1.0f);
  CHECK(ml::fp8_per_token_scale(3.0f, {0.0f, true}) == 0x1p-7f);  // 3 / 448 rounds up to 2^-7
  std::vector<float> x(128, 1.0f);
  const ml::matrix_view<const float> xv(x.data(), 1, 128);
  const std::string mx = check::error_of(
      [&] { (void)ml::quantize_rows<ml::mxfp8>(xv, ml::vllm_indexer_k_scaling()); });
  CHECK_THAT(mx, Catch::Contains("quantize_rows") && Catch::Contains("fp8_per_token only") &&
                     Catch::Contains("MXFP8"));
  std::vector<std::uint8_t> page(ml::page_bytes<ml::fp8_per_token>(1), 0xAB);
  const ml::mutable_paged_cache<ml::fp8_per_token> cache(page.data(), 1, 1);
  const std::vector<std::int32_t> slot = {0};
  const std::string neg = check::error_of([&] {
    ml::store_into_pages(xv, std::span<const std::int32_t>(slot), cache, {-1.0f, false});
  });
  CHECK_THAT(neg, Catch::Contains("store_into_pages") && Catch::Contains("amax_floor = -1"));
  for (std::uint8_t b : page) CHECK(b == 0xAB);  // nothing written
}
