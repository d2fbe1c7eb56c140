// The selection primitives under the fused top-k (topk_output.hpp), over the keys of
// topk_key.hpp: the cuts of a full candidate buffer back to its best keys, and the sort of a
// finished row. (The admission of scores and the compaction are the backend's selection steps.) All
// of them run on scores that arrive in random order, so they avoid data-dependent branches: a
// mispredicted branch per key costs more than the arithmetic it would save.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iterator>
#include <span>
#include <utility>

#include "../config.hpp"
#include "../std_abi.hpp"
#include "selection_steps.hpp"
#include "topk_key.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace detail {

// keys[lo, n) reordered so that those for which pred holds come first. Branch-free (a swap per
// key): the outcome of pred is close to random here.
template <class Pred>
void partition_keys(std::uint64_t* keys, std::int64_t lo, std::int64_t n, Pred pred) {
  std::int64_t out = lo;
  for (std::int64_t i = lo; i < n; ++i) {
    const std::uint64_t x = keys[i];
    const bool take = pred(x);
    keys[i] = keys[out];
    keys[out] = x;
    out += take;
  }
}

// The k best of keys[0, n) (1 <= k <= n) moved to the front, the k-th best (the smallest of
// them) at keys[k - 1], which it returns; keys[k, n) are left unspecified. A radix select: a
// histogram of the keys' leading varying bits finds the bucket that holds the k-th best, the
// keys below that bucket are dropped, those above it move to the front and only the bucket is
// searched further. A few linear passes, against nth_element's data-dependent branches, which
// mispredict on scores that arrive in random order.
template <class I = selection_steps>
std::uint64_t keep_best(std::uint64_t* keys, std::int64_t n, std::int64_t k) {
  constexpr int digit_bits = 8;
  constexpr std::int64_t buckets = std::int64_t{1} << digit_bits;
  constexpr std::int64_t small = 32;  // below this, nth_element
  std::int64_t lo = 0;                // keys[0, lo) are among the k best
  while (n - lo > small) {
    // (A plain min/max loop: it vectorises, std::minmax_element branches on every key.)
    std::uint64_t base = ~std::uint64_t{0}, highest = 0;
    for (std::int64_t i = lo; i < n; ++i) {
      base = std::min(base, keys[i]);
      highest = std::max(highest, keys[i]);
    }
    const std::uint64_t span = highest - base;
    const std::int64_t need = k - lo;
    if (span == 0 || need == n - lo) {
      // All equal, or all needed: any of them, the smallest at k - 1.
      std::iter_swap(std::find_if(keys + lo, keys + n, [&](auto x) { return x == base; }),
                     keys + (k - 1));
      return keys[k - 1];
    }
    const int shift = std::max(0, static_cast<int>(std::bit_width(span)) - digit_bits);
    const auto digit = [base, shift](std::uint64_t x) {
      return static_cast<std::int64_t>((x - base) >> shift);
    };
    // Four histograms, summed: scores cluster in a few buckets, and consecutive increments of
    // one counter would each wait for the last through memory.
    std::int64_t parts[4][buckets] = {};
    std::int64_t i = lo;
    for (; i + 4 <= n; i += 4)
      for (int j = 0; j < 4; ++j) ++parts[j][digit(keys[i + j])];
    for (; i < n; ++i) ++parts[0][digit(keys[i])];
    const auto count = [&](std::int64_t b) {
      return parts[0][b] + parts[1][b] + parts[2][b] + parts[3][b];
    };
    // The bucket of the k-th best, counting from the top, and how many keys lie above it.
    auto bucket = digit(highest);
    std::int64_t above = 0;
    while (above + count(bucket) < need) above += count(bucket--);
    // The keys of the bucket and above, compacted (vectorised); then the few above it first.
    const std::uint64_t bucket_floor = base + (static_cast<std::uint64_t>(bucket) << shift);
    n = lo + I::compact_at_least(keys + lo, n - lo, bucket_floor);
    if (above > 0) partition_keys(keys, lo, n, [&](std::uint64_t x) { return digit(x) > bucket; });
    lo += above;
    n = lo + count(bucket);  // at least one key fewer than before: span has two buckets
  }
  std::nth_element(keys + lo, keys + (k - 1), keys + n, detail::greater());
  return keys[k - 1];
}

// What keep_at_least kept: keys[0, count), the smallest of which is least.
struct kept_keys {
  std::int64_t count = 0;
  std::uint64_t least = 0;
};

// The most keep_at_least(keys, n, k) keeps.
constexpr std::int64_t keep_at_least_bound(std::int64_t n, std::int64_t k) {
  return std::max(k, (n + k) / 2);
}

