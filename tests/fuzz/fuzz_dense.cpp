// Fuzzes fp8_fp4_mqa_logits: shapes, strides, ks / ke (int32 edges included), max_seqlen_k (the
// full-width 0 included) and byte contents from the input, plus one deliberate defect per case
// at most, which must be rejected with the output untouched.
#include "fuzz_common.hpp"

namespace {

using namespace fuzz;

enum class defect {
  none,
  max_seqlen_negative,
  ks_size,
  ke_size,
  kv_negative_rows,
  kv,  // break_rows
  q_rows,
  q,  // break_rows
  heads_zero,
  heads_many,
  out_rows,
  out_cols,
  weights_or_output,  // break_weights_or_output
  count
};

template <class Format, class W, class O>
void run(input& in, const char* combo) {
  constexpr const char* where = "fp8_fp4_mqa_logits";
  const i64 rows = in.range(0, 6);
  const i64 N = in.range(0, 48);
  const i64 max_seqlen_k = in.one_in(4) ? 0 : in.range(1, 64);
  const i64 cols = max_seqlen_k == 0 ? N : max_seqlen_k;
  i64 H = in.range(1, 8);
  while (H > 1 && rows * cols * H > 12000) --H;  // keeps the reference fast
  defect d = pick_defect<defect>(in);
  ml::options opt = pick_options(in);
  opt.truncate_long_contexts = true;  // rows past N or max_seqlen_k: the reference's clamping

  if (d == defect::heads_zero) H = 0;
  if (d == defect::heads_many) H = ml::max_heads + 1;

  const i64 q_rows = rows * H + (d == defect::q_rows ? (in.one_in(2) && rows * H > 0 ? -1 : 1) : 0);
  const i64 kv_rows = d == defect::kv_negative_rows ? 0 : N;
  const i64 ks_n = rows + (d == defect::ks_size ? 1 : 0),
            ke_n = rows + (d == defect::ke_size ? 1 : 0);
  const i64 w_stride = pick_stride(in, H, 3);
  const i64 q_ds = pick_stride(in, Format::data_bytes, 40),
            q_ss = pick_stride(in, Format::scale_bytes, 4);
  const i64 kv_ds = pick_stride(in, Format::data_bytes, 40),
            kv_ss = pick_stride(in, Format::scale_bytes, 4);

  guarded<i32> ks(ks_n), ke(ke_n);
  for (i64 r = 0; r < std::max(ks_n, ke_n); ++r) {
    const i32 s = in.int_near(-8, N + 4);
    const i32 e = in.one_in(6) ? in.int_near(-8, N + 8)
                               : static_cast<i32>(std::clamp<i64>(i64{s} + in.range(-4, 56),
                                                                  std::numeric_limits<i32>::min(),
                                                                  std::numeric_limits<i32>::max()));
    if (r < ks_n) ks[r] = s;
    if (r < ke_n) ke[r] = e;
  }

  content c(in);
  const rows_buf<Format> q(c, q_rows, q_ds, q_ss, in.one_in(2));
  const rows_buf<Format> kv(c, kv_rows, kv_ds, kv_ss);
  const weights_buf<W> w(c, rows, H, w_stride);
  const auto out = output_for<O>(in, rows, cols, d == defect::out_rows, d == defect::out_cols);

  auto qv = q.view();
  auto kvv = kv.view();
  auto wv = w.view();
  auto ov = out.view();
  i64 seqlen = max_seqlen_k;
  switch (d) {
    case defect::max_seqlen_negative:
      seqlen = in.one_in(2) ? -1 : std::numeric_limits<i64>::min();
      break;
    case defect::kv_negative_rows:
      kvv.rows = -static_cast<i64>(in.range(1, 1000));
      break;
    default:
      break;
  }
  break_named_view(in, d, breaks(defect::kv, kvv), breaks(defect::q, qv),
                   breaks(defect::weights_or_output, wv, ov));

  const std::string context = std::string("dense ") + combo + ": rows=" + std::to_string(rows) +
                              " N=" + std::to_string(N) + " H=" + std::to_string(H) +
                              " max_seqlen_k=" + std::to_string(max_seqlen_k) +
                              " defect=" + std::to_string(static_cast<int>(d)) +
                              " clean=" + std::to_string(opt.clean_logits);
  const std::span<const i32> ks_span(ks.data(), static_cast<std::size_t>(ks_n));
  const std::span<const i32> ke_span(ke.data(), static_cast<std::size_t>(ke_n));
  auto call = [&] { ml::fp8_fp4_mqa_logits(qv, kvv, wv, ks_span, ke_span, seqlen, ov, opt); };
  if (d != defect::none) return expect_rejected(out, context, where, call);
  expect_ok(out, context, outcome(call, context));
  expect_matches(out, ref::dense(q.ref_view(), kvv, wv, ks_span, ke_span, max_seqlen_k),
                 opt.clean_logits, context);
}

}  // namespace

MQALOGITS_FUZZ_TARGET(run)
