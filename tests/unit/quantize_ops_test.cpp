// The ops around the kernel, byte-exact against scalar transcriptions of vLLM's kernels:
// - gather_from_pages: cp_gather_indexer_k_quant_cache (token -> sequence by cu_seq_lens, page
//   from the flat block table, data at page * block_stride + slot * head_dim bytes, the 4 scale
//   bytes at page * block_stride + block_size * head_dim + slot * 4), for FP8 and MXFP4 pages;
// - quantize_q_fold_weights: fused_indexer_q_rope_quant after its RoPE (DeepSeek-V3.2's
//   fmaxf(amax, 1e-10) * (1/448) and V4's fmaxf(amax, 1e-4) / 448, UE8M0, the e4m3 of x / s
//   saturating at 448, weights * s * softmax_scale * head_scale);
// - vLLM's DeepSeek-V4 MXFP4 rule (fmaxf(amax, 1e-4), ceil(log2(amax / 6)) clamped, the e2m1
//   bucket of x * 2^-e with each boundary in the lower bucket) into rows and into the cache.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <mqalogits/quantize.hpp>

#include "reference/reference.hpp"
#include "support/error_of.hpp"

namespace ml = mqalogits;

namespace {

// ---- cp_gather_indexer_k_quant_cache, as its CUDA kernel indexes bytes ----

// head_dim: data bytes per token (dst_k.size(1)); quant_block_size = head_dim * 4 /
// dst_scale.size(1) with dst_scale [tokens, 4] bytes.
void vllm_gather(const std::vector<std::uint8_t>& kv_cache, std::int64_t block_stride,
                 std::int64_t block_size, const std::vector<std::int32_t>& block_table,
                 int table_cols, const std::vector<std::int32_t>& cu_seq_lens, int head_dim,
                 std::vector<std::uint8_t>& dst_k, std::vector<std::uint8_t>& dst_scale) {
  const int batch = static_cast<int>(cu_seq_lens.size()) - 1;
  const int num_tokens = static_cast<int>(dst_k.size()) / head_dim;
  const int quant_block_size = head_dim * 4 / 4;
  for (int token = 0; token < num_tokens; ++token) {
    int b = -1;
    for (int i = 0; i < batch; ++i)
      if (token >= cu_seq_lens[i] && token < cu_seq_lens[i + 1]) b = i;
    if (b < 0) continue;  // the kernel's shared index is unset there: we leave the row
    const int in_seq = token - cu_seq_lens[b];
    const std::int64_t block = block_table[b * table_cols + in_seq / block_size];
    const std::int64_t src_block = block * block_stride;
    const std::int64_t in_block = (in_seq % block_size) * head_dim;
    std::memcpy(&dst_k[token * head_dim], &kv_cache[src_block + in_block], head_dim);
    const std::int64_t src_scale =
        src_block + block_size * head_dim + in_block * 4 / quant_block_size;
    std::memcpy(&dst_scale[(token * head_dim / quant_block_size) * 4], &kv_cache[src_scale], 4);
  }
}

template <class Format>
void gather_case(int page_kv, std::int64_t padding, std::vector<int> lens, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const int data_bytes = static_cast<int>(Format::data_bytes);
  const std::int64_t stride = ml::page_bytes<Format>(page_kv) + padding;
  int max_pages = 0, total = 0;
  for (int l : lens) {
    max_pages = std::max(max_pages, (l + page_kv - 1) / page_kv);
    total += l;
  }
  const int table_cols = max_pages + 1;  // one spare column, never read
  const int num_pages = static_cast<int>(lens.size()) * table_cols + 3;
  std::vector<std::uint8_t> cache(static_cast<std::size_t>(num_pages * stride));
  for (auto& b : cache) b = static_cast<std::uint8_t>(rng());
  // Pages scattered: a random permutation, so no sequence reads consecutive pages.
  std::vector<std::int32_t> perm(static_cast<std::size_t>(num_pages));
  for (int i = 0; i < num_pages; ++i) perm[static_cast<std::size_t>(i)] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<std::int32_t> table(lens.size() * static_cast<std::size_t>(table_cols));
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = perm[i];
  std::vector<std::int32_t> cu{0};
  for (int l : lens) cu.push_back(cu.back() + l);
  const int rows = total + 2;  // two rows past the last sequence stay untouched
  std::vector<std::uint8_t> want_k(static_cast<std::size_t>(rows * data_bytes), 0xCD),
      want_s(static_cast<std::size_t>(rows * 4), 0xCD), got_k = want_k, got_s = want_s;
  vllm_gather(cache, stride, page_kv, table, table_cols, cu, data_bytes, want_k, want_s);
  const ml::paged_cache_view<Format> view(cache.data(), num_pages, page_kv, stride);
  ml::gather_from_pages(view,
                        ml::matrix_view<const std::int32_t>(
                            table.data(), static_cast<std::int64_t>(lens.size()), table_cols),
                        std::span<const std::int32_t>(cu), got_k.data(), got_s.data(), rows);
  CHECK(got_k == want_k);
  CHECK(got_s == want_s);
  // int64 tables and offsets read the same.
  std::vector<std::int64_t> table64(table.begin(), table.end()), cu64(cu.begin(), cu.end());
  std::vector<std::uint8_t> k64(want_k.size(), 0xCD), s64(want_s.size(), 0xCD);
  ml::gather_from_pages(view,
                        ml::matrix_view<const std::int64_t>(
                            table64.data(), static_cast<std::int64_t>(lens.size()), table_cols),
                        std::span<const std::int64_t>(cu64), k64.data(), s64.data(), rows);
  CHECK(k64 == want_k);
  CHECK(s64 == want_s);
}

// ---- e4m3 and e2m1 references ----

using ref::satfinite_e4m3;

// vLLM's _e2m1_nibble: buckets with each boundary in the lower one, sign only on a non-zero code.
std::uint8_t vllm_e2m1(float x) {
  const float a = std::fmin(std::fabs(x), 6.0f);
  const float bounds[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  std::uint8_t code = 7;
  for (int i = 6; i >= 0; --i)
    if (a <= bounds[i]) code = static_cast<std::uint8_t>(i);
  return static_cast<std::uint8_t>(code | ((x < 0 && code != 0) ? 8 : 0));
}

// One block of 32 (even elements into low nibbles): 16 code bytes and the UE8M0 byte.
void vllm_mxfp4_block(const float* x, std::uint8_t* codes, std::uint8_t* ue8m0) {
  float amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  amax = std::fmax(amax, 1e-4f);
  float log2_ratio = std::ceil(std::log2(amax / 6.0f));
  log2_ratio = std::fmin(std::fmax(log2_ratio, -127.0f), 127.0f);
  const float scale = std::exp2(log2_ratio);
  const float inv = 1.0f / scale;
  *ue8m0 = static_cast<std::uint8_t>(log2_ratio + 127.0f);
  for (int i = 0; i < 16; ++i)
    codes[i] =
        static_cast<std::uint8_t>(vllm_e2m1(x[2 * i] * inv) | (vllm_e2m1(x[2 * i + 1] * inv) << 4));
}

// Rows with every branch: random magnitudes, zeros, under the floors, huge, powers of two.
std::vector<float> rows_of(std::mt19937& rng, int rows, int d) {
  std::vector<float> x;
  for (int r = 0; r < rows; ++r) {
    const int kind = r % 6;
    const float mag = std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
    for (int i = 0; i < d; ++i) {
      float v = std::uniform_real_distribution<float>(-mag, mag)(rng);
      if (kind == 1) v = 0;
      if (kind == 2) v *= 1e-12f;                                 // amax under both floors
      if (kind == 3) v = i == 5 ? 448.0f * 64 : v;                // amax a power of two * 448
      if (kind == 4) v = i % 7 == 0 ? 6.0f * (1 << (i % 5)) : v;  // block amax 6 * 2^k
      if (kind == 5) v = std::ldexp(v, 100);                      // huge
      x.push_back(ml::bf16::from_float(v).to_float());            // as bf16 leaves them
    }
  }
  return x;
}

}  // namespace

TEST_CASE("gather_from_pages: vLLM's cp_gather_indexer_k_quant_cache bytes", "[quantize][ops]") {
  // Page sizes 1, 16 and 64; padded page strides; an empty sequence; several scattered pages.
  gather_case<ml::fp8_per_token>(64, 0, {70, 0, 200, 1}, 1);
  gather_case<ml::fp8_per_token>(1, 0, {3, 5}, 2);
  gather_case<ml::fp8_per_token>(16, 48, {33, 16, 15}, 3);
  gather_case<ml::mxfp4>(64, 0, {130, 64}, 4);
  gather_case<ml::mxfp4>(1, 0, {4, 0, 2}, 5);
  gather_case<ml::mxfp4>(64, ml::aligned_page_stride<ml::mxfp4>(64) - ml::page_bytes<ml::mxfp4>(64),
                         {65}, 6);
}

TEST_CASE("gather_from_pages: bad tables, offsets and overlaps are named errors",
          "[quantize][ops]") {
  const int page_kv = 4, pages = 3;
  std::vector<std::uint8_t> cache(static_cast<std::size_t>(pages * page_kv * 132));
  const ml::paged_cache_view<ml::fp8_per_token> view(cache.data(), pages, page_kv);
  std::vector<std::int32_t> table{0, 1, 2, 0};
  std::vector<std::uint8_t> k(10 * 128), s(10 * 4);
  const auto gather = [&](std::vector<std::int32_t> cu, std::int64_t rows = 10, int cols = 2,
                          std::uint8_t* kp = nullptr) {
    return check::error_of([&] {
      ml::gather_from_pages(view, ml::matrix_view<const std::int32_t>(table.data(), 2, cols),
                            std::span<const std::int32_t>(cu), kp ? kp : k.data(), s.data(), rows);
    });
  };
  CHECK(gather({0, 8, 10}) == "");
  CHECK_THAT(gather({0, 9, 10}), Catch::Contains("sequence 0 has 9 tokens: 3 pages of 4") &&
                                     Catch::Contains("2 columns"));
  CHECK_THAT(gather({1, 2, 3}), Catch::Contains("cu_seq_lens[0] = 1 must be 0"));
  CHECK_THAT(gather({0, 5, 3}), Catch::Contains("cu_seq_lens decreases at 2: 5 then 3"));
  CHECK_THAT(gather({0, 4, 8}, 6), Catch::Contains("cu_seq_lens[2] = 8 is past the 6 output rows"));
  CHECK_THAT(gather({0, 4}), Catch::Contains("cu_seq_lens has 2 entries, expected 3"));
  table = {0, 1, 7, 0};
  CHECK_THAT(gather({0, 4, 8}),
             Catch::Contains("block_table[1, 0] = 7 is not a page of the cache"));
  table = {0, 1, -1, 0};
  CHECK_THAT(gather({0, 4, 8}), Catch::Contains("block_table[1, 0] = -1"));
  CHECK(gather({0, 4, 0 + 4}) == "");  // an empty sequence reads no page, not even a bad one
  table = {0, 1, 2, 0};
  CHECK_THAT(gather({0, 4, 8}, 2, 2, cache.data() + 100),
             Catch::Contains("data [") && Catch::Contains("overlap the cache"));
}

TEST_CASE("quantize_q_fold_weights: vLLM's fused_indexer_q_rope_quant after RoPE",
          "[quantize][ops]") {
  std::mt19937 rng(7);
  const int tokens = 5, heads = 6, d = 128;
  const std::vector<float> qf = rows_of(rng, tokens * heads, d);
  std::vector<ml::bf16> q;
  for (float v : qf) q.push_back(ml::bf16::from_float(v));
  std::vector<ml::bf16> w;
  for (int i = 0; i < tokens * heads; ++i)
    w.push_back(ml::bf16::from_float(std::uniform_real_distribution<float>(-2, 2)(rng)));
  const float softmax_scale = static_cast<float>(std::pow(128.0, -0.5)),
              head_scale = static_cast<float>(std::pow(double{heads}, -0.5));
  struct rule {
    ml::q_fold_scaling s;
    const char* name;
  };
  for (const rule& r :
       {rule{ml::vllm_v32_q_scaling(), "v3.2"}, rule{ml::vllm_v4_q_scaling(), "v4"},
        rule{{1e-4f, false, false}, "plain"}, rule{{1e-10f, false, true}, "recip"}}) {
    INFO(r.name);
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(tokens * heads * d));
    std::vector<float> w_out(static_cast<std::size_t>(tokens * heads));
    ml::quantize_q_fold_weights(
        ml::matrix_view<const ml::bf16>(q.data(), tokens * heads, d),
        ml::matrix_view<const ml::bf16>(w.data(), tokens, heads), codes.data(), 0,
        ml::matrix_view<float>(w_out.data(), tokens, heads), softmax_scale, head_scale, r.s);
    for (int row = 0; row < tokens * heads; ++row) {
      const float* x = &qf[static_cast<std::size_t>(row * d)];
      float amax = 0;
      for (int i = 0; i < d; ++i) amax = std::fmax(amax, std::fabs(x[i]));
      float s = r.s.multiply_by_reciprocal
                    ? std::fmax(amax, r.s.amax_floor) * static_cast<float>(1.0 / 448.0)
                    : std::fmax(amax, r.s.amax_floor) / 448.0f;
      if (r.s.power_of_two) s = std::exp2(std::ceil(std::log2(s)));
      for (int i = 0; i < d; ++i)
        REQUIRE(codes[static_cast<std::size_t>(row * d + i)] == satfinite_e4m3(x[i] / s));
      float want = w[static_cast<std::size_t>(row)].to_float();
      want *= s;
      want *= softmax_scale;
      want *= head_scale;
      REQUIRE(std::memcmp(&w_out[static_cast<std::size_t>(row)], &want, 4) == 0);
    }
  }
  // Without UE8M0 the largest element lands on 448, or saturates there when the scale's rounding
  // puts it above (the rounded scale is sometimes an ulp low).
  SECTION("saturation at 448") {
    std::vector<float> row(128, 1.0f);
    int saturated_above = 0;
    for (int k = 0; k < 4000; ++k) {
      const bool recip = k % 2 != 0;
      row[3] = 1000.0f + static_cast<float>(k) * 0.37f;
      std::vector<std::uint8_t> c(128);
      float wo = 0, one = 1;
      ml::quantize_q_fold_weights(ml::matrix_view<const float>(row.data(), 1, 128),
                                  ml::matrix_view<const float>(&one, 1, 1), c.data(), 0,
                                  ml::matrix_view<float>(&wo, 1, 1), 1.0f, 1.0f,
                                  {1e-10f, false, recip});
      REQUIRE(c[3] == 0x7E);
      saturated_above += row[3] / wo > 448.0f;
    }
    CHECK(saturated_above > 0);
  }
}

