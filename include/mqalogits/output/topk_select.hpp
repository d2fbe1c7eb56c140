// The selection primitives under the fused top-k (output/topk.hpp): a total order on
// (score, column) as one integer key, the admission of a slice of scores into a candidate
// buffer, the cuts of a full buffer back to its best keys, and the sort of a finished row.
// All of them run on scores that arrive in random order, so they avoid data-dependent
// branches: a mispredicted branch per key costs more than the arithmetic it would save.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <span>
#include <utility>

#include "../config.hpp"

#if defined(MQALOGITS_HOST_AVX2)  // (also defined on AVX-512 builds)
#include "../backend/host/isa/intrinsics_x86.hpp"
#endif

MQALOGITS_NAMESPACE_BEGIN
namespace detail {

// A total order on (fp32 score, column) as one unsigned integer, larger = ranked first:
// the score's bits mapped so that unsigned order is numeric order (NaN of either sign above
// +inf, -0 equal to +0), then the column reversed (ties to the lower column), then one bit that
// keeps the sign of a zero or NaN so the value written back is the logit itself.
struct topk_key {
  static constexpr std::uint32_t nan_rank = 0xFFFFFFFFu, zero_rank = 0x80000000u;

  // Branch-free (selects only): it runs on every score that passes the value threshold.
  static std::uint64_t make(float score, std::int64_t col) {
    const auto b = std::bit_cast<std::uint32_t>(score);
    const std::uint32_t mag = b & 0x7FFFFFFFu, sign = b >> 31;
    // Negative: all bits flipped; positive: the sign bit set.
    const std::uint32_t ordered = b ^ ((0u - sign) | 0x80000000u);
    const bool nan = mag > 0x7F800000u, zero = mag == 0;
    const std::uint32_t rank = nan ? nan_rank : zero ? zero_rank : ordered;
    const std::uint32_t keep = (nan || zero) ? sign : 0u;
    const auto reversed = static_cast<std::uint32_t>(0x7FFFFFFF - col);
    return (std::uint64_t{rank} << 32) | (std::uint64_t{reversed} << 1) | keep;
  }
  static std::uint32_t rank(std::uint64_t key) { return static_cast<std::uint32_t>(key >> 32); }
  static std::int32_t column(std::uint64_t key) {
    return static_cast<std::int32_t>(0x7FFFFFFF -
                                     static_cast<std::int64_t>((key >> 1) & 0x7FFFFFFFu));
  }
  static float value(std::uint64_t key) {
    const std::uint32_t r = rank(key);
    const std::uint32_t keep = static_cast<std::uint32_t>(key & 1u) << 31;
    // Selects, not branches: a finished row's values are decoded in a loop that vectorises.
    const std::uint32_t bits = r == nan_rank    ? 0x7FC00000u | keep
                               : r == zero_rank ? keep
                               : (r >> 31)      ? r & 0x7FFFFFFFu
                                                : ~r;
    return std::bit_cast<float>(bits);
  }
};

#if defined(MQALOGITS_HOST_AVX512)
MQALOGITS_GCC12_INTRINSICS_WARNINGS_OFF
// The lanes of v selected by take, stored in order at out; returns how many. (A masked store
// of the compressed vector: the compressing store to memory is slow on some cores.)
inline int compress_store(std::uint64_t* out, __mmask8 take, __m512i v) {
  const int n = std::popcount(static_cast<unsigned>(take));
  _mm512_mask_storeu_epi64(out, static_cast<__mmask8>((1u << n) - 1u),
                           _mm512_maskz_compress_epi64(take, v));
  return n;
}
MQALOGITS_GCC12_INTRINSICS_WARNINGS_ON
#elif defined(MQALOGITS_HOST_AVX2)
MQALOGITS_GCC12_INTRINSICS_WARNINGS_OFF
// The same for 4 lanes. AVX2 has no compress: a table of lane permutations, indexed by take,
// moves the selected lanes to the front, and a masked store writes only them.
inline int compress_store(std::uint64_t* out, int take, __m256i v) {
  alignas(32) static constexpr std::int32_t to_front[16][8] = {
      {0, 0, 0, 0, 0, 0, 0, 0}, {0, 1, 0, 0, 0, 0, 0, 0}, {2, 3, 0, 0, 0, 0, 0, 0},
      {0, 1, 2, 3, 0, 0, 0, 0}, {4, 5, 0, 0, 0, 0, 0, 0}, {0, 1, 4, 5, 0, 0, 0, 0},
      {2, 3, 4, 5, 0, 0, 0, 0}, {0, 1, 2, 3, 4, 5, 0, 0}, {6, 7, 0, 0, 0, 0, 0, 0},
      {0, 1, 6, 7, 0, 0, 0, 0}, {2, 3, 6, 7, 0, 0, 0, 0}, {0, 1, 2, 3, 6, 7, 0, 0},
      {4, 5, 6, 7, 0, 0, 0, 0}, {0, 1, 4, 5, 6, 7, 0, 0}, {2, 3, 4, 5, 6, 7, 0, 0},
      {0, 1, 2, 3, 4, 5, 6, 7}};
  alignas(32) static constexpr std::int64_t first_lanes[5][4] = {
      {0, 0, 0, 0}, {-1, 0, 0, 0}, {-1, -1, 0, 0}, {-1, -1, -1, 0}, {-1, -1, -1, -1}};
  const int n = std::popcount(static_cast<unsigned>(take));
  const __m256i front = _mm256_permutevar8x32_epi32(
      v, _mm256_load_si256(reinterpret_cast<const __m256i*>(to_front[take])));
  _mm256_maskstore_epi64(reinterpret_cast<long long*>(out),
                         _mm256_load_si256(reinterpret_cast<const __m256i*>(first_lanes[n])),
                         front);
  return n;
}
MQALOGITS_GCC12_INTRINSICS_WARNINGS_ON
#endif

// The keys >= t of keys[0, n) moved to the front in order; returns how many. In place: the
// write position never passes the read one. Branch-free (whether a key is kept is close to
// random).
inline std::int64_t compact_at_least(std::uint64_t* keys, std::int64_t n, std::uint64_t t) {
  std::int64_t out = 0, i = 0;
#if defined(MQALOGITS_HOST_AVX512)
  MQALOGITS_GCC12_INTRINSICS_WARNINGS_OFF
  const __m512i t_v = _mm512_set1_epi64(static_cast<long long>(t));
  for (; i + 8 <= n; i += 8) {
    const __m512i x = _mm512_loadu_si512(keys + i);
    out += compress_store(keys + out, _mm512_cmpge_epu64_mask(x, t_v), x);
  }
  MQALOGITS_GCC12_INTRINSICS_WARNINGS_ON
#elif defined(MQALOGITS_HOST_AVX2)
  MQALOGITS_GCC12_INTRINSICS_WARNINGS_OFF
  // Unsigned 64-bit order as signed order: both sides with the top bit flipped. (x >= t is
  // not x < t.)
  const __m256i top = _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull));
  const __m256i t_v = _mm256_xor_si256(_mm256_set1_epi64x(static_cast<long long>(t)), top);
  for (; i + 4 <= n; i += 4) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + i));
    const __m256i below = _mm256_cmpgt_epi64(t_v, _mm256_xor_si256(x, top));
    out += compress_store(keys + out, ~_mm256_movemask_pd(_mm256_castsi256_pd(below)) & 0xF, x);
  }
  MQALOGITS_GCC12_INTRINSICS_WARNINGS_ON
