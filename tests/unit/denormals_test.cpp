// Flush-to-zero and denormals-are-zero, as inference engines often set them (x86 MXCSR bits 15
// and 6): what the README's Reliability section promises, checked on the host backend.
// - Inputs whose values and products stay normal (the usual case): the same bits as without.
// - UE8M0 scale byte 0 (2^-127) and other small scales: exactly the result of the same inputs
//   with the flushed elements (MXFP8) or blocks (MXFP4) set to zero, computed without FTZ / DAZ.
// MXCSR is an x86 register; on other targets there is nothing to test here (the tag [x86] tells
// the ARM job to leave these out when it compares its test list with the native one).
#include <catch2/catch.hpp>

#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64)

#include <xmmintrin.h>

#include <cmath>
#include <cstdint>
#include <iterator>
#include <span>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/kernel_check.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;
using i32 = std::int32_t;
using i64 = std::int64_t;

namespace {

// FTZ (bit 15) and DAZ (bit 6) on the calling thread while alive; the old MXCSR after.
class flush_denormals {
 public:
  flush_denormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }
  flush_denormals(const flush_denormals&) = delete;
  flush_denormals& operator=(const flush_denormals&) = delete;
  ~flush_denormals() { _mm_setcsr(saved_); }

 private:
  unsigned saved_;
};

// Whether the thread flushes now: 2^-127 (subnormal) times 1 reads as 0 under DAZ.
bool flushing() {
  volatile float tiny = 0x1p-127f;
  volatile float one = 1.0f;
  return tiny * one == 0.0f;
}

// Equal values, +0 equal to -0 and NaN to NaN (a flushed product can change a zero's sign).
template <class O>
bool same_values(const ml::logits_buffer<O>& a, const ml::logits_buffer<O>& b) {
  for (i64 r = 0; r < a.rows(); ++r)
    for (i64 c = 0; c < a.cols(); ++c) {
      const float x = ml::to_float(a(r, c)), y = ml::to_float(b(r, c));
      if (!(x == y || (std::isnan(x) && std::isnan(y)))) return false;
    }
  return true;
}

template <class O>
bool differ(const ml::logits_buffer<O>& a, const ml::logits_buffer<O>& b) {
  return !same_values(a, b);
}

// Weights with few mantissa bits, so no weighted sum of the test's scores can cancel into a
// subnormal (that would be flushed too, which the comparisons below are not about).
rnd::owned_matrix<float> coarse_weights(rnd::engine& rng, i64 rows, i64 H) {
  auto w = rnd::matrix<float>(rows, H);
  for (auto& v : w.data) v = static_cast<float>(rnd::uniform(rng, -4, 4)) / 4.0f;
  return w;
}

// The promise, checked on a dense call: under FTZ / DAZ, (q, kv) scores exactly as (q0, kv0) —
// the same rows with the elements the flush loses zeroed — does without, and that matches the
// reference; without FTZ / DAZ, (q, kv) itself matches the reference; and the flush changed
// something.
template <class F>
void expect_flush_promise(const rnd::owned_rows<F>& q, const rnd::owned_rows<F>& kv,
                          const rnd::owned_rows<F>& q0, const rnd::owned_rows<F>& kv0,
                          const rnd::owned_matrix<float>& w, const std::vector<i32>& ks,
                          const std::vector<i32>& ke) {
  const i64 num_q = static_cast<i64>(ks.size()), N = kv.n;
  ml::logits_buffer<float> flushed(num_q, N), expected(num_q, N), plain(num_q, N);
  {
    const flush_denormals guard;
    REQUIRE(flushing());
    ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), ks, ke, 0, flushed.view());
  }
  ml::fp8_fp4_mqa_logits(q0.view(), kv0.view(), w.view(), ks, ke, 0, expected.view());
  ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), ks, ke, 0, plain.view());
  CHECK(same_values(flushed, expected));
  CHECK(check::against(flushed, ref::dense(q0.view(), kv0.view(), w.view(), std::span(ks),
                                           std::span(ke), 0)) == "");
  CHECK(check::against(plain, ref::dense(q.view(), kv.view(), w.view(), std::span(ks),
                                         std::span(ke), 0)) == "");
  CHECK(differ(plain, flushed));
}

}  // namespace

TEST_CASE("denormals: the MXCSR guard flushes and restores", "[denormals][x86]") {
  constexpr unsigned control = ~0x3Fu;  // bits 0-5 are sticky exception flags, not modes
  const unsigned before = _mm_getcsr();
  REQUIRE(!flushing());
  {
    const flush_denormals guard;
    CHECK((_mm_getcsr() & 0x8040u) == 0x8040u);
    CHECK(flushing());
  }
  CHECK((_mm_getcsr() & control) == (before & control));
  CHECK(!flushing());
}

