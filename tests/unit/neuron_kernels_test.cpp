// The neuron backend (every generation) against the scalar reference and the host backend, on
// the four kernels x {MXFP8, MXFP4} x {bf16, fp32 logits}, random inputs and edge cases.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include <mqalogits/neuron.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/accuracy.hpp"
#include "support/golden.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;

namespace {

template <class Gen, class Format>
struct combo {
  using gen = Gen;
  using format = Format;
};
using combos = std::tuple<combo<ml::backend::trn1, ml::mxfp8>, combo<ml::backend::trn1, ml::mxfp4>,
                          combo<ml::backend::trn2, ml::mxfp8>, combo<ml::backend::trn2, ml::mxfp4>,
                          combo<ml::backend::trn3, ml::mxfp8>, combo<ml::backend::trn3, ml::mxfp4>>;

// Checks neuron output against the exact reference (the accuracy bound, exact -inf mask) and
// against the host backend (each within the accuracy bound of the exact value, so within twice the
// bound of each other, with the same -inf and NaN positions). clean = false: only valid columns are
// compared.
template <class O>
void check_against(const ml::logits_buffer<O>& neuron, const ml::logits_buffer<O>& host,
                   const ref::result& exact, bool clean) {
  REQUIRE(neuron.rows() == exact.rows);
  REQUIRE(neuron.cols() == exact.cols);
  auto val = [](const ml::logits_buffer<O>& b, std::int64_t r, std::int64_t c) {
    return static_cast<double>(ml::to_float(b(r, c)));
  };
  std::int64_t bad_ref = 0, bad_host = 0;
  std::string first;
  for (std::int64_t r = 0; r < exact.rows; ++r)
    for (std::int64_t c = 0; c < exact.cols; ++c) {
      const double e = exact.at(r, c), m = exact.mag(r, c);
      const double n = val(neuron, r, c), h = val(host, r, c);
      const bool masked = std::isinf(e) && e < 0;
      if (masked && !clean) continue;
      if (!accuracy::within(n, e, m)) {
        if (!bad_ref++)
          first += "vs ref at [" + std::to_string(r) + "][" + std::to_string(c) + "]: neuron " +
                   std::to_string(n) + ", exact " + std::to_string(e) + "; ";
      }
      const bool same_class = (std::isnan(n) == std::isnan(h)) && (std::isinf(n) == std::isinf(h));
      const bool close =
          std::isnan(n) || std::isinf(n)
              ? (std::isnan(n) || n == h)
              : std::fabs(n - h) <= 2 * (std::ldexp(std::fabs(e), -7) + std::ldexp(m, -14));
      if (!(same_class && close) && !bad_host++)
        first += "vs host at [" + std::to_string(r) + "][" + std::to_string(c) + "]: neuron " +
                 std::to_string(n) + ", host " + std::to_string(h) + "; ";
    }
  INFO(first);
  CHECK(bad_ref == 0);
  CHECK(bad_host == 0);
}

template <class O>
ml::logits_buffer<O> garbage(std::int64_t rows, std::int64_t cols) {
  ml::logits_buffer<O> b(rows, cols);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) b(r, c) = ml::from_float<O>(12345.0f);
  return b;
}

template <class Gen, class Format, class O, class W>
void dense_case(rnd::engine& rng, std::int64_t num_q, std::int64_t H, std::int64_t N,
                std::int64_t max_seqlen_k, bool clean, const rnd::code_options& codes = {}) {
  INFO("dense num_q " << num_q << " H " << H << " N " << N << " max_seqlen_k " << max_seqlen_k
                      << " clean " << clean);
  const auto q = rnd::rows<Format>(rng, num_q * H, codes);
  const auto kv = rnd::rows<Format>(rng, N, codes);
  const auto w = rnd::weights<W>(rng, num_q, H);
  const auto ks = rnd::ints(rng, num_q, -20, N / 2);
  auto ke = rnd::ints(rng, num_q, 0, N + 30);
  const std::int64_t cols = max_seqlen_k ? max_seqlen_k : N;
  auto host = garbage<O>(num_q, cols), neuron = garbage<O>(num_q, cols);
  // Rows past N or past max_seqlen_k columns: both backends truncate them alike.
  const ml::options opt{.clean_logits = clean, .truncate_long_contexts = true};
  ml::fp8_fp4_mqa_logits(ml::backend::host{}, q.view(), kv.view(), w.view(), ks, ke, max_seqlen_k,
                         host.view(), opt);
  ml::fp8_fp4_mqa_logits(ml::backend::neuron<Gen>{}, q.view(), kv.view(), w.view(), ks, ke,
                         max_seqlen_k, neuron.view(), opt);
  check_against(neuron, host, ref::dense(q.view(), kv.view(), w.view(), ks, ke, max_seqlen_k),
                clean);
}

