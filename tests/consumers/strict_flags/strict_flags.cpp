// Every public template of mqalogits instantiated once per combination, for a consumer that
// compiles with strict warnings (-Wall -Wextra -Wpedantic -Wshadow -Wconversion
// -Wsign-conversion -Wold-style-cast -Wdouble-promotion -Werror) and takes the headers with a
// plain -I: the four kernels and the two legacy names x {MXFP8, MXFP4, FP8 per-token} x
// {float, bf16, fp16} weights x {float, bf16} logits and the top-k output on the host backend and
// the three NeuronCore generations, the metadata functions, the quantizers, the paged-cache writes,
// the ops around the kernels, the thread pool, and (when Eigen is found) the Eigen interop.
// Compiled only, never run. With STRICT_FLAGS_HOST_ONLY, the host kernels alone: the only code that
// differs between host paths.
#include <cstdint>
#include <span>
#include <vector>

#include <mqalogits/neuron.hpp>
#if defined(STRICT_FLAGS_EIGEN)
#include <mqalogits/interop/eigen.hpp>
#endif

namespace ml = mqalogits;

namespace {

template <class Backend, class Format, class W, class O>
void kernels(const ml::rows_view<Format>& q, const ml::rows_view<Format>& kv,
             const ml::paged_cache_view<Format>& cache, ml::matrix_view<const W> w,
             ml::matrix_view<O> out, std::span<const std::int32_t> ks,
             std::span<const std::int32_t> ke, ml::matrix_view<const std::int32_t> lens,
             ml::matrix_view<const std::int32_t> table, ml::matrix_view<const std::int32_t> idx,
             ml::thread_pool& pool) {
  const ml::options opt{.executor = pool, .clean_logits = false};
  ml::fp8_fp4_mqa_logits(Backend{}, q, kv, w, ks, ke, 0, out, opt);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens, cache.page_kv, 2);
  ml::fp8_fp4_paged_mqa_logits(Backend{}, q, cache, w, lens, table, schedule, 64, out, opt);
  const auto varlen = ml::get_paged_mqa_logits_metadata(lens, cache.page_kv, 2, ks);
  ml::fp8_fp4_paged_mqa_logits(Backend{}, q, cache, w, lens, table, varlen, 64, out, ks, opt);
  const auto meta = ml::get_sparse_mqa_logits_metadata(ks, ke, kv.rows, idx, 16);
  ml::fp8_fp4_sparse_mqa_logits(Backend{}, q, kv, w, meta, out, opt);
  const auto pmeta = ml::get_paged_sparse_mqa_logits_metadata(ks, table, cache.page_kv, idx, 16);
  ml::fp8_fp4_paged_sparse_mqa_logits(Backend{}, q, cache, w, pmeta, out, opt);
  // int64 index arrays, where the kernels read them in place or the metadata copies them.
  const std::vector<std::int64_t> ks64(ks.begin(), ks.end()), ke64(ke.begin(), ke.end());
  std::vector<std::int64_t> idx64(static_cast<std::size_t>(idx.rows * idx.cols)),
      table64(static_cast<std::size_t>(table.rows * table.cols));
  const ml::matrix_view<const std::int64_t> idx64_view(idx64.data(), idx.rows, idx.cols),
      table64_view(table64.data(), table.rows, table.cols);
  ml::fp8_fp4_mqa_logits(Backend{}, q, kv, w, ks64, ke64, 0, out, opt);
  const auto meta64 = ml::get_sparse_mqa_logits_metadata(std::span<const std::int64_t>(ks64),
                                                         std::span<const std::int64_t>(ke64),
                                                         kv.rows, idx64_view, 8, true);
  ml::fp8_fp4_sparse_mqa_logits(Backend{}, q, kv, w, meta64, out, opt);
  const auto pmeta64 = ml::get_paged_sparse_mqa_logits_metadata(
      std::span<const std::int64_t>(ks64), table64_view, std::span<const std::int64_t>(ke64),
      cache.page_kv, idx64_view, 8, ml::paged_sparse_protocol::snapshot);
  ml::fp8_fp4_paged_sparse_mqa_logits(Backend{}, q, cache, w, pmeta64, out, opt);
  if constexpr (std::is_same_v<O, float>) {  // the top-k output, once per weight type
    std::vector<std::int32_t> indices(static_cast<std::size_t>(out.rows * 4));
    std::vector<float> values(indices.size());
    const ml::matrix_view<std::int32_t> iv(indices.data(), out.rows, 4);
    const ml::matrix_view<float> vv(values.data(), out.rows, 4);
    ml::fp8_fp4_mqa_logits(Backend{}, q, kv, w, ks, ke, 0, ml::topk(iv), opt);
    ml::fp8_fp4_paged_mqa_logits(Backend{}, q, cache, w, lens, table, schedule, 64,
                                 ml::topk(iv, vv, ml::topk_index::slot), opt);
    ml::fp8_fp4_sparse_mqa_logits(Backend{}, q, kv, w, meta, ml::topk(iv, vv), opt);
    ml::fp8_fp4_paged_sparse_mqa_logits(Backend{}, q, cache, w, pmeta, ml::topk(iv, vv), opt);
  }
  if constexpr (std::is_same_v<Format, ml::fp8_per_token> && std::is_same_v<O, float>) {
    ml::fp8_mqa_logits(Backend{}, q, kv, w, ks, ke, true, 0, out, opt);
    ml::fp8_paged_mqa_logits(Backend{}, q, cache, w, lens, table, schedule, 64, false, out, opt);
    ml::fp8_paged_mqa_logits(Backend{}, q, cache, w, lens, table, varlen, 64, false, out, ks, opt);
  }
}

