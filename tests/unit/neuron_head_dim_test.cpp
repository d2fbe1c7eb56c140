// The NeuronCore model at head dims 32, 64 and 128 (32 for the FP8 formats only): the four
// kernels against the reference, and a mismatch between Q and K a named error before the model
// runs. (head_dim_test.cpp runs the same checks on the host.)
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include <mqalogits/neuron.hpp>

#include "reference/random_inputs.hpp"
#include "support/head_dim_kernels.hpp"
#include "support/kernel_check.hpp"

namespace {

namespace ml = mqalogits;
using head_dims::trn1;
using head_dims::trn2;
using head_dims::trn3;

// Each NeuronCore generation at two of the three formats (trn3, whose MX path differs, at both
// MX formats): every format x head dim still meets two generations, for two thirds of the
// compile time of all nine. The jobs that build with MQALOGITS_TEST_HOST_COMBOS_ONLY (the
// sanitizers) keep one generation per format, enough for ASan to see the model's reads at these
// head dims.
#if defined(MQALOGITS_TEST_HOST_COMBOS_ONLY)
using mxfp8_backends = std::tuple<trn3>;
using mxfp4_backends = std::tuple<trn3>;
using per_token_backends = std::tuple<trn1>;
#else
using mxfp8_backends = std::tuple<trn1, trn3>;
using mxfp4_backends = std::tuple<trn2, trn3>;
using per_token_backends = std::tuple<trn1, trn2>;
#endif

}  // namespace

TEMPLATE_LIST_TEST_CASE("neuron head dims: MXFP8 kernels at D = 32, 64, 128 against the reference",
                        "[neuron][head_dim][kernels]", mxfp8_backends) {
  head_dims::check_every_head_dim<ml::mxfp8, TestType>();
}
TEMPLATE_LIST_TEST_CASE("neuron head dims: MXFP4 kernels at D = 64, 128 against the reference",
                        "[neuron][head_dim][kernels]", mxfp4_backends) {
  head_dims::check_every_head_dim<ml::mxfp4, TestType>();
}
TEMPLATE_LIST_TEST_CASE(
    "neuron head dims: FP8 per-token kernels at D = 32, 64, 128 against the reference",
    "[neuron][head_dim][kernels]", per_token_backends) {
  head_dims::check_every_head_dim<ml::fp8_per_token, TestType>();
}

TEST_CASE("neuron head dims: a mismatch between Q and K is a named error, nothing written",
          "[neuron][head_dim][errors]") {
  using F = ml::mxfp8;
  std::mt19937_64 rng(9);
  const std::int64_t H = 4, num_q = 2, N = 32;
  const auto q128 = ref::rand::rows<F>(rng, num_q * H);
  const auto kv128 = ref::rand::rows<F>(rng, N);
  const auto w = ref::rand::weights<float>(rng, num_q, H);
  const std::vector<std::int32_t> ks(num_q, 0), ke(num_q, static_cast<std::int32_t>(N));
  // The 128-byte rows read as rows of 64 (stride 128): a valid view of another head dim.
  const ml::rows_view<F> q64(q128.data.data(), q128.scales.data(), q128.n, ml::head_dim_t{64}, 128);
  ml::logits_buffer<float> out(num_q, N);
  check::fill_sentinel(out);
  CHECK_THROWS_WITH(
      ml::fp8_fp4_mqa_logits(trn3{}, q64, kv128.view(), w.view(), ks, ke, 0, out.view()),
      Catch::Contains("kv head_dim = 128 differs from q head_dim = 64"));
  CHECK(check::untouched(out));
}