template <class Gen, class Format, class O, class W>
void paged_case(rnd::engine& rng, std::int64_t B, std::int64_t next_n, std::int64_t H,
                std::int32_t page_kv, std::int64_t max_len, bool clean,
                const rnd::code_options& codes = {}, std::int64_t min_len = 0) {
  INFO("paged B " << B << " next_n " << next_n << " H " << H << " page_kv " << page_kv
                  << " max_len " << max_len << " clean " << clean);
  const std::int64_t max_blocks = (max_len + page_kv - 1) / page_kv + 1, pages = B * max_blocks;
  const auto q = rnd::rows<Format>(rng, B * next_n * H, codes);
  const auto cache = rnd::paged_cache<Format>(rng, pages, page_kv, 0, codes);
  const auto w = rnd::weights<W>(rng, B * next_n, H);
  const auto lens = rnd::context_lens(rng, B, next_n, max_len, min_len);
  const auto table = rnd::block_table(rng, lens, max_blocks, page_kv, pages);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 3);
  auto host = garbage<O>(B * next_n, max_len), neuron = garbage<O>(B * next_n, max_len);
  const ml::options opt{.clean_logits = clean};
  ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, q.view(), cache.view(), w.view(), lens.view(),
                               table.view(), schedule, max_len, host.view(), opt);
  ml::fp8_fp4_paged_mqa_logits(ml::backend::neuron<Gen>{}, q.view(), cache.view(), w.view(),
                               lens.view(), table.view(), schedule, max_len, neuron.view(), opt);
  check_against(neuron, host,
                ref::paged(q.view(), cache.view(), w.view(), lens.view(), table.view(), max_len),
                clean);
}

template <class Gen, class Format, class O, class W>
void sparse_case(rnd::engine& rng, std::int64_t num_q, std::int64_t H, std::int64_t N,
                 std::int64_t cap, std::int64_t B, bool clean) {
  INFO("sparse num_q " << num_q << " H " << H << " N " << N << " cap " << cap << " B " << B
                       << " clean " << clean);
  const auto q = rnd::rows<Format>(rng, num_q * H);
  const auto kv = rnd::rows<Format>(rng, N);
  const auto w = rnd::weights<W>(rng, num_q, H);
  const auto ks = rnd::ints(rng, num_q, -5, N / 3);
  const auto ke = rnd::ints(rng, num_q, 0, N + 10);
  const auto idx = rnd::sparse_indices(rng, num_q, cap, (N + B - 1) / B, {.out_of_range = 0.1});
  const auto meta = ml::get_sparse_mqa_logits_metadata(ks, ke, N, idx.view(), B);
  auto host = garbage<O>(num_q, cap * B), neuron = garbage<O>(num_q, cap * B);
  const ml::options opt{.clean_logits = clean};
  ml::fp8_fp4_sparse_mqa_logits(ml::backend::host{}, q.view(), kv.view(), w.view(), meta,
                                host.view(), opt);
  ml::fp8_fp4_sparse_mqa_logits(ml::backend::neuron<Gen>{}, q.view(), kv.view(), w.view(), meta,
                                neuron.view(), opt);
  check_against(neuron, host, ref::sparse(q.view(), kv.view(), w.view(), ks, ke, N, idx.view(), B),
                clean);
}