template <class Backend, class Format>
void every_type(const std::uint8_t* bytes, ml::thread_pool& pool) {
  const ml::rows_view<Format> rows(bytes, bytes, 64);
  const ml::paged_cache_view<Format> cache(bytes, 4, 64);
  const std::int32_t* ints = reinterpret_cast<const std::int32_t*>(bytes);
  const std::span<const std::int32_t> ks(ints, 4), ke(ints, 4);
  const ml::matrix_view<const std::int32_t> lens(ints, 4, 1), table(ints, 4, 2), idx(ints, 4, 8);
  const ml::matrix_view<const float> wf(reinterpret_cast<const float*>(bytes), 4, 16);
  const ml::matrix_view<const ml::bf16> wb(reinterpret_cast<const ml::bf16*>(bytes), 4, 16);
  ml::logits_buffer<float> of(4, 64);
  ml::logits_buffer<ml::bf16> ob(4, 64, 1024);
  kernels<Backend>(rows, rows, cache, wf, of.view(), ks, ke, lens, table, idx, pool);
  kernels<Backend>(rows, rows, cache, wf, ob.view(), ks, ke, lens, table, idx, pool);
  kernels<Backend>(rows, rows, cache, wb, of.view(), ks, ke, lens, table, idx, pool);
  kernels<Backend>(rows, rows, cache, wb, ob.view(), ks, ke, lens, table, idx, pool);
  const ml::matrix_view<const ml::fp16> wh(reinterpret_cast<const ml::fp16*>(bytes), 4, 16);
  kernels<Backend>(rows, rows, cache, wh, of.view(), ks, ke, lens, table, idx, pool);
  kernels<Backend>(rows, rows, cache, wh, ob.view(), ks, ke, lens, table, idx, pool);
}

template <class Backend>
void every_format(const std::uint8_t* bytes, ml::thread_pool& pool) {
  every_type<Backend, ml::mxfp8>(bytes, pool);
  every_type<Backend, ml::mxfp4>(bytes, pool);
  every_type<Backend, ml::fp8_per_token>(bytes, pool);
}

template <class Format, class T>
void quantizers(std::vector<T>& x, std::uint8_t* bytes) {
  const auto q = ml::quantize_rows<Format>(std::span<const T>(x));
  const auto qm = ml::quantize_rows<Format>(ml::matrix_view<const T>(x.data(), 1, 128));
  ml::quantize_rows_into<Format>(std::span<const T>(x), bytes, bytes + 256);
  ml::quantize_rows_into<Format>(ml::matrix_view<const T>(x.data(), 1, 128), bytes, bytes + 256,
                                 Format::data_bytes, Format::scale_bytes);
  const ml::mutable_paged_cache<Format> cache(bytes, 2, 64);
  const std::int32_t slots32[1] = {3};
  const std::int64_t slots64[1] = {3};
  ml::store_into_pages(ml::matrix_view<const T>(x.data(), 1, 128),
                       std::span<const std::int32_t>(slots32), cache);
  ml::store_into_pages(ml::matrix_view<const T>(x.data(), 1, 128),
                       std::span<const std::int64_t>(slots64), cache);
  ml::store_into_pages(q.view(), std::span<const std::int64_t>(slots64), cache);
  if constexpr (std::is_same_v<Format, ml::fp8_per_token>) {
    const auto vllm = ml::vllm_indexer_k_scaling(true);
    const auto qv = ml::quantize_rows<Format>(std::span<const T>(x), vllm);
    ml::quantize_rows_into<Format>(ml::matrix_view<const T>(x.data(), 1, 128), bytes, bytes + 256,
                                   Format::data_bytes, Format::scale_bytes, vllm);
    ml::store_into_pages(ml::matrix_view<const T>(x.data(), 1, 128),
                         std::span<const std::int64_t>(slots64), cache, vllm);
    (void)qv;
  }
  (void)qm;
}

