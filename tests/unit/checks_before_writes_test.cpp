// A refused call writes nothing: every output is checked against every input and the other
// outputs before its first byte is written, in the helpers around the kernels too (the MXFP4 Q
// quantiser with its weights, the paged metadata's array form, the kernel's schedule array), and
// sizes computed from a caller's values fail as named errors instead of overflowing.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"
#include "support/error_of.hpp"
#include "support/kernel_inputs.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;

namespace {

using check::expect_error;

// q [T * H, 128] floats, weights [T, H], and the MXFP4 outputs, all in one float buffer so that
// any two can be made to overlap.
struct q_mxfp4_case {
  static constexpr std::int64_t T = 2, H = 4, rows = T * H, d = 128;
  std::vector<float> mem = std::vector<float>(4096, 0.25f);
  std::size_t q_at = 0, w_at = 1024, codes_at = 1100, scales_at = 1700, w_out_at = 1800;

  q_mxfp4_case() {
    rnd::engine rng(7);
    for (std::size_t i = 0; i < static_cast<std::size_t>(rows * d); ++i)
      mem[q_at + i] = static_cast<float>(rnd::uniform(rng, -3, 3));
  }
  void run() {
    auto* base = reinterpret_cast<std::uint8_t*>(mem.data());
    ml::quantize_q_mxfp4_scale_weights(
        ml::matrix_view<const float>(mem.data() + q_at, rows, d),
        ml::matrix_view<const float>(mem.data() + w_at, T, H), base + 4 * codes_at, 0,
        base + 4 * scales_at, 4, ml::matrix_view<float>(mem.data() + w_out_at, T, H), 0.5f, 0.25f);
  }
};

bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("checks before writes: the MXFP4 Q quantiser with its weights", "[hostile][helpers]") {
  q_mxfp4_case ok;
  ok.run();
  // The scale fields' unused bytes are zero, the weights scaled as scale_weights does.
  const auto* scale_bytes = reinterpret_cast<const std::uint8_t*>(ok.mem.data() + ok.scales_at);
  for (std::int64_t r = 0; r < q_mxfp4_case::rows; ++r) CHECK(scale_bytes[4 * r] != 0);
  CHECK(ok.mem[ok.w_out_at] == 0.25f * 0.5f * 0.25f);

  struct attack {
    const char* what;
    std::size_t q_mxfp4_case::*field;
    std::size_t at;
    const char* message;  // what the error names
  };
  const attack attacks[] = {
      {"scales over q", &q_mxfp4_case::scales_at, 8, "scales ["},
      {"codes over the weights", &q_mxfp4_case::codes_at, 1024, "overlap weights ["},
      {"scales over the weights", &q_mxfp4_case::scales_at, 1026, "overlap weights ["},
      {"weights_out over the codes", &q_mxfp4_case::w_out_at, 1110, "overlap weights_out ["},
      {"weights_out over the scales", &q_mxfp4_case::w_out_at, 1700, "overlap weights_out ["},
      {"weights_out over q", &q_mxfp4_case::w_out_at, 500, "overlap q ["},
      {"weights_out inside the weights", &q_mxfp4_case::w_out_at, 1025, "overlap weights ["},
      {"codes over the scales", &q_mxfp4_case::codes_at, 1650, "overlap scales ["},
  };
  for (const attack& a : attacks) {
    INFO(a.what);
    q_mxfp4_case c;
    c.*a.field = a.at;
    const std::vector<float> before = c.mem;
    expect_error([&] { c.run(); }, {"quantize_q_mxfp4_scale_weights", a.message});
    CHECK(same_bytes(c.mem, before));
  }
  // The float weights scaled in place stay allowed.
  q_mxfp4_case in_place;
  in_place.w_out_at = in_place.w_at;
  in_place.run();
  CHECK(in_place.mem[in_place.w_at] == 0.25f * 0.5f * 0.25f);
}

TEST_CASE("checks before writes: the paged metadata's array over its lengths", "[hostile]") {
  std::vector<std::int32_t> mem(64, 0);
  for (int b = 0; b < 3; ++b) mem[static_cast<std::size_t>(b)] = 100 * (b + 1);
  const ml::matrix_view<const std::int32_t> lens(mem.data(), 3, 1);
  const std::vector<std::int32_t> before = mem;
  const std::int64_t rows = ml::paged_mqa_schedule_array_rows(2);
  expect_error(
      [&] {
        ml::get_paged_mqa_logits_metadata(lens, 64, 2,
                                          ml::matrix_view<std::int32_t>(mem.data() + 2, rows, 2));
      },
      {"get_paged_mqa_logits_metadata", "out [", "overlap context_lens"});
  CHECK(mem == before);
  ml::get_paged_mqa_logits_metadata(lens, 64, 2,
                                    ml::matrix_view<std::int32_t>(mem.data() + 3, rows, 2));
  CHECK(mem[3] == 0);  // adjacent is fine: worker 0 starts at request 0
}

TEST_CASE("checks before writes: paged logits over the schedule array", "[hostile][overlap]") {
  check::paged_call_inputs<ml::mxfp8, float> c(1309, 4, 32, 2, 2);
  const auto lens = rnd::context_lens(c.rng, 2, 1, 90, 40);
  const auto table = rnd::block_table(c.rng, lens, 3, 32, 4);
  // The schedule array and the logits in one float buffer.
  std::vector<float> mem(4096, 0.0f);
  const std::int64_t rows = ml::paged_mqa_schedule_array_rows(2);
  const ml::matrix_view<std::int32_t> array(reinterpret_cast<std::int32_t*>(mem.data() + 100), rows,
                                            2);
  ml::get_paged_mqa_logits_metadata(lens.view(), 32, 2, array);
  const std::vector<float> before = mem;
  expect_error(
      [&] {
        ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, c.q.view(), c.cache.view(), c.w.view(),
                                     lens.view(), table.view(),
                                     ml::matrix_view<const std::int32_t>(array), 96,
                                     ml::matrix_view<float>(mem.data(), 2, 96, 128));
      },
      {"fp8_fp4_paged_mqa_logits", "overlap schedule_meta"});
  CHECK(same_bytes(mem, before));
}

TEST_CASE("checks before writes: sizes from a caller's values", "[hostile][helpers]") {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  CHECK(ml::checked_round_up("f", "width", 1000, 256) == 1024);
  CHECK(ml::checked_round_up("f", "width", max - 255, 256) == max - 255);
  expect_error([&] { ml::checked_round_up("f", "max_seqlen_k", max, 256); },
               {"f: max_seqlen_k", "overflows int64"});
  expect_error([&] { ml::checked_round_up("f", "width", -1, 256); }, {"f: width = -1"});
  CHECK(ml::checked_mul("f", "rows", 3, 4) == 12);
  expect_error([&] { ml::checked_mul("f", "rows", max / 2, 3); }, {"f: rows", "overflows int64"});
  expect_error([&] { ml::checked_add("f", "n", max, 1); }, {"f: n", "overflows int64"});
  CHECK(ml::checked_int32("f", "block size", 64) == 64);
  expect_error([&] { ml::checked_int32("f", "block size", std::int64_t{1} << 32); },
               {"f: block size = 4294967296 does not fit in int32"});
}
