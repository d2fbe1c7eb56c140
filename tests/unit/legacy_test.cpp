// DeepGEMM's legacy FP8 names, fp8_mqa_logits and fp8_paged_mqa_logits: per-token FP8 K, bare Q
// codes, fp32 logits, upstream's argument order with clean_logits positional. Each is checked
// against the reference, bit for bit against the fp8_fp4_* call it wraps, on both backends, and
// for the one thing it adds (a Q view with scales is refused before the output is touched).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/kernel_check.hpp"

namespace ml = mqalogits;
using ref::rand::engine;

namespace {

using F = ml::fp8_per_token;

// Per-token rows: NaN-free e4m3 codes and a random fp32 scale per row (1.0 for Q, which the
// library reads through a null scale pointer and the reference through explicit ones).
struct per_token_rows {
  std::int64_t n = 0;
  std::vector<std::uint8_t> data, scales;
  bool bare = false;
  ml::rows_view<F> ref() const { return {data.data(), scales.data(), n}; }
  ml::rows_view<F> lib() const { return bare ? ml::rows_view<F>(data.data(), nullptr, n) : ref(); }
};

float random_scale(engine& rng) {
  return std::ldexp(std::uniform_real_distribution<float>(1.0f, 2.0f)(rng),
                    static_cast<int>(ref::rand::uniform(rng, -9, -3)));
}

per_token_rows make_rows(engine& rng, std::int64_t n, bool is_q) {
  per_token_rows r;
  r.n = n;
  r.bare = is_q;
  r.data = ref::rand::rows<ml::mxfp8>(rng, n).data;
  r.scales.resize(static_cast<std::size_t>(n) * 4);
  for (std::int64_t i = 0; i < n; ++i) {
    const float s = is_q ? 1.0f : random_scale(rng);
    std::memcpy(r.scales.data() + i * 4, &s, 4);
  }
  return r;
}

ref::rand::owned_paged_cache<F> make_cache(engine& rng, std::int64_t pages, std::int32_t page_kv) {
  auto mx = ref::rand::paged_cache<ml::mxfp8>(rng, pages, page_kv);
  ref::rand::owned_paged_cache<F> c;
  c.num_pages = mx.num_pages;
  c.page_kv = mx.page_kv;
  c.page_stride = mx.page_stride;
  c.bytes = std::move(mx.bytes);
  for (std::int64_t p = 0; p < pages; ++p)
    for (std::int64_t s = 0; s < page_kv; ++s) {
      const float v = random_scale(rng);
      std::memcpy(c.scale(p, s), &v, 4);
    }
  return c;
}

}  // namespace

TEMPLATE_TEST_CASE("legacy: fp8_mqa_logits matches the reference and fp8_fp4_mqa_logits",
                   "[legacy][dense]", ml::backend::host, ml::backend::neuron<ml::backend::trn2>) {
  const bool clean = GENERATE(true, false);
  const std::int64_t max_seqlen_k = GENERATE(0, 70);
  const std::int64_t num_q = 6, H = 32, N = 130;
  engine rng(91000 + clean * 2 + (max_seqlen_k > 0));
  const auto q = make_rows(rng, num_q * H, true);
  const auto kv = make_rows(rng, N, false);
  const auto w = ref::rand::weights<float>(rng, num_q, H);
  auto ks = ref::rand::ints(rng, num_q, -2, 80);
  auto ke = ks;
  for (auto& e : ke) e += static_cast<std::int32_t>(ref::rand::uniform(rng, 0, 90));
  ks[0] = 5, ke[0] = 5;  // an empty row
  INFO("clean_logits " << clean << " max_seqlen_k " << max_seqlen_k);

  const ref::result e = ref::dense(q.ref(), kv.ref(), w.view(), ks, ke, max_seqlen_k);
  REQUIRE(check::valid_count(e) > 0);
  ml::logits_buffer<float> out(num_q, e.cols, 1024), wrapped(num_q, e.cols, 1024);
  ml::thread_pool pool(2);
  // The positional clean_logits wins over the options' value.
  // Some rows end past N or hold more than max_seqlen_k tokens: truncated, as the reference.
  ml::fp8_mqa_logits(TestType{}, q.lib(), kv.lib(), w.view(), ks, ke, clean, max_seqlen_k,
                     out.view(),
                     {.executor = pool, .clean_logits = !clean, .truncate_long_contexts = true});
  const std::string diff = check::against(out, e, clean);
  INFO(diff);
  CHECK(diff.empty());
  ml::fp8_fp4_mqa_logits(TestType{}, q.lib(), kv.lib(), w.view(), ks, ke, max_seqlen_k,
                         wrapped.view(), {.clean_logits = clean, .truncate_long_contexts = true});
  if (clean) CHECK(check::bitwise_equal(out, wrapped));
  for (std::int64_t r = 0; r < e.rows; ++r)
    for (std::int64_t c = 0; c < e.cols; ++c)
      if (!std::isinf(e.at(r, c))) CHECK(std::memcmp(&out(r, c), &wrapped(r, c), 4) == 0);
}