// The ops around the kernels: the prefill gather, Q quantisation with folded weights, the
// DeepSeek-V4 MXFP4 writes.
template <class T>
void engine_ops(std::vector<T>& x, std::uint8_t* bytes) {
  const std::int32_t table32[1] = {0}, cu32[2] = {0, 1};
  const std::int64_t table64[1] = {0}, cu64[2] = {0, 1}, slots64[1] = {3};
  const ml::paged_cache_view<ml::fp8_per_token> cache(bytes, 1, 64);
  ml::gather_from_pages(cache, ml::matrix_view<const std::int32_t>(table32, 1, 1),
                        std::span<const std::int32_t>(cu32), bytes + 9000, bytes + 9200, 1);
  ml::gather_from_pages(cache, ml::matrix_view<const std::int64_t>(table64, 1, 1),
                        std::span<const std::int64_t>(cu64), bytes + 9000, bytes + 9200, 1);
  std::vector<float> w(1, 1.0f), w_out(1);
  ml::quantize_q_fold_weights(
      ml::matrix_view<const T>(x.data(), 1, 128), ml::matrix_view<const float>(w.data(), 1, 1),
      bytes, 0, ml::matrix_view<float>(w_out.data(), 1, 1), 0.5f, 0.125f, ml::vllm_v4_q_scaling());
  ml::scale_weights(ml::matrix_view<const float>(w.data(), 1, 1),
                    ml::matrix_view<float>(w_out.data(), 1, 1), 0.5f, 0.125f);
  ml::quantize_rows_vllm_mxfp4(ml::matrix_view<const T>(x.data(), 1, 128), bytes, bytes + 64);
  ml::store_into_pages_vllm_mxfp4(ml::matrix_view<const T>(x.data(), 1, 128),
                                  std::span<const std::int64_t>(slots64),
                                  ml::mutable_paged_cache<ml::mxfp4>(bytes, 2, 64));
}

}  // namespace

// The entry point a consumer would call; the translation unit is only compiled.
void strict_flags_instantiate(std::uint8_t* bytes) {
  ml::thread_pool pool(2);
  every_format<ml::backend::host>(bytes, pool);
#if !defined(STRICT_FLAGS_HOST_ONLY)
  every_format<ml::backend::neuron<ml::backend::trn1>>(bytes, pool);
  every_format<ml::backend::neuron<ml::backend::trn2>>(bytes, pool);
  every_format<ml::backend::neuron<ml::backend::trn3>>(bytes, pool);
  every_format<ml::default_backend>(bytes, pool);

  std::vector<float> xf(128, 1.0f);
  std::vector<ml::bf16> xb(128);
  quantizers<ml::mxfp8>(xf, bytes);
  quantizers<ml::mxfp4>(xf, bytes);
  quantizers<ml::fp8_per_token>(xf, bytes);
  quantizers<ml::mxfp8>(xb, bytes);
  quantizers<ml::mxfp4>(xb, bytes);
  quantizers<ml::fp8_per_token>(xb, bytes);
  engine_ops(xf, bytes);
  engine_ops(xb, bytes);
  const auto qt = ml::quantize_rows<ml::fp8_per_token>(std::span<const float>(xf));
  std::vector<float> w(16, 1.0f);
  ml::fold_q_scales(ml::token_scales(qt), ml::matrix_view<float>(w.data(), 1, 16));

  ml::serial_executor serial;
  ml::executor_ref ref(serial);
  auto task = [](std::int64_t) {};
  ref.parallel_for(4, task);
  pool.parallel_for(4, task);

#if defined(STRICT_FLAGS_EIGEN)
  using RowF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  RowF logits(4, 64);
  Eigen::VectorXi ks = Eigen::VectorXi::Zero(4);
  const auto view = ml::as_matrix_view(logits);
  const auto span = ml::as_span(ks);
  (void)view;
  (void)span;
#endif
#endif  // !STRICT_FLAGS_HOST_ONLY
}
