// Quick start: random MXFP8 and MXFP4 inputs through all four kernels, with a short summary of
// each call (shape, valid logits, a checksum, time).
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace ml = mqalogits;

namespace {

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

std::vector<float> random_weights(std::int64_t n) {
  std::normal_distribution<float> normal(0.0f, 0.2f);
  std::vector<float> w(static_cast<std::size_t>(n));
  for (auto& x : w) x = ml::bf16::from_float(normal(rng)).to_float();  // bf16-exact, as engines use
  return w;
}

template <class Out>
void summarise(const char* what, const ml::logits_buffer<Out>& out, double ms) {
  std::int64_t valid = 0;
  double checksum = 0;
  for (std::int64_t r = 0; r < out.rows(); ++r)
    for (std::int64_t c = 0; c < out.cols(); ++c) {
      const float v = ml::to_float(out(r, c));
      if (std::isinf(v) && v < 0) continue;
      ++valid;
      checksum += v;
    }
  std::printf("  %-13s [%5lld x %5lld]  valid %8lld  checksum %14.4f  %8.2f ms\n", what,
              static_cast<long long>(out.rows()), static_cast<long long>(out.cols()),
              static_cast<long long>(valid), checksum, ms);
}

template <class F>
double time_ms(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

template <class Format>
void demo(ml::thread_pool& pool) {
  constexpr std::int64_t H = 64, num_q = 64, num_kv = 4096, page_kv = 64;
  const ml::options opt{.executor = pool};
  std::printf("%s, H = %lld, %d threads\n", Format::name, static_cast<long long>(H),
              pool.concurrency());

  const random_rows<Format> q(num_q * H), kv(num_kv);
  const auto w = random_weights(num_q * H);
  const ml::matrix_view<const float> weights(w.data(), num_q, H);

  // Dense prefill: query i sees the causal window [0, num_kv - num_q + i + 1).
  std::vector<std::int32_t> ks(num_q, 0), ke(num_q);
  for (std::int64_t i = 0; i < num_q; ++i) ke[i] = static_cast<std::int32_t>(num_kv - num_q + i + 1);
  ml::logits_buffer<ml::bf16> dense(num_q, num_kv);
  summarise("dense", dense, time_ms([&] {
              ml::fp8_fp4_mqa_logits(q.view(), kv.view(), weights, ks, ke, num_kv, dense.view(),
                                     opt);
            }));

  // Paged decode: each query its own context over a shuffled page pool.
  const std::int64_t num_pages = num_kv / page_kv, max_blocks = num_pages;
  const random_rows<Format> pages(num_pages * page_kv);
  std::vector<std::uint8_t> cache(static_cast<std::size_t>(num_pages * page_kv) *
                                  ml::paged_cache_view<Format>::token_bytes);
  for (std::int64_t p = 0; p < num_pages; ++p)  // [page_kv data rows | page_kv scale rows]
    for (std::int64_t s = 0; s < page_kv; ++s) {
      const std::int64_t t = p * page_kv + s;
      std::uint8_t* page = cache.data() + p * page_kv * ml::paged_cache_view<Format>::token_bytes;
      std::copy_n(pages.data.data() + t * Format::data_bytes, Format::data_bytes,
                  page + s * Format::data_bytes);
      std::copy_n(pages.scales.data() + t * Format::scale_bytes, Format::scale_bytes,
                  page + page_kv * Format::data_bytes + s * Format::scale_bytes);
    }
  const ml::paged_cache_view<Format> cache_view(cache.data(), num_pages, page_kv);
  std::vector<std::int32_t> lens(num_q), table(static_cast<std::size_t>(num_q * max_blocks));
  std::uniform_int_distribution<int> len(1, static_cast<int>(num_kv)), page(0, num_pages - 1);
  for (auto& l : lens) l = len(rng);
  for (auto& t : table) t = page(rng);
  const ml::matrix_view<const std::int32_t> lens_view(lens.data(), num_q, 1);
  const ml::matrix_view<const std::int32_t> table_view(table.data(), num_q, max_blocks);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens_view, page_kv, pool.concurrency());
  ml::logits_buffer<ml::bf16> paged(num_q, num_kv);
  summarise("paged", paged, time_ms([&] {
              ml::fp8_fp4_paged_mqa_logits(q.view(), cache_view, weights, lens_view, table_view,
                                           schedule, num_kv, paged.view(), opt);
            }));

  // Sparse: 32 selected blocks of 16 tokens per query (-1 pads the tail).
  constexpr std::int64_t cap = 32, B = 16;
  std::vector<std::int32_t> blocks(static_cast<std::size_t>(num_q * cap));
  std::uniform_int_distribution<int> block(0, static_cast<int>(num_kv / B) - 1);
  for (std::size_t i = 0; i < blocks.size(); ++i) blocks[i] = (i % cap) < cap - 4 ? block(rng) : -1;
  const ml::matrix_view<const std::int32_t> blocks_view(blocks.data(), num_q, cap);
  const auto sparse_meta = ml::get_sparse_mqa_logits_metadata(ks, ke, num_kv, blocks_view, B);
  ml::logits_buffer<ml::bf16> sparse(num_q, cap * B);
  summarise("sparse", sparse, time_ms([&] {
              ml::fp8_fp4_sparse_mqa_logits(q.view(), kv.view(), weights, sparse_meta,
                                            sparse.view(), opt);
            }));

  // Paged sparse: the same selection over the paged contexts; the first call snapshots.
  auto paged_sparse_meta =
      ml::get_paged_sparse_mqa_logits_metadata(lens, table_view, page_kv, blocks_view, B);
  ml::logits_buffer<ml::bf16> paged_sparse(num_q, cap * B);
  summarise("paged_sparse", paged_sparse, time_ms([&] {
              ml::fp8_fp4_paged_sparse_mqa_logits(q.view(), cache_view, weights,
                                                  paged_sparse_meta, paged_sparse.view(), opt);
            }));
  summarise("  (reuse)", paged_sparse, time_ms([&] {
              ml::fp8_fp4_paged_sparse_mqa_logits(q.view(), cache_view, weights,
                                                  paged_sparse_meta, paged_sparse.view(), opt);
            }));
}

}  // namespace

int main() {
  ml::thread_pool pool(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  std::printf("mqalogits %d.%d.%d quick start\n", ml::version_major, ml::version_minor,
              ml::version_patch);
  demo<ml::mxfp8>(pool);
  demo<ml::mxfp4>(pool);
  return 0;
}
