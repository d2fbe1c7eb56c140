// The dense kernel never loses tokens without a word: a row past the KV (ke > N) or longer than
// max_seqlen_k columns is a named error that writes nothing, unless the call opts in with
// options::truncate_long_contexts; then its logits and its fused top-k are those of the kept
// columns only (a scalar reference of the truncated rows).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/kernel_check.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;
using Catch::Contains;
using i32 = std::int32_t;
using i64 = std::int64_t;

namespace {

constexpr i64 H = 4, N = 80;

struct inputs {
  rnd::engine rng{71};
  rnd::owned_rows<ml::mxfp8> q = rnd::rows<ml::mxfp8>(rng, 3 * H);
  rnd::owned_rows<ml::mxfp8> kv = rnd::rows<ml::mxfp8>(rng, N);
  rnd::owned_matrix<float> w = rnd::weights<float>(rng, 3, H);
};

template <class Out, class KS>
void call(const inputs& in, const KS& ks, const KS& ke, i64 max_seqlen_k, Out out,
          bool truncate = false) {
  ml::fp8_fp4_mqa_logits(in.q.view(), in.kv.view(), in.w.view(), ks, ke, max_seqlen_k, out,
                         {.truncate_long_contexts = truncate});
}

}  // namespace

TEST_CASE("dense truncation: rows past N or max_seqlen_k are named errors by default",
          "[dense][truncate]") {
  inputs in;
  ml::logits_buffer<float> out(3, 10);
  check::fill_sentinel(out);
  // Row 1 ends past the 80 KV rows.
  const std::vector<i32> ks = {0, 70, 5}, ke = {10, 85, 15};
  CHECK_THROWS_WITH(call(in, ks, ke, 10, out.view()),
                    Contains("fp8_fp4_mqa_logits") &&
                        Contains("cu_seq_len_k_end[1] = 85 is past the 80 rows") &&
                        Contains("truncate_long_contexts"));
  // Row 2 holds 11 tokens, one more than the 10 columns.
  const std::vector<i32> ks2 = {0, 70, 5}, ke2 = {10, 80, 16};
  CHECK_THROWS_WITH(call(in, ks2, ke2, 10, out.view()),
                    Contains("cu_seq_len_k_start[2] = 5, cu_seq_len_k_end[2] = 16") &&
                        Contains("max_seqlen_k = 10") &&
                        Contains("truncate_long_contexts keeps the first 10"));
  // The same through the fused top-k and the legacy name: nothing written.
  std::vector<i32> top(3 * 4, -7);
  CHECK_THROWS_WITH(call(in, ks2, ke2, 10, ml::topk(ml::matrix_view<i32>(top.data(), 3, 4))),
                    Contains("max_seqlen_k = 10"));
  CHECK(std::all_of(top.begin(), top.end(), [](i32 v) { return v == -7; }));
  CHECK(check::untouched(out));
  // A start so far below 0 that ke - ks overflows int64 is refused, not wrapped.
  const std::vector<i64> far_ks = {std::numeric_limits<i64>::min(), 0, 0}, far_ke = {5, 1, 1};
  CHECK_THROWS_WITH(call(in, far_ks, far_ke, 10, out.view()), Contains("cu_seq_len_k_end[0] = 5"));
  // Rows that fit are accepted: exactly max_seqlen_k tokens, negative starts, empty rows, and
  // the full-width mode whatever the lengths.
  const std::vector<i32> fit_ks = {-3, 70, 40}, fit_ke = {7, 80, 30};
  CHECK_NOTHROW(call(in, fit_ks, fit_ke, 10, out.view()));
  ml::logits_buffer<float> full(3, N);
  CHECK_NOTHROW(call(in, std::vector<i32>{0, 0, 0}, std::vector<i32>{80, 80, 1}, 0, full.view()));
}

TEST_CASE("dense truncation: the opt-in keeps the first columns, logits and top-k alike",
          "[dense][truncate]") {
  inputs in;
  const i64 cols = 10, k = 4;
  // Row 0 spans the whole KV, row 1 ends past it, row 2 fits.
  const std::vector<i32> ks = {0, 60, 3}, ke = {80, 95, 9};
  // Row 0's largest logit moved past the cut (its key swapped with token 70's), so the
  // untruncated top-k would differ from the kept columns' one.
  const ref::result before = ref::dense(in.q.view(), in.kv.view(), in.w.view(),
                                        std::span<const i32>(ks), std::span<const i32>(ke), N);
  i64 best = 0;
  for (i64 t = 1; t < N; ++t)
    if (before.at(0, t) > before.at(0, best)) best = t;
  if (best < cols) {
    std::swap_ranges(in.kv.row(best), in.kv.row(best) + ml::mxfp8::data_bytes, in.kv.row(70));
    std::swap_ranges(in.kv.scale(best), in.kv.scale(best) + ml::mxfp8::scale_bytes,
                     in.kv.scale(70));
  }
  const ref::result kept = ref::dense(in.q.view(), in.kv.view(), in.w.view(),
                                      std::span<const i32>(ks), std::span<const i32>(ke), cols);
  ml::logits_buffer<float> out(3, cols);
  call(in, ks, ke, cols, out.view(), true);
  CHECK(check::against(out, kept) == "");

  // The scalar top-k of each truncated row: its valid kept columns by descending value (lower
  // column first on ties), -1 past them.
  std::vector<i32> top(3 * k), expected(3 * k, -1);
  call(in, ks, ke, cols, ml::topk(ml::matrix_view<i32>(top.data(), 3, k)), true);
  for (i64 r = 0; r < 3; ++r) {
    std::vector<i32> valid;
    for (i32 c = 0; c < cols; ++c)
      if (kept.at(r, c) != -std::numeric_limits<double>::infinity()) valid.push_back(c);
    std::stable_sort(valid.begin(), valid.end(),
                     [&](i32 a, i32 b) { return kept.at(r, a) > kept.at(r, b); });
    for (i64 i = 0; i < std::min<i64>(k, static_cast<i64>(valid.size())); ++i)
      expected[static_cast<std::size_t>(r * k + i)] = valid[static_cast<std::size_t>(i)];
  }
  CHECK(top == expected);
  // Row 0 has a larger logit past the cut than in its kept columns.
  const ref::result whole = ref::dense(in.q.view(), in.kv.view(), in.w.view(),
                                       std::span<const i32>(ks), std::span<const i32>(ke), N);
  double best_kept = -std::numeric_limits<double>::infinity(), best_past = best_kept;
  for (i64 c = 0; c < N; ++c) {
    double& side = c < cols ? best_kept : best_past;
    side = std::max(side, whole.at(0, c));
  }
  CHECK(best_past > best_kept);
}
