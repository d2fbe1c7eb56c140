// Fuzzes get_paged_mqa_logits_metadata + fp8_fp4_paged_mqa_logits: B, next_n, page_kv, page
// stride, context lengths (int32 max included), block tables (garbage past every context, and
// sometimes in a slot that is read), max_context_len, worker counts and byte contents from the
// input, plus at most one deliberate defect per case, which must be rejected with the output
// untouched. Valid cases must match ref::paged and give the same bits with another schedule.
#include "fuzz_common.hpp"

namespace {

using namespace fuzz;

enum class defect {
  none,
  lens_negative,
  stale_schedule,
  schedule_page_kv,
  schedule_shape,
  max_context_len,
  bad_page,
  q_rows,
  heads_many,
  out_rows,
  out_cols,
  weights_or_output,  // break_weights_or_output
  cache,              // break_cache
  page_kv_unsupported,
  table_rows,
  table_no_cols,
  table,    // break_matrix
  lengths,  // break_matrix
  count
};

template <class Format, class W, class O>
void run(input& in, const char* combo) {
  constexpr const char* where = "fp8_fp4_paged_mqa_logits";
  constexpr const char* meta_where = "get_paged_mqa_logits_metadata";
  const i64 B = in.range(0, 4), next_n = in.range(1, 4);
  const i32 page_kv = in.pick({1, 3, 16, 32, 64, 128, 256, 1024});
  const i64 max_blocks = in.range(1, page_kv >= 128 ? 3 : page_kv < 32 ? 40 : 5);
  const i64 capacity = max_blocks * page_kv;
  const i64 num_pages = in.range(0, 6);
  const i64 page_bytes = i64{page_kv} * cache_buf<Format>::token_bytes;
  const i64 page_stride = pick_stride(in, page_bytes, 700);
  const i64 max_context_len = in.range(1, capacity + page_kv);
  const i64 rows = B * next_n;
  i64 H = in.range(1, 8);
  while (H > 1 && rows * max_context_len * H > 12000) --H;
  const int workers = static_cast<int>(in.range(1, 6));
  defect d = pick_defect<defect>(in);
  ml::options opt = pick_options(in);

  // Context lengths, and the table slots each request reads (the kernel reads only those below its
  // longest row's valid range; slots past it are never read).
  ints_buf lens(B, next_n, pick_stride(in, next_n, 2));
  std::vector<i64> read_slots(static_cast<std::size_t>(B), 0);
  for (i64 b = 0; b < B; ++b)
    for (i64 j = 0; j < next_n; ++j) {
      lens(b, j) = in.one_in(12) ? std::numeric_limits<i32>::max()
                                 : static_cast<i32>(in.range(0, capacity + page_kv));
      const i64 keys = std::min({i64{lens(b, j)}, capacity, max_context_len});
      read_slots[b] = std::max(read_slots[b], (keys + page_kv - 1) / page_kv);
    }
  bool any_read = false;
  for (i64 b = 0; b < B; ++b) any_read |= read_slots[b] > 0;

  if (((d == defect::lens_negative || d == defect::stale_schedule) && B == 0) ||
      (d == defect::bad_page && !any_read) ||
      ((d == defect::q_rows || d == defect::out_rows) && rows == 0))
    d = defect::none;
  if (d == defect::heads_many) H = ml::max_heads + 1;

  const i64 table_rows = B + (d == defect::table_rows ? 1 : 0);
  ints_buf table(table_rows, max_blocks, pick_stride(in, max_blocks, 3));
  bool table_ok = true;
  for (i64 b = 0; b < table_rows; ++b)
    for (i64 s = 0; s < table.stride && b * table.stride + s < table.data.n; ++s) {
      const bool read = b < B && s < read_slots[b];
      const bool garbage = num_pages == 0 || (read ? in.one_in(40) : in.one_in(2));
      table.data[b * table.stride + s] =
          garbage ? not_a_page(in, num_pages) : static_cast<i32>(in.range(0, num_pages - 1));
      if (read && garbage) table_ok = false;
    }
  if (d == defect::bad_page) {
    i64 b = in.range(0, B - 1);
    while (read_slots[b] == 0) b = (b + 1) % B;
    table(b, in.range(0, read_slots[b] - 1)) = not_a_page(in, num_pages);
  }

  content c(in);
  const cache_buf<Format> cache(c, num_pages, page_kv, page_stride);
  const auto q = q_buf<Format>(in, c, rows * H, d == defect::q_rows);
  const weights_buf<W> w(c, rows, H, pick_stride(in, H, 3));
  const auto out =
      output_for<O>(in, rows, max_context_len, d == defect::out_rows, d == defect::out_cols);

  const std::string context =
      std::string("paged ") + combo + ": B=" + std::to_string(B) +
      " next_n=" + std::to_string(next_n) + " H=" + std::to_string(H) +
      " page_kv=" + std::to_string(page_kv) + " max_blocks=" + std::to_string(max_blocks) +
      " pages=" + std::to_string(num_pages) +
      " max_context_len=" + std::to_string(max_context_len) +
      " workers=" + std::to_string(workers) + " defect=" + std::to_string(static_cast<int>(d)) +
      " table_ok=" + std::to_string(table_ok) + " clean=" + std::to_string(opt.clean_logits);

  auto lv = lens.view();
  // The schedule, made from the call's lengths unless the defect is a stale or mismatched one.
  ml::paged_mqa_schedule schedule;
  {
    ints_buf other(B + (d == defect::schedule_shape ? 1 : 0), next_n, next_n);
    for (i64 b = 0; b < other.rows; ++b)
      for (i64 j = 0; j < next_n; ++j) other(b, j) = b < B ? lens(b, j) : 0;
    if (d == defect::stale_schedule) {
      i32& e = other(in.range(0, B - 1), in.range(0, next_n - 1));
      e = e == std::numeric_limits<i32>::max() ? 0 : e + 1;
    }
    const i32 kv = d == defect::schedule_page_kv ? (page_kv == 64 ? 128 : 64) : page_kv;
    const std::string err =
        outcome([&] { schedule = ml::get_paged_mqa_logits_metadata(other.view(), kv, workers); },
                context + " (metadata)");
    expect_ok(out, context + " (metadata)", err);
    if (schedule.num_workers() != workers)
      finding(context + ": schedule has the wrong worker count");
  }

  auto qv = q.view();
  auto cv = cache.view();
  auto wv = w.view();
  auto tv = table.view();
  auto ov = out.view();
  i64 mcl = max_context_len;
  switch (d) {
    case defect::lens_negative: {
      // The metadata rejects it, and so does the kernel (with the schedule of the valid lengths).
      i32& e = lens(in.range(0, B - 1), in.range(0, next_n - 1));
      e = in.one_in(2) ? -1 : std::numeric_limits<i32>::min();
      ml::paged_mqa_schedule bad;
      const std::string err =
          outcome([&] { bad = ml::get_paged_mqa_logits_metadata(lv, page_kv, workers); }, context);
      if (err.rfind(meta_where, 0) != 0)
        finding(context + ": negative context length not rejected by the metadata: " + err);
      break;
    }
    case defect::max_context_len:
      mcl = in.one_in(2) ? 0 : -static_cast<i64>(in.range(1, 1 << 30));
      break;
    case defect::page_kv_unsupported:
      cv.page_kv = static_cast<i32>(in.pick({0, -64, 1025, 4096}));
      break;
    case defect::table_no_cols:
      tv.cols = 0;
      break;
    default:
      break;
  }
  break_named_view(in, d, breaks(defect::weights_or_output, wv, ov), breaks(defect::cache, cv),
                   breaks(defect::table, tv), breaks(defect::lengths, lv));

  // A context longer than its table or the output is an error, unless the call asks to mask the
  // positions past them (what the reference computes).
  bool long_context = false;
  for (i64 b = 0; b < B; ++b)
    for (i64 j = 0; j < next_n; ++j)
      long_context |= lens(b, j) > std::min(capacity, max_context_len);
  opt.truncate_long_contexts = long_context && in.one_in(2);
  auto call = [&] { ml::fp8_fp4_paged_mqa_logits(qv, cv, wv, lv, tv, schedule, mcl, ov, opt); };
  if (d != defect::none || !table_ok || (long_context && !opt.truncate_long_contexts))
    return expect_rejected(out, context + " long_context=" + std::to_string(long_context), where,
                           call);
  expect_ok(out, context, outcome(call, context));
  expect_matches(out, ref::paged(q.ref_view(), cv, wv, lv, tv, max_context_len), opt.clean_logits,
                 context);

  // Another schedule and executor: the same bits (results never depend on the schedule or thread
  // count).
  if (in.one_in(2)) {
    const out_buf<O> again(out.rows, out.cols, out.stride);
    const auto other = ml::get_paged_mqa_logits_metadata(lv, page_kv, workers % 5 + 1);
    ml::options opt2 = opt;
    opt2.executor = shared_pool();
    ml::fp8_fp4_paged_mqa_logits(qv, cv, wv, lv, tv, other, max_context_len, again.view(), opt2);
    if (out.data.n && std::memcmp(out.data.data(), again.data.data(),
                                  static_cast<std::size_t>(out.data.n) * sizeof(O)) != 0)
      finding(context + ": another schedule gave different bits");
  }
}

}  // namespace

MQALOGITS_FUZZ_TARGET(run)