template <class Gen, class Format, class O, class W>
void paged_sparse_case(rnd::engine& rng, std::int64_t num_q, std::int64_t H, std::int32_t page_kv,
                       std::int64_t cap, std::int64_t B, bool clean) {
  INFO("paged_sparse num_q " << num_q << " H " << H << " page_kv " << page_kv << " cap " << cap
                             << " B " << B << " clean " << clean);
  const std::int64_t max_len = cap * B, max_blocks = (max_len + page_kv - 1) / page_kv;
  const std::int64_t pages = num_q * max_blocks + 1;
  const auto q = rnd::rows<Format>(rng, num_q * H);
  const auto cache = rnd::paged_cache<Format>(rng, pages, page_kv);
  const auto w = rnd::weights<W>(rng, num_q, H);
  const auto lens = rnd::context_lens(rng, num_q, 1, max_len);
  const auto table = rnd::block_table(rng, lens, max_blocks, page_kv, pages);
  const auto idx = rnd::sparse_indices(rng, num_q, cap, (max_len + B - 1) / B);
  const auto meta =
      ml::get_paged_sparse_mqa_logits_metadata(lens.data, table.view(), page_kv, idx.view(), B);
  auto host = garbage<O>(num_q, cap * B), neuron = garbage<O>(num_q, cap * B);
  const ml::options opt{.clean_logits = clean};
  // The first call (host) takes the snapshot, the neuron call reuses it.
  ml::fp8_fp4_paged_sparse_mqa_logits(ml::backend::host{}, q.view(), cache.view(), w.view(), meta,
                                      host.view(), opt);
  ml::fp8_fp4_paged_sparse_mqa_logits(ml::backend::neuron<Gen>{}, q.view(), cache.view(), w.view(),
                                      meta, neuron.view(), opt);
  check_against(
      neuron, host,
      ref::paged_sparse(q.view(), cache.view(), w.view(), lens.data, table.view(), idx.view(), B),
      clean);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("neuron dense (prefill schedule) matches ref and host", "[neuron]",
                        combos) {
  using Gen = typename TestType::gen;
  using F = typename TestType::format;
  const std::int64_t H = GENERATE(64, 32, 7);
  INFO(ml::neuron_backend::traits<Gen>::name << " " << F::name << " H " << H);
  rnd::engine rng(1000 + H);
  dense_case<Gen, F, ml::bf16, ml::bf16>(rng, 9, H, 600, 560, true);  // two key tiles
  dense_case<Gen, F, float, float>(rng, 5, H, 300, 0, true);          // full width
  dense_case<Gen, F, float, ml::bf16>(rng, 6, H, 200, 150, false);    // clean_logits = false
}

TEST_CASE("neuron dense: more than 128 query rows use several partition tiles", "[neuron]") {
  rnd::engine rng(7);
  dense_case<ml::backend::trn2, ml::mxfp8, float, float>(rng, 130, 4, 140, 140, true);
  dense_case<ml::backend::trn3, ml::mxfp4, ml::bf16, float>(rng, 130, 4, 140, 140, true);
}

TEMPLATE_LIST_TEST_CASE("neuron dense: query tiles sharing their keys reuse the resident K^T",
                        "[neuron]", combos) {
  // Causal ranges from key 0: the three 128-query tiles start at the same key, so the longest
  // (the last tile) runs first and the other two use the K^T it leaves, masked by their rows'
  // ranges; the logits match the host's and the reference's.
  using Gen = typename TestType::gen;
  using F = typename TestType::format;
  rnd::engine rng(77);
  const std::int64_t num_q = 300, H = 8, N = 420;
  const auto q = rnd::rows<F>(rng, num_q * H);
  const auto kv = rnd::rows<F>(rng, N);
  const auto w = rnd::weights<float>(rng, num_q, H);
  std::vector<std::int32_t> ks(num_q, 0), ke(num_q);
  for (std::int64_t i = 0; i < num_q; ++i)
    ke[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(N - num_q + 1 + i);
  auto host = garbage<float>(num_q, N), neuron = garbage<float>(num_q, N);
  ml::fp8_fp4_mqa_logits(ml::backend::host{}, q.view(), kv.view(), w.view(), ks, ke, N,
                         host.view());
  ml::neuron_backend::report rep;
  {
    ml::neuron_backend::capture cap(rep);
    ml::fp8_fp4_mqa_logits(ml::backend::neuron<Gen>{}, q.view(), kv.view(), w.view(), ks, ke, N,
                           neuron.view());
  }
  check_against(neuron, host, ref::dense(q.view(), kv.view(), w.view(), ks, ke, N), true);
  // The keys are read once: 14 rows of 32 tokens (codes and scales), not once per tile; then
  // Q, the weights, row i's 121 + i logits and the -inf fill of its other 299 - i columns
  // (trn2 / trn3: the weights once more, on the diagonals of the TensorE head sum; on trn3
  // with 300 rows of short key ranges the query tokens on partitions end sooner than decode's
  // passes).
  constexpr bool diag = !ml::neuron_backend::traits<Gen>::psum_read_exclusive;
  CHECK(rep.dma_bytes == 14 * 32 * F::data_bytes + 14 * 32 * F::scale_bytes +
                             num_q * H * (F::data_bytes + F::scale_bytes) +
                             num_q * H * 4 * (diag ? 2 : 1) + num_q * N * 4);
}

TEMPLATE_LIST_TEST_CASE("neuron paged (decode schedule) matches ref and host", "[neuron]", combos) {
  using Gen = typename TestType::gen;
  using F = typename TestType::format;
  const std::int64_t H = GENERATE(64, 32, 5);
  const std::int64_t next_n = GENERATE(1, 2, 3);
  INFO(ml::neuron_backend::traits<Gen>::name << " " << F::name);
  rnd::engine rng(2000 + H * 10 + next_n);
  paged_case<Gen, F, ml::bf16, float>(rng, 3, next_n, H, 64, 700, true);
  paged_case<Gen, F, float, ml::bf16>(rng, 2, next_n, H, 32, 200, false);
}

TEMPLATE_LIST_TEST_CASE("neuron paged: H = 128 and page sizes 128 / 256", "[neuron]", combos) {
  using Gen = typename TestType::gen;
  using F = typename TestType::format;
  const std::int32_t page_kv = GENERATE(128, 256);
  rnd::engine rng(3000 + page_kv);
  paged_case<Gen, F, ml::bf16, ml::bf16>(rng, 2, 2, 128, page_kv, 600, true);
}

// Requests longer than one chunk (8192 keys: pages of 128 go as runs of 64 tokens, one per
// partition row): packed passes pair a request's
// own chunks, of different lengths (and, four to a pack for H = 32 on trn2 / trn3, two
// requests'), with NaN / Inf scores among them.
TEMPLATE_LIST_TEST_CASE("neuron paged: packed passes over several chunks per request", "[neuron]",
                        combos) {
  using Gen = typename TestType::gen;
  using F = typename TestType::format;
  rnd::engine rng(3300);
  const rnd::code_options nan{.nan_codes = std::is_same_v<F, ml::mxfp8> ? 2 : 0, .nan_scales = 1};
  paged_case<Gen, F, ml::bf16, float>(rng, 2, 1, 64, 128, 9000, true, {}, 8400);
  paged_case<Gen, F, float, float>(rng, 2, 1, 32, 128, 9000, false, nan, 8400);
}

// Requests of one chunk each (8192 keys) on pages of 128 (MXFP8) and 256 (MXFP4) on trn3: runs of
// 128 tokens, one partition row each (half the gather descriptors of runs of 64), where they end
// the call sooner, as they do here; NaN / Inf among the codes and scales.
TEMPLATE_TEST_CASE("neuron paged (trn3): pages of 128 / 256 read as runs of 128 tokens", "[neuron]",
                   ml::mxfp8, ml::mxfp4) {
  using F = TestType;
  const std::int32_t page_kv = std::is_same_v<F, ml::mxfp8> ? 128 : 256;  // 2 s of model each
  rnd::engine rng(3400 + page_kv);
  const rnd::code_options nan{.nan_codes = std::is_same_v<F, ml::mxfp8> ? 2 : 0, .nan_scales = 1};
  ml::neuron_backend::report rep;
  {
    ml::neuron_backend::capture cap(rep);
    paged_case<ml::backend::trn3, F, ml::bf16, float>(rng, 16, 1, 64, page_kv, 8192, true, nan,
                                                      8192);
  }
  INFO(rep.summary());
  // A row per run of 128: 64 per request, codes and scales.
  CHECK(rep.dma_gathered_blocks == 16 * 8192 / page_kv * 2);
  CHECK(rep.dma_gathered_rows == 16 * 64 * 2);
}

// A request a few keys past one chunk (8192 keys on pages of 64) ends in a chunk of one partition
// row: its K transposes cover only the 4-key groups its keys fill (words and scales, one each),
// and its logits match, NaN / Inf included.
TEMPLATE_TEST_CASE("neuron paged (trn3): a one-row last chunk transposes only its keys' groups",
                   "[neuron]", ml::mxfp8, ml::mxfp4) {
  using F = TestType;
  rnd::engine rng(3450);
  const rnd::code_options nan{.nan_codes = std::is_same_v<F, ml::mxfp8> ? 2 : 0, .nan_scales = 1};
  ml::neuron_backend::report rep;
  {
    ml::neuron_backend::capture cap(rep);
    paged_case<ml::backend::trn3, F, ml::bf16, float>(rng, 2, 1, 64, 64, 8192 + 20, true, nan,
                                                      8192 + 1);
  }
  INFO(rep.summary());
  // Per request: 16 groups of the full chunk and at most 5 of the last (<= 20 keys), words and
  // scales; Q's words and scales once. A whole block's 16 groups would make it 2 x (32 + 32) + 4.
  CHECK(rep.matmul_transpose >= 2 * (32 + 2) + 4);
  CHECK(rep.matmul_transpose <= 2 * (32 + 10) + 4);
}

// Every page size from 1 to 1024 is allowed; a sample of them (odd sizes, sizes around the
// 4-key groups of trn3's row-tiled MX matmul and around a 64-key page) on every format.
TEMPLATE_TEST_CASE("neuron paged: page sizes 1..1024 on every format match ref and host",
                   "[neuron]", ml::backend::trn1, ml::backend::trn2, ml::backend::trn3) {
  using Gen = TestType;
  const std::int32_t page_kv = GENERATE(1, 2, 3, 5, 7, 9, 63, 64, 65, 127, 1023, 1024);
  const std::int64_t max_len = page_kv < 64 ? 300 : page_kv + 200;
  INFO(ml::neuron_backend::traits<Gen>::name << " page_kv " << page_kv);
  rnd::engine rng(3500 + page_kv);
  paged_case<Gen, ml::mxfp8, ml::bf16, float>(rng, 2, 2, 32, page_kv, max_len, true);
  paged_case<Gen, ml::mxfp4, ml::bf16, float>(rng, 2, 2, 32, page_kv, max_len, true);
  paged_case<Gen, ml::fp8_per_token, float, ml::bf16>(rng, 2, 2, 32, page_kv, max_len, true);
}

TEMPLATE_LIST_TEST_CASE("neuron sparse (decode schedule, masked keys) matches ref and host",
                        "[neuron]", combos) {
  using Gen = typename TestType::gen;
  using F = typename TestType::format;
  const std::int64_t B = GENERATE(8, 16);
  const std::int64_t H = GENERATE(64, 3);
  rnd::engine rng(4000 + B + H);
  sparse_case<Gen, F, ml::bf16, float>(rng, 5, H, 900, 40, B, true);
  sparse_case<Gen, F, float, ml::bf16>(rng, 3, H, 300, 8, B, false);
}

TEMPLATE_LIST_TEST_CASE("neuron paged-sparse (decode schedule, snapshot) matches ref and host",
                        "[neuron]", combos) {
  using Gen = typename TestType::gen;
  using F = typename TestType::format;
  const std::int32_t page_kv = GENERATE(64, 128);
  const std::int64_t B = GENERATE(8, 16);
  rnd::engine rng(5000 + page_kv + B);
  paged_sparse_case<Gen, F, ml::bf16, ml::bf16>(rng, 4, 32, page_kv, 2 * page_kv / B, B, true);
  paged_sparse_case<Gen, F, float, float>(rng, 3, 64, page_kv, 4 * page_kv / B, B, false);
}

TEMPLATE_LIST_TEST_CASE("neuron edge cases: NaN codes and scales, empty rows", "[neuron]", combos) {
  using Gen = typename TestType::gen;
  using F = typename TestType::format;
  rnd::engine rng(6000);
  // NaN codes (MXFP8) and NaN (255) scales propagate to exactly the logits they reach.
  const rnd::code_options nan{.nan_codes = std::is_same_v<F, ml::mxfp8> ? 3 : 0, .nan_scales = 2};
  dense_case<Gen, F, float, float>(rng, 4, 16, 100, 100, true, nan);
  // trn3 MX prefill: a few rows take decode's passes, of two (H = 64) and four (H = 32) rows
  // sharing a head sum (odd row counts leave a shorter last pass); 128 rows of short key ranges
  // keep the query tokens on partitions, whose TensorE head sum redoes a non-finite group on
  // VectorE.
  dense_case<Gen, F, float, float>(rng, 5, 64, 100, 100, true, nan);
  dense_case<Gen, F, float, float>(rng, 7, 32, 130, 0, true, nan);
  dense_case<Gen, F, float, float>(rng, 128, 16, 200, 0, true, nan);
  paged_case<Gen, F, ml::bf16, ml::bf16>(rng, 2, 2, 64, 64, 150, true, nan);
  // Packed passes (one query row of H <= 64): a NaN or Inf score of one request must not reach
  // the request it shares the head sum with.
  paged_case<Gen, F, float, float>(rng, 3, 1, 64, 64, 150, true, nan);
  paged_case<Gen, F, float, float>(rng, 4, 1, 32, 16, 150, true, nan);
  // Every row empty: the output is all -inf, nothing is read.
  {
    const auto q = rnd::rows<F>(rng, 2 * 8);
    const auto kv = rnd::rows<F>(rng, 10);
    const auto w = rnd::weights<float>(rng, 2, 8);
    const std::vector<std::int32_t> ks{5, 9}, ke{5, 3};
    auto out = garbage<float>(2, 16);
    ml::neuron_backend::report rep;
    {
      ml::neuron_backend::capture cap(rep);
      ml::fp8_fp4_mqa_logits(ml::backend::neuron<Gen>{}, q.view(), kv.view(), w.view(), ks, ke, 16,
                             out.view());
    }
    for (std::int64_t r = 0; r < 2; ++r)
      for (std::int64_t c = 0; c < 16; ++c) CHECK(std::isinf(out(r, c)));
    CHECK(rep.matmul_instructions() == 0);
    CHECK(rep.dma_descriptors == 2);  // one -inf row fill per output row
  }
  // Paged rows with length 0 next to long ones.
  {
    const auto q = rnd::rows<F>(rng, 2 * 2 * 16);
    const auto cache = rnd::paged_cache<F>(rng, 8, 64);
    const auto w = rnd::weights<ml::bf16>(rng, 4, 16);
    auto lens = rnd::matrix<std::int32_t>(2, 2);
    lens(0, 0) = 0;
    lens(0, 1) = 130;
    lens(1, 0) = 0;
    lens(1, 1) = 0;
    const auto table = rnd::block_table(rng, lens, 4, 64, 8);
    const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), 64, 2);
    auto host = garbage<float>(4, 200), neuron = garbage<float>(4, 200);
    ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, q.view(), cache.view(), w.view(), lens.view(),
                                 table.view(), schedule, 200, host.view());
    ml::fp8_fp4_paged_mqa_logits(ml::backend::neuron<Gen>{}, q.view(), cache.view(), w.view(),
                                 lens.view(), table.view(), schedule, 200, neuron.view());
    check_against(neuron, host,
                  ref::paged(q.view(), cache.view(), w.view(), lens.view(), table.view(), 200),
                  true);
  }
}

