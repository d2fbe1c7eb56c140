// DeepSeek V4.1's selections against a plain transcription over the kernel's own fp32 logits: the
// candidate blocks of the dense and paged kernels (block max over request-local positions, NaN
// propagating, newest block pinned to +inf, top-N ties to the lower id, -inf and missing as -1,
// both orders and both paddings), the top-k and the blocks from one call, the sparse kernels'
// positions and slots, short rows, and the bad input of each. 1, 2 and 3 pool threads: the blocks
// split between tasks are merged. (The NeuronCore model's are in neuron_kernels_test.cpp.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;

namespace {

constexpr std::uint32_t sentinel_bits = 0xFFA5A5A5u;  // a NaN no kernel writes: "not written"
constexpr float inf = std::numeric_limits<float>::infinity();

// The kernel's fp32 logits with the unwritten (masked) columns marked by the sentinel.
template <class Call>
std::vector<float> logits_of(Call&& call, std::int64_t rows, std::int64_t cols) {
  std::vector<float> logits(static_cast<std::size_t>(std::max<std::int64_t>(rows * cols, 1)),
                            std::bit_cast<float>(sentinel_bits));
  ml::options o;
  o.clean_logits = false;
  call(ml::matrix_view<float>(logits.data(), rows, cols), o);
  return logits;
}
bool written(float v) {
  return std::bit_cast<std::uint32_t>(v) != sentinel_bits;
}
bool ranks_above(float a, float b) {
  if (std::isnan(a)) return !std::isnan(b);
  if (std::isnan(b)) return false;
  return a > b;
}

// vLLM's select_candidate_blocks, written out: block max (NaN propagates) over the row's valid
// positions, newest block +inf, top-N by score with ties to the lower id, -inf dropped.
// position_of(row, col): the request-local position of a column.
template <class Position>
std::vector<std::int32_t> expected_blocks(const std::vector<float>& logits, std::int64_t rows,
                                          std::int64_t cols, std::int64_t B, std::int64_t N,
                                          ml::candidate_order order, ml::candidate_padding pad,
                                          Position position_of) {
  std::vector<std::int32_t> out;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<std::pair<std::int64_t, float>> blocks;  // (id, max), by id
    std::int64_t newest = -1;
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = logits[static_cast<std::size_t>(r * cols + c)];
      if (!written(v)) continue;
      const std::int64_t b = position_of(r, c) / B;
      if (blocks.empty() || blocks.back().first != b) blocks.push_back({b, -inf});
      float& m = blocks.back().second;
      if (std::isnan(v) || std::isnan(m))
        m = std::numeric_limits<float>::quiet_NaN();
      else
        m = std::max(m, v);
      newest = std::max(newest, b);
    }
    for (auto& [b, m] : blocks)
      if (b == newest) m = inf;
    std::stable_sort(blocks.begin(), blocks.end(),
                     [](const auto& a, const auto& b) { return ranks_above(a.second, b.second); });
    std::vector<std::int32_t> row;
    for (std::size_t i = 0; i < blocks.size() && static_cast<std::int64_t>(i) < N; ++i)
      if (blocks[i].second != -inf) row.push_back(static_cast<std::int32_t>(blocks[i].first));
    if (order == ml::candidate_order::ascending) std::sort(row.begin(), row.end());
    const std::int32_t fill =
        pad == ml::candidate_padding::repeat_last && !row.empty() ? row.back() : -1;
    row.resize(static_cast<std::size_t>(N), fill);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

// A top-k run the plain way: indices of the stable descending sort of the valid columns.
std::vector<std::int32_t> expected_topk(const std::vector<float>& logits, std::int64_t rows,
                                        std::int64_t cols, std::int64_t k) {
  std::vector<std::int32_t> out;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<std::pair<float, std::int32_t>> row;
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = logits[static_cast<std::size_t>(r * cols + c)];
      if (written(v)) row.push_back({v, static_cast<std::int32_t>(c)});
    }
    std::stable_sort(row.begin(), row.end(),
                     [](const auto& a, const auto& b) { return ranks_above(a.first, b.first); });
    for (std::int64_t i = 0; i < k; ++i)
      out.push_back(
          i < static_cast<std::int64_t>(row.size()) ? row[static_cast<std::size_t>(i)].second : -1);
  }
  return out;
}