TEMPLATE_TEST_CASE("legacy: fp8_paged_mqa_logits matches the reference and the fp8_fp4 call",
                   "[legacy][paged]", ml::backend::host, ml::backend::neuron<ml::backend::trn2>) {
  const bool clean = GENERATE(false, true);
  const std::int64_t next_n = GENERATE(1, 2);
  const std::int32_t page_kv = 64;
  const std::int64_t B = 3, H = 16, max_blocks = 4, pages = 7;
  engine rng(92000 + clean * 8 + next_n);
  const auto cache = make_cache(rng, pages, page_kv);
  const auto lens = ref::rand::context_lens(rng, B, next_n, max_blocks * page_kv, 1);
  const auto table = ref::rand::block_table(rng, lens, max_blocks, page_kv, pages);
  const auto q = make_rows(rng, B * next_n * H, true);
  const auto w = ref::rand::weights<float>(rng, B * next_n, H);
  const std::int64_t max_context_len = max_blocks * page_kv;
  INFO("clean_logits " << clean << " next_n " << next_n);

  const ref::result e =
      ref::paged(q.ref(), cache.view(), w.view(), lens.view(), table.view(), max_context_len);
  REQUIRE(check::valid_count(e) > 0);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 3);
  ml::logits_buffer<float> out(B * next_n, max_context_len, 1024);
  ml::logits_buffer<float> wrapped(B * next_n, max_context_len, 1024);
  ml::fp8_paged_mqa_logits(TestType{}, q.lib(), cache.view(), w.view(), lens.view(), table.view(),
                           schedule, max_context_len, clean, out.view());
  const std::string diff = check::against(out, e, clean);
  INFO(diff);
  CHECK(diff.empty());
  ml::fp8_fp4_paged_mqa_logits(TestType{}, q.lib(), cache.view(), w.view(), lens.view(),
                               table.view(), schedule, max_context_len, wrapped.view(),
                               {.clean_logits = clean});
  for (std::int64_t r = 0; r < e.rows; ++r)
    for (std::int64_t c = 0; c < e.cols; ++c)
      if (!std::isinf(e.at(r, c))) CHECK(std::memcmp(&out(r, c), &wrapped(r, c), 4) == 0);
}

TEST_CASE("legacy: the default-backend overloads and a Q with scales", "[legacy][validate]") {
  engine rng(93000);
  const std::int64_t H = 4, N = 40, page_kv = 32;
  const auto q = make_rows(rng, H, true);
  const auto kv = make_rows(rng, N, false);
  const auto w = ref::rand::weights<float>(rng, 1, H);
  const std::vector<std::int32_t> ks{3}, ke{N};
  const ref::result e = ref::dense(q.ref(), kv.ref(), w.view(), ks, ke, 0);
  ml::logits_buffer<float> out(1, N, 1024);
  ml::fp8_mqa_logits(q.lib(), kv.lib(), w.view(), ks, ke, true, 0, out.view());
  CHECK(check::against(out, e).empty());

  // A Q view carrying scales is refused by name, before the output is written.
  check::fill_sentinel(out);
  CHECK_THROWS_WITH(ml::fp8_mqa_logits(q.ref(), kv.lib(), w.view(), ks, ke, true, 0, out.view()),
                    Catch::Contains("fp8_mqa_logits") && Catch::Contains("q must be bare"));
  CHECK(check::untouched(out));

  const auto cache = make_cache(rng, 2, page_kv);
  const std::int32_t lens_data[1] = {50}, table_data[2] = {1, 0};
  const ml::matrix_view<const std::int32_t> lens(lens_data, 1, 1), table(table_data, 1, 2);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens, page_kv, 1);
  const ref::result pe = ref::paged(q.ref(), cache.view(), w.view(), lens, table, 64);
  ml::logits_buffer<float> paged(1, 64, 1024);
  ml::fp8_paged_mqa_logits(q.lib(), cache.view(), w.view(), lens, table, schedule, 64, true,
                           paged.view());
  CHECK(check::against(paged, pe).empty());
  check::fill_sentinel(paged);
  CHECK_THROWS_WITH(ml::fp8_paged_mqa_logits(q.ref(), cache.view(), w.view(), lens, table, schedule,
                                             64, true, paged.view()),
                    Catch::Contains("fp8_paged_mqa_logits") && Catch::Contains("q must be bare"));
  CHECK(check::untouched(paged));
}