// Moves to the front of keys[0, n) (1 <= k <= n) a set of at least k keys that holds the k
// best, usually k + 5-15%, and returns its size and smallest key; the other keys are lost. For
// a candidate buffer, which only needs to hold the k best, this is cheaper than keep_best's
// exact cut: a threshold read off a sample of the keys, then one counting pass and one
// compacting pass, both branch-free. When the sample misleads (too few or too many keys at or
// above its threshold: rare, since the threshold sits 2.5 standard deviations of the
// sample's quantile below the k-th best) it falls back to keep_best.
template <class I = selection_steps>
kept_keys keep_at_least(std::uint64_t* keys, std::int64_t n, std::int64_t k) {
  constexpr std::int64_t max_samples = 512;
  const std::int64_t samples = std::min(max_samples, n / 8);
  // Not worth sampling, or nothing to drop.
  if (samples < 64 || 8 * k > 7 * n) return {k, keep_best<I>(keys, n, k)};
  std::uint64_t sample[max_samples];
  const std::int64_t step = n / samples;
  for (std::int64_t s = 0; s < samples; ++s) sample[s] = keys[s * step];
  // The sample quantile that leaves k keys above it, moved 2.5 standard deviations lower.
  const double p = static_cast<double>(k) / static_cast<double>(n);
  const double ds = static_cast<double>(samples);
  const auto j =
      std::min(samples - 1, static_cast<std::int64_t>(p * ds + 2.5 * std::sqrt(ds * p * (1 - p))));
  const std::uint64_t t = keep_best<I>(sample, samples, j + 1);
  std::int64_t count = 0;
  for (std::int64_t i = 0; i < n; ++i) count += keys[i] >= t;
  // Too few (the k best are not all >= t), or so many that a buffer of n would soon be full
  // again.
  if (count < k || 2 * count > n + k) return {k, keep_best<I>(keys, n, k)};
  I::compact_at_least(keys, n, t);
  return {count, t};
}

// keys[0, n) in descending order, with tmp[0, n) as scratch. An LSD radix sort on the leading
// 22 bits of the scores' ranks that vary in this set (one or two passes of up to 11 bits),
// then the short runs those bits leave in a tie (equal scores, or scores a few ulps apart) put
// in order by the whole key. A comparison sort of random-order scores spends most of its time
// in mispredicted branches (about 6x slower at k = 2048).
inline void sort_descending(std::uint64_t* keys, std::int64_t n, std::uint64_t* tmp) {
  if (n < 64) {
    std::sort(keys, keys + n, detail::greater());
    return;
  }
  // (Plain min/max loops vectorise.)
  std::uint32_t lowest = ~0u, highest = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    lowest = std::min(lowest, topk_key::rank(keys[i]));
    highest = std::max(highest, topk_key::rank(keys[i]));
  }
  // Ascending order of highest - rank is descending order of rank.
  constexpr int digit_max = 11, passes_max = 2;
  const int bits = static_cast<int>(std::bit_width(highest - lowest));
  const int dropped = std::max(0, bits - digit_max * passes_max);
  // (By value: the stores below could otherwise alias them and force a reload per key.)
  const auto lead = [highest, dropped](std::uint64_t key) {
    return (highest - topk_key::rank(key)) >> dropped;
  };
  const int passes = (bits - dropped + digit_max - 1) / digit_max;
  if (passes > 0) {
    const int digit_bits = (bits - dropped + passes - 1) / passes;
    const std::uint32_t mask = (1u << digit_bits) - 1u;
    std::uint32_t count[passes_max][1u << digit_max];
    for (int p = 0; p < passes; ++p) std::fill_n(count[p], mask + 1, 0u);
    if (passes == 2) {
      for (std::int64_t i = 0; i < n; ++i) {
        const std::uint32_t l = lead(keys[i]);
        ++count[0][l & mask];
        ++count[1][l >> digit_bits];
      }
    } else {
      for (std::int64_t i = 0; i < n; ++i) ++count[0][lead(keys[i])];
    }
    std::uint64_t *from = keys, *to = tmp;
    for (int p = 0; p < passes; ++p) {
      std::uint32_t* c = count[p];
      std::uint32_t sum = 0;
      for (auto& b : std::span(c, mask + 1)) sum += std::exchange(b, sum);
      for (std::int64_t i = 0; i < n; ++i)
        to[c[(lead(from[i]) >> (p * digit_bits)) & mask]++] = from[i];
      std::swap(from, to);
    }
    if (from != keys) std::copy(from, from + n, keys);
  }
  // Ties are few (a row of a few thousand scores holds one or two tied pairs, if any): blocks
  // of neighbour pairs are checked in a loop that vectorises, and only a block with a tie is
  // walked. (A run that reaches into the next block is sorted whole; the next block's walk
  // then finds the rest of it in order.)
  constexpr std::int64_t block = 64;
  for (std::int64_t b = 0; b + 1 < n; b += block) {
    const std::int64_t e = std::min(b + block, n - 1);
    std::int64_t ties = 0;
    for (std::int64_t i = b; i < e; ++i) ties += lead(keys[i]) == lead(keys[i + 1]);
    for (std::int64_t i = b; ties > 0 && i < e;) {
      const std::uint32_t l = lead(keys[i]);
      std::int64_t end = i + 1;
      while (end < n && lead(keys[end]) == l) ++end;
      if (end - i > 1) {
        std::sort(keys + i, keys + end, detail::greater());
        ties -= std::min(end, e + 1) - i - 1;  // the tied pairs of this run inside the block
      }
      i = end;
    }
  }
}

}  // namespace detail
MQALOGITS_NAMESPACE_END
