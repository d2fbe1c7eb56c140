// Quick start: random MXFP8 and MXFP4 inputs through all four kernels. For each kernel it checks
// the result against the test suite's scalar reference (tests/reference/reference.hpp: the
// obvious loops in double) and times it:
//   max err/bound  the largest |got - exact| / (2^-7 |exact| + 2^-14 M) over valid columns, with
//                  M = sum_h |w_h| sum_i |q_hi k_i|; the library's accuracy contract is <= 1.
//   -inf mask      whether exactly the columns that must be -inf are -inf.
//   GFLOP/s        2 x H x 128 flops per valid (query, key) pair over the median of several warm
//                  calls (the first call, which also touches the memory, is not timed).
// Both formats get the same lengths, block tables and selections, so their valid counts agree.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "../../tests/reference/reference.hpp"

namespace ml = mqalogits;

namespace {

constexpr std::int64_t H = 64, num_q = 32, num_kv = 2048, page_kv = 64, cap = 32, B = 16;
constexpr int timed_calls = 7;

std::mt19937 rng(2026);

// Random quantised rows: codes that are never NaN, scales 2^-10 .. 2^-5.
template <class Format>
struct random_rows {
  std::vector<std::uint8_t> data, scales;
  std::int64_t rows;
  explicit random_rows(std::int64_t n)
      : data(static_cast<std::size_t>(n * Format::data_bytes)),
        scales(static_cast<std::size_t>(n * Format::scale_bytes)),
        rows(n) {
    std::uniform_int_distribution<int> byte(0, 255), exponent(117, 122);
    for (auto& b : data) {
      b = static_cast<std::uint8_t>(byte(rng));
      if ((b & 0x7F) == 0x7F) b ^= 1;  // e4m3 NaN codes would make NaN logits
    }
    for (auto& s : scales) s = static_cast<std::uint8_t>(exponent(rng));
  }
  ml::rows_view<Format> view() const { return {data.data(), scales.data(), rows}; }
};

// What both formats share: weights, lengths, block tables and sparse selections.
struct problem {
  static constexpr std::int64_t num_pages = num_kv / page_kv, max_blocks = num_kv / page_kv;
  std::vector<float> w;
  std::vector<std::int32_t> ks, ke, lens, table, blocks;