TEMPLATE_TEST_CASE("neuron fp8_per_token: folded scales (negative, zero, NaN) match ref and host",
                   "[neuron]", ml::backend::trn1, ml::backend::trn2, ml::backend::trn3) {
  using Gen = TestType;
  rnd::engine rng(8000);
  auto scale = [&](int i) {
    // Mostly positive, some negative (relu(s x d) = |s| relu(-d)), zeros, a NaN and an infinity
    // (the element-wise products are NaN: a zero code, or codes of both signs).
    const float v = std::uniform_real_distribution<float>(0.001f, 3.0f)(rng);
    return i % 17 == 3   ? -v
           : i % 31 == 5 ? 0.0f
           : i == 40     ? std::numeric_limits<float>::quiet_NaN()
           : i == 60     ? std::numeric_limits<float>::infinity()
                         : v;
  };
  {
    const std::int64_t num_q = 3, H = 16, N = 140;
    const auto qd = rnd::rows<ml::mxfp8>(rng, num_q * H);
    const auto kd = rnd::rows<ml::mxfp8>(rng, N);
    std::vector<float> k_scales(N), q_scales(static_cast<std::size_t>(num_q * H));
    for (int i = 0; i < N; ++i) k_scales[static_cast<std::size_t>(i)] = scale(i);
    for (std::size_t i = 0; i < q_scales.size(); ++i)
      q_scales[i] = i % 7 == 2 ? -0.5f : std::uniform_real_distribution<float>(0.1f, 2.0f)(rng);
    const ml::rows_view<ml::fp8_per_token> kv(kd.data.data(), k_scales.data(), N);
    const auto w = rnd::weights<float>(rng, num_q, H);
    const std::vector<std::int32_t> ks{0, 3, 50}, ke{140, 100, 90};
    for (const bool with_q_scales : {false, true}) {
      INFO("Q scales " << with_q_scales);
      const std::vector<float> ones(q_scales.size(), 1.0f);
      const ml::rows_view<ml::fp8_per_token> q(
          qd.data.data(), with_q_scales ? q_scales.data() : nullptr, num_q * H);
      const ml::rows_view<ml::fp8_per_token> q_ref(
          qd.data.data(), with_q_scales ? q_scales.data() : ones.data(), num_q * H);
      auto host = garbage<float>(num_q, N), neuron = garbage<float>(num_q, N);
      ml::fp8_fp4_mqa_logits(ml::backend::host{}, q, kv, w.view(), ks, ke, N, host.view());
      ml::neuron_backend::report rep;
      {
        ml::neuron_backend::capture cap(rep);
        ml::fp8_fp4_mqa_logits(ml::backend::neuron<Gen>{}, q, kv, w.view(), ks, ke, N,
                               neuron.view());
      }
      check_against(neuron, host, ref::dense(q_ref, kv, w.view(), ks, ke, N), true);
      // Codes go through bf16 (trn1 / trn2) or fp8 (trn3) matmuls: 2 key tiles of 512 columns
      // or fewer per head; the K scales reach the rows through one broadcast per tile.
      CHECK(rep.matmul_score == H);
      CHECK(rep.tensor.cycles < H * 4 * 140);  // no fp32 score passes
    }
  }
  {  // paged decode: K scales per token in the page, Q without scales
    const std::int64_t B = 2, next_n = 2, H = 32, page = 64, blocks = 4, len = 230;
    const auto qd = rnd::rows<ml::mxfp8>(rng, B * next_n * H);
    const std::int64_t token_bytes = ml::paged_cache_view<ml::fp8_per_token>::token_bytes;
    std::vector<std::uint8_t> cache(static_cast<std::size_t>(B * blocks * page * token_bytes));
    const auto codes = rnd::rows<ml::mxfp8>(rng, B * blocks * page);
    for (std::int64_t p = 0; p < B * blocks; ++p)
      for (std::int64_t t = 0; t < page; ++t) {
        std::uint8_t* base = cache.data() + p * page * token_bytes;
        std::memcpy(base + t * 128, codes.data.data() + (p * page + t) * 128, 128);
        const float sc = scale(static_cast<int>(p * page + t));
        std::memcpy(base + page * 128 + t * 4, &sc, 4);
      }
    const ml::paged_cache_view<ml::fp8_per_token> cv(cache.data(), B * blocks,
                                                     static_cast<std::int32_t>(page));
    auto lens = rnd::matrix<std::int32_t>(B, next_n);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t j = 0; j < next_n; ++j)
        lens(b, j) = static_cast<std::int32_t>(len - 40 * b + j);
    std::vector<std::int32_t> table(static_cast<std::size_t>(B * blocks));
    for (std::size_t i = 0; i < table.size(); ++i)
      table[i] = static_cast<std::int32_t>(table.size() - 1 - i);
    const ml::matrix_view<const std::int32_t> tv(table.data(), B, blocks);
    const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), 64, 2);
    const auto w = rnd::weights<ml::bf16>(rng, B * next_n, H);
    const ml::rows_view<ml::fp8_per_token> q(qd.data.data(), nullptr, B * next_n * H);
    const std::vector<float> ones(static_cast<std::size_t>(B * next_n * H), 1.0f);
    const ml::rows_view<ml::fp8_per_token> q_ref(qd.data.data(), ones.data(), B * next_n * H);
    auto host = garbage<float>(B * next_n, 256), neuron = garbage<float>(B * next_n, 256);
    ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, q, cv, w.view(), lens.view(), tv, schedule,
                                 256, host.view());
    ml::fp8_fp4_paged_mqa_logits(ml::backend::neuron<Gen>{}, q, cv, w.view(), lens.view(), tv,
                                 schedule, 256, neuron.view());
    check_against(neuron, host, ref::paged(q_ref, cv, w.view(), lens.view(), tv, 256), true);
  }
}

