// The AMX path's driver and score steps (isa/amx_path.hpp, amx_scores.hpp) on the tile model
// (amx/tile_model.hpp), so they run in every build, on any CPU: the four kernels on MXFP8,
// FP8 per-token and MXFP4 rows (and the dense one at head dims 64 and 32), against the scalar
// reference, with
// key counts that are not a multiple of the tiles' 16 rows, a single key, head counts that are
// not a multiple of a tile's heads and rows of more heads than one pass holds, masked and -inf
// columns, and the fused top-k. Both AMX formats must go through the tiles (the model counts
// its instructions). Where the build targets AMX (the dispatch library's avx512_amx path, or a
// unit built with the AMX flags) the same code runs on the instructions.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <mqalogits/backend/host/amx/tile_model.hpp>
#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/kernel_check.hpp"

namespace {

namespace ml = mqalogits;
namespace hb = mqalogits::host_backend;
namespace rnd = ref::rand;
using model = hb::amx::tile_model;

// The AMX path over the widest compiled ISA (16 heads per tile on AVX-512, 8 on AVX2 and the
// portable path), and over the portable path (8).
using amx_best = hb::amx_path<hb::isa_best, model>;
using amx_portable = hb::amx_path<hb::isa_portable, model>;

template <class Format>
constexpr bool int8_format = hb::int8_path<Format>;

// Tile instructions of the kind Format's rows take.
template <class Format>
std::int64_t dots() {
  auto& c = model::executed();
  return int8_format<Format> ? c.int8_dots.load() : c.bf16_dots.load();
}

template <class I, class Format, class Plan, class Output>
void run_on(const ml::rows_view<Format>& q, const Plan& plan, ml::matrix_view<const float> w,
            Output& output, ml::thread_pool& pool) {
  hb::run_with<I>(q, plan, w, output, ml::options{.executor = pool},
                  ml::backend_kernels<ml::backend::host>::work_tiling);
}

// The fused top-k of `out`'s rows: the k best of their valid columns (column j is key ks + j,
// valid below ke) in descending order (ties to the lower column; -inf logits of valid keys rank
// last), -1 past them.
void check_topk(const ml::logits_buffer<float>& out, const std::vector<std::int32_t>& ks,
                const std::vector<std::int32_t>& ke, const std::vector<std::int32_t>& idx,
                std::int64_t k) {
  for (std::int64_t r = 0; r < out.rows(); ++r) {
    std::vector<std::int32_t> cols;
    const auto row = static_cast<std::size_t>(r);
    for (std::int32_t c = 0; c < ke[row] - ks[row]; ++c) cols.push_back(c);
    std::stable_sort(cols.begin(), cols.end(),
                     [&](std::int32_t a, std::int32_t b) { return out(r, a) > out(r, b); });
    for (std::int64_t i = 0; i < k; ++i) {
      INFO("row " << r << ", rank " << i);
      CHECK(idx[static_cast<std::size_t>(r * k + i)] ==
            (i < static_cast<std::int64_t>(cols.size()) ? cols[static_cast<std::size_t>(i)] : -1));
    }
  }
}

// Dense: windows that leave masked columns, and with `topk` the fused top-k of the same run.
template <class I, class Format>
void dense_case(rnd::engine& rng, std::int64_t H, std::int64_t num_q, std::int64_t N,
                ml::thread_pool& pool, bool topk = false) {
  INFO(I::name << " over " << I::base::path << ", " << Format::name << " D " << Format::head_dim
               << ", H " << H << ", N " << N);
  const auto q = rnd::rows<Format>(rng, num_q * H);
  const auto kv = rnd::rows<Format>(rng, N);
  const auto w = rnd::weights<float>(rng, num_q, H);
  std::vector<std::int32_t> ks(static_cast<std::size_t>(num_q)), ke(ks.size());
  for (std::size_t r = 0; r < ks.size(); ++r) {
    ks[r] = static_cast<std::int32_t>(rnd::uniform(rng, 0, N / 4));
    ke[r] = static_cast<std::int32_t>(rnd::uniform(rng, ks[r] + 1, N));
  }
  ke.back() = static_cast<std::int32_t>(N);  // one row over every key
  const ml::dense_plan<Format> plan(kv.view(), ks, ke, N);
  ml::logits_buffer<float> out(num_q, N);
  ml::logits_row_output<float> logits(out.view(), true);
  const std::int64_t before = dots<Format>();
  run_on<I>(q.view(), plan, w.view(), logits, pool);
  CHECK(dots<Format>() > before);
  const auto expected = ref::dense(q.view(), kv.view(), w.view(), std::span<const std::int32_t>(ks),
                                   std::span<const std::int32_t>(ke), N);
  CHECK(check::valid_count(expected) > 0);
  CHECK(check::against(out, expected) == "");
  if (!topk) return;
  const std::int64_t k = 19;
  std::vector<std::int32_t> idx(static_cast<std::size_t>(num_q * k), -7);
  std::vector<float> val(idx.size());
  ml::topk_output<ml::detail::column_numbering> selection(
      ml::matrix_view<std::int32_t>(idx.data(), num_q, k),
      ml::matrix_view<float>(val.data(), num_q, k));
  run_on<I>(q.view(), plan, w.view(), selection, pool);
  check_topk(out, ks, ke, idx, k);
}

// Paged (two requests of next_n 2), sparse (blocks of 16, some -1) and paged-sparse.
template <class I, class Format>
void other_variants(rnd::engine& rng, std::int64_t H, ml::thread_pool& pool) {
  INFO(I::name << ", " << Format::name << " D " << Format::head_dim << ", H " << H);
  const std::int64_t before = dots<Format>();
  const std::int32_t page_kv = 16;
  const std::int64_t pages = 24, max_blocks = 12, max_len = max_blocks * page_kv;
  const auto cache = rnd::paged_cache<Format>(rng, pages, page_kv);
  auto lens = rnd::matrix<std::int32_t>(2, 2);
  lens.data = {33, 34, 1, 150};
  const auto table = rnd::block_table(rng, lens, max_blocks, page_kv, pages);
  const auto pq = rnd::rows<Format>(rng, 4 * H);
  const auto pw = rnd::weights<float>(rng, 4, H);
  {
    const auto sched = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 2);
    const ml::paged_plan<Format> plan(cache.view(), table.view(), lens.view(), max_len, sched);
    ml::logits_buffer<float> out(4, max_len);
    ml::logits_row_output<float> logits(out.view(), true);
    run_on<I>(pq.view(), plan, pw.view(), logits, pool);
    CHECK(check::against(out, ref::paged(pq.view(), cache.view(), pw.view(), lens.view(),
                                         table.view(), max_len)) == "");
  }
  const std::int64_t N = 200, rows = 3, cap = 6, B = 16;
  const auto kv = rnd::rows<Format>(rng, N);
  const auto q = rnd::rows<Format>(rng, rows * H);
  const auto w = rnd::weights<float>(rng, rows, H);
  const std::vector<std::int32_t> ks = {0, 17, 5}, ke = {200, 120, 6};
  const auto idx = rnd::sparse_indices(rng, rows, cap, N / B);
  {
    const auto meta = ml::get_sparse_mqa_logits_metadata(ks, ke, N, idx.view(), B);
    const ml::sparse_plan<Format> plan(kv.view(), meta);
    ml::logits_buffer<float> out(rows, cap * B);
    ml::logits_row_output<float> logits(out.view(), true);
    run_on<I>(q.view(), plan, w.view(), logits, pool);
    CHECK(check::against(
              out, ref::sparse(q.view(), kv.view(), w.view(), std::span<const std::int32_t>(ks),
                               std::span<const std::int32_t>(ke), N, idx.view(), B)) == "");
  }
  {
    const std::vector<std::int32_t> flat = {33, 1, 150};
    const auto ps_table =
        rnd::block_table(rng, std::vector<std::int64_t>{33, 1, 150}, max_blocks, page_kv, pages);
    const auto ps_idx = rnd::sparse_indices(rng, rows, cap, 10);
    const auto meta = ml::get_paged_sparse_mqa_logits_metadata(
        std::span<const std::int32_t>(flat), ps_table.view(), page_kv, ps_idx.view(), B);
    const ml::paged_sparse_plan<Format> plan(cache.view(), meta);
    ml::logits_buffer<float> out(rows, cap * B);
    ml::logits_row_output<float> logits(out.view(), true);
    run_on<I>(q.view(), plan, w.view(), logits, pool);
    CHECK(check::against(out, ref::paged_sparse(q.view(), cache.view(), w.view(),
                                                std::span<const std::int32_t>(flat),
                                                ps_table.view(), ps_idx.view(), B)) == "");
  }
  CHECK(dots<Format>() > before);
}

