// The fused top-k output (ml::topk) of every kernel against the two-pass result: the same
// library kernel writes an fp32 logits buffer, and each row's valid columns are stable-sorted
// (descending, NaN first, ties to the lower column; for the sparse kernels, whose rows repeat
// blocks here, without the columns whose token an earlier column already covers). Four kernels x
// MXFP8 / MXFP4 / FP8 per-token x 1, 2, 3 pool threads x k in {1, 7, 2048, more than a row's valid
// columns}; the edges (empty rows, all columns masked, ties, NaN, -inf), paged slot translation
// with garbage in the block table past each context, bad input and the NeuronCore model. (A warm
// top-k call allocating nothing is checked in allocation_test.cpp.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <mqalogits/neuron.hpp>

#include "reference/random_inputs.hpp"
#include "support/formats.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;

namespace {

constexpr std::uint32_t sentinel_bits = 0xFFA5A5A5u;  // a NaN no kernel writes: "not written"

// Rows and caches of any of the three formats; fp8_per_token scales have full mantissas.
template <class F>
rnd::owned_rows<F> make_rows(rnd::engine& rng, std::int64_t n) {
  return rnd::rows<F>(rng, n, {.full_mantissa_scales = true});
}
template <class F>
rnd::owned_paged_cache<F> make_cache(rnd::engine& rng, std::int64_t pages, std::int32_t page_kv) {
  return rnd::paged_cache<F>(rng, pages, page_kv, 0, {.full_mantissa_scales = true});
}
// The legacy names' Q: the codes without their scales (an engine folds those into the weights).
ml::rows_view<ml::fp8_per_token> bare_q(const rnd::owned_rows<ml::fp8_per_token>& q) {
  ml::rows_view<ml::fp8_per_token> bare = q.view();
  bare.scales = nullptr;
  return bare;
}

// NaN above everything, then numeric order (-0 == +0): the order torch.topk and the library use.
bool ranks_above(float a, float b) {
  if (std::isnan(a)) return !std::isnan(b);
  if (std::isnan(b)) return false;
  return a > b;
}

struct entry {
  float value;
  std::int32_t column;
};

// The two-pass result: the kernel's fp32 logits (clean_logits = false into a sentinel-filled
// buffer, so the columns it writes are exactly the valid ones, even where a logit is -inf or
// NaN), each row's valid columns stable-sorted.
struct two_pass {
  std::int64_t rows = 0, cols = 0, max_valid = 0, nans = 0, minus_infs = 0, repeats = 0;
  std::vector<std::vector<entry>> sorted;
};

// The token a column reads (sparse kernels), or -1 when masked: a column whose token an earlier
// column of the row already covers is no candidate (the fused top-k never selects a token twice).
using token_fn = std::function<std::int64_t(std::int64_t row, std::int64_t column)>;

template <class Call>
two_pass expect(Call&& call, std::int64_t rows, std::int64_t cols, const ml::options& opt = {},
                const token_fn& token_of = nullptr) {
  std::vector<float> logits(static_cast<std::size_t>(std::max<std::int64_t>(rows * cols, 1)),
                            std::bit_cast<float>(sentinel_bits));
  ml::options o = opt;
  o.clean_logits = false;
  call(ml::matrix_view<float>(logits.data(), rows, cols), o);
  two_pass e;
  e.rows = rows;
  e.cols = cols;
  e.sorted.resize(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    auto& row = e.sorted[static_cast<std::size_t>(r)];
    std::set<std::int64_t> seen;
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = logits[static_cast<std::size_t>(r * cols + c)];
      if (std::bit_cast<std::uint32_t>(v) == sentinel_bits) continue;
      if (token_of && !seen.insert(token_of(r, c)).second) {
        ++e.repeats;
        continue;
      }
      row.push_back({v, static_cast<std::int32_t>(c)});
      e.nans += std::isnan(v);
      e.minus_infs += std::isinf(v) && v < 0;
    }
    std::stable_sort(row.begin(), row.end(),
                     [](const entry& a, const entry& b) { return ranks_above(a.value, b.value); });
    e.max_valid = std::max<std::int64_t>(e.max_valid, static_cast<std::int64_t>(row.size()));
  }
  return e;
}

using numbering = std::function<std::int32_t(std::int64_t row, std::int32_t column)>;
std::int32_t same_column(std::int64_t, std::int32_t c) {
  return c;
}

bool same_value(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) ||
         std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

