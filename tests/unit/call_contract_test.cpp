// One call contract: a check stated once (check/call.hpp, check/block_table.hpp, the cache's
// geometry) refuses the same bad input with the same message on every C++ surface: the four host
// entry points, the same entry points on the Neuron backend, and the Neuron-native paged path with
// its cache converter. Small shapes, one format, one output type: the calls are refused before a
// kernel runs, and the baseline runs each surface once.
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <mqalogits/mqalogits.hpp>
#include <mqalogits/neuron.hpp>

#include "reference/random_inputs.hpp"
#include "support/error_of.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;

namespace {

using F = ml::mxfp8;
using neuron = ml::backend::neuron<ml::backend::trn3>;

// Two query rows of four heads; every surface writes [2, 64] logits: dense over 64 kv rows
// (max_seqlen_k 64), sparse and paged sparse with 4 selected blocks of 16, paged with
// max_context_len 64 over pages of 32 tokens (requests of 40 and 64 positions, pages {0, 1} and
// {2, 3} of a 4-page cache).
struct call_inputs {
  static constexpr std::int64_t rows = 2, H = 4, cols = 64, N = 64;
  static constexpr std::int32_t page_kv = 32;
  rnd::engine rng{4803};
  rnd::owned_rows<F> q = rnd::rows<F>(rng, rows*H), kv = rnd::rows<F>(rng, N);
  rnd::owned_matrix<float> w = rnd::weights<float>(rng, rows, H);
  std::vector<std::int32_t> ks{0, 0}, ke{40, 64};
  rnd::owned_matrix<std::int32_t> idx = blocks({0, 1, 2, 2, 0, 1, 2, 3});
  rnd::owned_paged_cache<F> cache = rnd::paged_cache<F>(rng, 4, page_kv);
  rnd::owned_matrix<std::int32_t> lens = column({40, 64});
  rnd::owned_matrix<std::int32_t> table = blocks({0, 1, 2, 3}, 2);
  std::vector<float> out = std::vector<float>(rows * cols, 0.0f);
  std::int64_t width = cols;  // max_seqlen_k, max_context_len

  static rnd::owned_matrix<std::int32_t> blocks(std::vector<std::int32_t> v, std::int64_t c = 4) {
    auto m = rnd::matrix<std::int32_t>(rows, c);
    m.data = std::move(v);
    return m;
  }
  static rnd::owned_matrix<std::int32_t> column(std::vector<std::int32_t> v) {
    auto m = rnd::matrix<std::int32_t>(rows, 1);
    m.data = std::move(v);
    return m;
  }
  ml::matrix_view<float> logits() { return {out.data(), rows, cols}; }
};

// One surface: its name in messages and the call, on inputs a case may have broken.
struct surface {
  std::string where;
  std::function<void(call_inputs&, ml::matrix_view<const float>, ml::matrix_view<float>)> call;
};

template <class Backend>
std::vector<surface> entry_points() {
  return {
      {"fp8_fp4_mqa_logits",
       [](call_inputs& c, auto w, auto out) {
         ml::fp8_fp4_mqa_logits(Backend{}, c.q.view(), c.kv.view(), w, c.ks, c.ke, c.width, out);
       }},
      {"fp8_fp4_paged_mqa_logits",
       [](call_inputs& c, auto w, auto out) {
         const auto s = ml::get_paged_mqa_logits_metadata(c.lens.view(), c.page_kv, 1);
         ml::fp8_fp4_paged_mqa_logits(Backend{}, c.q.view(), c.cache.view(), w, c.lens.view(),
                                      c.table.view(), s, c.width, out);
       }},
      {"fp8_fp4_sparse_mqa_logits",
       [](call_inputs& c, auto w, auto out) {
         const auto m = ml::get_sparse_mqa_logits_metadata(c.ks, c.ke, c.N, c.idx.view(), 16);
         ml::fp8_fp4_sparse_mqa_logits(Backend{}, c.q.view(), c.kv.view(), w, m, out);
       }},
      {"fp8_fp4_paged_sparse_mqa_logits",
       [](call_inputs& c, auto w, auto out) {
         const std::span<const std::int32_t> lens(c.lens.data);
         const auto m = ml::get_paged_sparse_mqa_logits_metadata(lens, c.table.view(), c.page_kv,
                                                                 c.idx.view(), 16);
         ml::fp8_fp4_paged_sparse_mqa_logits(Backend{}, c.q.view(), c.cache.view(), w, m, out);
       }},
  };
}

surface native_paged() {
  return {"fp8_fp4_paged_mqa_logits_native", [](call_inputs& c, auto w, auto out) {
            const auto native = ml::neuron_backend::to_native_paged_cache(
                c.cache.view(), c.table.view(), c.lens.view());
            ml::neuron_backend::fp8_fp4_paged_mqa_logits_native(neuron{}, c.q.view(), native, w,
                                                                c.lens.view(), c.width, out);
          }};
}

// Every surface: the host's and the Neuron backend's entry points, and the native paged path.
std::vector<surface> every_surface() {
  std::vector<surface> all = entry_points<ml::backend::host>();
  for (surface& s : entry_points<neuron>()) all.push_back(std::move(s));
  all.push_back(native_paged());
  return all;
}

std::string range(const char* name, const void* p, std::int64_t bytes) {
  const auto b = reinterpret_cast<std::uintptr_t>(p);
  return std::string(name) + " [" + std::to_string(b) + ", " + std::to_string(b + bytes) + ")";
}

}  // namespace