template <template <int> class Format>
void every_head_dim(rnd::engine& rng, ml::thread_pool& pool) {
  // H 20: a tile's heads and a padded rest; 72: two passes (4 + 1 head vectors of 16, or 9 of
  // 8); N 1 and 37: a lone key, and groups past the last key. The variants differ only in the
  // keys the driver hands the score step, the same at every head dim: they run at 128, and the
  // score steps (compiled per head dim) run densely at 64 and 32.
  for (const std::int64_t H : {20, 72}) {
    dense_case<amx_best, Format<128>>(rng, H, 3, 37, pool, H == 20);
    other_variants<amx_best, Format<128>>(rng, H, pool);
  }
  dense_case<amx_best, Format<128>>(rng, 5, 2, 1, pool);
  dense_case<amx_best, Format<64>>(rng, 20, 3, 37, pool, true);
  if constexpr (Format<128>::supports_head_dim(32))
    dense_case<amx_best, Format<32>>(rng, 33, 3, 40, pool, true);
  dense_case<amx_portable, Format<128>>(rng, 20, 3, 37, pool);
}

template <int D>
using mxfp8_d = ml::mxfp8::with_head_dim<D>;
template <int D>
using mxfp4_d = ml::mxfp4::with_head_dim<D>;
template <int D>
using fp8_per_token_d = ml::fp8_per_token::with_head_dim<D>;

}  // namespace

