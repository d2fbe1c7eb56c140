// The upstream-compatible paths (formats, layouts and kernels as DeepGEMM defines them) against the
// reference: FP8 with one fp32 scale per KV token and unscaled Q (the 132-byte vLLM / sglang
// cache), fp32 weights and logits, 1024-byte logits rows, the dense full-width mode, paged decode
// with Q [B, next_n, H] and one block-table row per request, and clean_logits = false.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/accuracy.hpp"
#include "support/formats.hpp"

namespace ml = mqalogits;
using ref::rand::engine;

namespace {

constexpr std::int64_t upstream_alignment = 1024;  // bytes per logits row, as upstream pads

void put_float(std::uint8_t* dst, float v) {
  std::memcpy(dst, &v, sizeof v);
}

// Q or KV rows of any format that own their bytes. `lib` is what the library gets; `ref` what the
// reference gets. For fp8_per_token Q the library sees no scales (null pointer, scale 1) and the
// reference explicit 1.0f scales, so the null path is checked against an independent reading.
template <class Format>
struct rows_input {
  std::int64_t n = 0;
  std::vector<std::uint8_t> data, scales;
  bool unscaled = false;

  ml::rows_view<Format> ref() const { return ml::rows_view<Format>(data.data(), scales.data(), n); }
  ml::rows_view<Format> lib() const {
    if constexpr (ml::scales_optional_v<Format>)
      if (unscaled) return ml::rows_view<Format>(data.data(), nullptr, n);
    return ref();
  }
};

template <class Format>
rows_input<Format> make_rows(engine& rng, std::int64_t n, bool is_q) {
  auto rows = ref::rand::rows<Format>(rng, n, {.full_mantissa_scales = true});
  rows_input<Format> in;
  in.n = n;
  in.data = std::move(rows.data);
  in.scales = std::move(rows.scales);
  if constexpr (std::is_same_v<Format, ml::fp8_per_token>) {
    in.unscaled = is_q;
    if (is_q)
      for (std::int64_t r = 0; r < n; ++r) put_float(in.scales.data() + r * 4, 1.0f);
  }
  return in;
}

// A paged cache of any format; fp8_per_token pages hold a full-mantissa fp32 scale per slot.
template <class Format>
ref::rand::owned_paged_cache<Format> make_cache(engine& rng, std::int64_t pages,
                                                std::int32_t page_kv, std::int64_t page_stride) {
  return ref::rand::paged_cache<Format>(rng, pages, page_kv, page_stride,
                                        {.full_mantissa_scales = true});
}

// Upstream pads the page stride to a multiple of 512 bytes.
template <class Format>
std::int64_t padded_page_stride(std::int32_t page_kv) {
  const std::int64_t used = std::int64_t{page_kv} * (Format::data_bytes + Format::scale_bytes);
  return (used + 511) / 512 * 512 + 512;  // one extra 512-byte block of garbage padding
}

// Compares a result with the reference; with clean = false only valid columns are compared
// (the others are unspecified).
template <class O>
std::string compare(const ref::result& e, const ml::logits_buffer<O>& out, bool clean) {
  if (out.rows() != e.rows || out.cols() != e.cols)
    return "shape [" + std::to_string(out.rows()) + ", " + std::to_string(out.cols()) +
           "], reference [" + std::to_string(e.rows) + ", " + std::to_string(e.cols) + "]";
  return accuracy::compare(
      e.rows, e.cols,
      [&](auto r, auto c) {
        const double x = e.at(r, c);
        if (!clean && std::isinf(x) && x < 0) return x;
        return double(ml::to_float(out(r, c)));
      },
      [&](auto r, auto c) { return e.at(r, c); }, [&](auto r, auto c) { return e.mag(r, c); });
}

std::int64_t valid_count(const ref::result& e) {
  return std::count_if(e.value.begin(), e.value.end(), [](double v) { return !std::isinf(v); });
}

template <class O>
bool same_bits(const ml::logits_buffer<O>& a, const ml::logits_buffer<O>& b, const ref::result& e) {
  for (std::int64_t r = 0; r < e.rows; ++r)
    for (std::int64_t c = 0; c < e.cols; ++c) {
      if (std::isinf(e.at(r, c))) continue;
      if (std::memcmp(&a(r, c), &b(r, c), sizeof(O)) != 0) return false;
    }
  return true;
}

template <class F>
const char* format_name() {
  return F::name;
}

}  // namespace