#endif
  for (; i < n; ++i) {
    const std::uint64_t x = keys[i];
    keys[out] = x;
    out += x >= t;
  }
  return out;
}

// admit_keys one score at a time (the portable path, and the tail of a vector one).
inline std::int64_t admit_keys_scalar(const float* scores, const unsigned char* valid,
                                      std::int64_t n, std::int64_t col, std::uint64_t floor,
                                      float bar, std::uint64_t* out) {
  std::int64_t held = 0;
  // Once the threshold has risen, most slices hold few candidates or none: one branch-free
  // pass (it vectorises) counts them.
  std::int64_t passing = 0;
  for (std::int64_t i = 0; i < n; ++i) passing += (valid[i] != 0) & !(scores[i] < bar);
  if (passing == 0) return 0;
  if (passing * 8 < n) {
    // Few pass: a branch that is nearly always "no" is the cheapest filter.
    for (std::int64_t i = 0; i < n; ++i) {
      if (!valid[i] || scores[i] < bar) continue;
      const std::uint64_t key = topk_key::make(scores[i], col + i);
      if (key > floor) out[held++] = key;
    }
  } else {
    // Many pass (a row's first keys, or a threshold near the median): branch-free, since a
    // branch on the outcome would mispredict about every other key.
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint64_t key = topk_key::make(scores[i], col + i);
      out[held] = key;
      held += (valid[i] != 0) & (key > floor);
    }
  }
  return held;
}