// "" when indices / values (values may be empty: not requested) are the first k of the two-pass
// result, padded with -1 / -inf; else the first difference.
std::string against(const two_pass& e, std::int64_t k, const std::vector<std::int32_t>& idx,
                    const std::vector<float>& val, const numbering& number = same_column) {
  for (std::int64_t r = 0; r < e.rows; ++r) {
    const auto& row = e.sorted[static_cast<std::size_t>(r)];
    for (std::int64_t i = 0; i < k; ++i) {
      const auto at = static_cast<std::size_t>(r * k + i);
      const bool pad = i >= static_cast<std::int64_t>(row.size());
      const std::int32_t want_i = pad ? -1 : number(r, row[static_cast<std::size_t>(i)].column);
      const float want_v =
          pad ? -std::numeric_limits<float>::infinity() : row[static_cast<std::size_t>(i)].value;
      if (idx[at] != want_i || (!val.empty() && !same_value(val[at], want_v)))
        return "row " + std::to_string(r) + " rank " + std::to_string(i) + ": got index " +
               std::to_string(idx[at]) + (val.empty() ? "" : " value " + std::to_string(val[at])) +
               ", expected " + std::to_string(want_i) + " value " + std::to_string(want_v);
    }
  }
  return "";
}

struct topk_result {
  std::vector<std::int32_t> indices;
  std::vector<float> values;
};

template <class Call>
topk_result run_topk(Call&& call, std::int64_t rows, std::int64_t k, bool with_values,
                     const ml::options& opt, bool slots = false) {
  topk_result t;
  t.indices.assign(static_cast<std::size_t>(std::max<std::int64_t>(rows * k, 1)), 0x5A5A5A5A);
  if (with_values) t.values.assign(t.indices.size(), std::bit_cast<float>(sentinel_bits));
  const ml::matrix_view<std::int32_t> iv(t.indices.data(), rows, k);
  const ml::matrix_view<float> vv =
      with_values ? ml::matrix_view<float>(t.values.data(), rows, k) : ml::matrix_view<float>();
  if constexpr (requires { call(ml::topk(iv, vv, ml::topk_index::slot), opt); }) {
    if (slots) {
      call(ml::topk(iv, vv, ml::topk_index::slot), opt);
      return t;
    }
  }
  REQUIRE(!slots);
  if (with_values)
    call(ml::topk(iv, vv), opt);
  else
    call(ml::topk(iv), opt);
  return t;
}

// Every thread count and k against the two-pass result of the same kernel.
constexpr int every_thread_count[] = {1, 2, 3};
// The legacy names forward to the same kernels: one thread count (two, so that the per-worker
// results are merged) is enough for them.
constexpr int two_threads[] = {2};
template <class Call>
void check_kernel(Call&& call, std::int64_t rows, std::int64_t cols,
                  const numbering& slot_of = nullptr, const token_fn& token_of = nullptr,
                  std::span<const int> thread_counts = every_thread_count) {
  const two_pass e = expect(call, rows, cols, {}, token_of);
  if (token_of) CHECK(e.repeats > 0);  // the selections repeat blocks: some columns left out
  INFO("rows " << rows << " cols " << cols << " most valid columns in a row " << e.max_valid);
  REQUIRE(e.max_valid > 2 * 2048);  // k = 2048 exercises the buffer's cut-to-k path
  for (int threads : thread_counts) {
    ml::thread_pool pool(threads);
    const ml::options opt{.executor = pool};
    for (std::int64_t k : {std::int64_t{1}, std::int64_t{7}, std::int64_t{2048}, e.max_valid + 5}) {
      INFO(threads << " threads, k " << k);
      const topk_result t = run_topk(call, rows, k, true, opt);
      CHECK(against(e, k, t.indices, t.values) == "");
      if (k == 7) {
        const topk_result i_only = run_topk(call, rows, k, false, opt);
        CHECK(against(e, k, i_only.indices, {}) == "");
      }
      if (slot_of) {
        const topk_result s = run_topk(call, rows, k, true, opt, true);
        CHECK(against(e, k, s.indices, s.values, slot_of) == "");
      }
    }
  }
}

template <class F>
void dense_topk(rnd::engine& rng, std::int64_t max_seqlen_k) {
  const std::int64_t num_q = 11, H = 4, N = 9000;
  const auto q = make_rows<F>(rng, num_q * H);
  const auto kv = make_rows<F>(rng, N);
  const auto w = rnd::weights<float>(rng, num_q, H);
  auto ks = rnd::ints(rng, num_q, -20, 2000);
  auto ke = rnd::ints(rng, num_q, 4000, N + 30);
  ks[2] = 500;  // empty row
  ke[2] = 400;
  ks[3] = 0;  // the whole context
  ke[3] = static_cast<std::int32_t>(N);
  const std::int64_t cols = max_seqlen_k ? max_seqlen_k : N;
  INFO(F::name << " dense, max_seqlen_k " << max_seqlen_k);
  check_kernel(
      [&](ml::output_argument auto out, ml::options o) -> void {
        o.truncate_long_contexts = true;  // ke past N, rows longer than max_seqlen_k
        ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), ks, ke, max_seqlen_k, out, o);
      },
      num_q, cols);
  if constexpr (std::is_same_v<F, ml::fp8_per_token>) {
    INFO("the legacy fp8_mqa_logits");
    check_kernel(
        [&, bare = bare_q(q)](ml::detail::legacy_output auto out, ml::options o) -> void {
          o.truncate_long_contexts = true;
          ml::fp8_mqa_logits(bare, kv.view(), w.view(), ks, ke, o.clean_logits, max_seqlen_k, out,
                             o);
        },
        num_q, cols, nullptr, nullptr, two_threads);
  }
}

