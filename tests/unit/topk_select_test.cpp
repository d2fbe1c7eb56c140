// The selection primitives under the fused top-k, against plain references: the admission of a
// slice of scores against topk_key::make one score at a time, the cuts of a candidate buffer
// (exact, to at least its k best, and at a threshold), each on every compiled host ISA (the
// portable path always; AVX2 and AVX-512 where built), and the radix sort of a finished row against
// std::sort. The kernels' top-k tests reach them only through the key distributions real logits
// produce; these feed them the awkward ones: all keys equal, two values, one outlier, keys at 0 and
// at ~0, every byte varying, scores a few ulps apart, NaN, zeros and infinities of both signs, and
// sizes on both sides of the small-input and sampling fallbacks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace ml = mqalogits;
namespace hb = mqalogits::host_backend;

namespace {

enum class spread { random, few_values, two_values, outlier, extremes, scores, equal, ulps };

std::vector<std::uint64_t> make_keys(std::mt19937_64& rng, std::int64_t n, spread s) {
  std::vector<std::uint64_t> keys(static_cast<std::size_t>(n));
  std::normal_distribution<float> normal;
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint64_t& x = keys[static_cast<std::size_t>(i)];
    switch (s) {
      case spread::random:
        x = rng();
        break;
      case spread::few_values:
        x = (rng() % 5) << 40;
        break;
      case spread::two_values:
        x = rng() % 2 ? ~std::uint64_t{0} : 0;
        break;
      case spread::outlier:
        x = i == n / 2 ? ~std::uint64_t{0} : 1000 + rng() % 3;
        break;
      case spread::extremes:
        x = rng() % 3 == 0 ? 0 : ~std::uint64_t{0} - rng() % 4;
        break;
      case spread::scores:
        x = ml::detail::topk_key::make(normal(rng), i);
        break;
      case spread::equal:
        x = 0x1234;
        break;
      case spread::ulps:  // scores within 16 ulps of 1 and one far above: ties past 22 bits
        x = ml::detail::topk_key::make(
            i == 0 ? 1e30f : std::bit_cast<float>(0x3F800000u + static_cast<unsigned>(rng() % 16)),
            i);
        break;
    }
  }
  return keys;
}

constexpr spread all_spreads[] = {spread::random,  spread::few_values, spread::two_values,
                                  spread::outlier, spread::extremes,   spread::scores,
                                  spread::equal,   spread::ulps};

// keys in descending order (the reference every primitive is checked against).
std::vector<std::uint64_t> descending(std::vector<std::uint64_t> keys) {
  std::sort(keys.begin(), keys.end(), std::greater<>());
  return keys;
}