  problem() : w(num_q * H), ks(num_q, 0), ke(num_q), lens(num_q), table(num_q * max_blocks) {
    std::normal_distribution<float> normal(0.0f, 0.2f);
    for (auto& x : w) x = ml::bf16::from_float(normal(rng)).to_float();  // bf16-exact, as engines
    // Dense prefill: query i sees the causal window [0, num_kv - num_q + i + 1).
    for (std::int64_t i = 0; i < num_q; ++i)
      ke[i] = static_cast<std::int32_t>(num_kv - num_q + i + 1);
    // Paged decode: each query its own context over a shuffled page pool.
    std::uniform_int_distribution<int> len(1, static_cast<int>(num_kv)),
        page(0, static_cast<int>(num_pages) - 1);
    for (auto& l : lens) l = len(rng);
    for (auto& t : table) t = page(rng);
    // Sparse: cap selected blocks of B tokens per query, the last 4 of each row -1 (padding).
    blocks.resize(num_q * cap);
    std::uniform_int_distribution<int> block(0, static_cast<int>(num_kv / B) - 1);
    for (std::size_t i = 0; i < blocks.size(); ++i)
      blocks[i] = (i % cap) < cap - 4 ? block(rng) : -1;
  }
  ml::matrix_view<const float> weights() const { return {w.data(), num_q, H}; }
  ml::matrix_view<const std::int32_t> lens_view() const { return {lens.data(), num_q, 1}; }
  ml::matrix_view<const std::int32_t> table_view() const {
    return {table.data(), num_q, max_blocks};
  }
  ml::matrix_view<const std::int32_t> blocks_view() const { return {blocks.data(), num_q, cap}; }
};

template <class F>
double median_ms(F&& f) {
  std::vector<double> ms;
  for (int i = 0; i < timed_calls; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(ms.begin(), ms.begin() + timed_calls / 2, ms.end());
  return ms[timed_calls / 2];
}

// Prints one kernel's verdict and speed; returns whether it passed.
template <class Out>
bool report(const char* what, const ml::logits_buffer<Out>& out, const ref::result& exact,
            double ms) {
  std::int64_t valid = 0;
  double worst = 0;
  bool mask_exact = out.rows() == exact.rows && out.cols() == exact.cols;
  for (std::int64_t r = 0; mask_exact && r < out.rows(); ++r)
    for (std::int64_t c = 0; c < out.cols(); ++c) {
      const double got = ml::to_float(out(r, c)), e = exact.at(r, c);
      const bool got_masked = std::isinf(got) && got < 0, masked = std::isinf(e) && e < 0;
      if (got_masked != masked) mask_exact = false;
      if (masked) continue;
      ++valid;
      const double bound = std::ldexp(std::fabs(e), -7) + std::ldexp(exact.mag(r, c), -14);
      worst = std::max(worst, std::isfinite(got) ? std::fabs(got - e) / bound : INFINITY);
    }
  const bool ok = mask_exact && worst <= 1.0;
  const double gflops = static_cast<double>(valid) * 2.0 * H * 128 / (ms * 1e6);
  std::printf(
      "  %-14s [%3lld x %4lld] valid %6lld  max err/bound %.3f  -inf mask %-7s %s"
      "  %7.3f ms %7.1f GFLOP/s\n",
      what, static_cast<long long>(out.rows()), static_cast<long long>(out.cols()),
      static_cast<long long>(valid), worst, mask_exact ? "exact" : "WRONG", ok ? "PASS" : "FAIL",
      ms, gflops);
  return ok;
}

template <class Format>
bool demo(ml::thread_pool& pool, const problem& p) {
  const ml::options opt{.executor = pool};
  std::printf("%s, H = %lld, %d threads\n", Format::name, static_cast<long long>(H),
              pool.concurrency());
  bool ok = true;

  const random_rows<Format> q(num_q * H), kv(num_kv);
  const auto w = p.weights();

  ml::logits_buffer<ml::bf16> dense(num_q, num_kv);
  const auto run_dense = [&] {
    ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w, p.ks, p.ke, num_kv, dense.view(), opt);
  };
  run_dense();
  ok &= report("dense", dense, ref::dense(q.view(), kv.view(), w, p.ks, p.ke, num_kv),
               median_ms(run_dense));

  // The paged cache: per page, page_kv data rows then page_kv scale rows.
  const random_rows<Format> keys(p.num_pages * page_kv);
  constexpr std::int64_t token_bytes = ml::paged_cache_view<Format>::token_bytes;
  std::vector<std::uint8_t> cache(static_cast<std::size_t>(p.num_pages * page_kv * token_bytes));
  for (std::int64_t pg = 0; pg < p.num_pages; ++pg)
    for (std::int64_t s = 0; s < page_kv; ++s) {
      const std::int64_t t = pg * page_kv + s;
      std::uint8_t* page = cache.data() + pg * page_kv * token_bytes;
      std::copy_n(keys.data.data() + t * Format::data_bytes, Format::data_bytes,
                  page + s * Format::data_bytes);
      std::copy_n(keys.scales.data() + t * Format::scale_bytes, Format::scale_bytes,
                  page + page_kv * Format::data_bytes + s * Format::scale_bytes);
    }
  const ml::paged_cache_view<Format> cache_view(cache.data(), p.num_pages, page_kv);
  const auto schedule =
      ml::get_paged_mqa_logits_metadata(p.lens_view(), page_kv, pool.concurrency());
  ml::logits_buffer<ml::bf16> paged(num_q, num_kv);
  const auto run_paged = [&] {
    ml::fp8_fp4_paged_mqa_logits(q.view(), cache_view, w, p.lens_view(), p.table_view(), schedule,
                                 num_kv, paged.view(), opt);
  };
  run_paged();
  ok &= report("paged", paged,
               ref::paged(q.view(), cache_view, w, p.lens_view(), p.table_view(), num_kv),
               median_ms(run_paged));

  const auto sparse_meta =
      ml::get_sparse_mqa_logits_metadata(p.ks, p.ke, num_kv, p.blocks_view(), B);
  ml::logits_buffer<ml::bf16> sparse(num_q, cap * B);
  const auto run_sparse = [&] {
    ml::fp8_fp4_sparse_mqa_logits(q.view(), kv.view(), w, sparse_meta, sparse.view(), opt);
  };
  run_sparse();
  ok &= report("sparse", sparse,
               ref::sparse(q.view(), kv.view(), w, p.ks, p.ke, num_kv, p.blocks_view(), B),
               median_ms(run_sparse));

  // Paged sparse: the first call with a metadata object gathers the selected keys out of the
  // cache into it (one timed call); "(reuse)" is later calls with the same metadata, which
  // score the gathered keys without reading the cache (median of warm calls).
  const auto paged_sparse_exact =
      ref::paged_sparse(q.view(), cache_view, w, p.lens, p.table_view(), p.blocks_view(), B);
  ml::logits_buffer<ml::bf16> paged_sparse(num_q, cap * B);
  std::vector<std::int32_t> lens(p.lens);
  {
    // Timed with its own metadata so the gather is in the figure.
    auto meta =
        ml::get_paged_sparse_mqa_logits_metadata(lens, p.table_view(), page_kv, p.blocks_view(), B);
    const auto t0 = std::chrono::steady_clock::now();
    ml::fp8_fp4_paged_sparse_mqa_logits(q.view(), cache_view, w, meta, paged_sparse.view(), opt);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ok &= report("paged_sparse", paged_sparse, paged_sparse_exact, ms);
    const auto run_reuse = [&] {
      ml::fp8_fp4_paged_sparse_mqa_logits(q.view(), cache_view, w, meta, paged_sparse.view(), opt);
    };
    ok &= report("  (reuse)", paged_sparse, paged_sparse_exact, median_ms(run_reuse));
  }
  return ok;
}

}  // namespace

int main() {
  ml::thread_pool pool(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  std::printf("mqalogits %d.%d.%d quick start, host path: %s (this file's compiler flags)\n",
              ml::version_major, ml::version_minor, ml::version_patch, ml::host_isa_name());
  const problem p;
  const bool ok = demo<ml::mxfp8>(pool, p) & demo<ml::mxfp4>(pool, p);
  std::printf("%s\n", ok ? "every kernel matches the reference" : "MISMATCH");
  return ok ? 0 : 1;
}
