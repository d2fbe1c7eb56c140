// The benchmark shapes and their inputs, built once per (shape, format) and shared by
// the library's kernels, the Eigen baseline and the scalar reference. Bytes come from a fast
// counter-based generator (the largest cache is ~280 MB): valid codes only, UE8M0 scales in a
// sane range, exact-bf16 weights.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace bench {

namespace ml = mqalogits;

#if defined(MADV_NOHUGEPAGE)
inline constexpr int no_huge_pages = MADV_NOHUGEPAGE;
#else
inline constexpr int no_huge_pages = 0;
#endif

inline std::uint64_t mix(std::uint64_t x) {  // splitmix64
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <class Format>
void fill_data(std::uint8_t* p, std::size_t n, std::uint64_t seed) {
  for (std::size_t i = 0; i < n; i += 8) {
    const std::uint64_t r = mix(seed + i);
    for (std::size_t j = 0; j < 8 && i + j < n; ++j) {
      auto b = static_cast<std::uint8_t>(r >> (8 * j));
      if constexpr (std::is_same_v<typename Format::data_type, ml::float_e4m3>)
        if ((b & 0x7F) == 0x7F) b ^= 1;  // no NaN codes
      p[i + j] = b;
    }
  }
}
// UE8M0 exponents in [120, 129]. By default each block's independently (a row's 4 exponents
// then differ by up to 9, so MXFP4 rows almost never take the folded path); with
// MQALOGITS_BENCH_SCALES=row, one exponent per row and each block within 1 of it, which is what
// the library's quantizer writes for Gaussian rows (all of them fold: see the micro-kernel
// tests' fold-rate report).
inline bool row_scales() {
  static const bool row = [] {
    const char* v = std::getenv("MQALOGITS_BENCH_SCALES");
    return v && std::string(v) == "row";
  }();
  return row;
}
inline void fill_scales(std::uint8_t* p, std::size_t n, std::uint64_t seed) {
  for (std::size_t i = 0; i < n; ++i) {
    if (row_scales()) {
      const std::uint64_t row = i / 4;  // 4 scale bytes per row
      p[i] = static_cast<std::uint8_t>(120 + mix(seed + row) % 9 + mix(seed ^ i) % 2);
    } else {
      p[i] = static_cast<std::uint8_t>(120 + mix(seed + i) % 10);
    }
  }
}

// Scales of Format: UE8M0 bytes as fill_scales, or fp32 row scales in [2^-6, 2^-5).
template <class Format>
void fill_format_scales(std::uint8_t* p, std::size_t n, std::uint64_t seed) {
  if constexpr (std::is_same_v<typename Format::scale_type, ml::fp32_row_scale>) {
    for (std::size_t i = 0; i + 4 <= n; i += 4) {
      const float s = (1.0f + static_cast<float>(mix(seed + i) % 64) / 64.0f) / 64.0f;
      std::memcpy(p + i, &s, 4);
    }
  } else {
    fill_scales(p, n, seed);
  }
}

template <class Format>
struct rows {
  std::int64_t n = 0;
  std::vector<std::uint8_t> data, scales;
  rows(std::int64_t count, std::uint64_t seed)
      : n(count),
        data(static_cast<std::size_t>(count * Format::data_bytes)),
        scales(static_cast<std::size_t>(count * Format::scale_bytes)) {
    fill_data<Format>(data.data(), data.size(), seed);
    fill_format_scales<Format>(scales.data(), scales.size(), seed ^ 0x5CA1E);
  }
  ml::rows_view<Format> view() const { return {data.data(), scales.data(), n}; }
};

inline std::vector<ml::bf16> weights(std::int64_t n, std::uint64_t seed) {
  std::vector<ml::bf16> w(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i] = ml::bf16::from_float(static_cast<float>(mix(seed + i) % 2001) / 1000.0f - 1.0f);
  return w;
}

// A paged cache of num_pages pages: back to back in one buffer, or (scatter_over > 0) at random
// page slots of an anonymous mapping of that many bytes, as an engine's multi-GiB cache whose
// pages a request finds wherever the allocator left them; the mapping gets `advice`
// (MADV_NOHUGEPAGE by default: engines' caches get no huge pages unless they ask). The view
// spans every slot; slot(p) is where page p sits.
template <class Format>
struct paged_cache {
  static constexpr std::int64_t token_bytes = Format::data_bytes + Format::scale_bytes;
  std::int64_t pages = 0;
  std::int32_t page_kv = 64;
  std::vector<std::uint8_t> bytes;
  std::shared_ptr<std::uint8_t> mapping;
  std::vector<std::int32_t> slots;
  paged_cache(std::int64_t num_pages, std::int32_t tokens_per_page, std::uint64_t seed,
              std::size_t scatter_over = 0, int advice = no_huge_pages)
      : pages(num_pages), page_kv(tokens_per_page) {
    const std::int64_t stride = std::int64_t{page_kv} * token_bytes;
    slots.resize(static_cast<std::size_t>(num_pages));
    std::iota(slots.begin(), slots.end(), 0);
    if (scatter_over > 0) {
      pages = static_cast<std::int64_t>(scatter_over) / stride;
      void* m = mmap(nullptr, scatter_over, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (m == MAP_FAILED || pages < num_pages) std::abort();
      madvise(m, scatter_over, advice);
      mapping = std::shared_ptr<std::uint8_t>(
          static_cast<std::uint8_t*>(m),
          [scatter_over](std::uint8_t* q) { munmap(q, scatter_over); });
      std::vector<std::int32_t> all(static_cast<std::size_t>(pages));
      std::iota(all.begin(), all.end(), 0);
      for (std::int64_t i = 0; i < num_pages; ++i)  // the first num_pages of a shuffle
        std::swap(all[static_cast<std::size_t>(i)],
                  all[static_cast<std::size_t>(
                      i + static_cast<std::int64_t>(mix(seed + static_cast<std::uint64_t>(i)) %
                                                    static_cast<std::uint64_t>(pages - i)))]);
      slots.assign(all.begin(), all.begin() + num_pages);
    } else {
      bytes.resize(static_cast<std::size_t>(pages * stride));
    }
    for (std::int64_t p = 0; p < num_pages; ++p) {
      std::uint8_t* page = base() + slots[static_cast<std::size_t>(p)] * stride;
      fill_data<Format>(page, static_cast<std::size_t>(page_kv * Format::data_bytes),
                        seed + static_cast<std::uint64_t>(p) * 1000003u);
      fill_format_scales<Format>(page + page_kv * Format::data_bytes,
                                 static_cast<std::size_t>(page_kv * Format::scale_bytes), seed ^ p);
    }
  }
  std::uint8_t* base() const {
    return mapping ? mapping.get() : const_cast<std::uint8_t*>(bytes.data());
  }
  std::int32_t slot(std::int32_t p) const { return slots[static_cast<std::size_t>(p)]; }
  ml::paged_cache_view<Format> view() const { return {base(), pages, page_kv}; }
};

// A random permutation of [0, n).
inline std::vector<std::int32_t> permutation(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int32_t> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  for (std::int64_t i = n - 1; i > 0; --i)
    std::swap(p[static_cast<std::size_t>(i)],
              p[static_cast<std::size_t>(mix(seed + static_cast<std::uint64_t>(i)) % (i + 1))]);
  return p;
}

// ---- the shapes ----

// Dense prefill: num_q queries, the last num_q tokens of an N-token context, causal.
template <class Format>
struct dense_inputs {
  std::int64_t num_q, N, H;
  rows<Format> q, kv;
  std::vector<ml::bf16> w;
  std::vector<std::int32_t> ks, ke;
  dense_inputs(std::int64_t nq, std::int64_t n, std::int64_t h)
      : num_q(nq), N(n), H(h), q(nq * h, 1), kv(n, 2), w(weights(nq * h, 3)) {
    for (std::int64_t i = 0; i < nq; ++i) {
      ks.push_back(0);
      ke.push_back(static_cast<std::int32_t>(n - nq + i + 1));
    }
  }
  ml::matrix_view<const ml::bf16> wv() const { return {w.data(), num_q, H, H}; }
  std::int64_t valid_pairs() const {
    std::int64_t s = 0;
    for (std::int64_t i = 0; i < num_q; ++i) s += ke[i] - ks[i];
    return s;
  }
  std::int64_t bytes() const {  // Q + KV + weights read, logits written
    return num_q * H * (Format::data_bytes + Format::scale_bytes) +
           N * (Format::data_bytes + Format::scale_bytes) + num_q * H * 2 + num_q * N * 2;
  }
};

// Paged decode: B requests x next_n tokens, every request `context` tokens on its own pages.
template <class Format>
struct paged_inputs {
  std::int64_t B, next_n, context, H;
  std::int32_t page_kv = 64;
  std::int64_t blocks;
  paged_cache<Format> cache;
  rows<Format> q;
  std::vector<ml::bf16> w;
  std::vector<std::int32_t> lens, table;
  paged_inputs(std::int64_t b, std::int64_t nn, std::int64_t ctx, std::int64_t h,
               std::size_t scatter_over = 0)
      : B(b),
        next_n(nn),
        context(ctx),
        H(h),
        blocks(ctx / 64),
        cache(b * (ctx / 64), 64, 11, scatter_over),
        q(b * nn * h, 12),
        w(weights(b * nn * h, 13)) {
    for (std::int64_t i = 0; i < B; ++i)
      for (std::int64_t j = 0; j < next_n; ++j)
        lens.push_back(static_cast<std::int32_t>(context - next_n + 1 + j));
    table = permutation(B * blocks, 14);
    for (auto& p : table) p = cache.slot(p);
  }
  ml::matrix_view<const std::int32_t> lens_view() const { return {lens.data(), B, next_n, next_n}; }
  ml::matrix_view<const std::int32_t> table_view() const {
    return {table.data(), B, blocks, blocks};
  }
  ml::matrix_view<const ml::bf16> wv() const { return {w.data(), B * next_n, H, H}; }
  std::int64_t valid_pairs() const {
    std::int64_t s = 0;
    for (auto l : lens) s += l;
    return s;
  }
  std::int64_t bytes() const {
    return B * next_n * H * (Format::data_bytes + Format::scale_bytes) +
           B * context * (Format::data_bytes + Format::scale_bytes) + B * next_n * H * 2 +
           B * next_n * context * 2;
  }
};

// Sparse: rows queries x cap selected blocks of B tokens (distinct blocks, no padding) of an
// N-token KV; the paged form holds the same KV on page_kv-token pages.
template <class Format>
struct sparse_inputs {
  std::int64_t rows_n, cap, blk, N, H;
  rows<Format> q, kv;
  std::vector<ml::bf16> w;
  std::vector<std::int32_t> ks, ke, idx;
  // paged form
  paged_cache<Format> cache;
  std::vector<std::int32_t> lens, table;
  std::int64_t blocks;
  sparse_inputs(std::int64_t r, std::int64_t c, std::int64_t b, std::int64_t n, std::int64_t h)
      : rows_n(r),
        cap(c),
        blk(b),
        N(n),
        H(h),
        q(r * h, 21),
        kv(n, 22),
        w(weights(r * h, 23)),
        cache(n / 64, 64, 24),
        blocks(n / 64) {
    for (std::int64_t i = 0; i < r; ++i) {
      ks.push_back(0);
      ke.push_back(static_cast<std::int32_t>(n));
      auto p = permutation(n / b, 25 + static_cast<std::uint64_t>(i));
      idx.insert(idx.end(), p.begin(), p.begin() + c);
      lens.push_back(static_cast<std::int32_t>(n));
    }
    const auto pages = permutation(blocks, 26);
    for (std::int64_t i = 0; i < r; ++i) table.insert(table.end(), pages.begin(), pages.end());
  }
  ml::matrix_view<const std::int32_t> idx_view() const { return {idx.data(), rows_n, cap, cap}; }
  ml::matrix_view<const std::int32_t> table_view() const {
    return {table.data(), rows_n, blocks, blocks};
  }
  ml::matrix_view<const ml::bf16> wv() const { return {w.data(), rows_n, H, H}; }
  std::int64_t valid_pairs() const { return rows_n * cap * blk; }
  std::int64_t bytes() const {
    return rows_n * H * (Format::data_bytes + Format::scale_bytes) +
           rows_n * cap * blk * (Format::data_bytes + Format::scale_bytes) + rows_n * H * 2 +
           rows_n * cap * blk * 2;
  }
};

// Inputs are built on first use and kept for the whole run (shared between benchmarks).
template <class T, class... A>
const T& shared(const std::string& key, A... args) {
  static std::mutex m;
  static std::map<std::string, std::unique_ptr<T>> store;
  std::lock_guard lock(m);
  auto& p = store[key];
  if (!p) p = std::make_unique<T>(args...);
  return *p;
}

}  // namespace bench