TEMPLATE_TEST_CASE("neuron native MX cache layout (trn3) matches ref and host", "[neuron]",
                   ml::mxfp8, ml::mxfp4) {
  using F = TestType;
  rnd::engine rng(9000);
  const std::int64_t next_n = GENERATE(1, 2);
  const std::int64_t B = 3, H = 64, max_len = 700, max_blocks = 12, pages = B * max_blocks;
  const std::int32_t page_kv = 64;
  const rnd::code_options nan{.nan_codes = std::is_same_v<F, ml::mxfp8> ? 2 : 0, .nan_scales = 1};
  const auto q = rnd::rows<F>(rng, B * next_n * H, nan);
  const auto cache = rnd::paged_cache<F>(rng, pages, page_kv, 0, nan);
  const auto w = rnd::weights<float>(rng, B * next_n, H);
  const auto lens = rnd::context_lens(rng, B, next_n, max_len);
  const auto table = rnd::block_table(rng, lens, max_blocks, page_kv, pages);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 1);
  const auto native =
      ml::neuron_backend::to_native_paged_cache(cache.view(), table.view(), lens.view());
  auto host = garbage<ml::bf16>(B * next_n, max_len), out = garbage<ml::bf16>(B * next_n, max_len);
  ml::fp8_fp4_paged_mqa_logits(ml::backend::host{}, q.view(), cache.view(), w.view(), lens.view(),
                               table.view(), schedule, max_len, host.view());
  ml::neuron_backend::report rep;
  {
    ml::neuron_backend::capture cap(rep);
    ml::neuron_backend::fp8_fp4_paged_mqa_logits_native(ml::backend::neuron<ml::backend::trn3>{},
                                                        q.view(), native, w.view(), lens.view(),
                                                        max_len, out.view());
  }
  check_against(out, host,
                ref::paged(q.view(), cache.view(), w.view(), lens.view(), table.view(), max_len),
                true);
  // Keys come as native blocks: the only transposes are Q's (words and scales per pass).
  const std::int64_t passes = B * ((next_n + 1) / 2);
  CHECK(rep.matmul_transpose == 2 * passes);
  CHECK(rep.dma_gathers >= B);
  // A bad shape is a named error.
  const auto short_lens = rnd::context_lens(rng, B - 1, next_n, max_len);
  CHECK_THROWS_WITH(ml::neuron_backend::fp8_fp4_paged_mqa_logits_native(
                        ml::backend::neuron<ml::backend::trn3>{}, q.view(), native, w.view(),
                        short_lens.view(), max_len, out.view()),
                    Catch::Contains("requests of the cache"));
  // Logits over the weights: the same named error as every other entry point, nothing written.
  // The buffer holds both views (max_len bf16 logits per row span more than H float weights), so
  // the only overlap is theirs.
  auto over = garbage<float>(B * next_n, max_len);
  const std::vector<float> before(over.view().data, over.view().data + B * next_n * H);
  CHECK_THROWS_WITH(
      ml::neuron_backend::fp8_fp4_paged_mqa_logits_native(
          ml::backend::neuron<ml::backend::trn3>{}, q.view(), native,
          ml::matrix_view<const float>(over.view().data, B * next_n, H), lens.view(), max_len,
          ml::matrix_view<ml::bf16>(reinterpret_cast<ml::bf16*>(over.view().data), B * next_n,
                                    max_len)),
      Catch::Contains("overlap weights"));
  CHECK(std::vector<float>(over.view().data, over.view().data + B * next_n * H) == before);
}