template <class F>
void paged_topk(rnd::engine& rng) {
  const std::int64_t B = 3, next_n = 2, H = 4, max_blocks = 160;
  const std::int32_t page_kv = 64;
  const std::int64_t pages = 400, max_len = max_blocks * page_kv + 100;
  const auto cache = make_cache<F>(rng, pages, page_kv);
  auto lens = rnd::context_lens(rng, B, next_n, 9000, 100);
  lens(0, 1) = 0;                                                     // empty row
  lens(1, 0) = static_cast<std::int32_t>(max_blocks * page_kv + 50);  // past the table
  lens(2, 0) = 5000;
  // Garbage (not a page) in every slot past each request's context.
  const auto table = rnd::block_table(rng, lens, max_blocks, page_kv, pages);
  const auto q = make_rows<F>(rng, B * next_n * H);
  const auto w = rnd::weights<float>(rng, B * next_n, H);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 5);
  INFO(F::name << " paged");
  const numbering slot = [&](std::int64_t row, std::int32_t pos) {
    return static_cast<std::int32_t>(table(row / next_n, pos / page_kv) * page_kv + pos % page_kv);
  };
  check_kernel(
      [&](ml::paged_output_argument auto out, ml::options o) -> void {
        o.truncate_long_contexts = true;  // row 1 runs past its table
        ml::fp8_fp4_paged_mqa_logits(q.view(), cache.view(), w.view(), lens.view(), table.view(),
                                     schedule, max_len, out, o);
      },
      B* next_n, max_len, slot);
  if constexpr (std::is_same_v<F, ml::fp8_per_token>) {
    INFO("the legacy fp8_paged_mqa_logits");
    check_kernel(
        [&, bare = bare_q(q)](ml::detail::legacy_paged_output auto out, ml::options o) -> void {
          o.truncate_long_contexts = true;
          ml::fp8_paged_mqa_logits(bare, cache.view(), w.view(), lens.view(), table.view(),
                                   schedule, max_len, o.clean_logits, out, o);
        },
        B* next_n, max_len, slot, nullptr, two_threads);
  }
}

// Sparse selections [rows, cap] of distinct blocks in [0, max_block) in random order, with a
// share of -1 entries and of repeats of an earlier entry (rows as engines pad them).
rnd::owned_matrix<std::int32_t> selection_with_repeats(rnd::engine& rng, std::int64_t rows,
                                                       std::int64_t cap, std::int64_t max_block) {
  auto m = rnd::matrix<std::int32_t>(rows, cap, 0, -1);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<std::int32_t> blocks(static_cast<std::size_t>(max_block));
    std::iota(blocks.begin(), blocks.end(), 0);
    std::shuffle(blocks.begin(), blocks.end(), rng);
    for (std::int64_t b = 0; b < cap; ++b) {
      m(r, b) = blocks[static_cast<std::size_t>(b)];
      if (rnd::chance(rng, 0.02))
        m(r, b) = -1;
      else if (b > 0 && rnd::chance(rng, 0.04))
        m(r, b) = m(r, rnd::uniform(rng, 0, b - 1));
    }
  }
  return m;
}

template <class F>
void sparse_topk(rnd::engine& rng) {
  const std::int64_t num_q = 5, H = 4, N = 12000, cap = 400, blk = 16;
  const auto q = make_rows<F>(rng, num_q * H);
  const auto kv = make_rows<F>(rng, N);
  const auto w = rnd::weights<float>(rng, num_q, H);
  auto ks = rnd::ints(rng, num_q, 0, 100);
  auto ke = rnd::ints(rng, num_q, N - 100, N);
  auto idx = selection_with_repeats(rng, num_q, cap, N / blk);
  for (std::int64_t b = 0; b < cap; ++b) idx(1, b) = -1;  // all columns masked
  const auto meta = ml::get_sparse_mqa_logits_metadata(ks, ke, N, idx.view(), blk);
  INFO(F::name << " sparse");
  check_kernel(
      [&](ml::output_argument auto out, const ml::options& o) -> void {
        ml::fp8_fp4_sparse_mqa_logits(q.view(), kv.view(), w.view(), meta, out, o);
      },
      num_q, cap* blk, nullptr, [&](std::int64_t r, std::int64_t c) { return meta.token(r, c); });
}

