// DeepSeek-V3.2 / V4 / V4.1 indexer shapes (D = 128) on the neuron backend model, costed with a
// cost-only capture: the schedule is walked and counted, nothing is computed. Shared by
// example 09 and its test, so the test checks exactly what the example prints.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <mqalogits/neuron.hpp>

namespace neuron_shapes {

namespace ml = mqalogits;

inline constexpr std::int64_t heads = 64;
inline constexpr std::int32_t page_kv = 64;

// A decode line's model shape: index heads, page size and query tokens per request (next_n).
// DeepSeek V3.2 and V4 index with 64 heads, V4.1 with 32; engines page the index cache by 64
// (vLLM) or 128 (sglang's V4.1 cache).
struct decode_shape {
  std::int64_t heads = neuron_shapes::heads;
  std::int32_t page = page_kv;
  std::int64_t next_n = 1;
  // Every request's block table names the same pages: a cost-only line costs the pages each
  // request reads, wherever they sit, and the cache stays one request long.
  bool shared_pages = false;
};

template <class Format>
std::string format_tag() {
  return std::is_same_v<Format, ml::mxfp4> ? "mxfp4" : "mxfp8";
}

// The inputs of a paged decode: `batch` requests of next_n query tokens, each with `context`
// positions (the last token sees all of them) in pages of their own (request b's pages follow
// request b - 1's).
template <class Format>
struct decode_inputs {
  decode_shape shape;
  std::int64_t batch, blocks;
  std::vector<std::uint8_t> q, q_sf, cache;
  std::vector<float> w;
  std::vector<std::int32_t> lens, table;
  ml::paged_cache_view<Format> cv;
  ml::matrix_view<const std::int32_t> lv, tv;

