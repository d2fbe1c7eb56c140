// The library against the independent float64 golden cases, on every kernel and both formats.
#include <catch2/catch.hpp>

#include <mqalogits/mqalogits.hpp>

#include "support/accuracy.hpp"
#include "support/golden.hpp"

namespace ml = mqalogits;

namespace {

template <class Format, class Out>
ml::logits_buffer<Out> run_case(const golden::case_data& c, ml::executor_ref exec) {
  const auto q = c.load<std::uint8_t>("q.bin");
  const auto q_sf = c.load<std::uint8_t>("q_sf.bin");
  const auto w = c.load<float>("w.bin");
  const std::int64_t Q = c.num("Q"), H = c.num("H");
  const ml::rows_view<Format> qv(q.data(), q_sf.data(), Q * H);
  const ml::matrix_view<const float> wv(w.data(), Q, H);
  const ml::options opt{.executor = exec};
  if (c.kind() == "dense") {
    const auto kv = c.load<std::uint8_t>("kv.bin");
    const auto kv_sf = c.load<std::uint8_t>("kv_sf.bin");
    const auto ks = c.load<std::int32_t>("ks.bin"), ke = c.load<std::int32_t>("ke.bin");
    ml::logits_buffer<Out> out(Q, c.num("max_seqlen_k"));
    ml::fp8_fp4_mqa_logits(qv, ml::rows_view<Format>(kv.data(), kv_sf.data(), c.num("N")), wv, ks,
                           ke, c.num("max_seqlen_k"), out.view(), opt);
    return out;
  }
  if (c.kind() == "sparse") {
    const auto kv = c.load<std::uint8_t>("kv.bin");
    const auto kv_sf = c.load<std::uint8_t>("kv_sf.bin");
    const auto ks = c.load<std::int32_t>("ks.bin"), ke = c.load<std::int32_t>("ke.bin");
    const auto blocks = c.load<std::int32_t>("blocks.bin");
    const auto meta = ml::get_sparse_mqa_logits_metadata(
        ks, ke, c.num("N"), ml::matrix_view<const std::int32_t>(blocks.data(), Q, c.num("cap")),
        c.num("B"));
    ml::logits_buffer<Out> out(Q, c.num("cap") * c.num("B"));
    ml::fp8_fp4_sparse_mqa_logits(qv, ml::rows_view<Format>(kv.data(), kv_sf.data(), c.num("N")),
                                  wv, meta, out.view(), opt);
    return out;
  }
  const auto cache = c.load<std::uint8_t>("cache.bin");
  const auto lens = c.load<std::int32_t>("lens.bin");
  const auto table = c.load<std::int32_t>("table.bin");
  const ml::paged_cache_view<Format> cv(cache.data(), c.num("P"),
                                        static_cast<std::int32_t>(c.num("page_kv")),
                                        c.num("page_stride"));
  const ml::matrix_view<const std::int32_t> tv(table.data(), Q, c.num("M"));
  if (c.kind() == "paged") {
    const ml::matrix_view<const std::int32_t> lv(lens.data(), Q, 1);
    const auto schedule = ml::get_paged_mqa_logits_metadata(lv, cv.page_kv, 3);
    ml::logits_buffer<Out> out(Q, c.num("max_context_len"));
    ml::fp8_fp4_paged_mqa_logits(qv, cv, wv, lv, tv, schedule, c.num("max_context_len"),
                                 out.view(), opt);
    return out;
  }
  const auto blocks = c.load<std::int32_t>("blocks.bin");
  const auto meta = ml::get_paged_sparse_mqa_logits_metadata(
      lens, tv, cv.page_kv, ml::matrix_view<const std::int32_t>(blocks.data(), Q, c.num("cap")),
      c.num("B"));
  ml::logits_buffer<Out> out(Q, c.num("cap") * c.num("B"));
  ml::fp8_fp4_paged_sparse_mqa_logits(qv, cv, wv, meta, out.view(), opt);
  return out;
}

template <class Out>
void check_case(const std::string& name, ml::executor_ref exec) {
  const auto c = golden::load_case(name);
  const auto expected = c.load<float>("out.bin");
  const auto mag = c.load<float>("mag.bin");
  const auto out = c.fp4() ? run_case<ml::mxfp4, Out>(c, exec) : run_case<ml::mxfp8, Out>(c, exec);
  const std::int64_t cols = out.cols();
  REQUIRE(static_cast<std::int64_t>(expected.size()) == out.rows() * cols);
  const std::string diff = accuracy::compare(
      out.rows(), cols, [&](auto r, auto k) { return double(ml::to_float(out(r, k))); },
      [&](auto r, auto k) { return double(expected[r * cols + k]); },
      [&](auto r, auto k) { return double(mag[r * cols + k]); });
  INFO(name << (sizeof(Out) == 2 ? " bf16" : " fp32") << " logits");
  CHECK(diff == "");
}

}  // namespace

TEST_CASE("golden cases: every kernel x format matches the float64 reference", "[golden]") {
  const std::string name = GENERATE(from_range(golden::case_names()));
  const int threads = GENERATE(1, 2);
  ml::thread_pool pool(threads);
  INFO(name << ", " << threads << " threads");
  check_case<ml::bf16>(name, pool);
  check_case<float>(name, pool);
}
