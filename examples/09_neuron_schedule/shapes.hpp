// DeepSeek-V3.2 indexer shapes (H = 64, D = 128) on the neuron backend model, costed with a
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

template <class Format>
std::string format_tag() {
  return std::is_same_v<Format, ml::mxfp4> ? "mxfp4" : "mxfp8";
}

// Paged decode: `batch` requests of one query token, each with `context` positions.
template <class Gen, class Format>
ml::neuron_backend::report paged_decode(std::int64_t batch, std::int64_t context,
                                        ml::neuron_backend::capture_options opt = {}) {
  const std::int64_t blocks = context / page_kv, rows = batch;
  std::vector<std::uint8_t> q(static_cast<std::size_t>(rows * heads * Format::data_bytes)),
      q_sf(static_cast<std::size_t>(rows * heads * Format::scale_bytes), 127);
  const std::int64_t token_bytes = ml::paged_cache_view<Format>::token_bytes;
  std::vector<std::uint8_t> cache(static_cast<std::size_t>(batch * blocks * page_kv * token_bytes));
  std::vector<float> w(static_cast<std::size_t>(rows * heads), 0.125f);
  std::vector<std::int32_t> lens(static_cast<std::size_t>(batch),
                                 static_cast<std::int32_t>(context));
  std::vector<std::int32_t> table(static_cast<std::size_t>(batch * blocks));
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<std::int32_t>(i);
  const ml::paged_cache_view<Format> cv(cache.data(), batch * blocks, page_kv);
  const ml::matrix_view<const std::int32_t> lv(lens.data(), batch, 1),
      tv(table.data(), batch, blocks);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lv, page_kv, 1);
  ml::logits_buffer<ml::bf16> out(rows, context);
  ml::neuron_backend::report rep;
  opt.cost_only = true;
  {
    ml::neuron_backend::capture cap(rep, opt);
    ml::fp8_fp4_paged_mqa_logits(
        ml::backend::neuron<Gen>{}, ml::rows_view<Format>(q.data(), q_sf.data(), rows * heads), cv,
        ml::matrix_view<const float>(w.data(), rows, heads), lv, tv, schedule, context, out.view());
  }
  return rep;
}

// The same decode with the K cache converted to the Neuron-native MX layout (trn3).
template <class Gen, class Format>
ml::neuron_backend::report paged_decode_native(std::int64_t batch, std::int64_t context) {
  const std::int64_t blocks = context / page_kv, rows = batch;
  std::vector<std::uint8_t> q(static_cast<std::size_t>(rows * heads * Format::data_bytes)),
      q_sf(static_cast<std::size_t>(rows * heads * Format::scale_bytes), 127);
  const std::int64_t token_bytes = ml::paged_cache_view<Format>::token_bytes;
  std::vector<std::uint8_t> cache(static_cast<std::size_t>(batch * blocks * page_kv * token_bytes));
  std::vector<float> w(static_cast<std::size_t>(rows * heads), 0.125f);
  std::vector<std::int32_t> lens(static_cast<std::size_t>(batch),
                                 static_cast<std::int32_t>(context));
  std::vector<std::int32_t> table(static_cast<std::size_t>(batch * blocks));
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<std::int32_t>(i);
  const ml::paged_cache_view<Format> cv(cache.data(), batch * blocks, page_kv);
  const ml::matrix_view<const std::int32_t> lv(lens.data(), batch, 1),
      tv(table.data(), batch, blocks);
  const auto native = ml::neuron_backend::to_native_paged_cache(cv, tv, lv);
  ml::logits_buffer<ml::bf16> out(rows, context);
  ml::neuron_backend::report rep;
  {
    ml::neuron_backend::capture cap(rep, {.cost_only = true});
    ml::neuron_backend::fp8_fp4_paged_mqa_logits_native(
        ml::backend::neuron<Gen>{}, ml::rows_view<Format>(q.data(), q_sf.data(), rows * heads),
        native, ml::matrix_view<const float>(w.data(), rows, heads), lv, context, out.view());
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
  return out;
}

}  // namespace neuron_shapes