  decode_inputs(std::int64_t batch_, std::int64_t context, decode_shape shape_ = {})
      : shape(shape_),
        batch(batch_),
        blocks((context + shape.page - 1) / shape.page),
        q(static_cast<std::size_t>(rows() * shape.heads * Format::data_bytes)),
        q_sf(static_cast<std::size_t>(rows() * shape.heads * Format::scale_bytes), 127),
        cache(static_cast<std::size_t>(pages() * shape.page *
                                       ml::paged_cache_view<Format>::token_bytes)),
        w(static_cast<std::size_t>(rows() * shape.heads), 0.125f),
        lens(static_cast<std::size_t>(rows())),
        table(static_cast<std::size_t>(batch * blocks)),
        cv(cache.data(), pages(), shape.page),
        lv(lens.data(), batch, shape.next_n),
        tv(table.data(), batch, blocks) {
    for (std::size_t i = 0; i < table.size(); ++i)
      table[i] = static_cast<std::int32_t>(static_cast<std::int64_t>(i) % pages());
    for (std::int64_t r = 0; r < rows(); ++r)
      lens[static_cast<std::size_t>(r)] =
          static_cast<std::int32_t>(context - shape.next_n + 1 + r % shape.next_n);
  }
  decode_inputs(const decode_inputs&) = delete;  // the views point into this object
  std::int64_t rows() const { return batch * shape.next_n; }
  std::int64_t pages() const { return shape.shared_pages ? blocks : batch * blocks; }
  ml::rows_view<Format> q_view() const {
    return ml::rows_view<Format>(q.data(), q_sf.data(), rows() * shape.heads);
  }
  ml::matrix_view<const float> w_view() const {
    return ml::matrix_view<const float>(w.data(), rows(), shape.heads);
  }
};

// Paged decode: `batch` requests of next_n query tokens, each with `context` positions.
template <class Gen, class Format>
ml::neuron_backend::report paged_decode(std::int64_t batch, std::int64_t context,
                                        ml::neuron_backend::capture_options opt = {},
                                        decode_shape shape = {}) {
  const decode_inputs<Format> in(batch, context, shape);
  const auto schedule = ml::get_paged_mqa_logits_metadata(in.lv, shape.page, 1);
  ml::logits_buffer<ml::bf16> out(in.rows(), in.blocks * shape.page);
  ml::neuron_backend::report rep;
  opt.cost_only = true;
  {
    ml::neuron_backend::capture cap(rep, opt);
    ml::fp8_fp4_paged_mqa_logits(ml::backend::neuron<Gen>{}, in.q_view(), in.cv, in.w_view(), in.lv,
                                 in.tv, schedule, in.blocks * shape.page, out.view());
  }
  return rep;
}

// The same decode called as engines call it for the indexer's selection: the top k columns of
// each row (ml::topk), the selection costed with the logits (nisa.topk on GpSimd).
template <class Gen, class Format>
ml::neuron_backend::report paged_decode_topk(std::int64_t batch, std::int64_t context,
                                             std::int64_t k,
                                             ml::neuron_backend::capture_options opt = {},
                                             decode_shape shape = {}) {
  const decode_inputs<Format> in(batch, context, shape);
  const auto schedule = ml::get_paged_mqa_logits_metadata(in.lv, shape.page, 1);
  std::vector<std::int32_t> picked(static_cast<std::size_t>(in.rows() * k));
  ml::neuron_backend::report rep;
  opt.cost_only = true;
  {
    ml::neuron_backend::capture cap(rep, opt);
    ml::fp8_fp4_paged_mqa_logits(
        ml::backend::neuron<Gen>{}, in.q_view(), in.cv, in.w_view(), in.lv, in.tv, schedule,
        in.blocks * shape.page,
        ml::topk(ml::matrix_view<std::int32_t>(picked.data(), in.rows(), k)));
  }
  return rep;
}

// DeepSeek V4.1's candidate source as engines call it: the decode with its top k columns and
// n candidate blocks of `block` positions per row (ml::topk_and_candidates). The blocks come from
// ml::candidate_blocks fed the model's logits; the call's report counts their selection (VectorE
// block max, nisa.topk of the blocks) beside the top-k's.
template <class Gen, class Format>
ml::neuron_backend::report paged_decode_candidates(std::int64_t batch, std::int64_t context,
                                                   std::int64_t k, std::int64_t n,
                                                   std::int64_t block,
                                                   ml::neuron_backend::capture_options opt,
                                                   decode_shape shape) {
  const decode_inputs<Format> in(batch, context, shape);
  const auto schedule = ml::get_paged_mqa_logits_metadata(in.lv, shape.page, 1);
  std::vector<std::int32_t> picked(static_cast<std::size_t>(in.rows() * k)),
      blocks(static_cast<std::size_t>(in.rows() * n));
  ml::neuron_backend::report rep;
  opt.cost_only = true;
  {
    ml::neuron_backend::capture cap(rep, opt);
    ml::fp8_fp4_paged_mqa_logits(
        ml::backend::neuron<Gen>{}, in.q_view(), in.cv, in.w_view(), in.lv, in.tv, schedule,
        in.blocks * shape.page,
        ml::topk_and_candidates(
            ml::topk(ml::matrix_view<std::int32_t>(picked.data(), in.rows(), k)),
            ml::candidate_blocks(ml::matrix_view<std::int32_t>(blocks.data(), in.rows(), n),
                                 block)));
  }
  return rep;
}

// DeepSeek V4.1's consumer layers: the paged-sparse kernel over the `cap` selected blocks of
// `block` positions of each of `batch` rows (one request each, `context` positions; the odd
// blocks, the newest among them), with the top k of the cap x block candidate columns.
template <class Gen, class Format>
ml::neuron_backend::report paged_sparse_topk(std::int64_t batch, std::int64_t context,
                                             std::int64_t cap, std::int64_t block, std::int64_t k,
                                             ml::neuron_backend::capture_options opt,
                                             decode_shape shape) {
  const decode_inputs<Format> in(batch, context, shape);
  std::vector<std::int32_t> idx(static_cast<std::size_t>(batch * cap));
  for (std::size_t i = 0; i < idx.size(); ++i)
    idx[i] = static_cast<std::int32_t>(2 * (static_cast<std::int64_t>(i) % cap) + 1);
  const auto meta = ml::get_paged_sparse_mqa_logits_metadata(
      in.lens, in.tv, shape.page, ml::matrix_view<const std::int32_t>(idx.data(), batch, cap),
      block);
  std::vector<std::int32_t> picked(static_cast<std::size_t>(batch * k));
  ml::neuron_backend::report rep;
  opt.cost_only = true;
  {
    ml::neuron_backend::capture c(rep, opt);
    ml::fp8_fp4_paged_sparse_mqa_logits(
        ml::backend::neuron<Gen>{}, in.q_view(), in.cv, in.w_view(), meta,
        ml::topk(ml::matrix_view<std::int32_t>(picked.data(), batch, k)));
  }
  return rep;
}

// The same decode with the K cache converted to the Neuron-native MX layout (trn3).
template <class Gen, class Format>
ml::neuron_backend::report paged_decode_native(std::int64_t batch, std::int64_t context,
                                               ml::neuron_backend::capture_options opt = {}) {
  const decode_inputs<Format> in(batch, context);
  const auto native = ml::neuron_backend::to_native_paged_cache(in.cv, in.tv, in.lv);
  ml::logits_buffer<ml::bf16> out(batch, context);
  ml::neuron_backend::report rep;
  {
    opt.cost_only = true;
    ml::neuron_backend::capture cap(rep, opt);
    ml::neuron_backend::fp8_fp4_paged_mqa_logits_native(
        ml::backend::neuron<Gen>{}, in.q_view(), native, in.w_view(), in.lv, context, out.view());
  }
  return rep;
}

// Dense prefill: num_q query tokens against n keys, causal ranges.
template <class Gen, class Format>
ml::neuron_backend::report dense_prefill(std::int64_t num_q, std::int64_t n,
                                         ml::neuron_backend::capture_options opt = {}) {
  std::vector<std::uint8_t> q(static_cast<std::size_t>(num_q * heads * Format::data_bytes)),
      q_sf(static_cast<std::size_t>(num_q * heads * Format::scale_bytes), 127),
      kv(static_cast<std::size_t>(n * Format::data_bytes)),
      kv_sf(static_cast<std::size_t>(n * Format::scale_bytes), 127);
  std::vector<float> w(static_cast<std::size_t>(num_q * heads), 0.125f);
  std::vector<std::int32_t> ks(static_cast<std::size_t>(num_q), 0),
      ke(static_cast<std::size_t>(num_q));
  for (std::int64_t i = 0; i < num_q; ++i)
    ke[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(n - num_q + 1 + i);
  ml::logits_buffer<ml::bf16> out(num_q, n);
  ml::neuron_backend::report rep;
  opt.cost_only = true;
  {
    ml::neuron_backend::capture cap(rep, opt);
    ml::fp8_fp4_mqa_logits(
        ml::backend::neuron<Gen>{}, ml::rows_view<Format>(q.data(), q_sf.data(), num_q * heads),
        ml::rows_view<Format>(kv.data(), kv_sf.data(), n),
        ml::matrix_view<const float>(w.data(), num_q, heads), ks, ke, n, out.view());
  }
  return rep;
}

// One line of example 09: `line` the report's own (report::line), `printed` that line with the
// floor and, on trn2 / trn3, the busier core's estimate under LNC = 2 (`lnc2`), as
//   neuron <gen> <kernel> <shape> estimate N us bound E roofline M us floor F us [lnc2 X us]
struct shape_line {
  std::string line;
  ml::neuron_backend::report report;
  std::string printed;
  ml::neuron_backend::report lnc2;  // calls = 0 on trn1
};

// The line of `run(options)`'s report, with the floor and (trn2 / trn3) LNC = 2.
template <class Gen, class Run>
void add_line(std::vector<shape_line>& out, Run run, const std::string& kernel,
              const std::string& shape) {
  using options = ml::neuron_backend::capture_options;
  shape_line l{{}, run(options{}), {}, {}};
  l.line = std::string(l.report.line(kernel, shape));
  char buf[96];
  std::snprintf(buf, sizeof buf, " floor %.2f us", l.report.floor_seconds() * 1e6);
  l.printed = l.line + buf;
  if constexpr (ml::neuron_backend::traits<Gen>::max_logical_cores > 1) {
    l.lnc2 = run(options{.logical_cores = 2});
    std::snprintf(buf, sizeof buf, " lnc2 %.2f us", l.lnc2.estimated_seconds() * 1e6);
    l.printed += buf;
  }
  out.push_back(std::move(l));
}

// Every line example 09 prints for generation Gen.
template <class Gen>
std::vector<shape_line> lines() {
  using options = ml::neuron_backend::capture_options;
  std::vector<shape_line> out;
  const auto add = [&](auto run, const std::string& kernel, const std::string& s) {
    add_line<Gen>(out, run, kernel, s);
  };
  using ml::mxfp4, ml::mxfp8;
  add([](options o) { return paged_decode<Gen, mxfp8>(64, 8192, o); }, "paged-decode-mxfp8",
      "64x8192/H64/page64");
  add([](options o) { return paged_decode<Gen, mxfp4>(64, 8192, o); }, "paged-decode-mxfp4",
      "64x8192/H64/page64");
  add([](options o) { return paged_decode<Gen, mxfp8>(1, 65536, o); }, "paged-decode-mxfp8",
      "1x65536/H64/page64");
  add([](options o) { return paged_decode<Gen, mxfp4>(1, 65536, o); }, "paged-decode-mxfp4",
      "1x65536/H64/page64");
  add([](options o) { return dense_prefill<Gen, mxfp8>(4096, 4096, o); }, "dense-prefill-mxfp8",
      "4096x4096/H64");
  if constexpr (ml::neuron_backend::traits<Gen>::mx_matmul) {  // the native cache layout
    add([](options o) { return paged_decode_native<Gen, mxfp8>(64, 8192, o); },
        "paged-decode-mxfp8-native", "64x8192/H64/page64");
    add([](options o) { return paged_decode_native<Gen, mxfp4>(64, 8192, o); },
        "paged-decode-mxfp4-native", "64x8192/H64/page64");
    add([](options o) { return paged_decode_native<Gen, mxfp8>(1, 65536, o); },
        "paged-decode-mxfp8-native", "1x65536/H64/page64");
  }
  // The page sizes engines run (sglang pages DeepSeek V4.1's index cache by 128), and V4.1's
  // decode (32 index heads) with two query tokens per request (MTP).
  add([](options o) { return paged_decode<Gen, mxfp8>(64, 8192, o, {.page = 128}); },
      "paged-decode-mxfp8", "64x8192/H64/page128");
  add([](options o) { return paged_decode<Gen, mxfp8>(64, 8192, o, {.page = 256}); },
      "paged-decode-mxfp8", "64x8192/H64/page256");
  add(
      [](options o) {
        return paged_decode<Gen, mxfp8>(64, 8192, o, {.heads = 32, .page = 128, .next_n = 2});
      },
      "paged-decode-mxfp8", "64x8192/H32/page128/next2");
  return out;
}

// Example 09's decode lines with the selection, as engines run the indexer: DeepSeek V3.2
// keeps 2048 columns per row, V4 512 or 1024 (64 heads), V4.1 512 (32 heads, pages of 128,
// two query tokens per request).
template <class Gen>
std::vector<shape_line> topk_lines() {
  using options = ml::neuron_backend::capture_options;
  using ml::mxfp8;
  std::vector<shape_line> out;
  const auto add = [&](auto run, const char* shape) {
    add_line<Gen>(out, run, "paged-decode-mxfp8", shape);
  };
  add([](options o) { return paged_decode_topk<Gen, mxfp8>(64, 8192, 2048, o); },
      "64x8192/H64/page64/topk2048");
  add([](options o) { return paged_decode_topk<Gen, mxfp8>(64, 8192, 1024, o); },
      "64x8192/H64/page64/topk1024");
  add([](options o) { return paged_decode_topk<Gen, mxfp8>(64, 8192, 512, o); },
      "64x8192/H64/page64/topk512");
  add(
      [](options o) {
        return paged_decode_topk<Gen, mxfp8>(64, 8192, 512, o,
                                             {.heads = 32, .page = 128, .next_n = 2});
      },
      "64x8192/H32/page128/next2/topk512");
  // V4.1 as engines run it at 32768 positions: the candidate source's decode with its top-512
  // and 2048 candidate blocks of 8, then a consumer layer's paged-sparse kernel over those
  // 16384 candidate columns with its own top-512.
  static constexpr decode_shape v41{.heads = 32, .page = 128, .shared_pages = true};
  add(
      [](options o) {
        return paged_decode_candidates<Gen, mxfp8>(64, 32768, 512, 2048, 8, o, v41);
      },
      "64x32768/H32/page128/topk512/blocks8x2048");
  add_line<Gen>(
      out, [](options o) { return paged_sparse_topk<Gen, mxfp8>(64, 32768, 2048, 8, 512, o, v41); },
      "paged-sparse-mxfp8", "64x16384/H32/page128/blocks8/topk512");
  return out;
}

}  // namespace neuron_shapes