// ---- the independent float64 golden cases, on every generation ----

TEMPLATE_TEST_CASE("neuron golden cases: every kernel x format matches the float64 reference",
                   "[neuron][golden]", ml::backend::trn1, ml::backend::trn2, ml::backend::trn3) {
  using Backend = ml::backend::neuron<TestType>;
  const std::string name = GENERATE(from_range(golden::case_names()));
  INFO(ml::neuron_backend::traits<TestType>::name << " " << name);
  const auto c = golden::load_case(name);
  CHECK(golden::check_case<Backend, ml::bf16>(c) == "");
}

namespace {
std::vector<std::int32_t> filled_ids(std::int64_t n) {
  return std::vector<std::int32_t>(static_cast<std::size_t>(n), 0x5A5A5A5A);
}
}  // namespace

TEST_CASE("neuron selections: the model writes the host's candidate blocks and positions",
          "[neuron][selections]") {
  rnd::engine rng(4800);
  const std::int64_t num_q = 3, H = 4, N = 700, k = 40, N_blocks = 30;
  const auto q = rnd::rows<ml::mxfp8>(rng, num_q * H);
  const auto kv = rnd::rows<ml::mxfp8>(rng, N);
  const auto w = rnd::weights<float>(rng, num_q, H);
  const std::vector<std::int32_t> ks = {0, 5, 300}, ke = {700, 611, 305};
  auto both = [&](auto backend, std::vector<std::int32_t>& idx, std::vector<std::int32_t>& blk) {
    ml::fp8_fp4_mqa_logits(
        backend, q.view(), kv.view(), w.view(), ks, ke, 0,
        ml::topk_and_candidates(
            ml::topk(ml::matrix_view<std::int32_t>(idx.data(), num_q, k)),
            ml::candidate_blocks(ml::matrix_view<std::int32_t>(blk.data(), num_q, N_blocks), 8)),
        ml::options{});
  };
  auto idx_host = filled_ids(num_q * k), blk_host = filled_ids(num_q * N_blocks);
  auto idx_trn = filled_ids(num_q * k), blk_trn = filled_ids(num_q * N_blocks);
  both(ml::backend::host{}, idx_host, blk_host);
  ml::neuron_backend::report rep;
  {
    ml::neuron_backend::capture cap(rep);
    both(ml::backend::neuron<ml::backend::trn2>{}, idx_trn, blk_trn);
  }
  CHECK(idx_host == idx_trn);
  CHECK(blk_host == blk_trn);
  // The call's report counts both selections: a nisa.topk over each row's 700 logits (3 rows,
  // one call) and one over its 88 block maxima.
  CHECK(rep.topk_calls == 2);
  CHECK(rep.floor.gpsimd_topk_s ==
        Approx(3 / 8.0 * ((4 * 700 + k) + (4 * 88 + N_blocks)) / 1.2e9).epsilon(1e-12));
  // Sparse positions on the model.
  auto idx = rnd::sparse_indices(rng, num_q, 20, N / 8);
  const auto meta = ml::get_sparse_mqa_logits_metadata(ks, ke, N, idx.view(), 8);
  auto pos_host = filled_ids(num_q * k), pos_trn = filled_ids(num_q * k);
  ml::fp8_fp4_sparse_mqa_logits(
      ml::backend::host{}, q.view(), kv.view(), w.view(), meta,
      ml::topk(ml::matrix_view<std::int32_t>(pos_host.data(), num_q, k), ml::topk_index::position));
  ml::fp8_fp4_sparse_mqa_logits(
      ml::backend::neuron<ml::backend::trn2>{}, q.view(), kv.view(), w.view(), meta,
      ml::topk(ml::matrix_view<std::int32_t>(pos_trn.data(), num_q, k), ml::topk_index::position));
  CHECK(pos_host == pos_trn);
}
