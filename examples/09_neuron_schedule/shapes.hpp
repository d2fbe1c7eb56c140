// DeepSeek-V3.2 / V4 / V4.1 indexer shapes (D = 128) on the neuron backend model, costed with a
// cost-only capture: the schedule is walked and counted, nothing is computed. Shared by
// example 09 and its test, so the test checks exactly what the example prints.
#pragma once

#include <cstdint>
#include <string>
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
        cache(static_cast<std::size_t>(batch * blocks * shape.page *
                                       ml::paged_cache_view<Format>::token_bytes)),
        w(static_cast<std::size_t>(rows() * shape.heads), 0.125f),
        lens(static_cast<std::size_t>(rows())),
        table(static_cast<std::size_t>(batch * blocks)),
        cv(cache.data(), batch * blocks, shape.page),
        lv(lens.data(), batch, shape.next_n),
        tv(table.data(), batch, blocks) {
    for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<std::int32_t>(i);
    for (std::int64_t r = 0; r < rows(); ++r)
      lens[static_cast<std::size_t>(r)] =
          static_cast<std::int32_t>(context - shape.next_n + 1 + r % shape.next_n);
  }
  decode_inputs(const decode_inputs&) = delete;  // the views point into this object
  std::int64_t rows() const { return batch * shape.next_n; }
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

// The same decode with the K cache converted to the Neuron-native MX layout (trn3).
template <class Gen, class Format>
ml::neuron_backend::report paged_decode_native(std::int64_t batch, std::int64_t context) {
  const decode_inputs<Format> in(batch, context);
  const auto native = ml::neuron_backend::to_native_paged_cache(in.cv, in.tv, in.lv);
  ml::logits_buffer<ml::bf16> out(batch, context);
  ml::neuron_backend::report rep;
  {
    ml::neuron_backend::capture cap(rep, {.cost_only = true});
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

struct shape_line {
  std::string line;
  ml::neuron_backend::report report;
};

// Every line example 09 prints for generation Gen.
template <class Gen>
std::vector<shape_line> lines() {
  std::vector<shape_line> out;
  auto add = [&](ml::neuron_backend::report r, const std::string& kernel, const std::string& s) {
    out.push_back({std::string(r.line(kernel, s)), r});
  };
  add(paged_decode<Gen, ml::mxfp8>(64, 8192), "paged-decode-mxfp8", "64x8192/H64/page64");
  add(paged_decode<Gen, ml::mxfp4>(64, 8192), "paged-decode-mxfp4", "64x8192/H64/page64");
  add(paged_decode<Gen, ml::mxfp8>(1, 65536), "paged-decode-mxfp8", "1x65536/H64/page64");
  add(paged_decode<Gen, ml::mxfp4>(1, 65536), "paged-decode-mxfp4", "1x65536/H64/page64");
  add(dense_prefill<Gen, ml::mxfp8>(4096, 4096), "dense-prefill-mxfp8", "4096x4096/H64");
  if constexpr (ml::neuron_backend::traits<Gen>::mx_matmul) {  // the native cache layout
    add(paged_decode_native<Gen, ml::mxfp8>(64, 8192), "paged-decode-mxfp8-native",
        "64x8192/H64/page64");
    add(paged_decode_native<Gen, ml::mxfp4>(64, 8192), "paged-decode-mxfp4-native",
        "64x8192/H64/page64");
    add(paged_decode_native<Gen, ml::mxfp8>(1, 65536), "paged-decode-mxfp8-native",
        "1x65536/H64/page64");
  }
  // The page sizes engines run (sglang pages DeepSeek V4.1's index cache by 128), and V4.1's
  // decode (32 index heads) with two query tokens per request (MTP).
  add(paged_decode<Gen, ml::mxfp8>(64, 8192, {}, {.page = 128}), "paged-decode-mxfp8",
      "64x8192/H64/page128");
  add(paged_decode<Gen, ml::mxfp8>(64, 8192, {}, {.page = 256}), "paged-decode-mxfp8",
      "64x8192/H64/page256");
  add(paged_decode<Gen, ml::mxfp8>(64, 8192, {}, {.heads = 32, .page = 128, .next_n = 2}),
      "paged-decode-mxfp8", "64x8192/H32/page128/next2");
  return out;
}

}  // namespace neuron_shapes
