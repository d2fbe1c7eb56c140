// Cross-checks the test reference itself: against the independent float64 golden cases (value,
// -inf mask, bf16 rounding and the magnitude M), and its decoders against hand-written values.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/accuracy.hpp"
#include "support/golden.hpp"

namespace ml = mqalogits;

namespace {

template <class Format>
ref::result run_reference(const golden::case_data& c) {
  const auto q = c.load<std::uint8_t>("q.bin");
  const auto q_sf = c.load<std::uint8_t>("q_sf.bin");
  const auto w = c.load<float>("w.bin");
  const std::int64_t Q = c.num("Q"), H = c.num("H");
  const ml::rows_view<Format> qv(q.data(), q_sf.data(), Q * H);
  const ml::matrix_view<const float> wv(w.data(), Q, H);
  if (c.kind() == "dense" || c.kind() == "sparse") {
    const auto kv = c.load<std::uint8_t>("kv.bin");
    const auto kv_sf = c.load<std::uint8_t>("kv_sf.bin");
    const auto ks = c.load<std::int32_t>("ks.bin"), ke = c.load<std::int32_t>("ke.bin");
    const ml::rows_view<Format> kvv(kv.data(), kv_sf.data(), c.num("N"));
    if (c.kind() == "dense") return ref::dense(qv, kvv, wv, ks, ke, c.num("max_seqlen_k"));
    const auto blocks = c.load<std::int32_t>("blocks.bin");
    return ref::sparse(qv, kvv, wv, ks, ke, c.num("N"),
                       ml::matrix_view<const std::int32_t>(blocks.data(), Q, c.num("cap")),
                       c.num("B"), /*unaligned=*/true);  // the golden cases use that mapping
  }
  const auto cache = c.load<std::uint8_t>("cache.bin");
  const auto lens = c.load<std::int32_t>("lens.bin");
  const auto table = c.load<std::int32_t>("table.bin");
  const ml::paged_cache_view<Format> cv(
      cache.data(), c.num("P"), static_cast<std::int32_t>(c.num("page_kv")), c.num("page_stride"));
  const ml::matrix_view<const std::int32_t> tv(table.data(), Q, c.num("M"));
  if (c.kind() == "paged")
    return ref::paged(qv, cv, wv, ml::matrix_view<const std::int32_t>(lens.data(), Q, 1), tv,
                      c.num("max_context_len"));
  const auto blocks = c.load<std::int32_t>("blocks.bin");
  return ref::paged_sparse(qv, cv, wv, lens, tv,
                           ml::matrix_view<const std::int32_t>(blocks.data(), Q, c.num("cap")),
                           c.num("B"));
}

}  // namespace

TEST_CASE("reference: matches every golden case (value, mask, bf16 rounding, M)", "[reference]") {
  const std::string name = GENERATE(from_range(golden::case_names()));
  INFO(name);
  const auto c = golden::load_case(name);
  const auto expected = c.load<float>("out.bin");
  const auto mag = c.load<float>("mag.bin");
  const ref::result res = c.fp4() ? run_reference<ml::mxfp4>(c) : run_reference<ml::mxfp8>(c);
  REQUIRE(static_cast<std::int64_t>(expected.size()) == res.rows * res.cols);
  std::int64_t valid = 0, bad_round = 0, bad_mag = 0;
  for (std::int64_t r = 0; r < res.rows; ++r)
    for (std::int64_t k = 0; k < res.cols; ++k) {
      const double e = expected[static_cast<std::size_t>(r * res.cols + k)];
      const double m = mag[static_cast<std::size_t>(r * res.cols + k)];
      INFO("[" << r << "][" << k << "] ref " << res.at(r, k) << " golden " << e);
      REQUIRE(accuracy::within(res.at(r, k), e, m));
      if (std::isinf(e)) continue;
      ++valid;
      if (ref::round_to_bf16(res.at(r, k)) != e) ++bad_round;
      // mag.bin holds M rounded to bf16, as out.bin holds the logit.
      if (ref::round_to_bf16(res.mag(r, k)) != m) ++bad_mag;
    }
  INFO(valid << " valid columns");
  CHECK(valid > 0);
  CHECK(bad_round == 0);
  CHECK(bad_mag == 0);
}

TEST_CASE("reference: decoders agree with hand-written values", "[reference]") {
  CHECK(ref::e4m3(0x00) == 0.0);
  CHECK(std::signbit(ref::e4m3(0x80)));
  CHECK(ref::e4m3(0x01) == std::ldexp(1.0, -9));  // smallest subnormal
  CHECK(ref::e4m3(0x07) == 7 * std::ldexp(1.0, -9));
  CHECK(ref::e4m3(0x08) == std::ldexp(1.0, -6));  // smallest normal
  CHECK(ref::e4m3(0x38) == 1.0);
  CHECK(ref::e4m3(0x7E) == 448.0);
  CHECK(ref::e4m3(0xFE) == -448.0);
  CHECK(std::isnan(ref::e4m3(0x7F)));
  CHECK(std::isnan(ref::e4m3(0xFF)));
  const double fp4[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (int n = 0; n < 16; ++n)
    CHECK(ref::e2m1(static_cast<std::uint8_t>(n)) == (n & 8 ? -1 : 1) * fp4[n & 7]);
  CHECK(ref::ue8m0(127) == 1.0);
  CHECK(ref::ue8m0(0) == std::ldexp(1.0, -127));
  CHECK(ref::ue8m0(254) == std::ldexp(1.0, 127));
  CHECK(std::isnan(ref::ue8m0(255)));
  // Packing: element 2i is the low nibble.
  const std::uint8_t packed[64] = {0x72};
  CHECK(ref::code<ml::mxfp4>(packed, 0) == 1.0);
  CHECK(ref::code<ml::mxfp4>(packed, 1) == 6.0);
  CHECK(ref::round_to_bf16(1.0 + std::ldexp(1.0, -8)) == 1.0);  // tie, to even
  CHECK(ref::round_to_bf16(1.0 + 3 * std::ldexp(1.0, -8)) == 1.0 + std::ldexp(1.0, -6));
  CHECK(std::isinf(ref::round_to_bf16(0x1.FFp127)));
}

TEST_CASE("reference: random inputs build views the reference and the library accept",
          "[reference]") {
  ref::rand::engine rng(7);
  const std::int64_t B = 3, next_n = 2, H = 4, pages = 9;
  const auto q = ref::rand::rows<ml::mxfp8>(rng, B * next_n * H, {}, 160, 8);
  const auto w = ref::rand::weights<ml::bf16>(rng, B * next_n, H);
  const auto cache = ref::rand::paged_cache<ml::mxfp8>(rng, pages, 32, 32 * 132 + 100);
  const auto lens = ref::rand::context_lens(rng, B, next_n, 100);
  const auto table = ref::rand::block_table(rng, lens, 4, 32, pages);
  const ref::result res =
      ref::paged(q.view(), cache.view(), w.view(), lens.view(), table.view(), 128);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), 32, 2);
  ml::logits_buffer<float> out(B * next_n, 128);
  ml::fp8_fp4_paged_mqa_logits(q.view(), cache.view(), w.view(), lens.view(), table.view(),
                               schedule, 128, out.view());
  const std::string diff = accuracy::compare(
      res.rows, res.cols, [&](auto r, auto k) { return double(out(r, k)); },
      [&](auto r, auto k) { return res.at(r, k); }, [&](auto r, auto k) { return res.mag(r, k); });
  CHECK(diff == "");
}
