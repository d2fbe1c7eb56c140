// Fuzzes get_paged_sparse_mqa_logits_metadata + fp8_fp4_paged_sparse_mqa_logits: rows, page_kv,
// sparse_block_kv, capacity, page stride, context lengths (int32 max included), block tables
// (garbage wherever no selected position reads them, sometimes where one does), block indices
// and byte contents from the input, plus at most one deliberate defect per case (rejected by the
// metadata or the kernel, output untouched), under either protocol. Valid cases must match
// ref::paged_sparse on the first call, and on a reuse call with new Q and weights against a
// different cache: with reread that cache is scored, with snapshot the first call's keys are; a
// call with the other format on the same metadata is scored (reread) or rejected (snapshot).
#include "fuzz_common.hpp"

namespace {

using namespace fuzz;

enum class defect {
  none,
  // rejected by get_paged_sparse_mqa_logits_metadata
  page_kv_bad,
  block_bad,
  indices_size,
  cap_zero,
  lens_size,
  lens_negative,
  table_rows,
  table_no_cols,
  table,    // break_matrix
  indices,  // break_matrix
  // rejected by fp8_fp4_paged_sparse_mqa_logits
  bad_page,
  cache_page_kv,
  default_metadata,
  q_rows,
  heads_many,
  weights_or_output,  // break_weights_or_output
  out_rows,
  out_cols,
  cache,  // break_cache
  count
};

bool metadata_defect(defect d) {
  return d >= defect::page_kv_bad && d <= defect::indices;
}

// A format whose snapshot differs: MXFP8 <-> MXFP4, FP8 per-token -> MXFP8 (same 132-byte
// token, another format: still rejected).
template <class Format>
using other_format = std::conditional_t<std::is_same_v<Format, ml::mxfp8>, ml::mxfp4, ml::mxfp8>;

template <class Format, class W, class O>
void run(input& in, const char* combo) {
  constexpr const char* where = "fp8_fp4_paged_sparse_mqa_logits";
  constexpr const char* meta_where = "get_paged_sparse_mqa_logits_metadata";
  const i64 rows = in.range(0, 4);
  const i64 block = in.pick({8, 16});
  const i32 page_kv = static_cast<i32>(block * in.pick({1, 3, 4, 8, 16}));
  i64 cap = in.range(1, 2 * page_kv / block);
  const auto protocol =
      in.one_in(2) ? ml::paged_sparse_protocol::snapshot : ml::paged_sparse_protocol::reread;
  const bool snapshot = protocol == ml::paged_sparse_protocol::snapshot;
  const i64 max_blocks = in.range(1, 4);
  const i64 capacity = max_blocks * page_kv;
  const i64 num_pages = in.range(0, 5);
  const i64 page_bytes = i64{page_kv} * cache_buf<Format>::token_bytes;
  const i64 page_stride = pick_stride(in, page_bytes, 700);
  i64 H = in.range(1, 8);
  while (H > 1 && rows * cap * block * H > 12000) --H;
  defect d = pick_defect<defect>(in);
  ml::options opt = pick_options(in);

  // Lengths and indices; the table slots read are those of the selected valid positions.
  const i64 lens_n = rows + (d == defect::lens_size ? 1 : 0);
  guarded<i32> lens(lens_n);
  for (i64 r = 0; r < lens_n; ++r)
    lens[r] = in.one_in(12) ? std::numeric_limits<i32>::max()
                            : static_cast<i32>(in.range(0, capacity + page_kv));
  ints_buf idx(rows, cap, pick_stride(in, cap, 3));
  for (i64 r = 0; r < rows; ++r) {
    const i64 blocks = (std::min<i64>(lens[r], capacity + page_kv) + block - 1) / block;
    for (i64 b = 0; b < idx.stride && r * idx.stride + b < idx.data.n; ++b) {
      const std::uint8_t mode = in.byte() % 8;
      idx.data[r * idx.stride + b] = mode == 0   ? -1
                                     : mode == 1 ? in.int_near(-3, blocks + 3)
                                                 : static_cast<i32>(in.range(0, blocks));
    }
  }
  std::vector<std::vector<bool>> read(static_cast<std::size_t>(rows),
                                      std::vector<bool>(static_cast<std::size_t>(max_blocks)));
  bool any_read = false;
  for (i64 r = 0; r < rows; ++r) {
    const i64 nb = std::min(cap, (i64{lens[r]} + block - 1) / block);
    for (i64 b = 0; b < nb; ++b) {
      if (idx(r, b) < 0) continue;
      for (i64 o = 0; o < block; ++o) {
        const i64 p = i64{idx(r, b)} * block + o;
        if (p < lens[r] && p < capacity) read[r][p / page_kv] = any_read = true;
      }
    }
  }

  if (((d == defect::lens_negative || d == defect::q_rows || d == defect::out_rows) && rows == 0) ||
      (d == defect::bad_page && !any_read))
    d = defect::none;
  if (d == defect::heads_many) H = ml::max_heads + 1;
  if (d == defect::lens_negative)
    lens[in.range(0, rows - 1)] = in.one_in(2) ? -1 : std::numeric_limits<i32>::min();

  const i64 table_rows = rows + (d == defect::table_rows ? 1 : 0);
  ints_buf table(table_rows, max_blocks, pick_stride(in, max_blocks, 3));
  bool table_ok = true;
  for (i64 r = 0; r < table_rows; ++r)
    for (i64 s = 0; s < table.stride && r * table.stride + s < table.data.n; ++s) {
      const bool is_read = r < rows && s < max_blocks && read[r][s];
      const bool garbage = num_pages == 0 || (is_read ? in.one_in(40) : in.one_in(2));
      table.data[r * table.stride + s] =
          garbage ? not_a_page(in, num_pages) : static_cast<i32>(in.range(0, num_pages - 1));
      if (is_read && garbage) table_ok = false;
    }
  if (d == defect::bad_page) {
    for (i64 r = in.range(0, rows - 1);; r = (r + 1) % rows) {
      i64 s = in.range(0, max_blocks - 1), n = 0;
      while (!read[r][s] && n++ < max_blocks) s = (s + 1) % max_blocks;
      if (read[r][s]) {
        table(r, s) = not_a_page(in, num_pages);
        break;
      }
    }
  }

  content c(in);
  const cache_buf<Format> cache(c, num_pages, page_kv, page_stride);
  const auto q = q_buf<Format>(in, c, rows * H, d == defect::q_rows);
  const weights_buf<W> w(c, rows, H, pick_stride(in, H, 3));
  const i64 cols = cap * block;
  const auto out = output_for<O>(in, rows, cols, d == defect::out_rows, d == defect::out_cols);

  const std::string context =
      std::string("paged_sparse ") + combo + ": rows=" + std::to_string(rows) +
      " page_kv=" + std::to_string(page_kv) + " B=" + std::to_string(block) +
      " cap=" + std::to_string(cap) + " max_blocks=" + std::to_string(max_blocks) +
      " pages=" + std::to_string(num_pages) + " H=" + std::to_string(H) +
      " defect=" + std::to_string(static_cast<int>(d)) + " table_ok=" + std::to_string(table_ok) +
      " clean=" + std::to_string(opt.clean_logits) + (snapshot ? " snapshot" : " reread");

  // The metadata, with the metadata defects applied to its arguments.
  auto tv = table.view();
  auto iv = idx.view();
  i32 page_kv_arg = page_kv;
  i64 block_arg = block;
  switch (d) {
    case defect::page_kv_bad:
      page_kv_arg = static_cast<i32>(in.pick({0, -16, -8, 4, 12, 100}));
      break;
    case defect::block_bad:
      block_arg = in.pick({0, -8, 4, 12, 32, 64});
      break;
    case defect::cap_zero:
      iv.cols = 0;
      break;
    case defect::table_no_cols:
      tv.cols = 0;
      break;
    default:
      break;
  }
  break_named_view(in, d, breaks(defect::table, tv), breaks(defect::indices, iv));
  const std::span<const i32> lens_span(lens.data(), static_cast<std::size_t>(lens_n));
  // DeepGEMM's request indices: none, or one distinct request per row (the table rows differ).
  std::vector<i32> requests;
  if (in.one_in(2) || d == defect::indices_size)
    for (i64 r = 0; r < rows + (d == defect::indices_size ? 1 : 0); ++r)
      requests.push_back(static_cast<i32>(3 * r + 1));
  ml::paged_sparse_mqa_metadata meta;
  const std::string meta_err = outcome(
      [&] {
        meta = ml::get_paged_sparse_mqa_logits_metadata(lens_span, tv, requests, page_kv_arg, iv,
                                                        block_arg, protocol);
      },
      context + " (metadata)");
  if (metadata_defect(d)) return expect_metadata_rejected(meta_err, meta_where, context);
  expect_ok(out, context + " (metadata)", meta_err);
  if (d == defect::default_metadata) meta = ml::paged_sparse_mqa_metadata{};

  auto qv = q.view();
  auto cv = cache.view();
  auto wv = w.view();
  auto ov = out.view();
  if (d == defect::cache_page_kv) cv.page_kv = page_kv == 64 ? 128 : 64;
  break_named_view(in, d, breaks(defect::weights_or_output, wv, ov), breaks(defect::cache, cv));
  // A row longer than its block table is an error, unless the call asks to mask the positions
  // past it (what the reference computes).
  bool long_context = false;
  for (i64 r = 0; r < rows; ++r) long_context |= lens[r] > capacity;
  opt.truncate_long_contexts = long_context && in.one_in(2);
  auto call = [&] { ml::fp8_fp4_paged_sparse_mqa_logits(qv, cv, wv, meta, ov, opt); };
  if (d == defect::none && table_ok && long_context && !opt.truncate_long_contexts) {
    expect_rejected(out, context + " (long context)", where, call);
    if (meta.has_snapshot()) finding(context + ": a rejected first call left a snapshot");
    return;
  }
  if (d != defect::none || !table_ok) {
    expect_rejected(out, context, where, call);
    if (d != defect::default_metadata && meta.has_snapshot())
      finding(context + ": a rejected first call left a snapshot");
    // A rejected first call leaves the metadata unsnapshotted: the same call is rejected again.
    if (d == defect::bad_page || !table_ok) expect_rejected(out, context + " (again)", where, call);
    return;
  }
  expect_ok(out, context, outcome(call, context));
  expect_matches(out, ref::paged_sparse(q.ref_view(), cv, wv, lens_span, tv, iv, block),
                 opt.clean_logits, context);
  if (meta.has_snapshot() != snapshot)
    finding(context + (snapshot ? ": no snapshot after the first call" : ": a reread snapshot"));

  // Reuse: new Q and weights against a different cache; with snapshot the first call's keys are
  // read (the cache may even lack pages), with reread the cache passed now.
  if (in.one_in(2)) {
    const cache_buf<Format> other_cache(c, snapshot ? in.range(0, 2) : num_pages, page_kv,
                                        page_bytes);
    const rows_buf<Format> q2(c, rows * H, Format::data_bytes, Format::scale_bytes, in.one_in(2));
    const weights_buf<W> w2(c, rows, H, H);
    const out_buf<O> out2(rows, cols, cols);
    const std::string ctx2 = context + " (reuse)";
    expect_ok(out2, ctx2,
              outcome(
                  [&] {
                    ml::fp8_fp4_paged_sparse_mqa_logits(q2.view(), other_cache.view(), w2.view(),
                                                        meta, out2.view(), opt);
                  },
                  ctx2));
    if (snapshot)
      expect_matches(out2,
                     ref::paged_sparse(q2.ref_view(), cv, w2.view(), lens_span, tv, iv, block),
                     opt.clean_logits, ctx2);
    else
      expect_matches(
          out2,
          ref::paged_sparse(q2.ref_view(), other_cache.view(), w2.view(), lens_span, tv, iv, block),
          opt.clean_logits, ctx2);
  } else if (!snapshot) {
    // The metadata holds no format: the same selection read as the other format is scored.
    using F2 = other_format<Format>;
    const cache_buf<F2> cache2(c, num_pages, page_kv, i64{page_kv} * cache_buf<F2>::token_bytes);
    const rows_buf<F2> q2(c, rows * H);
    const out_buf<O> out2(rows, cols, cols);
    const std::string ctx2 = context + " (other format)";
    expect_ok(out2, ctx2,
              outcome(
                  [&] {
                    ml::fp8_fp4_paged_sparse_mqa_logits(q2.view(), cache2.view(), wv, meta,
                                                        out2.view(), opt);
                  },
                  ctx2));
    expect_matches(out2,
                   ref::paged_sparse(q2.ref_view(), cache2.view(), wv, lens_span, tv, iv, block),
                   opt.clean_logits, ctx2);
  } else {
    // The snapshot holds this format: the other format on the same metadata is rejected.
    using F2 = other_format<Format>;
    const cache_buf<F2> cache2(c, num_pages, page_kv, i64{page_kv} * cache_buf<F2>::token_bytes);
    const rows_buf<F2> q2(c, rows * H);
    const out_buf<O> out2(rows, cols, cols);
    expect_rejected(out2, context + " (other format)", where, [&] {
      ml::fp8_fp4_paged_sparse_mqa_logits(q2.view(), cache2.view(), wv, meta, out2.view(), opt);
    });
  }
}

}  // namespace

MQALOGITS_FUZZ_TARGET(run)