TEST_CASE("upstream: fp8_per_token decodes code x fp32 scale, null scales read as 1",
          "[upstream][format]") {
  std::uint8_t data[128];
  for (int i = 0; i < 128; ++i) data[i] = static_cast<std::uint8_t>(i);
  data[0] = 0x38;  // 1.0
  data[1] = 0xC4;  // -3.0 (s=1, e=8, m=4: -1.5 * 2)
  data[2] = 0x7E;  // 448
  data[3] = 0x01;  // 2^-9, the smallest subnormal
  data[4] = 0x7F;  // NaN
  std::uint8_t scale[4];
  put_float(scale, 0.375f);
  float out[128];
  ml::fp8_per_token::decode_row(data, scale, out);
  CHECK(out[0] == 0.375f);
  CHECK(out[1] == -1.125f);
  CHECK(out[2] == 168.0f);
  CHECK(out[3] == std::ldexp(0.375f, -9));
  CHECK(std::isnan(out[4]));
  for (int i = 5; i < 128; ++i) {
    INFO("code " << i);
    const double expected = ref::e4m3(data[i]) * 0.375;
    if (std::isnan(expected))
      CHECK(std::isnan(out[i]));
    else
      CHECK(out[i] == static_cast<float>(expected));
  }
  ml::fp8_per_token::decode_row(data, nullptr, out);
  CHECK(out[0] == 1.0f);
  CHECK(out[2] == 448.0f);
  static_assert(ml::fp8_per_token::data_bytes + ml::fp8_per_token::scale_bytes == 132);
  static_assert(ml::paged_cache_view<ml::fp8_per_token>::token_bytes == 132);
  static_assert(ml::scales_optional_v<ml::fp8_per_token>);
  static_assert(!ml::scales_optional_v<ml::mxfp8> && !ml::scales_optional_v<ml::mxfp4>);
}

TEST_CASE("upstream: a 1024-byte logits alignment pads rows and aligns the allocation",
          "[upstream]") {
  const std::int64_t cols = GENERATE(1, 255, 256, 257, 1000);
  ml::logits_buffer<float> f(3, cols, upstream_alignment);
  ml::logits_buffer<ml::bf16> h(3, cols, upstream_alignment);
  INFO("cols " << cols);
  CHECK(f.stride() % 256 == 0);
  CHECK(f.stride() >= cols);
  CHECK(f.stride() < cols + 256);
  CHECK(h.stride() % 512 == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(f.data()) % upstream_alignment == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(h.data()) % upstream_alignment == 0);
  CHECK(ml::logits_row_stride<float>(cols, 1024) == f.stride());
}

TEST_CASE("upstream: dense fp8_per_token, fp32 weights and logits, bounded and full width",
          "[upstream][dense]") {
  const std::int64_t H = GENERATE(1, 32, 64);
  const bool full_width = GENERATE(false, true);
  const bool clean = GENERATE(true, false);
  engine rng(1000 + H * 4 + full_width * 2 + clean);
  const std::int64_t num_q = 5, N = 150;
  const auto q = make_rows<ml::fp8_per_token>(rng, num_q * H, true);
  const auto kv = make_rows<ml::fp8_per_token>(rng, N, false);
  const auto w = ref::rand::weights<float>(rng, num_q, H, 0, 4.0f);
  auto ks = ref::rand::ints(rng, num_q, -3, N - 20);
  auto ke = ks;
  for (auto& e : ke) e += static_cast<std::int32_t>(ref::rand::uniform(rng, 0, 120));
  ks[1] = 0, ke[1] = N + 7;  // the whole KV (ke past N is clamped, as the call opts in)
  ks[2] = 40, ke[2] = 40;    // empty
  const std::int64_t max_seqlen_k = full_width ? 0 : 90;
  INFO("H " << H << (full_width ? " full width" : " max_seqlen_k 90") << " clean_logits " << clean);

  const ref::result e = ref::dense(q.ref(), kv.ref(), w.view(), ks, ke, max_seqlen_k);
  REQUIRE(e.cols == (full_width ? N : 90));
  REQUIRE(valid_count(e) > 0);
  ml::logits_buffer<float> out(num_q, e.cols, upstream_alignment);
  ml::fp8_fp4_mqa_logits(q.lib(), kv.lib(), w.view(), ks, ke, max_seqlen_k, out.view(),
                         {.clean_logits = clean, .truncate_long_contexts = true});
  const std::string diff = compare(e, out, clean);
  INFO(diff);
  CHECK(diff.empty());

  // Same bits on a pool, and bf16 logits within the contract too.
  ml::thread_pool pool(3);
  ml::logits_buffer<float> pooled(num_q, e.cols, upstream_alignment);
  ml::fp8_fp4_mqa_logits(ml::default_backend{}, q.lib(), kv.lib(), w.view(), ks, ke, max_seqlen_k,
                         pooled.view(),
                         {.executor = pool, .clean_logits = clean, .truncate_long_contexts = true});
  CHECK(same_bits(out, pooled, e));
  ml::logits_buffer<ml::bf16> half(num_q, e.cols);
  ml::fp8_fp4_mqa_logits(q.lib(), kv.lib(), w.view(), ks, ke, max_seqlen_k, half.view(),
                         {.clean_logits = clean, .truncate_long_contexts = true});
  const std::string diff16 = compare(e, half, clean);
  INFO(diff16);
  CHECK(diff16.empty());
}