TEST_CASE("quantize_q_fold_weights: shapes, floors and overlaps are named errors",
          "[quantize][ops]") {
  std::vector<float> q(4 * 128, 1.0f), w(4, 1.0f), wo(4);
  std::vector<std::uint8_t> codes(4 * 128);
  const auto call = [&](std::int64_t t, std::int64_t h, ml::q_fold_scaling s = {},
                        std::uint8_t* c = nullptr) {
    return check::error_of([&] {
      ml::quantize_q_fold_weights(ml::matrix_view<const float>(q.data(), 4, 128),
                                  ml::matrix_view<const float>(w.data(), t, h),
                                  c ? c : codes.data(), 0, ml::matrix_view<float>(wo.data(), t, h),
                                  1.0f, 1.0f, s);
    });
  };
  CHECK(call(2, 2) == "");
  CHECK_THAT(call(3, 1), Catch::Contains("q has 4 rows, but weights [3, 1] need"));
  CHECK_THAT(call(2, 2, {0.0f, true, true}), Catch::Contains("amax_floor = 0"));
  CHECK_THAT(call(2, 2, {}, reinterpret_cast<std::uint8_t*>(q.data()) + 8),
             Catch::Contains("codes [") && Catch::Contains("overlap q"));
}

TEST_CASE("vLLM's DeepSeek-V4 MXFP4 rule: rows and the paged cache insert", "[quantize][ops]") {
  std::mt19937 rng(11);
  const int n = 12, d = 128;
  const std::vector<float> x = rows_of(rng, n, d);
  std::vector<std::uint8_t> want(static_cast<std::size_t>(n * 64)),
      want_s(static_cast<std::size_t>(n * 4));
  for (int r = 0; r < n; ++r)
    for (int b = 0; b < 4; ++b)
      vllm_mxfp4_block(&x[static_cast<std::size_t>(r * d + b * 32)],
                       &want[static_cast<std::size_t>(r * 64 + b * 16)],
                       &want_s[static_cast<std::size_t>(r * 4 + b)]);
  SECTION("rows") {
    std::vector<std::uint8_t> got(want.size()), got_s(want_s.size());
    ml::quantize_rows_vllm_mxfp4(ml::matrix_view<const float>(x.data(), n, d), got.data(),
                                 got_s.data());
    CHECK(got == want);
    CHECK(got_s == want_s);
  }
  SECTION("cache") {
    for (int page_kv : {1, 64}) {
      INFO("page_kv " << page_kv);
      const int pages = (n + page_kv - 1) / page_kv * 2 + 1;
      const std::int64_t stride = ml::page_bytes<ml::mxfp4>(page_kv);
      std::vector<std::uint8_t> cache(static_cast<std::size_t>(pages * stride), 0xAB);
      // Scattered slots, every third token padding (-1), int64 as vLLM passes them.
      std::vector<std::int64_t> slots;
      for (int i = 0; i < n; ++i)
        slots.push_back(i % 3 == 2 ? -1 : (i * 7 + 3) % (pages * page_kv));
      std::vector<std::uint8_t> expect = cache;
      for (int i = 0; i < n; ++i) {
        if (slots[static_cast<std::size_t>(i)] < 0) continue;
        const std::int64_t p = slots[static_cast<std::size_t>(i)] / page_kv,
                           o = slots[static_cast<std::size_t>(i)] % page_kv;
        std::memcpy(&expect[static_cast<std::size_t>(p * stride + o * 64)],
                    &want[static_cast<std::size_t>(i * 64)], 64);
        std::memcpy(&expect[static_cast<std::size_t>(p * stride + page_kv * 64 + o * 4)],
                    &want_s[static_cast<std::size_t>(i * 4)], 4);
      }
      std::vector<ml::bf16> kb;
      for (float v : x) kb.push_back(ml::bf16::from_float(v));
      ml::store_into_pages_vllm_mxfp4(
          ml::matrix_view<const ml::bf16>(kb.data(), n, d), std::span<const std::int64_t>(slots),
          ml::mutable_paged_cache<ml::mxfp4>(cache.data(), pages, page_kv));
      CHECK(cache == expect);
      slots[0] = pages * page_kv;
      CHECK_THAT(check::error_of([&] {
                   ml::store_into_pages_vllm_mxfp4(
                       ml::matrix_view<const ml::bf16>(kb.data(), n, d),
                       std::span<const std::int64_t>(slots),
                       ml::mutable_paged_cache<ml::mxfp4>(cache.data(), pages, page_kv));
                 }),
                 Catch::Contains("slot_mapping[0] = ") && Catch::Contains("is past the cache"));
    }
  }
}