struct dense_inputs {
  std::int64_t num_q = 9, H = 4, N = 5000;
  rnd::owned_rows<ml::mxfp8> q, kv;
  rnd::owned_matrix<float> w;
  std::vector<std::int32_t> ks, ke;
  std::int64_t max_seqlen_k = 0;
  explicit dense_inputs(rnd::engine& rng, const rnd::code_options& o = {})
      : q(rnd::rows<ml::mxfp8>(rng, num_q * H)),
        kv(rnd::rows<ml::mxfp8>(rng, N, o)),
        w(rnd::weights<float>(rng, num_q, H)),
        ks(rnd::ints(rng, num_q, -13, 900)),
        ke(rnd::ints(rng, num_q, 1000, N + 20)) {
    ks[2] = 300;  // an empty row
    ke[2] = 200;
    ks[3] = 40;  // shorter than one block
    ke[3] = 45;
    ks[4] = 0;  // the whole context
    ke[4] = static_cast<std::int32_t>(N);
  }
  std::int64_t cols() const { return max_seqlen_k ? max_seqlen_k : N; }
  auto call() {
    return [this](auto out, ml::options o) {
      o.truncate_long_contexts = true;  // some rows end past N, or past max_seqlen_k columns
      ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), ks, ke, max_seqlen_k, out, o);
    };
  }
  // Request-local position of a column: token - ks.
  std::int64_t position(std::int64_t r, std::int64_t c) const {
    const std::int64_t token = max_seqlen_k ? ks[static_cast<std::size_t>(r)] + c : c;
    return token - ks[static_cast<std::size_t>(r)];
  }
};

struct paged_inputs {
  std::int64_t B = 3, next_n = 2, H = 4, max_blocks = 80, pages = 200;
  std::int32_t page_kv = 64;
  rnd::owned_paged_cache<ml::mxfp4> cache;
  rnd::owned_matrix<std::int32_t> lens, table;
  rnd::owned_rows<ml::mxfp4> q;
  rnd::owned_matrix<float> w;
  ml::paged_mqa_schedule schedule;
  std::int64_t max_len = 80 * 64;
  explicit paged_inputs(rnd::engine& rng)
      : cache(rnd::paged_cache<ml::mxfp4>(rng, pages, page_kv)),
        lens(rnd::context_lens(rng, B, next_n, 5000, 7)),
        table(rnd::block_table(rng, lens, max_blocks, page_kv, pages)),
        q(rnd::rows<ml::mxfp4>(rng, B * next_n * H)),
        w(rnd::weights<float>(rng, B * next_n, H)) {
    schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 4);
  }
  void set_lens(std::initializer_list<std::int32_t> v) {
    std::int64_t i = 0;
    for (const std::int32_t l : v) {
      lens(i / next_n, i % next_n) = l;
      ++i;
    }
    rnd::engine rng(5);
    table = rnd::block_table(rng, lens, max_blocks, page_kv, pages);
    schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 4);
  }
  std::int64_t rows() const { return B * next_n; }
  auto call() {
    return [this](auto out, const ml::options& o) {
      ml::fp8_fp4_paged_mqa_logits(q.view(), cache.view(), w.view(), lens.view(), table.view(),
                                   schedule, max_len, out, o);
    };
  }
};

std::vector<std::int32_t> filled(std::int64_t n) {
  return std::vector<std::int32_t>(static_cast<std::size_t>(n), 0x5A5A5A5A);
}