const char* name(spread s) {
  const char* names[] = {"random",   "few values", "two values", "outlier",
                         "extremes", "scores",     "equal",      "ulps"};
  return names[static_cast<int>(s)];
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("topk select: keep_best moves exactly the k best to the front",
                        "[topk][select]", hb::compiled_isas) {
  std::mt19937_64 rng(7);
  for (spread s : all_spreads) {
    for (std::int64_t n : {1, 2, 31, 32, 33, 64, 257, 4096, 5000}) {
      for (std::int64_t k : {std::int64_t{1}, std::int64_t{2}, n / 2, n - 1, n}) {
        if (k < 1 || k > n) continue;
        INFO(name(s) << ", n " << n << ", k " << k);
        const std::vector<std::uint64_t> keys = make_keys(rng, n, s);
        const std::vector<std::uint64_t> sorted = descending(keys);
        std::vector<std::uint64_t> got = keys;
        const std::uint64_t kth = ml::detail::keep_best<TestType>(got.data(), n, k);
        CHECK(kth == sorted[static_cast<std::size_t>(k - 1)]);
        CHECK(got[static_cast<std::size_t>(k - 1)] == kth);
        // The front k are the k best (as a multiset); the rest is unspecified.
        const auto front = descending({got.begin(), got.begin() + k});
        CHECK(std::equal(front.begin(), front.end(), sorted.begin()));
      }
    }
  }
}

TEMPLATE_LIST_TEST_CASE("topk select: compact_at_least keeps the keys >= t in order",
                        "[topk][select]", hb::compiled_isas) {
  std::mt19937_64 rng(13);
  for (spread s : all_spreads) {
    for (std::int64_t n : {0, 1, 3, 4, 5, 7, 8, 9, 100, 1001}) {
      const std::vector<std::uint64_t> keys = make_keys(rng, n, s);
      // Thresholds: 0 (all kept), the largest key (ties at the top), one past it (none kept),
      // and keys from the input (ties with every copy of it).
      std::vector<std::uint64_t> bars = {0, ~std::uint64_t{0}};
      if (n > 0) {
        const std::uint64_t top = descending(keys).front();
        bars.push_back(top);
        if (top != ~std::uint64_t{0}) bars.push_back(top + 1);
        for (int j = 0; j < 4; ++j) bars.push_back(keys[rng() % keys.size()]);
      }
      for (std::uint64_t t : bars) {
        INFO(name(s) << ", n " << n << ", t " << t);
        std::vector<std::uint64_t> want;
        std::copy_if(keys.begin(), keys.end(), std::back_inserter(want),
                     [t](std::uint64_t x) { return x >= t; });
        std::vector<std::uint64_t> got = keys;
        got.push_back(0xABCDu);
        const std::int64_t m = TestType::compact_at_least(got.data(), n, t);
        CHECK(got.back() == 0xABCDu);  // only keys[0, n) is touched
        got.resize(static_cast<std::size_t>(m));
        CHECK(got == want);
      }
    }
  }
}

TEST_CASE("topk select: sort_descending equals std::sort", "[topk][select]") {
  std::mt19937_64 rng(11);
  for (spread s : all_spreads) {
    for (std::int64_t n : {0, 1, 63, 64, 65, 1000, 2048, 4097}) {
      INFO(name(s) << ", n " << n);
      std::vector<std::uint64_t> keys = make_keys(rng, n, s);
      const std::vector<std::uint64_t> want = descending(keys);
      std::vector<std::uint64_t> scratch(static_cast<std::size_t>(n) + 1, 0xABCDu);
      ml::detail::sort_descending(keys.data(), n, scratch.data());
      CHECK(keys == want);
      CHECK(scratch.back() == 0xABCDu);  // only scratch[0, n) is used
    }
  }
}

TEMPLATE_LIST_TEST_CASE("topk select: keep_at_least keeps a superset of the k best",
                        "[topk][select]", hb::compiled_isas) {
  std::mt19937_64 rng(5);
  for (spread s : all_spreads) {
    for (std::int64_t n : {1, 2, 100, 511, 512, 2048, 4096, 8192, 20000}) {
      for (std::int64_t k : {std::int64_t{1}, n / 10, n / 4, n / 2, n - 1, n}) {
        if (k < 1 || k > n) continue;
        INFO(name(s) << ", n " << n << ", k " << k);
        const std::vector<std::uint64_t> keys = make_keys(rng, n, s);
        const std::vector<std::uint64_t> sorted = descending(keys);
        std::vector<std::uint64_t> got = keys;
        const ml::detail::kept_keys kept = ml::detail::keep_at_least<TestType>(got.data(), n, k);
        REQUIRE(kept.count >= k);
        REQUIRE(kept.count <= n);
        // A buffer of n that keeps this many is never full again at once.
        if (n > 1) CHECK(2 * kept.count <= n + k);
        const auto front = descending({got.begin(), got.begin() + kept.count});
        CHECK(front.back() == kept.least);
        // The best keys of the input, in order: front is a prefix of the sorted input.
        CHECK(std::equal(front.begin(), front.end(), sorted.begin()));
      }
    }
  }
}

TEMPLATE_LIST_TEST_CASE("topk select: admit_keys equals topk_key::make one score at a time",
                        "[topk][select]", hb::compiled_isas) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.f, 4.f);
  constexpr float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {0.f,
                            -0.f,
                            inf,
                            -inf,
                            std::bit_cast<float>(0x7FC00001u),
                            std::bit_cast<float>(0xFFC00000u),
                            std::bit_cast<float>(0x7F800001u),
                            1e-45f,
                            -1e-45f,
                            1.f};
  for (std::int64_t n : {0, 1, 15, 16, 17, 31, 64, 100, 1000}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> scores(static_cast<std::size_t>(n));
      std::vector<unsigned char> valid(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) {
        const auto u = static_cast<std::size_t>(i);
        scores[u] = rng() % 4 == 0 ? specials[rng() % std::size(specials)] : normal(rng);
        valid[u] = static_cast<unsigned char>(trial % 5 == 0 ? 1 : rng() % 3 != 0);
      }
      const std::int64_t col = trial % 2 ? 0 : 1000003 + trial;
      // The threshold: nothing yet, a key from the slice, or the highest possible.
      std::uint64_t floor = 0;
      if (n > 0 && trial % 3 == 1)
        floor = ml::detail::topk_key::make(scores[rng() % scores.size()], col + n / 2);
      if (trial % 7 == 6) floor = ~std::uint64_t{0};
      const float bar = floor == 0 ? -inf : ml::detail::topk_key::value(floor);
      std::vector<std::uint64_t> want;
      for (std::int64_t i = 0; i < n; ++i) {
        const std::uint64_t key =
            ml::detail::topk_key::make(scores[static_cast<std::size_t>(i)], col + i);
        if (valid[static_cast<std::size_t>(i)] && key > floor) want.push_back(key);
      }
      INFO("n " << n << ", trial " << trial);
      constexpr std::uint64_t sentinel = 0xABCDu;
      std::vector<std::uint64_t> out(static_cast<std::size_t>(n) + 1, sentinel);
      const std::int64_t held =
          TestType::admit_keys(scores.data(), valid.data(), n, col, floor, bar, out.data());
      CHECK(out.back() == sentinel);  // at most n written
      out.resize(static_cast<std::size_t>(held));
      CHECK(out == want);
    }
  }
}