template <class F>
void paged_sparse_topk(rnd::engine& rng) {
  const std::int64_t num_q = 4, H = 4, blk = 16, max_blocks = 100, cap = 352;
  const std::int32_t page_kv = 64;
  const std::int64_t pages = 300;
  const auto cache = make_cache<F>(rng, pages, page_kv);
  std::vector<std::int32_t> lens = {6400, 6000, 0, 5900};
  const std::vector<std::int64_t> keys(lens.begin(), lens.end());
  const auto table = rnd::block_table(rng, keys, max_blocks, page_kv, pages);
  auto idx = selection_with_repeats(rng, num_q, cap, 6400 / blk);
  const auto q = make_rows<F>(rng, num_q * H);
  const auto w = rnd::weights<float>(rng, num_q, H);
  const auto meta =
      ml::get_paged_sparse_mqa_logits_metadata(lens, table.view(), page_kv, idx.view(), blk);
  INFO(F::name << " paged sparse");
  check_kernel(
      [&](ml::output_argument auto out, const ml::options& o) -> void {
        ml::fp8_fp4_paged_sparse_mqa_logits(q.view(), cache.view(), w.view(), meta, out, o);
      },
      num_q, cap* blk, nullptr,
      [&](std::int64_t r, std::int64_t c) { return meta.position(r, c); });
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("topk: dense equals the stable sort of its fp32 logits", "[topk][dense]",
                        check::all_formats) {
  const std::int64_t max_seqlen_k = GENERATE(0, 6000);  // full width, compressed
  rnd::engine rng(100 + static_cast<std::uint64_t>(max_seqlen_k));
  dense_topk<TestType>(rng, max_seqlen_k);
}

TEMPLATE_LIST_TEST_CASE(
    "topk: paged equals the stable sort of its fp32 logits, and its cache slots", "[topk][paged]",
    check::all_formats) {
  rnd::engine rng(200);
  paged_topk<TestType>(rng);
}

TEMPLATE_LIST_TEST_CASE("topk: sparse equals the stable sort of its fp32 logits", "[topk][sparse]",
                        check::all_formats) {
  rnd::engine rng(300);
  sparse_topk<TestType>(rng);
}

TEMPLATE_LIST_TEST_CASE("topk: paged sparse equals the stable sort of its fp32 logits",
                        "[topk][paged_sparse]", check::all_formats) {
  rnd::engine rng(400);
  paged_sparse_topk<TestType>(rng);
}

namespace {
// Dense MXFP8 rows for the edges: num_q rows of H heads over N keys, every column valid.
struct edge_inputs {
  std::int64_t num_q = 3, H = 2, N = 700;
  rnd::owned_rows<ml::mxfp8> q, kv;
  rnd::owned_matrix<float> w;
  std::vector<std::int32_t> ks, ke;
  edge_inputs(rnd::engine& rng, const rnd::code_options& o = {})
      : q(rnd::rows<ml::mxfp8>(rng, num_q * H)),
        kv(rnd::rows<ml::mxfp8>(rng, N, o)),
        w(rnd::weights<float>(rng, num_q, H)),
        ks(static_cast<std::size_t>(num_q), 0),
        ke(static_cast<std::size_t>(num_q), static_cast<std::int32_t>(N)) {}
  auto call() {
    return [this](ml::output_argument auto out, const ml::options& o) -> void {
      ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), ks, ke, 0, out, o);
    };
  }
};

// Whether a kernel call accepts Out in the position of its output.
template <class Call, class Out>
concept takes_output = requires(Call c, Out out) {
  c(out, ml::options{});
};

void check_edges(edge_inputs& in, std::int64_t k) {
  auto call = in.call();
  const two_pass e = expect(call, in.num_q, in.N);
  ml::thread_pool pool(3);
  const topk_result t = run_topk(call, in.num_q, k, true, {.executor = pool});
  CHECK(against(e, k, t.indices, t.values) == "");
}
}  // namespace

// The legacy names take the selection in the logits' position, dense with columns only, paged
// also with cache slots (dense_topk and paged_topk check them on fp8_per_token inputs).
static_assert(ml::detail::legacy_output<ml::topk_selection<ml::topk_index::column_t>>);
static_assert(!ml::detail::legacy_output<ml::topk_selection<ml::topk_index::slot_t>>);
static_assert(ml::detail::legacy_paged_output<ml::topk_selection<ml::topk_index::slot_t>>);

TEST_CASE("topk: ties (identical keys) go to the lower column", "[topk][edges]") {
  rnd::engine rng(500);
  edge_inputs in(rng);
  for (std::int64_t t = 1; t < in.N; ++t) {  // every key a copy of key 0
    std::memcpy(in.kv.row(t), in.kv.row(0), ml::mxfp8::data_bytes);
    std::memcpy(in.kv.scale(t), in.kv.scale(0), ml::mxfp8::scale_bytes);
  }
  for (std::int64_t k : {1, 7, 300, 800}) {
    INFO("k " << k);
    check_edges(in, k);
    auto call = in.call();
    ml::thread_pool pool(2);
    const topk_result t = run_topk(call, in.num_q, k, true, {.executor = pool});
    for (std::int64_t i = 0; i < std::min<std::int64_t>(k, in.N); ++i)
      CHECK(t.indices[static_cast<std::size_t>(i)] == i);  // all equal: columns in order
  }
}