TEST_CASE("scale_weights: vLLM's MXFP4 Q weights (softmax and head scales, no Q scale)",
          "[quantize][ops]") {
  std::vector<ml::bf16> w;
  for (int i = 0; i < 12; ++i) w.push_back(ml::bf16::from_float(0.37f * static_cast<float>(i - 5)));
  std::vector<float> out(12);
  const float ss = static_cast<float>(std::pow(128.0, -0.5)), hs = 0.25f;
  ml::scale_weights(ml::matrix_view<const ml::bf16>(w.data(), 3, 4),
                    ml::matrix_view<float>(out.data(), 3, 4), ss, hs);
  for (int i = 0; i < 12; ++i) {
    float want = w[static_cast<std::size_t>(i)].to_float();
    want *= ss;
    want *= hs;
    CHECK(std::memcmp(&out[static_cast<std::size_t>(i)], &want, 4) == 0);
  }
  // In place on the same float array; a shifted overlap is an error.
  std::vector<float> f(out);
  ml::scale_weights(ml::matrix_view<float>(f.data(), 3, 4), ml::matrix_view<float>(f.data(), 3, 4),
                    2.0f, 1.0f);
  CHECK(f[5] == out[5] * 2.0f);
  CHECK_THAT(check::error_of([&] {
               ml::scale_weights(ml::matrix_view<float>(f.data(), 2, 4),
                                 ml::matrix_view<float>(f.data() + 1, 2, 4), 1.0f, 1.0f);
             }),
             Catch::Contains("without being the same array"));
}
