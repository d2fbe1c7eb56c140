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
  idx_stride,
  idx_null,
  // rejected by fp8_fp4_sparse_mqa_logits
  default_metadata,
  kv_short,
  kv_null,
  kv_stride,
  kv_overflow,
  q_rows,
  heads_zero,
  w_null,
  out_rows,
  out_cols,
  out_overflow,
  count
};

bool metadata_defect(defect d) {
  return d >= defect::cap_zero && d <= defect::idx_null;
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

  if (((d == defect::idx_null || d == defect::q_rows || d == defect::w_null ||
        d == defect::out_rows) &&
       rows == 0) ||
      (d == defect::kv_short && num_kv < 2) || (d == defect::kv_overflow && num_kv + kv_extra < 2))
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
  const i64 q_rows = rows * H + (d == defect::q_rows ? (in.one_in(2) ? -1 : 1) : 0);
  const rows_buf<Format> q(c, q_rows, pick_stride(in, Format::data_bytes, 40),
                           pick_stride(in, Format::scale_bytes, 4), in.one_in(2));
  const weights_buf<W> w(c, rows, H, pick_stride(in, H, 3));
  const i64 out_rows = rows + (d == defect::out_rows ? (in.one_in(2) ? -1 : 1) : 0);
  const i64 out_cols =
      std::max<i64>(cols, 0) + (d == defect::out_cols ? (in.one_in(2) && cols > 0 ? -1 : 1) : 0);
  const out_buf<O> out(
      out_rows, out_cols,
      in.one_in(2) ? ml::logits_row_stride<O>(out_cols) : pick_stride(in, out_cols, 5));

  const std::string context = std::string("sparse ") + combo + ": rows=" + std::to_string(rows) +
                              " cap=" + std::to_string(cap) + " B=" + std::to_string(block_arg) +
                              " num_kv=" + std::to_string(num_kv) +
                              " kv_rows=" + std::to_string(kv_rows) + " H=" + std::to_string(H) +
                              " defect=" + std::to_string(static_cast<int>(d)) +
                              " clean=" + std::to_string(opt.clean_logits);

  auto iv = idx.view();
  iv.cols = cap;
  i64 num_kv_arg = num_kv;
  if (d == defect::idx_stride) iv.stride = in.range(-1, cap - 1);
  if (d == defect::idx_null) iv.data = nullptr;
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
  if (metadata_defect(d)) {
    if (meta_err.rfind(meta_where, 0) != 0)
      finding(context + ": metadata accepted a defect or named another function: " + meta_err);
    return;
  }
  expect_ok(out, context + " (metadata)", meta_err);
  if (d == defect::default_metadata) meta = ml::sparse_mqa_metadata{};

  auto qv = q.view();
  auto kvv = kv.view();
  auto wv = w.view();
  auto ov = out.view();
  switch (d) {
    case defect::kv_null:
      (in.one_in(2) || ml::scales_optional_v<Format> ? kvv.data : kvv.scales) = nullptr;
      break;
    case defect::kv_stride:
      kvv.data_stride = in.range(-1, Format::data_bytes - 1);
      break;
    case defect::kv_overflow:
      kvv.data_stride =  // + one row of data bytes overflows
          std::numeric_limits<i64>::max() - in.range(0, Format::data_bytes - 1);
      break;
    case defect::w_null:
      wv.data = nullptr;
      break;
    case defect::out_overflow:
      ov.stride = std::numeric_limits<i64>::max() / in.range(1, 4);
      if (ov.rows < 2 || ov.cols < 1) ov.rows = -1;  // a shape that cannot be valid instead
      break;
    default:
      break;
  }
  auto call = [&] { ml::fp8_fp4_sparse_mqa_logits(qv, kvv, wv, meta, ov, opt); };
  if (d != defect::none) return expect_rejected(out, context, where, call);
  expect_ok(out, context, outcome(call, context));
  expect_matches(out, ref::sparse(q.ref_view(), kvv, wv, ks_span, ke_span, num_kv, iv, block),
                 opt.clean_logits, context);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  input in(data, size);
  for_one_combination(
      in, [&]<class Format, class W, class O>(const char* what) { run<Format, W, O>(in, what); });
  return 0;
}