TEST_CASE("topk: NaN ranks above +inf, -inf logits are selectable, empty and masked rows pad",
          "[topk][edges]") {
  rnd::engine rng(501);
  edge_inputs in(rng, {.nan_codes = 9});
  rnd::minus_inf_keys(in.q, in.kv, in.w, 100, 105);  // logits -inf on keys 100..104
  in.ks[1] = 50;                                     // an empty row
  in.ke[1] = 10;
  in.ks[2] = static_cast<std::int32_t>(in.N + 5);  // every column past the keys: masked
  auto call = in.call();
  const two_pass e = expect(call, in.num_q, in.N);
  CHECK(e.nans > 0);
  CHECK(e.minus_infs >= 5);
  CHECK(e.sorted[1].empty());
  CHECK(e.sorted[2].empty());
  CHECK(std::isnan(e.sorted[0].front().value));
  for (std::int64_t k : {1, 7, 695, 700, 900}) {
    INFO("k " << k);
    check_edges(in, k);
  }
}

TEST_CASE("topk: values keep the sign of a zero logit", "[topk][edges]") {
  rnd::engine rng(502);
  edge_inputs in(rng);
  for (std::int64_t r = 0; r < in.num_q * in.H; ++r)  // Q all zero codes: every logit is a zero
    std::fill(in.q.row(r), in.q.row(r) + ml::mxfp8::data_bytes, std::uint8_t{0});
  for (auto& v : in.w.data) v = -1.0f;  // 0 x -1 = -0
  check_edges(in, 50);
}

TEST_CASE("topk: bad input is a named error and the output is untouched", "[topk][validate]") {
  rnd::engine rng(600);
  edge_inputs in(rng);
  auto call = in.call();
  std::vector<std::int32_t> idx(64 * 8, 77);
  std::vector<float> val(64 * 8, 3.0f);
  auto untouched = [&] {
    return std::all_of(idx.begin(), idx.end(), [](std::int32_t v) { return v == 77; }) &&
           std::all_of(val.begin(), val.end(), [](float v) { return v == 3.0f; });
  };
  using Catch::Matchers::Contains;
  const std::int64_t R = in.num_q;
  CHECK_THROWS_WITH(call(ml::topk(ml::matrix_view<std::int32_t>(idx.data(), R, 0)), {}),
                    Contains("fp8_fp4_mqa_logits") && Contains("k must be >= 1"));
  CHECK_THROWS_WITH(call(ml::topk(ml::matrix_view<std::int32_t>(idx.data(), R + 1, 4)), {}),
                    Contains("top-k indices shape [4, 4], expected [3, 4]"));
  CHECK_THROWS_WITH(call(ml::topk(ml::matrix_view<std::int32_t>(nullptr, R, 4)), {}),
                    Contains("top-k indices is null"));
  CHECK_THROWS_WITH(call(ml::topk(ml::matrix_view<std::int32_t>(idx.data(), R, 4),
                                  ml::matrix_view<float>(val.data(), R, 5)),
                         {}),
                    Contains("top-k values shape [3, 5], expected [3, 4]"));
  CHECK_THROWS_WITH(call(ml::topk(ml::matrix_view<std::int32_t>(idx.data(), R, 4),
                                  ml::matrix_view<float>(nullptr, R, 4)),
                         {}),
                    Contains("top-k values is null"));
  CHECK_THROWS_WITH(call(ml::topk(ml::matrix_view<std::int32_t>(idx.data(), R, 4, 2)), {}),
                    Contains("top-k indices stride 2 < cols 4"));
  CHECK(untouched());
  // Slot translation is a paged-kernel output: the other kernels do not take it.
  using slot_sel = ml::topk_selection<ml::topk_index::slot_t>;
  static_assert(!ml::output_argument<slot_sel>);
  static_assert(ml::paged_output_argument<slot_sel>);
  static_assert(ml::output_argument<ml::topk_selection<ml::topk_index::column_t>>);
  static_assert(!takes_output<decltype(call), slot_sel>);
}

