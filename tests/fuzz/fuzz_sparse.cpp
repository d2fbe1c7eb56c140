// Fuzzes get_sparse_mqa_logits_metadata + fp8_fp4_sparse_mqa_logits: rows, num_kv_tokens (and
// KV rows past it), sparse_block_kv, capacity (4096 included), ks / ke and block indices (-1 pads,
// far and int32-edge values) and byte contents from the input, plus at most one deliberate defect
// per case, which must be rejected (by the metadata or the kernel) with the output untouched.
#include "fuzz_common.hpp"

namespace {

using namespace fuzz;

enum class defect {
  none,
  // rejected by get_sparse_mqa_logits_metadata
  cap_zero,
  cap_big,
  block_bad,
  ks_size,
  ke_size,
  num_kv_bad,
  indices,  // break_matrix
  // rejected by fp8_fp4_sparse_mqa_logits
  default_metadata,
  kv_short,
  kv,  // break_rows
  q_rows,
  heads_zero,
  out_rows,
  out_cols,
  weights_or_output,  // break_weights_or_output
  count
};

bool metadata_defect(defect d) {
  return d >= defect::cap_zero && d <= defect::indices;
}

template <class Format, class W, class O>
void run(input& in, const char* combo) {
  constexpr const char* where = "fp8_fp4_sparse_mqa_logits";
  constexpr const char* meta_where = "get_sparse_mqa_logits_metadata";
  const i64 block = in.pick({8, 16});
  const bool wide = in.one_in(48);  // the largest capacity, on one row
  i64 rows = wide ? in.range(0, 1) : in.range(0, 5);
  i64 cap = wide ? ml::max_sparse_capacity : in.range(1, 24);
  const i64 num_kv = in.range(1, 64);
  const i64 kv_extra = in.one_in(4) ? in.range(1, 8) : 0;
  i64 H = in.range(1, 8);
  while (H > 1 && rows * cap * block * H > 12000) --H;
  defect d = pick_defect<defect>(in);
  const ml::options opt = pick_options(in);

  if (((d == defect::q_rows || d == defect::out_rows) && rows == 0) ||
      (d == defect::kv_short && num_kv < 2))
    d = defect::none;
  if (d == defect::heads_zero) H = 0;
  if (d == defect::cap_zero) cap = 0;
  if (d == defect::cap_big) cap = ml::max_sparse_capacity + in.range(1, 3);
  const i64 block_arg = d == defect::block_bad ? in.pick({0, -8, 4, 12, 32, 64}) : block;
  const i64 cols = cap * block;

  // ks, ke (one longer when a defect says so), and the indices: mostly blocks near the valid
  // range of the row, -1 pads, and sometimes far or int32-edge values (masked, never read).
  const i64 ks_n = rows + (d == defect::ks_size ? 1 : 0),
            ke_n = rows + (d == defect::ke_size ? 1 : 0);
  guarded<i32> ks(ks_n), ke(ke_n);
  for (i64 r = 0; r < std::max(ks_n, ke_n); ++r) {
    const i32 s = in.int_near(-8, num_kv + 4);
    const i32 e = in.one_in(6) ? in.int_near(-8, num_kv + 8)
                               : static_cast<i32>(std::clamp<i64>(i64{s} + in.range(-4, 120),
                                                                  std::numeric_limits<i32>::min(),
                                                                  std::numeric_limits<i32>::max()));
    if (r < ks_n) ks[r] = s;
    if (r < ke_n) ke[r] = e;
  }
  ints_buf idx(rows, std::max<i64>(cap, 0), pick_stride(in, std::max<i64>(cap, 0), 3));
  const i64 max_block = num_kv / block + 2;
  for (i64 i = 0; i < idx.data.n; ++i) {
    const std::uint8_t mode = in.byte() % 8;
    idx.data[i] = mode == 0   ? -1
                  : mode == 1 ? in.int_near(-3, max_block + 3)
                              : static_cast<i32>(in.range(0, max_block));
  }

  content c(in);
  const i64 kv_rows = d == defect::kv_short ? in.range(1, num_kv - 1) : num_kv + kv_extra;
  const rows_buf<Format> kv(c, kv_rows, pick_stride(in, Format::data_bytes, 40),
                            pick_stride(in, Format::scale_bytes, 4));
  const auto q = q_buf<Format>(in, c, rows * H, d == defect::q_rows);
  const weights_buf<W> w(c, rows, H, pick_stride(in, H, 3));
  const auto out =
      output_for<O>(in, rows, std::max<i64>(cols, 0), d == defect::out_rows, d == defect::out_cols);

  const std::string context = std::string("sparse ") + combo + ": rows=" + std::to_string(rows) +
                              " cap=" + std::to_string(cap) + " B=" + std::to_string(block_arg) +
                              " num_kv=" + std::to_string(num_kv) +
                              " kv_rows=" + std::to_string(kv_rows) + " H=" + std::to_string(H) +
                              " defect=" + std::to_string(static_cast<int>(d)) +
                              " clean=" + std::to_string(opt.clean_logits);

  auto iv = idx.view();
  iv.cols = cap;
  i64 num_kv_arg = num_kv;
  break_named_view(in, d, breaks(defect::indices, iv));
  if (d == defect::num_kv_bad)
    num_kv_arg = in.one_in(2) ? 0 : -static_cast<i64>(in.range(1, 1 << 20));
  const std::span<const i32> ks_span(ks.data(), static_cast<std::size_t>(ks_n));
  const std::span<const i32> ke_span(ke.data(), static_cast<std::size_t>(ke_n));

  ml::sparse_mqa_metadata meta;
  const std::string meta_err = outcome(
      [&] {
        meta = ml::get_sparse_mqa_logits_metadata(ks_span, ke_span, num_kv_arg, iv, block_arg);
      },
      context + " (metadata)");
  if (metadata_defect(d)) return expect_metadata_rejected(meta_err, meta_where, context);
  expect_ok(out, context + " (metadata)", meta_err);
  if (d == defect::default_metadata) meta = ml::sparse_mqa_metadata{};

  auto qv = q.view();
  auto kvv = kv.view();
  auto wv = w.view();
  auto ov = out.view();
  break_named_view(in, d, breaks(defect::kv, kvv), breaks(defect::weights_or_output, wv, ov));
  auto call = [&] { ml::fp8_fp4_sparse_mqa_logits(qv, kvv, wv, meta, ov, opt); };
  if (d != defect::none) return expect_rejected(out, context, where, call);
  expect_ok(out, context, outcome(call, context));
  expect_matches(out, ref::sparse(q.ref_view(), kvv, wv, ks_span, ke_span, num_kv, iv, block),
                 opt.clean_logits, context);
}

}  // namespace

MQALOGITS_FUZZ_TARGET(run)