TEST_CASE("call contract: the baseline call runs on every surface", "[call_contract]") {
  for (const surface& s : every_surface()) {
    INFO(s.where);
    call_inputs c;
    CHECK(check::error_of([&] { s.call(c, c.w.view(), c.logits()); }) == "");
  }
}

TEST_CASE("call contract: a zero head count, one message everywhere", "[call_contract]") {
  for (const surface& s : every_surface()) {
    call_inputs c;
    const ml::matrix_view<const float> no_heads(c.w.data.data(), c.rows, 0);
    CHECK(check::error_of([&] { s.call(c, no_heads, c.logits()); }) ==
          s.where + ": weights have 0 heads (columns); supported: 1.." +
              std::to_string(ml::max_heads));
  }
}

TEST_CASE("call contract: logits over q, one message everywhere", "[call_contract]") {
  for (const surface& s : every_surface()) {
    call_inputs c;
    const std::vector<std::uint8_t> before = c.q.data;
    const auto q = c.q.view();
    const ml::matrix_view<float> over(reinterpret_cast<float*>(c.q.data.data()), c.rows, c.cols);
    CHECK(check::error_of([&] { s.call(c, c.w.view(), over); }) ==
          s.where + ": " + range("logits", over.data, c.rows * c.cols * 4) + " overlap " +
              range("q", q.data, (q.rows - 1) * q.data_stride + q.data_bytes()) +
              ": an output must not share a byte with an input");
    CHECK(c.q.data == before);
  }
}

TEST_CASE("call contract: a block table past its cache, one message on every paged surface",
          "[call_contract]") {
  // The second request's second page is past the cache's four.
  const std::string message = "block_table[1][1] = 4 is not a page (num_pages = 4)";
  for (const surface& s : every_surface()) {
    if (s.where.find("paged") == std::string::npos) continue;
    call_inputs c;
    c.table(1, 1) = 4;
    const std::string where = s.where == "fp8_fp4_paged_mqa_logits_native"
                                  ? "neuron_backend::to_native_paged_cache"
                                  : s.where;
    CHECK(check::error_of([&] { s.call(c, c.w.view(), c.logits()); }) == where + ": " + message);
  }
}

TEST_CASE("call contract: a cache whose pages overlap, one message on every paged surface",
          "[call_contract]") {
  for (const surface& s : every_surface()) {
    if (s.where.find("paged") == std::string::npos) continue;
    call_inputs c;
    c.cache.page_stride = 32;  // less than a page of 32 tokens
    const std::string where = s.where == "fp8_fp4_paged_mqa_logits_native"
                                  ? "neuron_backend::to_native_paged_cache"
                                  : s.where;
    CHECK(check::error_of([&] { s.call(c, c.w.view(), c.logits()); }) ==
          where + ": cache page_stride 32 < page_kv * token_bytes = " +
              std::to_string(32 * (F::data_bytes + F::scale_bytes)));
  }
}

TEST_CASE("call contract: a zero max_context_len, one message on every paged decode surface",
          "[call_contract]") {
  for (const surface& s : every_surface()) {
    if (s.where.find("paged_mqa") == std::string::npos) continue;
    call_inputs c;
    c.width = 0;
    CHECK(check::error_of([&] { s.call(c, c.w.view(), c.logits()); }) ==
          s.where + ": max_context_len = 0 must be > 0");
  }
  // The binding's own form, before it sizes an output: the same check.
  const auto r = ml::check::refusal_of([] { ml::check::max_context_len("my_op", 0); });
  CHECK(std::string(r.what()) == "my_op: max_context_len = 0 must be > 0");
}

TEST_CASE("call contract: the contract alone refuses as the calls do, without throwing",
          "[call_contract]") {
  call_inputs c;
  const ml::matrix_view<const float> no_heads(c.w.data.data(), c.rows, 0);
  const auto logits = ml::to_output_policy(c.logits(), ml::options{});
  const auto ask = [&](ml::matrix_view<const float> w) {
    return ml::check::refusal_of([&] {
      ml::check::logits_call("fp8_fp4_mqa_logits", c.q.view(), w, logits, c.rows, c.cols,
                             {"kv", 128}, ml::check::data_range_of("kv", c.kv.view()));
    });
  };
  const auto refused = ask(no_heads);
  REQUIRE(refused);
  const surface dense = entry_points<ml::backend::host>()[0];
  CHECK(std::string(refused.what()) ==
        check::error_of([&] { dense.call(c, no_heads, c.logits()); }));
  const auto passed = ask(c.w.view());
  CHECK(!passed);
  CHECK(std::string(passed.what()).empty());
}