TEST_CASE("topk: paged slots past 2^31 are rejected", "[topk][validate]") {
  rnd::engine rng(601);
  const std::int32_t page_kv = 64;
  auto lens = rnd::context_lens(rng, 1, 1, 10, 10);
  const auto table = rnd::block_table(rng, lens, 1, page_kv, 1);
  const auto cache = rnd::paged_cache<ml::mxfp8>(rng, 1, page_kv);
  // A view that claims 2^25 + 1 pages (never read: the check comes first).
  const ml::paged_cache_view<ml::mxfp8> huge(cache.bytes.data(), (1 << 25) + 1, page_kv,
                                             cache.page_stride);
  const auto q = rnd::rows<ml::mxfp8>(rng, 2);
  const auto w = rnd::weights<float>(rng, 1, 2);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 1);
  std::vector<std::int32_t> idx(4, 77);
  CHECK_THROWS_WITH(
      ml::fp8_fp4_paged_mqa_logits(
          q.view(), huge, w.view(), lens.view(), table.view(), schedule, 10,
          ml::topk(ml::matrix_view<std::int32_t>(idx.data(), 1, 4), ml::topk_index::slot)),
      Catch::Matchers::Contains("do not fit int32"));
  CHECK(std::all_of(idx.begin(), idx.end(), [](std::int32_t v) { return v == 77; }));
}

TEMPLATE_TEST_CASE("topk: the NeuronCore model selects from its own fp32 logits", "[topk][neuron]",
                   ml::mxfp8, ml::mxfp4) {
  using F = TestType;
  using neuron = ml::backend::neuron<ml::backend::trn2>;
  rnd::engine rng(700);
  {
    const std::int64_t num_q = 3, H = 4, N = 600;
    const auto q = rnd::rows<F>(rng, num_q * H);
    const auto kv = rnd::rows<F>(rng, N);
    const auto w = rnd::weights<float>(rng, num_q, H);
    const std::vector<std::int32_t> ks = {0, 100, 700}, ke = {600, 550, 800};
    auto call = [&](ml::output_argument auto out, ml::options o) -> void {
      o.truncate_long_contexts = true;  // row 2 lies past N: clamped to no column
      ml::fp8_fp4_mqa_logits(neuron{}, q.view(), kv.view(), w.view(), ks, ke, 0, out, o);
    };
    const two_pass e = expect(call, num_q, N);
    for (std::int64_t k : {1, 7, 2048}) {
      const topk_result t = run_topk(call, num_q, k, true, {});
      CHECK(against(e, k, t.indices, t.values) == "");
    }
  }
  {  // The selection is part of the modelled schedule: nisa.topk calls on GpSimd, on top of the
     // logits kernel's cost, one call per 8 rows (one segment).
    const std::int64_t num_q = 10, H = 4, N = 300, k = 16;
    const auto q = rnd::rows<F>(rng, num_q * H);
    const auto kv = rnd::rows<F>(rng, N);
    const auto w = rnd::weights<float>(rng, num_q, H);
    const std::vector<std::int32_t> ks(num_q, 0), ke(num_q, static_cast<std::int32_t>(N));
    namespace nb = ml::neuron_backend;
    nb::report logits_only, fused;
    ml::logits_buffer<float> out(num_q, N);
    std::vector<std::int32_t> idx(static_cast<std::size_t>(num_q * k));
    {
      nb::capture cap(logits_only);
      ml::fp8_fp4_mqa_logits(neuron{}, q.view(), kv.view(), w.view(), ks, ke, 0, out.view());
    }
    {
      nb::capture cap(fused);
      ml::fp8_fp4_mqa_logits(neuron{}, q.view(), kv.view(), w.view(), ks, ke, 0,
                             ml::topk(ml::matrix_view<std::int32_t>(idx.data(), num_q, k)));
    }
    CHECK(logits_only.topk_calls == 0);
    CHECK(fused.topk_calls == (num_q + 7) / 8);
    CHECK(fused.estimated_seconds() > logits_only.estimated_seconds());
    // The selection is the library's: the best column of row 0 is its largest logit.
    const float* row0 = &out(0, 0);
    CHECK(idx[0] == std::max_element(row0, row0 + N) - row0);
  }
  {
    const std::int64_t B = 2, next_n = 2, H = 4, max_blocks = 8, pages = 20;
    const std::int32_t page_kv = 64;
    const auto cache = rnd::paged_cache<F>(rng, pages, page_kv);
    const auto lens = rnd::context_lens(rng, B, next_n, 400, 1);
    const auto table = rnd::block_table(rng, lens, max_blocks, page_kv, pages);
    const auto q = rnd::rows<F>(rng, B * next_n * H);
    const auto w = rnd::weights<float>(rng, B * next_n, H);
    const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 1);
    auto call = [&](ml::paged_output_argument auto out, const ml::options& o) -> void {
      ml::fp8_fp4_paged_mqa_logits(neuron{}, q.view(), cache.view(), w.view(), lens.view(),
                                   table.view(), schedule, 512, out, o);
    };
    const two_pass e = expect(call, B * next_n, 512);
    const numbering slot = [&](std::int64_t row, std::int32_t pos) {
      return static_cast<std::int32_t>(table(row / next_n, pos / page_kv) * page_kv +
                                       pos % page_kv);
    };
    for (std::int64_t k : {1, 7, 600}) {
      const topk_result t = run_topk(call, B * next_n, k, true, {}, true);
      CHECK(against(e, k, t.indices, t.values, slot) == "");
    }
  }
}