TEST_CASE("amx path on the tile model: MXFP8, every variant and head dim", "[amx]") {
  rnd::engine rng(11);
  ml::thread_pool pool(2);
  every_head_dim<mxfp8_d>(rng, pool);
}

TEST_CASE("amx path on the tile model: FP8 per-token, every variant and head dim", "[amx]") {
  rnd::engine rng(12);
  ml::thread_pool pool(2);
  every_head_dim<fp8_per_token_d>(rng, pool);
}

TEST_CASE("amx path on the tile model: MXFP4, every variant and head dim", "[amx]") {
  rnd::engine rng(13);
  ml::thread_pool pool(2);
  every_head_dim<mxfp4_d>(rng, pool);
}

// Logits that overflow to -inf (MXFP8 keys at scale 2^127) stay -inf through the tiles, and the
// top-k passes over them.
TEST_CASE("amx path on the tile model: -inf logits and the top-k around them", "[amx]") {
  rnd::engine rng(14);
  ml::thread_pool pool(2);
  const std::int64_t H = 16, num_q = 2, N = 40;
  auto q = rnd::rows<ml::mxfp8>(rng, num_q * H);
  auto kv = rnd::rows<ml::mxfp8>(rng, N);
  auto w = rnd::weights<float>(rng, num_q, H);
  rnd::minus_inf_keys(q, kv, w, 10, 30);
  const std::vector<std::int32_t> ks = {0, 5}, ke = {40, 35};
  const ml::dense_plan<ml::mxfp8> plan(kv.view(), ks, ke, N);
  ml::logits_buffer<float> out(num_q, N);
  ml::logits_row_output<float> logits(out.view(), true);
  const std::int64_t before = dots<ml::mxfp8>();
  run_on<amx_best>(q.view(), plan, w.view(), logits, pool);
  CHECK(dots<ml::mxfp8>() > before);
  // The same call on the vector path: -inf where it has -inf (those logits are finite in the
  // reference's double precision), the accuracy bound elsewhere.
  ml::logits_buffer<float> vector(num_q, N);
  ml::logits_row_output<float> vector_logits(vector.view(), true);
  run_on<hb::isa_best>(q.view(), plan, w.view(), vector_logits, pool);
  const auto expected = ref::dense(q.view(), kv.view(), w.view(), std::span<const std::int32_t>(ks),
                                   std::span<const std::int32_t>(ke), N);
  for (std::int64_t r = 0; r < num_q; ++r)
    for (std::int64_t c = 0; c < N; ++c) {
      INFO("[" << r << "][" << c << "] " << out(r, c) << " vs " << vector(r, c));
      if (std::isinf(vector(r, c)))
        CHECK(out(r, c) == vector(r, c));
      else
        CHECK(accuracy::within(out(r, c), expected.at(r, c), expected.mag(r, c)));
    }
  for (std::int64_t t = 10; t < 30; ++t) CHECK((std::isinf(out(0, t)) && out(0, t) < 0));
  const std::int64_t k = 25;
  std::vector<std::int32_t> idx(static_cast<std::size_t>(num_q * k));
  std::vector<float> val(idx.size());
  ml::topk_output<ml::detail::column_numbering> selection(
      ml::matrix_view<std::int32_t>(idx.data(), num_q, k),
      ml::matrix_view<float>(val.data(), num_q, k));
  run_on<amx_best>(q.view(), plan, w.view(), selection, pool);
  check_topk(out, ks, ke, idx, k);
}