TEMPLATE_LIST_TEST_CASE("upstream: paged decode with Q [B, next_n, H] and context_lens [B, next_n]",
                        "[upstream][paged]", check::all_formats) {
  using Format = TestType;
  const std::int64_t next_n = GENERATE(1, 2, 4);
  const std::int32_t page_kv = GENERATE(32, 64, 128);
  const bool clean = GENERATE(true, false);
  const std::int64_t B = 3, H = 16, max_blocks = 6, pages = 11;
  engine rng(2000 + next_n * 1000 + page_kv * 2 + clean);
  const std::int64_t stride = padded_page_stride<Format>(page_kv);
  const auto cache = make_cache<Format>(rng, pages, page_kv, stride);
  auto lens = ref::rand::context_lens(rng, B, next_n, 3 * page_kv + 5, 1);
  lens(0, next_n - 1) = 0;  // an empty row next to non-empty ones of the same request
  lens(1, 0) = static_cast<std::int32_t>(max_blocks * page_kv + 9);  // past the table: masked
  // One block-table row per request, garbage (not a page) past each request's context.
  const auto table = ref::rand::block_table(rng, lens, max_blocks, page_kv, pages);
  const auto q = make_rows<Format>(rng, B * next_n * H, true);
  const auto w = ref::rand::weights<float>(rng, B * next_n, H);
  const std::int64_t max_context_len = max_blocks * page_kv + 16;
  INFO(format_name<Format>() << " next_n " << next_n << " page_kv " << page_kv << " page_stride "
                             << stride << " clean_logits " << clean);

  const ref::result e =
      ref::paged(q.ref(), cache.view(), w.view(), lens.view(), table.view(), max_context_len);
  REQUIRE(valid_count(e) > 0);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 4);
  ml::logits_buffer<float> out(B * next_n, max_context_len, upstream_alignment);
  ml::thread_pool pool(2);
  ml::fp8_fp4_paged_mqa_logits(
      q.lib(), cache.view(), w.view(), lens.view(), table.view(), schedule, max_context_len,
      out.view(), {.executor = pool, .clean_logits = clean, .truncate_long_contexts = true});
  const std::string diff = compare(e, out, clean);
  INFO(diff);
  CHECK(diff.empty());
}

TEST_CASE("upstream: sparse fp8_per_token against the reference", "[upstream][sparse]") {
  const std::int64_t B = GENERATE(8, 16);
  const bool clean = GENERATE(true, false);
  engine rng(3000 + B + clean);
  const std::int64_t num_q = 4, H = 8, N = 200, cap = 12;
  const auto q = make_rows<ml::fp8_per_token>(rng, num_q * H, true);
  const auto kv = make_rows<ml::fp8_per_token>(rng, N, false);
  const auto w = ref::rand::weights<float>(rng, num_q, H);
  auto ks = ref::rand::ints(rng, num_q, 0, 60);
  auto ke = ks;
  for (auto& x : ke) x += static_cast<std::int32_t>(ref::rand::uniform(rng, 20, 220));
  const auto idx = ref::rand::sparse_indices(rng, num_q, cap, (N + B - 1) / B);
  INFO("sparse_block_kv " << B << " clean_logits " << clean);

  const ref::result e = ref::sparse(q.ref(), kv.ref(), w.view(), ks, ke, N, idx.view(), B);
  const auto meta = ml::get_sparse_mqa_logits_metadata(ks, ke, N, idx.view(), B);
  ml::logits_buffer<float> out(num_q, cap * B, upstream_alignment);
  ml::fp8_fp4_sparse_mqa_logits(q.lib(), kv.lib(), w.view(), meta, out.view(),
                                {.clean_logits = clean});
  const std::string diff = compare(e, out, clean);
  INFO(diff);
  CHECK(valid_count(e) > 0);
  CHECK(diff.empty());
}