template <class Inputs, class Position>
void check_candidates(Inputs& in, std::int64_t rows, std::int64_t cols, Position position) {
  auto call = in.call();
  const std::vector<float> logits = logits_of(call, rows, cols);
  for (const std::int64_t B : {8, 1, 32}) {
    for (const std::int64_t N : {1, 5, 64, 2048}) {
      for (const auto order : {ml::candidate_order::ascending, ml::candidate_order::score}) {
        const auto pad =
            N == 64 ? ml::candidate_padding::repeat_last : ml::candidate_padding::minus_one;
        const auto want = expected_blocks(logits, rows, cols, B, N, order, pad, position);
        for (const int threads : {1, 2, 3}) {
          INFO("B " << B << " N " << N << " order " << static_cast<int>(order) << " threads "
                    << threads);
          ml::thread_pool pool(threads);
          auto got = filled(rows * N);
          call(ml::candidate_blocks(ml::matrix_view<std::int32_t>(got.data(), rows, N), B, order,
                                    pad),
               ml::options{.executor = pool});
          CHECK(got == want);
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("candidate blocks: dense, both column modes, equal the plain block selection",
          "[selections][candidates]") {
  for (const std::int64_t max_seqlen_k : {0, 4100}) {
    rnd::engine rng(4100 + static_cast<std::uint64_t>(max_seqlen_k));
    dense_inputs in(rng);
    in.max_seqlen_k = max_seqlen_k;
    INFO("max_seqlen_k " << max_seqlen_k);
    check_candidates(in, in.num_q, in.cols(),
                     [&](std::int64_t r, std::int64_t c) { return in.position(r, c); });
  }
}

TEST_CASE("candidate blocks: paged, next_n 2, equal the plain block selection",
          "[selections][candidates]") {
  rnd::engine rng(4200);
  paged_inputs in(rng);
  in.set_lens({4999, 5000, 0, 3, 1234, 64 * 80});
  check_candidates(in, in.rows(), in.max_len, [](std::int64_t, std::int64_t c) { return c; });
}

TEST_CASE("candidate blocks: NaN blocks rank first, -inf blocks are -1, the newest is pinned",
          "[selections][candidates][edges]") {
  rnd::engine rng(4300);
  dense_inputs in(rng, {.nan_codes = 5});
  rnd::minus_inf_keys(in.q, in.kv, in.w, 100, 110);             // logits -inf on keys 100..109
  for (std::size_t r = 0; r < in.ks.size(); ++r) in.ks[r] = 0;  // blocks = token / 8
  auto call = in.call();
  const std::vector<float> logits = logits_of(call, in.num_q, in.N);
  std::int64_t nans = 0;
  for (const float v : logits) nans += std::isnan(v) && written(v);
  CHECK(nans > 0);
  check_candidates(in, in.num_q, in.N,
                   [&](std::int64_t r, std::int64_t c) { return in.position(r, c); });
  // Row 4 covers every key. With B = 4, blocks 25 and 26 (tokens 100..107) hold only -inf logits:
  // never selected, though N leaves room for every block; the newest is there.
  std::vector<std::int32_t> got = filled(in.num_q * 2000);
  call(ml::candidate_blocks(ml::matrix_view<std::int32_t>(got.data(), in.num_q, 2000), 4),
       ml::options{});
  const std::int32_t* row4 = got.data() + 4 * 2000;
  CHECK(std::find(row4, row4 + 2000, 25) == row4 + 2000);    // tokens 100..103: all -inf
  CHECK(std::find(row4, row4 + 2000, 26) == row4 + 2000);    // tokens 104..107
  CHECK(std::find(row4, row4 + 2000, 1249) != row4 + 2000);  // the newest block, pinned
}

TEST_CASE("two selections: the top-k and the blocks from one call equal each alone",
          "[selections][two]") {
  rnd::engine rng(4400);
  dense_inputs in(rng);
  auto call = in.call();
  const std::int64_t rows = in.num_q, k = 300, N = 50, B = 8;
  for (const int threads : {1, 3}) {
    ml::thread_pool pool(threads);
    const ml::options o{.executor = pool};
    auto idx1 = filled(rows * k), blocks1 = filled(rows * N);
    std::vector<float> val1(static_cast<std::size_t>(rows * k)), val2 = val1;
    call(ml::topk(ml::matrix_view<std::int32_t>(idx1.data(), rows, k),
                  ml::matrix_view<float>(val1.data(), rows, k)),
         o);
    call(ml::candidate_blocks(ml::matrix_view<std::int32_t>(blocks1.data(), rows, N), B), o);
    auto idx2 = filled(rows * k), blocks2 = filled(rows * N);
    call(ml::topk_and_candidates(
             ml::topk(ml::matrix_view<std::int32_t>(idx2.data(), rows, k),
                      ml::matrix_view<float>(val2.data(), rows, k)),
             ml::candidate_blocks(ml::matrix_view<std::int32_t>(blocks2.data(), rows, N), B)),
         o);
    CHECK(idx1 == idx2);
    CHECK(std::memcmp(val1.data(), val2.data(), val1.size() * sizeof(float)) == 0);
    CHECK(blocks1 == blocks2);
    CHECK(idx1 == expected_topk(logits_of(call, rows, in.cols()), rows, in.cols(), k));
  }
  // The paged kernel, with cache slots.
  paged_inputs p(rng);
  auto pcall = p.call();
  const std::int64_t prow = p.rows();
  auto slots1 = filled(prow * k), slots2 = filled(prow * k);
  auto pb1 = filled(prow * N), pb2 = filled(prow * N);
  ml::thread_pool pool(2);
  const ml::options o{.executor = pool};
  pcall(ml::topk(ml::matrix_view<std::int32_t>(slots1.data(), prow, k), ml::topk_index::slot), o);
  pcall(ml::candidate_blocks(ml::matrix_view<std::int32_t>(pb1.data(), prow, N), 16,
                             ml::candidate_order::score),
        o);
  pcall(ml::topk_and_candidates(
            ml::topk(ml::matrix_view<std::int32_t>(slots2.data(), prow, k), ml::topk_index::slot),
            ml::candidate_blocks(ml::matrix_view<std::int32_t>(pb2.data(), prow, N), 16,
                                 ml::candidate_order::score)),
        o);
  CHECK(slots1 == slots2);
  CHECK(pb1 == pb2);
}

TEST_CASE("short rows: len <= k written 0..len-1 ascending, longer rows ranked",
          "[selections][short_rows]") {
  rnd::engine rng(4500);
  dense_inputs in(rng);
  in.max_seqlen_k = 4100;
  auto call = in.call();
  const std::int64_t rows = in.num_q, cols = in.cols();
  const std::vector<float> logits = logits_of(call, rows, cols);
  for (const std::int64_t k : {5, 3000, 4100}) {
    INFO("k " << k);
    const auto ranked = expected_topk(logits, rows, cols, k);
    auto got = filled(rows * k);
    ml::thread_pool pool(2);
    call(ml::topk(ml::matrix_view<std::int32_t>(got.data(), rows, k)).with_short_rows(),
         ml::options{.executor = pool});
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t len = 0;
      for (std::int64_t c = 0; c < cols; ++c)
        len += written(logits[static_cast<std::size_t>(r * cols + c)]);
      const std::int32_t* row = got.data() + r * k;
      if (len <= k) {
        for (std::int64_t i = 0; i < k; ++i) CHECK(row[i] == (i < len ? i : -1));
      } else {
        CHECK(std::equal(row, row + k, ranked.data() + r * k));
      }
    }
  }
  // The paged kernel: next_n 2, slots of 0..len-1.
  paged_inputs p(rng);
  p.set_lens({10, 11, 0, 3, 4000, 4001});
  auto pcall = p.call();
  const std::int64_t k = 11;
  auto got = filled(p.rows() * k);
  pcall(ml::topk(ml::matrix_view<std::int32_t>(got.data(), p.rows(), k), ml::topk_index::slot)
            .with_short_rows(),
        ml::options{});
  for (std::int64_t r = 0; r < 4; ++r) {
    const std::int64_t len = p.lens(r / 2, r % 2);
    for (std::int64_t i = 0; i < k; ++i) {
      const std::int32_t want =
          i < len ? static_cast<std::int32_t>(p.table(r / 2, i / p.page_kv) * p.page_kv + i) : -1;
      CHECK(got[static_cast<std::size_t>(r * k + i)] == want);
    }
  }
}

TEST_CASE("positions and slots: the sparse kernels' top-k mapped back", "[selections][sparse]") {
  rnd::engine rng(4600);
  const std::int64_t num_q = 5, H = 4, N = 6000, cap = 200, blk = 8, k = 64;
  const auto q = rnd::rows<ml::mxfp8>(rng, num_q * H);
  const auto kv = rnd::rows<ml::mxfp8>(rng, N);
  const auto w = rnd::weights<float>(rng, num_q, H);
  auto ks = rnd::ints(rng, num_q, 0, 300);
  auto ke = rnd::ints(rng, num_q, N - 300, N);
  auto idx = rnd::sparse_indices(rng, num_q, cap, N / blk);
  for (const bool unaligned : {false, true}) {
    INFO("unaligned " << unaligned);
    const auto meta = ml::get_sparse_mqa_logits_metadata(ks, ke, N, idx.view(), blk, unaligned);
    auto cols = filled(num_q * k), pos = filled(num_q * k);
    auto call = [&](auto out) {
      ml::thread_pool pool(2);
      ml::fp8_fp4_sparse_mqa_logits(q.view(), kv.view(), w.view(), meta, out,
                                    ml::options{.executor = pool});
    };
    call(ml::topk(ml::matrix_view<std::int32_t>(cols.data(), num_q, k)));
    call(ml::topk(ml::matrix_view<std::int32_t>(pos.data(), num_q, k), ml::topk_index::position));
    for (std::int64_t r = 0; r < num_q; ++r)
      for (std::int64_t i = 0; i < k; ++i) {
        const std::int32_t c = cols[static_cast<std::size_t>(r * k + i)];
        const std::int64_t want = c < 0 ? -1 : meta.token(r, c) - ks[static_cast<std::size_t>(r)];
        CHECK(pos[static_cast<std::size_t>(r * k + i)] == want);
      }
  }
  // Paged-sparse: context positions and cache slots.
  const std::int32_t page_kv = 64;
  const std::int64_t pages = 150, max_blocks = 100;
  const auto cache = rnd::paged_cache<ml::mxfp8>(rng, pages, page_kv);
  std::vector<std::int32_t> lens = {6400, 5000, 0, 100, 6399};
  const std::vector<std::int64_t> keys(lens.begin(), lens.end());
  const auto table = rnd::block_table(rng, keys, max_blocks, page_kv, pages);
  const auto sel = rnd::sparse_indices(rng, num_q, cap, 6400 / blk);
  const auto meta =
      ml::get_paged_sparse_mqa_logits_metadata(lens, table.view(), page_kv, sel.view(), blk);
  auto cols = filled(num_q * k), pos = filled(num_q * k), slots = filled(num_q * k);
  auto call = [&](auto out) {
    ml::fp8_fp4_paged_sparse_mqa_logits(q.view(), cache.view(), w.view(), meta, out);
  };
  call(ml::topk(ml::matrix_view<std::int32_t>(cols.data(), num_q, k)));
  call(ml::topk(ml::matrix_view<std::int32_t>(pos.data(), num_q, k), ml::topk_index::position));
  call(ml::topk(ml::matrix_view<std::int32_t>(slots.data(), num_q, k), ml::topk_index::slot));
  for (std::int64_t r = 0; r < num_q; ++r)
    for (std::int64_t i = 0; i < k; ++i) {
      const auto at = static_cast<std::size_t>(r * k + i);
      const std::int32_t c = cols[at];
      const std::int64_t p = c < 0 ? -1 : meta.position(r, c);
      CHECK(pos[at] == p);
      CHECK(slots[at] == (c < 0 ? -1 : table(r, p / page_kv) * page_kv + p % page_kv));
    }
}

// Which kernels take which outputs (a kernel that cannot number a kind does not compile with it).
using cand = ml::candidate_blocks_selection;
using pos_sel = ml::topk_selection<ml::topk_index::position_t>;
using slot_sel = ml::topk_selection<ml::topk_index::slot_t>;
using pair_sel = ml::topk_and_candidates_selection<ml::topk_selection<ml::topk_index::column_t>>;
static_assert(ml::dense_output_argument<cand> && ml::paged_output_argument<cand>);
static_assert(!ml::sparse_output_argument<cand> && !ml::paged_sparse_output_argument<cand>);
static_assert(ml::dense_output_argument<pair_sel> && ml::paged_output_argument<pair_sel>);
static_assert(!ml::sparse_output_argument<pair_sel>);
static_assert(ml::sparse_output_argument<pos_sel> && ml::paged_sparse_output_argument<pos_sel>);
static_assert(!ml::dense_output_argument<pos_sel> && !ml::paged_output_argument<pos_sel>);
static_assert(ml::paged_sparse_output_argument<slot_sel> && !ml::sparse_output_argument<slot_sel>);

TEST_CASE("selections: bad input is a named error and writes nothing", "[selections][bad_input]") {
  rnd::engine rng(4700);
  dense_inputs in(rng);
  auto call = in.call();
  const std::int64_t rows = in.num_q;
  auto blocks = filled(rows * 16);
  const auto before = blocks;
  const ml::matrix_view<std::int32_t> view(blocks.data(), rows, 16);
  auto refused = [&](auto out, const char* words) {
    CHECK_THROWS_WITH(call(out, ml::options{}), Catch::Contains(words));
    CHECK(blocks == before);
  };
  refused(ml::candidate_blocks(view, 6), "power of two");
  refused(ml::candidate_blocks(view, 0), "power of two");
  refused(ml::candidate_blocks(ml::matrix_view<std::int32_t>(blocks.data(), rows - 1, 16), 8),
          "candidate blocks");
  refused(ml::candidate_blocks(ml::matrix_view<std::int32_t>(blocks.data(), rows, 0), 8),
          "N must be >= 1");
  // The blocks over the top-k's indices, or over an input.
  refused(
      ml::topk_and_candidates(ml::topk(ml::matrix_view<std::int32_t>(blocks.data() + 3, rows, 4)),
                              ml::candidate_blocks(view, 8)),
      "must not share a byte");
  CHECK_THROWS_WITH(
      call(ml::candidate_blocks(ml::matrix_view<std::int32_t>(in.ks.data(), rows, 1), 8),
           ml::options{}),
      Catch::Contains("overlap"));
  // Short rows have no values to write.
  std::vector<float> values(static_cast<std::size_t>(rows * 16));
  refused(ml::topk(view, ml::matrix_view<float>(values.data(), rows, 16)).with_short_rows(),
          "short rows");
  // Block ids past int32 (full width, ks far below the first token, B = 1): refused before the
  // top-k writes its short rows.
  {
    dense_inputs far(rng);
    far.ks[0] = std::numeric_limits<std::int32_t>::min();
    auto top = filled(rows * 16);
    const auto top_before = top;
    CHECK_THROWS_WITH(
        far.call()(
            ml::topk_and_candidates(
                ml::topk(ml::matrix_view<std::int32_t>(top.data(), rows, 16)).with_short_rows(),
                ml::candidate_blocks(view, 1)),
            ml::options{}),
        Catch::Contains("do not fit int32"));
    CHECK(top == top_before);
    CHECK(blocks == before);
  }
  // A block larger than the page.
  paged_inputs p(rng);
  auto pblocks = filled(p.rows() * 4);
  CHECK_THROWS_WITH(p.call()(ml::candidate_blocks(
                                 ml::matrix_view<std::int32_t>(pblocks.data(), p.rows(), 4), 128),
                             ml::options{}),
                    Catch::Contains("larger than the cache's page_kv"));
  CHECK(pblocks == filled(p.rows() * 4));
}