// A varlen request with more rows than one work item holds, its keys split over several schedule
// workers: the schedule interleaves the request's row blocks in its work list, and each row's
// selection must still come from all of its keys.
TEST_CASE("topk: a varlen request of 24 rows over several schedule workers", "[topk][paged]") {
  using F = ml::mxfp8;
  rnd::engine rng(3);
  const std::int64_t rows = 24, H = 4, page_kv = 64, max_blocks = 64, pages = 64, k = 16;
  const std::int64_t cols = max_blocks * page_kv;
  const auto cache = rnd::paged_cache<F>(rng, pages, page_kv);
  auto lens = rnd::matrix<std::int32_t>(rows, 1);
  auto table = rnd::matrix<std::int32_t>(rows, max_blocks);
  for (std::int64_t r = 0; r < rows; ++r) {
    lens(r, 0) = static_cast<std::int32_t>(cols - 3 * r);
    for (std::int64_t s = 0; s < max_blocks; ++s) table(r, s) = static_cast<std::int32_t>(s);
  }
  const std::vector<std::int32_t> request(static_cast<std::size_t>(rows), 7);
  const auto q = rnd::rows<F>(rng, rows * H);
  const auto w = rnd::weights<float>(rng, rows, H);
  ml::thread_pool pool(2);
  const int workers = GENERATE(1, 2, 4, 7);
  INFO("schedule workers " << workers);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, workers, request);
  ml::logits_buffer<float> logits(rows, cols);
  ml::fp8_fp4_paged_mqa_logits(q.view(), cache.view(), w.view(), lens.view(), table.view(),
                               schedule, cols, logits.view(), request, {.executor = pool});
  std::vector<std::int32_t> top(static_cast<std::size_t>(rows * k));
  ml::fp8_fp4_paged_mqa_logits(
      q.view(), cache.view(), w.view(), lens.view(), table.view(), schedule, cols,
      ml::topk(ml::matrix_view<std::int32_t>(top.data(), rows, k)), request, {.executor = pool});
  for (std::int64_t r = 0; r < rows; ++r) {
    INFO("row " << r);
    std::vector<std::int32_t> order(static_cast<std::size_t>(lens(r, 0)));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int32_t a, std::int32_t b) { return logits(r, a) > logits(r, b); });
    order.resize(static_cast<std::size_t>(k));
    CHECK(std::vector<std::int32_t>(top.begin() + r * k, top.begin() + (r + 1) * k) == order);
  }
}

// ---- careless callers: the selection's buffers are checked like a logits view ----------------

namespace {
// An executor that is correct on every parallel_for but the `faulty`-th of a call (counted from
// 0), where it skips the last index, or passes -1 instead (outside [0, n)).
struct nth_pass_faulty_executor {
  int faulty = 0;
  bool out_of_range = false;
  int calls = 0;
  void parallel_for(std::int64_t n, ml::task_ref task) {
    const bool bad = calls++ == faulty;
    for (std::int64_t i = 0; i < n; ++i)
      if (!bad || i != n - 1) task(i);
    if (bad && out_of_range) task(-1);
  }
  int concurrency() const { return 1; }
};
}  // namespace

TEST_CASE("topk: indices or values overlapping an input or each other are rejected, untouched",
          "[topk][validate][overlap]") {
  rnd::engine rng(602);
  edge_inputs in(rng);
  const std::int64_t R = in.num_q, k = 8;
  using Catch::Matchers::Contains;
  SECTION("indices and values in one buffer") {
    std::vector<std::int32_t> buf(static_cast<std::size_t>(2 * R * k), 77);
    const std::vector<std::int32_t> before = buf;
    const ml::matrix_view<std::int32_t> iv(buf.data(), R, k);
    // Values start on indices row 1 (an int32 and a float are both 4 bytes, 4-aligned).
    const ml::matrix_view<float> vv(reinterpret_cast<float*>(buf.data() + k), R, k);
    CHECK_THROWS_WITH(in.call()(ml::topk(iv, vv), {}), Contains("fp8_fp4_mqa_logits") &&
                                                           Contains("top-k indices") &&
                                                           Contains("overlap top-k values"));
    CHECK(buf == before);
  }
  SECTION("indices over the weights") {
    std::vector<float> buf(static_cast<std::size_t>(R * k + R * in.H), 0.0f);
    std::memcpy(buf.data() + k, in.w.data.data(), in.w.data.size() * sizeof(float));
    const ml::matrix_view<const float> w(buf.data() + k, R, in.H);
    const std::vector<float> before = buf;
    const ml::matrix_view<std::int32_t> iv(reinterpret_cast<std::int32_t*>(buf.data()), R, k);
    CHECK_THROWS_WITH(
        ml::fp8_fp4_mqa_logits(in.q.view(), in.kv.view(), w, in.ks, in.ke, 0, ml::topk(iv), {}),
        Contains("top-k indices") && Contains("overlap weights"));
    CHECK(std::memcmp(buf.data(), before.data(), buf.size() * sizeof(float)) == 0);
  }
  SECTION("values over q scales") {
    std::vector<std::int32_t> idx(static_cast<std::size_t>(R * k));
    auto q = in.q.view();
    std::vector<float> buf(static_cast<std::size_t>(R * k) + in.q.scales.size(), 0.0f);
    std::memcpy(buf.data() + 1, in.q.scales.data(), in.q.scales.size());
    q.scales = reinterpret_cast<const std::uint8_t*>(buf.data() + 1);
    const ml::matrix_view<float> vv(buf.data(), R, k);
    CHECK_THROWS_WITH(
        ml::fp8_fp4_mqa_logits(q, in.kv.view(), in.w.view(), in.ks, in.ke, 0,
                               ml::topk(ml::matrix_view<std::int32_t>(idx.data(), R, k), vv), {}),
        Contains("top-k values") && Contains("overlap q scales"));
  }
}