TEST_CASE("amx path: a key group's head sums reduce 16 at once as one at a time, bit for bit",
          "[amx]") {
  using I = hb::isa_best;
  using vf = I::vf;
  if constexpr (requires(const vf* v, float* o) { I::reduce16(v, o); }) {
    static_assert(I::lanes == 16);
    rnd::engine gen(52);
    std::uniform_real_distribution<double> value(-1.0, 1.0);
    for (int trial = 0; trial < 50; ++trial) {
      // Values of mixed signs and magnitudes, so a different order of additions would show.
      alignas(64) float lanes[16][16];
      for (auto& row : lanes)
        for (float& x : row) x = static_cast<float>(value(gen) * std::ldexp(1.0, trial % 24 - 12));
      vf v[16];
      for (int m = 0; m < 16; ++m) v[m] = I::load(lanes[m]);
      float out[16];
      I::reduce16(v, out);
      for (int m = 0; m < 16; ++m) {
        INFO("key " << m);
        CHECK(out[m] == I::reduce(v[m]));
      }
    }
  } else {
    SUCCEED("this build's widest path reduces one vector at a time");
  }
}

// MXFP4 rows whose block exponents fold (within 3 of their smallest) take one TDPBSSD per 64
// bytes instead of one per 32-byte block: half the tile steps of the same call on rows that do
// not fold, and the same logits as the reference; keys that do not fold among folding ones are
// scored per block.
TEST_CASE("amx path on the tile model: MXFP4 rows that fold take the one-sum kernel", "[amx]") {
  rnd::engine rng(15);
  ml::thread_pool pool(1);
  using F = ml::mxfp4;
  const std::int64_t H = 20, num_q = 3, N = 150;
  // Tile steps of one call; `unfolded` keys get block exponents 8 apart (they do not fold).
  auto steps_of = [&](const rnd::code_options& qo, const rnd::code_options& ko,
                      std::vector<std::int64_t> unfolded = {}) {
    const auto q = rnd::rows<F>(rng, num_q * H, qo);
    auto kv = rnd::rows<F>(rng, N, ko);
    for (const std::int64_t t : unfolded)
      kv.scale(t)[0] = static_cast<std::uint8_t>(ko.scale_lo - 8);
    const auto w = rnd::weights<float>(rng, num_q, H);
    const std::vector<std::int32_t> ks = {0, 3, 64}, ke = {150, 97, 150};
    const ml::dense_plan<F> plan(kv.view(), ks, ke, N);
    ml::logits_buffer<float> out(num_q, N);
    ml::logits_row_output<float> logits(out.view(), true);
    const std::int64_t before = dots<F>();
    run_on<amx_best>(q.view(), plan, w.view(), logits, pool);
    const std::int64_t steps = dots<F>() - before;
    CHECK(check::against(
              out, ref::dense(q.view(), kv.view(), w.view(), std::span<const std::int32_t>(ks),
                              std::span<const std::int32_t>(ke), N)) == "");
    return steps;
  };
  const rnd::code_options folds{.scale_lo = 124, .scale_hi = 127};
  const rnd::code_options spread{.scale_lo = 110, .scale_hi = 140};
  const std::int64_t per_block = steps_of(spread, spread);
  const std::int64_t folded = steps_of(folds, folds);
  CHECK(per_block > 0);
  CHECK(2 * folded == per_block);
  // Folding rows over keys of both kinds: every call takes the one-sum kernel, and a call with a
  // key that does not fold (5 or 70) the per-block one too; the others (keys 128-149 of the
  // first row) take the one-sum kernel alone.
  const std::int64_t mixed = steps_of(folds, folds, {5, 70});
  CHECK(mixed > folded);
  CHECK(mixed < folded + per_block);
}