// Appends at out the key of every score i of scores[0, n) (column col + i) that is valid and
// ranks above floor, in column order; returns how many (at most n are written). bar is floor's
// value: a score below it cannot rank above floor (NaN is never below).
inline std::int64_t admit_keys(const float* scores, const unsigned char* valid, std::int64_t n,
                               std::int64_t col, std::uint64_t floor, float bar,
                               std::uint64_t* out) {
  std::int64_t held = 0;
#if defined(MQALOGITS_HOST_AVX512)
  MQALOGITS_GCC12_INTRINSICS_WARNINGS_OFF
  // 16 scores per step: keys built in 32-bit lanes as topk_key::make does, widened to 64 bits,
  // and the admitted ones compressed to the front of a vector and stored.
  const __m512 bar_v = _mm512_set1_ps(bar);
  const __m512i floor_v = _mm512_set1_epi64(static_cast<long long>(floor));
  const __m512i sign_bit = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF);
  const __m512i inf_bits = _mm512_set1_epi32(0x7F800000);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (std::int64_t i = 0; i < n; i += 16) {
    const auto in_range = static_cast<__mmask16>(n - i >= 16 ? 0xFFFFu : (1u << (n - i)) - 1u);
    const __m128i v = _mm_maskz_loadu_epi8(in_range, valid + i);
    const __m512 s = _mm512_maskz_loadu_ps(in_range, scores + i);
    const __mmask16 pass =
        _mm512_mask_cmp_ps_mask(_mm_mask_test_epi8_mask(in_range, v, v), s, bar_v, _CMP_NLT_UQ);
    if (pass == 0) continue;
    const __m512i b = _mm512_castps_si512(s);
    const __m512i mag = _mm512_and_si512(b, magnitude);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(mag, inf_bits);
    const __mmask16 zero = _mm512_testn_epi32_mask(mag, mag);
    __m512i rank = _mm512_xor_si512(b, _mm512_or_si512(_mm512_srai_epi32(b, 31), sign_bit));
    rank = _mm512_mask_mov_epi32(rank, zero, sign_bit);
    rank = _mm512_mask_mov_epi32(rank, nan, _mm512_set1_epi32(-1));
    const __m512i keep = _mm512_maskz_srli_epi32(static_cast<__mmask16>(nan | zero), b, 31);
    const __m512i reversed =
        _mm512_sub_epi32(_mm512_set1_epi32(static_cast<int>(0x7FFFFFFF - (col + i))), lane);
    const __m512i low = _mm512_or_si512(_mm512_slli_epi32(reversed, 1), keep);
    for (int half = 0; half < 2; ++half) {
      const __m256i r = half ? _mm512_extracti64x4_epi64(rank, 1) : _mm512_castsi512_si256(rank);
      const __m256i l = half ? _mm512_extracti64x4_epi64(low, 1) : _mm512_castsi512_si256(low);
      const __m512i key = _mm512_or_si512(_mm512_slli_epi64(_mm512_cvtepu32_epi64(r), 32),
                                          _mm512_cvtepu32_epi64(l));
      const auto take =
          _mm512_mask_cmpgt_epu64_mask(static_cast<__mmask8>(pass >> (8 * half)), key, floor_v);
      held += compress_store(out + held, take, key);
    }
  }
  MQALOGITS_GCC12_INTRINSICS_WARNINGS_ON
#elif defined(MQALOGITS_HOST_AVX2)
  MQALOGITS_GCC12_INTRINSICS_WARNINGS_OFF
  // 8 scores per step, keys built as on AVX-512.
  const __m256 bar_v = _mm256_set1_ps(bar);
  // Unsigned 64-bit order as signed order: both sides with the top bit flipped.
  const __m256i top = _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull));
  const __m256i floor_v = _mm256_xor_si256(_mm256_set1_epi64x(static_cast<long long>(floor)), top);
  const __m256i sign_bit = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i inf_bits = _mm256_set1_epi32(0x7F800000);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 s = _mm256_loadu_ps(scores + i);
    std::uint64_t v8;
    std::memcpy(&v8, valid + i, sizeof v8);
    const __m256i v = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(v8)));
    const __m256 live = _mm256_castsi256_ps(_mm256_cmpgt_epi32(v, _mm256_setzero_si256()));
    const int pass = _mm256_movemask_ps(_mm256_and_ps(_mm256_cmp_ps(s, bar_v, _CMP_NLT_UQ), live));
    if (pass == 0) continue;
    const __m256i b = _mm256_castps_si256(s);
    const __m256i mag = _mm256_and_si256(b, magnitude);
    const __m256i nan = _mm256_cmpgt_epi32(mag, inf_bits);  // (both sides non-negative)
    const __m256i zero = _mm256_cmpeq_epi32(mag, _mm256_setzero_si256());
    __m256i rank = _mm256_xor_si256(b, _mm256_or_si256(_mm256_srai_epi32(b, 31), sign_bit));
    rank = _mm256_blendv_epi8(rank, sign_bit, zero);
    rank = _mm256_or_si256(rank, nan);  // NaN: all ones
    const __m256i keep = _mm256_and_si256(_mm256_srli_epi32(b, 31), _mm256_or_si256(nan, zero));
    const __m256i reversed =
        _mm256_sub_epi32(_mm256_set1_epi32(static_cast<int>(0x7FFFFFFF - (col + i))), lane);
    const __m256i low = _mm256_or_si256(_mm256_slli_epi32(reversed, 1), keep);
    for (int half = 0; half < 2; ++half) {
      const __m128i r = half ? _mm256_extracti128_si256(rank, 1) : _mm256_castsi256_si128(rank);
      const __m128i l = half ? _mm256_extracti128_si256(low, 1) : _mm256_castsi256_si128(low);
      const __m256i key = _mm256_or_si256(_mm256_slli_epi64(_mm256_cvtepu32_epi64(r), 32),
                                          _mm256_cvtepu32_epi64(l));
      const __m256i above = _mm256_cmpgt_epi64(_mm256_xor_si256(key, top), floor_v);
      const int take = _mm256_movemask_pd(_mm256_castsi256_pd(above)) & (pass >> (4 * half)) & 0xF;
      held += compress_store(out + held, take, key);
    }
  }
  MQALOGITS_GCC12_INTRINSICS_WARNINGS_ON
  held += admit_keys_scalar(scores + i, valid + i, n - i, col + i, floor, bar, out + held);
