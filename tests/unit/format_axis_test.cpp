// A block-scaled format the library does not ship, defined only here: packed e2m1 codes with one
// e4m3fn scale per 16 elements (the layout of NVFP4 without its per-tensor scale). It runs through
// the host kernels (dense and paged) and the quantizers against the reference, and the NeuronCore
// model refuses it at compile time: a new point on the format axis needs no library change.
//
// Built with -DMQALOGITS_EXPECT_NEURON_REFUSAL this file calls the model with the format, and
// must not compile (tests/CMakeLists.txt checks that it fails on the model's static_assert).
#if !defined(MQALOGITS_EXPECT_NEURON_REFUSAL)
#include <catch2/catch.hpp>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <mqalogits/mqalogits.hpp>
#include <mqalogits/neuron.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/kernel_check.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;

namespace {

// The scale codec: one e4m3fn byte per 16 elements, in block order; a row of 128 has 8 of them,
// an 8-byte field.
struct e4m3_scales_per_16 {
  using codec = ml::float_e4m3;
  static constexpr int bytes_per_scale = 1;
  static constexpr bool power_of_two = false;
  static constexpr bool ue8m0_bytes = false;
  static constexpr bool optional = false;
  static constexpr bool takes_scaling_rule = false;
  static constexpr int block_size(int /*head_dim*/) { return 16; }
  static constexpr int field_bytes(int blocks) { return ml::word_scale_field(blocks, 1); }
  template <class Storage>
  static constexpr bool accepts_storage = std::is_same_v<Storage, std::uint8_t>;
  static float value(const std::uint8_t* field, int b) { return ml::e4m3_values[field[b]]; }

  // The smallest e4m3fn value s >= amax / max_code (so no code saturates), at least the smallest
  // subnormal 2^-9 and at most 448; amax = 0 gives 1. Codes are x / s.
  struct encoding {
    std::uint8_t code;
    float scale;
    float apply(float x) const { return x / scale; }
    void store(std::uint8_t* field, int b) const { field[b] = code; }
  };
  static encoding encode(float amax, float max_code) {
    if (!(amax > 0)) return {0x38, 1.0f};  // 1.0
    const float target = amax / max_code;
    std::uint8_t c = ml::encode_e4m3(target);  // nearest, saturating at 448 (0x7E)
    if (c < 0x7E && ml::e4m3_values[c] < target) ++c;
    if (c == 0) c = 1;
    return {c, ml::e4m3_values[c]};
  }
};

// The format: a point on block_scaled with rows of 128 (64 code bytes + 8 scale bytes).
struct e2m1_e4m3_16 : ml::block_scaled<ml::float_e2m1, e4m3_scales_per_16, 16> {
  static constexpr const char* name = "e2m1 with e4m3 scales per 16";
};

using F = e2m1_e4m3_16;
static_assert(ml::row_format<F>);
static_assert(F::blocks == 8 && F::scale_bytes == 8 && F::data_bytes == 64);
static_assert(!ml::is_mx_format_v<F> && !ml::is_row_scaled_v<F>);
// The host reads it through the fp32 path (per-block fp32 scales), not the UE8M0 int8 one.
static_assert(ml::host_backend::runs_scale_codec_v<F::scale_type> &&
              !ml::host_backend::int8_path<F>);
// The NeuronCore model has no kernel for its codec (the static_assert of its kernel), and has one
// for the library's formats.
static_assert(!ml::neuron_backend::runs_format_v<F>);
static_assert(ml::neuron_backend::runs_format_v<ml::mxfp8> &&
              ml::neuron_backend::runs_format_v<ml::mxfp4> &&
              ml::neuron_backend::runs_format_v<ml::fp8_per_token>);
// The library's formats keep their host paths (MXFP4: int8; MXFP8, FP8 per-token: the ISAs' own
// e4m3 row decoders) and their upstream layouts.
static_assert(ml::host_backend::int8_path<ml::mxfp4> && !ml::host_backend::int8_path<ml::mxfp8> &&
              !ml::host_backend::int8_path<ml::fp8_per_token>);
static_assert(ml::host_backend::e4m3_ue8m0_rows<ml::mxfp8> &&
              ml::host_backend::e4m3_fp32_rows<ml::fp8_per_token> &&
              !ml::host_backend::e4m3_fp32_rows<ml::mxfp8::with_head_dim<32>>);
static_assert(ml::mxfp8::scale_bytes == 4 && ml::mxfp4::scale_bytes == 4 &&
              ml::fp8_per_token::scale_bytes == 4 &&
              ml::mxfp8::with_head_dim<32>::scale_bytes == 4);

using O = float;  // one output type, one weight type: one dense and one paged kernel
using W = float;

}  // namespace

