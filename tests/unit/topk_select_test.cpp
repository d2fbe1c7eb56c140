// The selection primitives under the fused top-k, against std::sort: the radix select that cuts
// a row's candidate buffer to its k best, and the radix sort of a finished row. The kernels'
// top-k tests reach them only through the key distributions real logits produce; these feed
// them the awkward ones: all keys equal, two values, one outlier, keys at 0 and at ~0, every
// byte varying, and sizes on both sides of the small-input fallbacks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace ml = mqalogits;

namespace {

enum class spread { random, few_values, two_values, outlier, extremes, scores, equal };

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
    }
  }
  return keys;
}

const char* name(spread s) {
  const char* names[] = {"random",   "few values", "two values", "outlier",
                         "extremes", "scores",     "equal"};
  return names[static_cast<int>(s)];
}

}  // namespace

TEST_CASE("topk select: keep_best moves exactly the k best to the front", "[topk][select]") {
  std::mt19937_64 rng(7);
  for (spread s : {spread::random, spread::few_values, spread::two_values, spread::outlier,
                   spread::extremes, spread::scores, spread::equal}) {
    for (std::int64_t n : {1, 2, 31, 32, 33, 64, 257, 4096, 5000}) {
      for (std::int64_t k : {std::int64_t{1}, std::int64_t{2}, n / 2, n - 1, n}) {
        if (k < 1 || k > n) continue;
        INFO(name(s) << ", n " << n << ", k " << k);
        const std::vector<std::uint64_t> keys = make_keys(rng, n, s);
        std::vector<std::uint64_t> sorted = keys;
        std::sort(sorted.begin(), sorted.end(), std::greater<>());
        std::vector<std::uint64_t> got = keys;
        const std::uint64_t kth = ml::detail::keep_best(got.data(), n, k);
        CHECK(kth == sorted[static_cast<std::size_t>(k - 1)]);
        CHECK(got[static_cast<std::size_t>(k - 1)] == kth);
        // The front k are the k best (as a multiset), the rest is what remains.
        std::vector<std::uint64_t> front(got.begin(), got.begin() + k);
        std::sort(front.begin(), front.end(), std::greater<>());
        CHECK(std::equal(front.begin(), front.end(), sorted.begin()));
        std::sort(got.begin(), got.end(), std::greater<>());
        CHECK(got == sorted);
      }
    }
  }
}

TEST_CASE("topk select: sort_descending equals std::sort", "[topk][select]") {
  std::mt19937_64 rng(11);
  for (spread s : {spread::random, spread::few_values, spread::two_values, spread::outlier,
                   spread::extremes, spread::scores, spread::equal}) {
    for (std::int64_t n : {0, 1, 63, 64, 65, 1000, 2048, 4097}) {
      INFO(name(s) << ", n " << n);
      std::vector<std::uint64_t> keys = make_keys(rng, n, s);
      std::vector<std::uint64_t> want = keys;
      std::sort(want.begin(), want.end(), std::greater<>());
      std::vector<std::uint64_t> scratch(static_cast<std::size_t>(n) + 1, 0xABCDu);
      ml::detail::sort_descending(keys.data(), n, scratch.data());
      CHECK(keys == want);
      CHECK(scratch.back() == 0xABCDu);  // only scratch[0, n) is used
    }
  }
}
