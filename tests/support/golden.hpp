// Loads the golden cases of tests/golden (computed independently in float64; see its README).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "support/accuracy.hpp"

namespace golden {

struct case_data {
  std::string name;
  std::map<std::string, std::string> keys;
  std::string dir;

  std::int64_t num(const std::string& k) const { return std::stoll(keys.at(k)); }
  const std::string& kind() const { return keys.at("kind"); }
  bool fp4() const { return num("fp4") != 0; }

  template <class T>
  std::vector<T> load(const std::string& file) const {
    std::ifstream in(dir + "/" + file, std::ios::binary);
    if (!in) throw std::runtime_error("golden: cannot open " + dir + "/" + file);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.size() % sizeof(T)) throw std::runtime_error("golden: bad size of " + file);
    std::vector<T> out(bytes.size() / sizeof(T));
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }
};

inline case_data load_case(const std::string& name) {
  case_data c;
  c.name = name;
  c.dir = std::string(MQALOGITS_GOLDEN_DIR) + "/" + name;
  std::ifstream in(c.dir + "/case.txt");
  if (!in) throw std::runtime_error("golden: cannot open " + c.dir + "/case.txt");
  std::string k, v;
  while (in >> k >> v) c.keys[k] = v;
  return c;
}

inline const std::vector<std::string>& case_names() {
  static const std::vector<std::string> names = {
      "case000_dense_fp8",       "case001_dense_fp8",        "case002_paged_fp8",
      "case003_sparse_fp8",      "case004_paged_sparse_fp8", "case005_dense_fp4",
      "case006_dense_fp4",       "case007_paged_fp4",        "case008_sparse_fp4",
      "case009_paged_sparse_fp4"};
  return names;
}

namespace ml = mqalogits;

// Runs case c's kernel on Backend with Format's rows and Out logits.
template <class Backend, class Format, class Out>
ml::logits_buffer<Out> run_case(const case_data& c, const ml::options& opt = {}) {
  const auto q = c.load<std::uint8_t>("q.bin"), q_sf = c.load<std::uint8_t>("q_sf.bin");
  const auto w = c.load<float>("w.bin");
  const std::int64_t Q = c.num("Q"), H = c.num("H");
  const ml::rows_view<Format> qv(q.data(), q_sf.data(), Q * H);
  const ml::matrix_view<const float> wv(w.data(), Q, H);
  if (c.kind() == "dense" || c.kind() == "sparse") {
    const auto kv = c.load<std::uint8_t>("kv.bin"), kv_sf = c.load<std::uint8_t>("kv_sf.bin");
    const auto ks = c.load<std::int32_t>("ks.bin"), ke = c.load<std::int32_t>("ke.bin");
    const ml::rows_view<Format> kvv(kv.data(), kv_sf.data(), c.num("N"));
    if (c.kind() == "dense") {
      ml::logits_buffer<Out> out(Q, c.num("max_seqlen_k"));
      // The cases' rows may end past N (case006): clamped, as the files were made.
      ml::options clamped = opt;
      clamped.truncate_long_contexts = true;
      ml::fp8_fp4_mqa_logits(Backend{}, qv, kvv, wv, ks, ke, c.num("max_seqlen_k"), out.view(),
                             clamped);
      return out;
    }
    const auto blocks = c.load<std::int32_t>("blocks.bin");
    const auto meta = ml::get_sparse_mqa_logits_metadata(
        ks, ke, c.num("N"), ml::matrix_view<const std::int32_t>(blocks.data(), Q, c.num("cap")),
        c.num("B"), /*use_unaligned_ks=*/true);  // the golden sparse cases use that mapping
    ml::logits_buffer<Out> out(Q, c.num("cap") * c.num("B"));
    ml::fp8_fp4_sparse_mqa_logits(Backend{}, qv, kvv, wv, meta, out.view(), opt);
    return out;
  }
  const auto cache = c.load<std::uint8_t>("cache.bin");
  const auto lens = c.load<std::int32_t>("lens.bin"), table = c.load<std::int32_t>("table.bin");
  const ml::paged_cache_view<Format> cv(
      cache.data(), c.num("P"), static_cast<std::int32_t>(c.num("page_kv")), c.num("page_stride"));
  const ml::matrix_view<const std::int32_t> tv(table.data(), Q, c.num("M"));
  if (c.kind() == "paged") {
    const ml::matrix_view<const std::int32_t> lv(lens.data(), Q, 1);
    const auto schedule = ml::get_paged_mqa_logits_metadata(lv, cv.page_kv, 3);
    ml::logits_buffer<Out> out(Q, c.num("max_context_len"));
    ml::fp8_fp4_paged_mqa_logits(Backend{}, qv, cv, wv, lv, tv, schedule, c.num("max_context_len"),
                                 out.view(), opt);
    return out;
  }
  const auto blocks = c.load<std::int32_t>("blocks.bin");
  const auto meta = ml::get_paged_sparse_mqa_logits_metadata(
      lens, tv, cv.page_kv, ml::matrix_view<const std::int32_t>(blocks.data(), Q, c.num("cap")),
      c.num("B"));
  ml::logits_buffer<Out> out(Q, c.num("cap") * c.num("B"));
  ml::fp8_fp4_paged_sparse_mqa_logits(Backend{}, qv, cv, wv, meta, out.view(), opt);
  return out;
}

// Runs case c on Backend (its own format) and returns the accuracy report against out.bin: empty
// when every column is within the bound and the -inf mask is exact.
template <class Backend, class Out>
std::string check_case(const case_data& c, const ml::options& opt = {}) {
  const auto expected = c.load<float>("out.bin");
  const auto mag = c.load<float>("mag.bin");
  const auto out = c.fp4() ? run_case<Backend, ml::mxfp4, Out>(c, opt)
                           : run_case<Backend, ml::mxfp8, Out>(c, opt);
  const std::int64_t cols = out.cols();
  if (static_cast<std::int64_t>(expected.size()) != out.rows() * cols)
    return "out.bin holds " + std::to_string(expected.size()) + " values, the kernel wrote " +
           std::to_string(out.rows() * cols);
  return accuracy::compare(
      out.rows(), cols, [&](auto r, auto k) { return double(ml::to_float(out(r, k))); },
      [&](auto r, auto k) { return double(expected[r * cols + k]); },
      [&](auto r, auto k) { return double(mag[r * cols + k]); });
}

}  // namespace golden