#if defined(MQALOGITS_EXPECT_NEURON_REFUSAL)
// Must not compile: the model's kernel static_asserts on the scale codec.
void neuron_refuses(const ml::rows_view<F>& q, const ml::rows_view<F>& kv,
                    const ml::matrix_view<const W>& w, std::span<const std::int32_t> ks,
                    std::span<const std::int32_t> ke, ml::logits_buffer<O>& out) {
  ml::fp8_fp4_mqa_logits(ml::backend::neuron<ml::backend::trn2>{}, q, kv, w, ks, ke, 0, out.view());
}
#else
namespace {

// Dense and paged logits on the host (2 threads), each against the reference.
void check_dense(const ml::rows_view<F>& q, const ml::rows_view<F>& kv,
                 const ml::matrix_view<const W>& w, std::int64_t N) {
  const std::int64_t num_q = w.rows;
  std::vector<std::int32_t> ks(static_cast<std::size_t>(num_q)), ke(ks.size());
  for (std::int64_t r = 0; r < num_q; ++r) {
    ks[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(r * 3);
    ke[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(N - r);
  }
  const ref::result expected =
      ref::dense(q, kv, w, std::span<const std::int32_t>(ks), std::span<const std::int32_t>(ke), N);
  CHECK(check::valid_count(expected) > 0);
  ml::logits_buffer<O> out(num_q, N);
  ml::thread_pool pool(2);
  ml::fp8_fp4_mqa_logits(ml::backend::host{}, q, kv, w, std::span<const std::int32_t>(ks),
                         std::span<const std::int32_t>(ke), N, out.view(), {.executor = pool});
  CHECK(check::against(out, expected) == "");
}

void check_paged(const ml::rows_view<F>& q, const ml::paged_cache_view<F>& cache,
                 const ml::matrix_view<const W>& w, const ml::matrix_view<const std::int32_t>& lens,
                 const ml::matrix_view<const std::int32_t>& table, std::int64_t max_context_len) {
  const ref::result expected = ref::paged(q, cache, w, lens, table, max_context_len);
  CHECK(check::valid_count(expected) > 0);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens, cache.page_kv, 3);
  ml::logits_buffer<O> out(lens.rows * lens.cols, max_context_len);
  ml::thread_pool pool(2);
  ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, q, cache, w, lens, table, schedule,
                               max_context_len, out.view(),
                               {.executor = pool, .truncate_long_contexts = true});
  CHECK(check::against(out, expected) == "");
}

// Random fp32 rows of 128 whose 16-element blocks span many binades: some all zero, some tiny,
// some large, so the chosen scales cover e4m3fn's subnormals, normals and its largest value.
std::vector<float> random_source(rnd::engine& rng, std::int64_t rows) {
  std::vector<float> x(static_cast<std::size_t>(rows * 128));
  for (std::int64_t b = 0; b < rows * 8; ++b) {
    const int kind = static_cast<int>(rnd::uniform(rng, 0, 9));
    const int exponent = kind == 0   ? -40
                         : kind == 1 ? 12
                                     : static_cast<int>(rnd::uniform(rng, -8, 6));
    for (int i = 0; i < 16; ++i) {
      const float v = std::ldexp(std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng), exponent);
      x[static_cast<std::size_t>(b * 16 + i)] = kind == 2 ? 0.0f : v;
    }
  }
  return x;
}

}  // namespace

TEST_CASE("format axis: e2m1 with e4m3 scales per 16, host dense and paged against the reference",
          "[format_axis]") {
  rnd::engine rng(2028);
  const std::int64_t H = GENERATE(as<std::int64_t>{}, 4, 33);
  const std::int64_t num_q = 5, N = 300;
  const auto q = rnd::rows<F>(rng, num_q * H);
  const auto kv = rnd::rows<F>(rng, N, {.nan_scales = 2});  // NaN scales reach some logits
  const auto w = rnd::weights<W>(rng, num_q, H);
  check_dense(q.view(), kv.view(), w.view(), N);

  const std::int32_t page_kv = 64;
  const std::int64_t pages = 7, max_blocks = 4, next_n = 2;
  const auto cache = rnd::paged_cache<F>(rng, pages, page_kv, 0);
  auto lens = rnd::context_lens(rng, 3, next_n, max_blocks * page_kv + 20);
  const auto table = rnd::block_table(rng, lens, max_blocks, page_kv, pages);
  const auto pq = rnd::rows<F>(rng, 3 * next_n * H);
  const auto pw = rnd::weights<W>(rng, 3 * next_n, H);
  check_paged(pq.view(), cache.view(), pw.view(), lens.view(), table.view(), max_blocks * page_kv);
}