TEST_CASE("upstream: paged sparse fp8_per_token, both protocols, first call and reuse",
          "[upstream][paged_sparse]") {
  const auto protocol =
      GENERATE(ml::paged_sparse_protocol::reread, ml::paged_sparse_protocol::snapshot);
  const std::int32_t page_kv = GENERATE(64, 128);
  const std::int64_t B = GENERATE(8, 16);
  engine rng(4000 + page_kv + B);
  const std::int64_t num_q = 4, H = 8, pages = 9, max_blocks = 4;
  const std::int64_t cap = 2 * (page_kv / B);
  const auto cache = make_cache<ml::fp8_per_token>(rng, pages, page_kv,
                                                   padded_page_stride<ml::fp8_per_token>(page_kv));
  const auto lens = ref::rand::ints(rng, num_q, 1, max_blocks * page_kv);
  std::vector<std::int64_t> keys(lens.begin(), lens.end());
  const auto table = ref::rand::block_table(rng, keys, max_blocks, page_kv, pages);
  const auto idx = ref::rand::sparse_indices(rng, num_q, cap, max_blocks * page_kv / B);
  const auto w = ref::rand::weights<float>(rng, num_q, H);
  INFO("page_kv " << page_kv << " sparse_block_kv " << B);

  const auto meta = ml::get_paged_sparse_mqa_logits_metadata(lens, table.view(), page_kv,
                                                             idx.view(), B, protocol);
  for (int call = 0; call < 2; ++call) {  // the second call has new Q
    INFO("call " << call);
    const auto q = make_rows<ml::fp8_per_token>(rng, num_q * H, true);
    const ref::result e =
        ref::paged_sparse(q.ref(), cache.view(), w.view(), lens, table.view(), idx.view(), B);
    ml::logits_buffer<float> out(num_q, cap * B, upstream_alignment);
    ml::fp8_fp4_paged_sparse_mqa_logits(q.lib(), cache.view(), w.view(), meta, out.view());
    const std::string diff = compare(e, out, true);
    INFO(diff);
    CHECK(valid_count(e) > 0);
    CHECK(diff.empty());
    CHECK(meta.has_snapshot() == (protocol == ml::paged_sparse_protocol::snapshot));
  }
}

TEST_CASE("upstream: null scales are accepted only for formats that declare them optional",
          "[upstream][validate]") {
  engine rng(5000);
  const std::int64_t H = 4, N = 16;
  const auto w = ref::rand::weights<float>(rng, 1, H);
  const std::vector<std::int32_t> ks{0}, ke{N};
  ml::logits_buffer<float> out(1, N);
  std::fill(out.data(), out.data() + out.stride(), 7.0f);
  const auto q8 = ref::rand::rows<ml::mxfp8>(rng, H);
  const auto kv8 = ref::rand::rows<ml::mxfp8>(rng, N);
  const ml::rows_view<ml::mxfp8> q_unscaled(q8.data.data(), nullptr, H);
  try {
    ml::fp8_fp4_mqa_logits(q_unscaled, kv8.view(), w.view(), ks, ke, N, out.view());
    FAIL("MXFP8 Q without scales was accepted");
  } catch (const ml::error& err) {
    const std::string what = err.what();
    INFO(what);
    CHECK(what.find("fp8_fp4_mqa_logits") != std::string::npos);
    CHECK(what.find("q scales is null") != std::string::npos);
  }
  CHECK(out(0, 0) == 7.0f);  // untouched

  const auto q = make_rows<ml::fp8_per_token>(rng, H, true);
  const auto kv = make_rows<ml::fp8_per_token>(rng, N, false);
  CHECK_NOTHROW(ml::fp8_fp4_mqa_logits(q.lib(), kv.lib(), w.view(), ks, ke, N, out.view()));
  CHECK(out(0, 0) != 7.0f);
}