TEST_CASE("topk: indices over the paged block table are rejected (was a heap read past the cache)",
          "[topk][validate][overlap]") {
  rnd::engine rng(603);
  const std::int64_t B = 2, H = 2, pages = 4, max_blocks = 3, cols = 96, k = max_blocks;
  const std::int32_t page_kv = 32;
  const auto cache = rnd::paged_cache<ml::mxfp8>(rng, pages, page_kv);
  const auto lens = rnd::context_lens(rng, B, 1, 90, 40);
  const auto q = rnd::rows<ml::mxfp8>(rng, B * H);
  const auto w = rnd::weights<float>(rng, B, H);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 2);
  // The block table is indices row 1 onwards: a finished row 0 would overwrite table row 0 ...
  // and row 1's selection would be written over table row 1 while it is still to be read.
  std::vector<std::int32_t> buf(static_cast<std::size_t>((B + 1) * k), 0);
  for (std::int64_t i = 0; i < B * max_blocks; ++i)
    buf[static_cast<std::size_t>(k + i)] = static_cast<std::int32_t>(i % pages);
  const ml::matrix_view<const std::int32_t> table(buf.data() + k, B, max_blocks);
  const std::vector<std::int32_t> before = buf;
  for (bool slots : {false, true}) {
    INFO("slots " << slots);
    const ml::matrix_view<std::int32_t> iv(buf.data(), B, k);
    auto call = [&](auto sel) {
      ml::fp8_fp4_paged_mqa_logits(q.view(), cache.view(), w.view(), lens.view(), table, schedule,
                                   cols, sel, ml::options{});
    };
    if (slots)
      CHECK_THROWS_WITH(call(ml::topk(iv, ml::matrix_view<float>(), ml::topk_index::slot)),
                        Catch::Matchers::Contains("fp8_fp4_paged_mqa_logits") &&
                            Catch::Matchers::Contains("top-k indices") &&
                            Catch::Matchers::Contains("overlap block_table"));
    else
      CHECK_THROWS_WITH(call(ml::topk(iv, ml::matrix_view<float>())),
                        Catch::Matchers::Contains("top-k indices") &&
                            Catch::Matchers::Contains("overlap block_table"));
    CHECK(buf == before);
  }
}

TEST_CASE("topk: the padding pass goes through the executor contract check",
          "[topk][validate][executor]") {
  rnd::engine rng(604);
  edge_inputs in(rng);
  in.ke[1] = 0;  // an empty row: only the padding pass writes it
  const std::int64_t R = in.num_q, k = 8;
  // The scoring pass is parallel_for call 0, the padding pass call 1.
  for (bool out_of_range : {false, true}) {
    INFO("out of range " << out_of_range);
    std::vector<std::int32_t> idx(static_cast<std::size_t>(R * k), 77);
    nth_pass_faulty_executor good{.faulty = -1};
    in.call()(ml::topk(ml::matrix_view<std::int32_t>(idx.data(), R, k)), {.executor = good});
    REQUIRE(good.calls == 2);
    CHECK(idx[static_cast<std::size_t>(k)] == -1);  // the padded row
    nth_pass_faulty_executor bad{.faulty = 1, .out_of_range = out_of_range};
    CHECK_THROWS_WITH(
        in.call()(ml::topk(ml::matrix_view<std::int32_t>(idx.data(), R, k)), {.executor = bad}),
        Catch::Matchers::Contains("executor") && Catch::Matchers::Contains("parallel_for(1)"));
  }
}