TEST_CASE("format axis: the quantizers write e4m3 block scales and nearest e2m1 codes",
          "[format_axis][quantize]") {
  rnd::engine rng(2029);
  const std::int64_t N = 150, H = 8;
  const auto xk = random_source(rng, N);
  const auto xq = random_source(rng, H);
  const ml::matrix_view<const float> k_in(xk.data(), N, 128);
  const auto kv = ml::quantize_rows<F>(k_in);
  REQUIRE(kv.scales.size() == static_cast<std::size_t>(N * 8));

  // Every block's scale is the smallest e4m3fn value >= amax / 6 (amax = 0: 1), found here by
  // walking all positive codes; every element decodes to an e2m1 grid point x that scale nearest
  // to it.
  int bad_scales = 0, bad_codes = 0;
  for (std::int64_t r = 0; r < N; ++r) {
    const std::vector<double> row =
        ref::row<F>(kv.data.data() + r * F::data_bytes, kv.scales.data() + r * F::scale_bytes);
    for (int b = 0; b < 8; ++b) {
      const float* x = xk.data() + r * 128 + b * 16;
      double amax = 0;
      for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(double{x[i]}));
      double want = amax == 0 ? 1.0 : 448.0;
      for (int c = 1; c < 0x7F && amax > 0; ++c)
        if (ref::e4m3(static_cast<std::uint8_t>(c)) >= static_cast<double>(float(amax) / 6.0f)) {
          want = ref::e4m3(static_cast<std::uint8_t>(c));
          break;
        }
      const double s = ref::scale<F>(kv.scales.data() + r * F::scale_bytes, b);
      bad_scales += s != want;
      for (int i = 0; i < 16; ++i) {
        double best = std::numeric_limits<double>::infinity();
        for (std::uint8_t n = 0; n < 16; ++n)
          best = std::min(best, std::fabs(ref::e2m1(n) * s - x[i]));
        // (x / s is rounded once in fp32 before its code is picked: a tie that rounding moves is
        // within 2^-22 of x.)
        bad_codes += std::fabs(row[static_cast<std::size_t>(b * 16 + i)] - x[i]) >
                     best + std::ldexp(std::fabs(double{x[i]}), -22);
      }
    }
  }
  CHECK(bad_scales == 0);
  CHECK(bad_codes == 0);

  // The same keys through store_into_pages (8-byte scale fields in the page layout), then the
  // quantised Q through both kernels.
  const std::int32_t page_kv = 64;
  const std::int64_t pages = 4;
  const std::vector<std::int32_t> table_row{3, 0, 2};
  std::vector<std::int64_t> slots(static_cast<std::size_t>(N));
  for (std::int64_t t = 0; t < N; ++t)
    slots[static_cast<std::size_t>(t)] =
        table_row[t / page_kv] * std::int64_t{page_kv} + t % page_kv;
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(pages * ml::page_bytes<F>(page_kv)));
  const ml::mutable_paged_cache<F> cache(bytes.data(), pages, page_kv);
  ml::store_into_pages(k_in, std::span<const std::int64_t>(slots), cache);
  for (std::int64_t t = 0; t < N; ++t) {
    const std::int64_t page = slots[static_cast<std::size_t>(t)] / page_kv, slot = t % page_kv;
    CHECK(std::equal(kv.scales.begin() + t * 8, kv.scales.begin() + t * 8 + 8,
                     cache.scale(page, slot)));
  }

  const auto q = ml::quantize_rows<F>(ml::matrix_view<const float>(xq.data(), H, 128));
  const auto w = rnd::weights<W>(rng, 1, H);
  check_dense(q.view(), kv.view(), w.view(), N);
  const std::vector<std::int32_t> lens{static_cast<std::int32_t>(N)};
  check_paged(q.view(), cache.view(), w.view(),
              ml::matrix_view<const std::int32_t>(lens.data(), 1, 1),
              ml::matrix_view<const std::int32_t>(table_row.data(), 1, 3), N);

  // A scale rule is fp8_per_token's: this codec takes none.
  CHECK_THROWS_AS(ml::quantize_rows<F>(k_in, ml::vllm_indexer_k_scaling()), ml::error);
}

#endif