#else
  held = admit_keys_scalar(scores, valid, n, col, floor, bar, out);
#endif
  return held;
}

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
inline std::uint64_t keep_best(std::uint64_t* keys, std::int64_t n, std::int64_t k) {
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
      std::iter_swap(std::find(keys + lo, keys + n, base), keys + (k - 1));
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
    n = lo + compact_at_least(keys + lo, n - lo, bucket_floor);
    if (above > 0) partition_keys(keys, lo, n, [&](std::uint64_t x) { return digit(x) > bucket; });
    lo += above;
    n = lo + count(bucket);  // at least one key fewer than before: span has two buckets
  }
  std::nth_element(keys + lo, keys + (k - 1), keys + n, std::greater<>());
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
inline kept_keys keep_at_least(std::uint64_t* keys, std::int64_t n, std::int64_t k) {
  constexpr std::int64_t max_samples = 512;
  const std::int64_t samples = std::min(max_samples, n / 8);
  // Not worth sampling, or nothing to drop.
  if (samples < 64 || 8 * k > 7 * n) return {k, keep_best(keys, n, k)};
  std::uint64_t sample[max_samples];
  const std::int64_t step = n / samples;
  for (std::int64_t s = 0; s < samples; ++s) sample[s] = keys[s * step];
  // The sample quantile that leaves k keys above it, moved 2.5 standard deviations lower.
  const double p = static_cast<double>(k) / static_cast<double>(n);
  const double ds = static_cast<double>(samples);
  const auto j =
      std::min(samples - 1, static_cast<std::int64_t>(p * ds + 2.5 * std::sqrt(ds * p * (1 - p))));
  const std::uint64_t t = keep_best(sample, samples, j + 1);
  std::int64_t count = 0;
  for (std::int64_t i = 0; i < n; ++i) count += keys[i] >= t;
  // Too few (the k best are not all >= t), or so many that a buffer of n would soon be full
  // again.
  if (count < k || 2 * count > n + k) return {k, keep_best(keys, n, k)};
  compact_at_least(keys, n, t);
  return {count, t};
}

// keys[0, n) in descending order, with tmp[0, n) as scratch. An LSD radix sort on the leading
// 22 bits of the scores' ranks that vary in this set (one or two passes of up to 11 bits),
// then the short runs those bits leave in a tie (equal scores, or scores a few ulps apart) put
// in order by the whole key. A comparison sort of random-order scores spends most of its time
// in mispredicted branches (about 6x slower at k = 2048).
inline void sort_descending(std::uint64_t* keys, std::int64_t n, std::uint64_t* tmp) {
  if (n < 64) {
    std::sort(keys, keys + n, std::greater<>());
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
  // Ties are rare: one pass that vectorises finds whether there are any.
  std::int64_t ties = 0;
  for (std::int64_t i = 0; i + 1 < n; ++i) ties += lead(keys[i]) == lead(keys[i + 1]);
  if (ties == 0) return;
  for (std::int64_t i = 0; i + 1 < n;) {
    const std::uint32_t l = lead(keys[i]);
    std::int64_t end = i + 1;
    while (end < n && lead(keys[end]) == l) ++end;
    if (end - i > 1) std::sort(keys + i, keys + end, std::greater<>());
    i = end;
  }
}

}  // namespace detail
MQALOGITS_NAMESPACE_END