TEMPLATE_LIST_TEST_CASE("denormals: ordinary inputs give the same bits under FTZ / DAZ",
                        "[denormals][x86]", check::all_formats) {
  using F = TestType;
  rnd::engine rng(4401);
  const i64 num_q = 5, H = 16, N = 700;
  const auto q = rnd::rows<F>(rng, num_q * H);
  const auto kv = rnd::rows<F>(rng, N);
  const auto w = rnd::weights<float>(rng, num_q, H);
  const auto ks = rnd::ints(rng, num_q, 0, 100);
  const std::vector<i32> ke(num_q, static_cast<i32>(N));
  ml::logits_buffer<float> plain(num_q, N), flushed(num_q, N);
  ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), ks, ke, 0, plain.view());
  {
    const flush_denormals guard;
    ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), ks, ke, 0, flushed.view());
  }
  CHECK(check::bitwise_equal(plain, flushed));

  // The paged kernel too (its keys come through the page table, decoded the same way).
  const i32 page_kv = 64;
  const i64 B = 3, max_blocks = 4, pages = 6, cols = max_blocks * page_kv;
  const auto cache = rnd::paged_cache<F>(rng, pages, page_kv);
  const auto lens = rnd::context_lens(rng, B, 1, cols, 1);
  const auto table = rnd::block_table(rng, lens, max_blocks, page_kv, pages);
  const auto pq = rnd::rows<F>(rng, B * H);
  const auto pw = rnd::weights<ml::bf16>(rng, B, H);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 2);
  ml::logits_buffer<ml::bf16> paged(B, cols), paged_flushed(B, cols);
  ml::fp8_fp4_paged_mqa_logits(pq.view(), cache.view(), pw.view(), lens.view(), table.view(),
                               schedule, cols, paged.view());
  {
    const flush_denormals guard;
    ml::fp8_fp4_paged_mqa_logits(pq.view(), cache.view(), pw.view(), lens.view(), table.view(),
                                 schedule, cols, paged_flushed.view());
  }
  CHECK(check::bitwise_equal(paged, paged_flushed));
}

// Blocks 0 and 1 pair small query scales with large key scales, blocks 2 and 3 the other way
// round, so every product that survives the flush is a normal number.
namespace {
constexpr std::uint8_t small_scales[] = {0, 0, 1, 2, 3, 5, 9, 12, 20};
constexpr std::uint8_t large_scales[] = {180, 200, 215};
template <class F>
void set_scales(rnd::engine& rng, rnd::owned_rows<F>& rows, bool query) {
  for (i64 r = 0; r < rows.n; ++r)
    for (int b = 0; b < 4; ++b) {
      const bool small = (b < 2) == query;
      const auto pick = [&](const auto& set) {
        return set[rnd::uniform(rng, 0, static_cast<i64>(std::size(set)) - 1)];
      };
      rows.scale(r)[b] = small ? pick(small_scales) : pick(large_scales);
    }
}

// 4 query rows of 8 heads against 300 keys with the scales above, every key valid.
template <class F>
struct flush_inputs {
  static constexpr i64 num_q = 4, H = 8, N = 300;
  rnd::owned_rows<F> q, kv;
  rnd::owned_matrix<float> w;
  std::vector<i32> ks = std::vector<i32>(num_q, 0),
                   ke = std::vector<i32>(num_q, static_cast<i32>(N));

  explicit flush_inputs(std::uint64_t seed) {
    rnd::engine rng(seed);
    q = rnd::rows<F>(rng, num_q * H);
    kv = rnd::rows<F>(rng, N);
    set_scales(rng, q, true);
    set_scales(rng, kv, false);
    w = coarse_weights(rng, num_q, H);
  }
};
}  // namespace

TEST_CASE("denormals: MXFP8 elements below 2^-126 read as zero under FTZ / DAZ",
          "[denormals][mxfp8][x86]") {
  using F = ml::mxfp8;
  const flush_inputs<F> in(4403);
  const auto& [q, kv, w, ks, ke] = in;
  // The promise: every element whose value code x 2^(byte - 127) is below 2^-126 is zero (all
  // of a block with byte 0, whose scale 2^-127 is itself subnormal); nothing else changes.
  auto flush = [](rnd::owned_rows<F> rows) {
    i64 zeroed = 0;
    for (i64 r = 0; r < rows.n; ++r)
      for (int i = 0; i < 128; ++i) {
        const std::uint8_t byte = rows.scale(r)[i / 32];
        const double v = ml::float_e4m3::decode(rows.row(r)[i]) * std::ldexp(1.0, byte - 127);
        if (byte == 0 || std::abs(v) < 0x1p-126) {
          zeroed += rows.row(r)[i] != 0;
          rows.row(r)[i] = 0;
        }
      }
    CHECK(zeroed > 0);
    return rows;
  };
  const auto q0 = flush(q), kv0 = flush(kv);
  expect_flush_promise(q, kv, q0, kv0, w, ks, ke);
}

TEST_CASE("denormals: MXFP4 block pairs whose scale product is below 2^-126 read as zero",
          "[denormals][mxfp4][x86]") {
  using F = ml::mxfp4;
  const flush_inputs<F> in(4405);
  const auto& [q, kv, w, ks, ke] = in;
  // The promise: the pair (query block, key block) with scale bytes eq, ek contributes zero when
  // the query's block scale 2^(eq - 127) / 4 or the key's 2^(ek - 127) is subnormal (eq <= 2,
  // ek == 0) or their product is (eq + ek < 130); nothing else changes. With these scales the
  // first two decide it; rows whose blocks do that are zeroed here.
  auto flush = [](rnd::owned_rows<F> rows, int limit) {
    i64 zeroed = 0;
    for (i64 r = 0; r < rows.n; ++r)
      for (int b = 0; b < 4; ++b)
        if (rows.scale(r)[b] <= limit) {
          ++zeroed;
          for (int i = 0; i < 16; ++i) rows.row(r)[16 * b + i] = 0;
        }
    CHECK(zeroed > 0);
    return rows;
  };
  const auto q0 = flush(q, 2), kv0 = flush(kv, 0);
  // Block 0 of every 7th key: byte 105 against query bytes 3..20 (each scale normal), a product
  // 2^-148 .. 2^-131, subnormal: flushed.
  auto kv_low = kv, kv_low0 = kv0;
  for (i64 t = 0; t < in.N; t += 7) {
    kv_low.scale(t)[0] = 105;
    kv_low0.scale(t)[0] = 105;
    for (int i = 0; i < 16; ++i) kv_low0.row(t)[i] = 0;
  }
  expect_flush_promise(q, kv_low, q0, kv_low0, w, ks, ke);
}

#endif  // x86
