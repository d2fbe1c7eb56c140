// Bad input, one test per rule for every entry point and metadata function: each bad argument
// throws mqalogits::error (a std::invalid_argument) whose message names the argument and the
// value, and the output buffer is left bit-for-bit untouched.
#include <catch2/catch.hpp>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"
#include "support/error_of.hpp"
#include "support/kernel_check.hpp"
#include "support/kernel_inputs.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;

static_assert(std::is_base_of_v<std::invalid_argument, ml::error>);

namespace {

using check::expect_error;

constexpr std::int64_t huge = std::numeric_limits<std::int64_t>::max() / 2;

// ---- dense -------------------------------------------------------------------------------

struct dense_fixture : check::row_call_inputs<ml::mxfp8, float> {
  static constexpr std::int64_t num_q = 2, H = 4, N = 9, max_seqlen_k = 8;
  std::vector<std::int32_t> ks{0, 2}, ke{8, 7};  // every token has a column
  ml::logits_buffer<ml::bf16> out{num_q, max_seqlen_k};

  dense_fixture() : row_call_inputs(101, num_q, H, N) { check::fill_sentinel(out); }

  // The call with every argument overridable.
  void call(ml::rows_view<ml::mxfp8> qv, ml::rows_view<ml::mxfp8> kvv,
            ml::matrix_view<const float> wv, std::span<const std::int32_t> s,
            std::span<const std::int32_t> e, std::int64_t msk, ml::matrix_view<ml::bf16> o) {
    ml::fp8_fp4_mqa_logits(qv, kvv, wv, s, e, msk, o);
  }
  void call() { call(q.view(), kv.view(), w.view(), ks, ke, max_seqlen_k, out.view()); }
};

}  // namespace

TEST_CASE("bad input: the valid baseline calls succeed", "[bad_input]") {
  dense_fixture f;
  f.call();
  CHECK(!check::untouched(f.out));
}

TEST_CASE("bad input, dense: max_seqlen_k < 0", "[bad_input]") {
  dense_fixture f;
  expect_error([&] { f.call(f.q.view(), f.kv.view(), f.w.view(), f.ks, f.ke, -3, f.out.view()); },
               {"fp8_fp4_mqa_logits", "max_seqlen_k", "-3"});
  CHECK(check::untouched(f.out));
}

TEST_CASE("bad input, dense: shapes that disagree", "[bad_input]") {
  dense_fixture f;
  SECTION("q rows") {
    auto qv = f.q.view();
    qv.rows = 7;
    expect_error([&] { f.call(qv, f.kv.view(), f.w.view(), f.ks, f.ke, 8, f.out.view()); },
                 {"q", "7"});
  }
  SECTION("ks entries") {
    const std::vector<std::int32_t> ks3{0, 1, 2};
    expect_error([&] { f.call(f.q.view(), f.kv.view(), f.w.view(), ks3, f.ke, 8, f.out.view()); },
                 {"cu_seq_len_k_start", "3"});
  }
  SECTION("ke entries") {
    const std::vector<std::int32_t> ke1{5};
    expect_error([&] { f.call(f.q.view(), f.kv.view(), f.w.view(), f.ks, ke1, 8, f.out.view()); },
                 {"cu_seq_len_k_end", "1"});
  }
  SECTION("logits columns") {
    expect_error([&] { f.call(f.q.view(), f.kv.view(), f.w.view(), f.ks, f.ke, 7, f.out.view()); },
                 {"logits", "[2, 8]"});
  }
  SECTION("logits columns in full-width mode (N)") {
    expect_error([&] { f.call(f.q.view(), f.kv.view(), f.w.view(), f.ks, f.ke, 0, f.out.view()); },
                 {"logits", "9"});
  }
  SECTION("logits rows") {
    auto o = f.out.view();
    o.rows = 1;
    expect_error([&] { f.call(f.q.view(), f.kv.view(), f.w.view(), f.ks, f.ke, 8, o); },
                 {"logits", "[1, 8]"});
  }
  SECTION("heads out of range") {
    const std::int64_t heads = GENERATE(as<std::int64_t>{}, 0, 129);
    auto big = rnd::rows<ml::mxfp8>(f.rng, 2 * 129);
    auto wv = rnd::weights<float>(f.rng, 2, 129);
    auto wview = wv.view();
    wview.cols = heads;
    auto qv = big.view();
    qv.rows = 2 * heads;
    expect_error([&] { f.call(qv, f.kv.view(), wview, f.ks, f.ke, 8, f.out.view()); },
                 {"heads", std::to_string(heads)});
  }
  SECTION("kv rows negative") {
    auto kvv = f.kv.view();
    kvv.rows = -4;
    expect_error([&] { f.call(f.q.view(), kvv, f.w.view(), f.ks, f.ke, 8, f.out.view()); },
                 {"kv", "-4"});
  }
  CHECK(check::untouched(f.out));
}

TEST_CASE("bad input, dense: strides smaller than a row", "[bad_input]") {
  dense_fixture f;
  SECTION("q data stride") {
    auto qv = f.q.view();
    qv.data_stride = 127;
    expect_error([&] { f.call(qv, f.kv.view(), f.w.view(), f.ks, f.ke, 8, f.out.view()); },
                 {"q", "127"});
  }
  SECTION("kv scale stride") {
    auto kvv = f.kv.view();
    kvv.scale_stride = 3;
    expect_error([&] { f.call(f.q.view(), kvv, f.w.view(), f.ks, f.ke, 8, f.out.view()); },
                 {"kv", "scale", "3"});
  }
  SECTION("weights stride") {
    auto wv = f.w.view();
    wv.stride = 2;
    expect_error([&] { f.call(f.q.view(), f.kv.view(), wv, f.ks, f.ke, 8, f.out.view()); },
                 {"weights", "stride 2"});
  }
  SECTION("logits stride") {
    auto o = f.out.view();
    o.stride = 5;
    expect_error([&] { f.call(f.q.view(), f.kv.view(), f.w.view(), f.ks, f.ke, 8, o); },
                 {"logits", "stride 5"});
  }
  CHECK(check::untouched(f.out));
}

TEST_CASE("bad input, dense: null pointers with non-zero sizes", "[bad_input]") {
  dense_fixture f;
  SECTION("kv data") {
    auto kvv = f.kv.view();
    kvv.data = nullptr;
    expect_error([&] { f.call(f.q.view(), kvv, f.w.view(), f.ks, f.ke, 8, f.out.view()); },
                 {"kv", "null"});
  }
  SECTION("q scales") {
    auto qv = f.q.view();
    qv.scales = nullptr;
    expect_error([&] { f.call(qv, f.kv.view(), f.w.view(), f.ks, f.ke, 8, f.out.view()); },
                 {"q", "scales", "null"});
  }
  SECTION("weights") {
    auto wv = f.w.view();
    wv.data = nullptr;
    expect_error([&] { f.call(f.q.view(), f.kv.view(), wv, f.ks, f.ke, 8, f.out.view()); },
                 {"weights", "null"});
  }
  SECTION("ks") {
    const std::span<const std::int32_t> s(static_cast<const std::int32_t*>(nullptr), 0);
    expect_error(
        [&] {
          f.call(f.q.view(), f.kv.view(), f.w.view(), std::span(s.data(), 2), f.ke, 8,
                 f.out.view());
        },
        {"cu_seq_len_k_start", "null"});
  }
  SECTION("logits") {
    auto o = f.out.view();
    o.data = nullptr;
    expect_error([&] { f.call(f.q.view(), f.kv.view(), f.w.view(), f.ks, f.ke, 8, o); },
                 {"logits", "null"});
  }
  CHECK(check::untouched(f.out));
}

TEST_CASE("bad input, dense: byte extents that overflow int64", "[bad_input]") {
  dense_fixture f;
  SECTION("kv data stride") {
    auto kvv = f.kv.view();
    kvv.data_stride = huge;
    expect_error([&] { f.call(f.q.view(), kvv, f.w.view(), f.ks, f.ke, 8, f.out.view()); },
                 {"kv", std::to_string(huge)});
  }
  SECTION("q scale stride") {
    auto qv = f.q.view();
    qv.scale_stride = huge;
    expect_error([&] { f.call(qv, f.kv.view(), f.w.view(), f.ks, f.ke, 8, f.out.view()); },
                 {"q", std::to_string(huge)});
  }
  SECTION("weights stride") {
    auto wv = f.w.view();
    wv.stride = huge / 3;
    expect_error([&] { f.call(f.q.view(), f.kv.view(), wv, f.ks, f.ke, 8, f.out.view()); },
                 {"weights", std::to_string(huge / 3)});
  }
  SECTION("logits stride") {
    auto o = f.out.view();
    o.stride = huge;
    expect_error([&] { f.call(f.q.view(), f.kv.view(), f.w.view(), f.ks, f.ke, 8, o); },
                 {"logits", std::to_string(huge)});
  }
  CHECK(check::untouched(f.out));
}

// ---- paged -------------------------------------------------------------------------------

namespace {

struct paged_fixture : check::paged_call_inputs<ml::mxfp4, ml::bf16> {
  static constexpr std::int64_t B = 2, next_n = 2, H = 2, pages = 4, max_blocks = 3,
                                max_context_len = 96;
  static constexpr std::int32_t page_kv = 32;
  rnd::owned_matrix<std::int32_t> lens = make_lens();
  rnd::owned_matrix<std::int32_t> table = rnd::block_table(rng, lens, max_blocks, page_kv, pages);
  ml::paged_mqa_schedule schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 3);
  ml::logits_buffer<float> out{B * next_n, max_context_len};

  static rnd::owned_matrix<std::int32_t> make_lens() {
    auto m = rnd::matrix<std::int32_t>(B, next_n);
    m(0, 0) = 40, m(0, 1) = 41, m(1, 0) = 10, m(1, 1) = 11;  // slots 2 (req 0) and 1.. unread
    return m;
  }
  paged_fixture() : paged_call_inputs(103, pages, page_kv, B * next_n, H) {
    check::fill_sentinel(out);
  }

  struct args {
    ml::rows_view<ml::mxfp4> q;
    ml::paged_cache_view<ml::mxfp4> cache;
    ml::matrix_view<const ml::bf16> w;
    ml::matrix_view<const std::int32_t> lens, table;
    const ml::paged_mqa_schedule* schedule;
    std::int64_t max_context_len;
    ml::matrix_view<float> out;
  };
  args defaults() {
    return {q.view(),     cache.view(), w.view(),        lens.view(),
            table.view(), &schedule,    max_context_len, out.view()};
  }
  void call(const args& a) {
    ml::fp8_fp4_paged_mqa_logits(a.q, a.cache, a.w, a.lens, a.table, *a.schedule, a.max_context_len,
                                 a.out);
  }
};

}  // namespace

TEST_CASE("bad input, paged: the valid baseline call succeeds", "[bad_input]") {
  paged_fixture f;
  f.call(f.defaults());
  CHECK(!check::untouched(f.out));
}

TEST_CASE("bad input, paged: a read block-table entry that is not a page", "[bad_input]") {
  paged_fixture f;
  const std::int32_t bad = GENERATE(-3, 4, 90210);
  const bool second_request = GENERATE(false, true);
  const std::int64_t b = second_request ? 1 : 0, s = second_request ? 0 : 1;
  f.table(b, s) = bad;
  INFO("block_table[" << b << "][" << s << "] = " << bad);
  expect_error([&] { f.call(f.defaults()); },
               {"fp8_fp4_paged_mqa_logits", "block_table[" + std::to_string(b) + "][" +
                                                std::to_string(s) + "] = " + std::to_string(bad)});
  CHECK(check::untouched(f.out));
}

TEST_CASE("bad input, paged: block-table entries past the context are not checked", "[bad_input]") {
  paged_fixture f;
  f.table(0, 2) = 90210;  // request 0 reads slots 0..1 only
  f.table(1, 1) = -7;     // request 1 reads slot 0 only
  f.table(1, 2) = std::numeric_limits<std::int32_t>::min();
  CHECK_NOTHROW(f.call(f.defaults()));
}

TEST_CASE("bad input, paged: negative lengths and stale schedules", "[bad_input]") {
  paged_fixture f;
  SECTION("negative context length in the kernel") {
    f.lens(1, 0) = -5;
    expect_error([&] { f.call(f.defaults()); }, {"context_lens[1][0]", "-5"});
  }
  SECTION("negative context length in the metadata") {
    f.lens(0, 1) = -6;
    expect_error([&] { (void)ml::get_paged_mqa_logits_metadata(f.lens.view(), 32, 1); },
                 {"get_paged_mqa_logits_metadata", "context_lens[0][1]", "-6"});
  }
  SECTION("stale schedule: a length changed") {
    f.lens(1, 1) = 12;
    expect_error([&] { f.call(f.defaults()); }, {"schedule", "context_lens[1][1]", "12", "11"});
  }
  SECTION("stale schedule: made for another page size") {
    const auto other = ml::get_paged_mqa_logits_metadata(f.lens.view(), 64, 3);
    auto a = f.defaults();
    a.schedule = &other;
    expect_error([&] { f.call(a); }, {"schedule", "64"});
  }
  SECTION("stale schedule: made for another batch") {
    auto fewer = rnd::matrix<std::int32_t>(1, 2, 0, 3);
    const auto other = ml::get_paged_mqa_logits_metadata(fewer.view(), 32, 3);
    auto a = f.defaults();
    a.schedule = &other;
    expect_error([&] { f.call(a); }, {"schedule", "1 x 2"});
  }
  SECTION("a default-constructed schedule") {
    const ml::paged_mqa_schedule none;
    auto a = f.defaults();
    a.schedule = &none;
    expect_error([&] { f.call(a); }, {"schedule"});
  }
  CHECK(check::untouched(f.out));
}

TEST_CASE("bad input, paged: unsupported page_kv", "[bad_input]") {
  paged_fixture f;
  const std::int32_t page_kv = GENERATE(0, -64, 1025, 4096);
  SECTION("kernel") {
    auto a = f.defaults();
    a.cache.page_kv = page_kv;
    a.cache.page_stride = std::int64_t{page_kv} * 68;
    a.cache.num_pages = 1;  // keep the view inside the cache's bytes
    expect_error([&] { f.call(a); }, {"page_kv", std::to_string(page_kv)});
  }
  SECTION("metadata") {
    expect_error([&] { (void)ml::get_paged_mqa_logits_metadata(f.lens.view(), page_kv, 1); },
                 {"get_paged_mqa_logits_metadata", "page_kv", std::to_string(page_kv)});
  }
  CHECK(check::untouched(f.out));
}

TEST_CASE("bad input, paged: shapes that disagree", "[bad_input]") {
  paged_fixture f;
  auto a = f.defaults();
  SECTION("block_table rows") {
    a.table.rows = 1;
    expect_error([&] { f.call(a); }, {"block_table", "[1, 3]"});
  }
  SECTION("q rows") {
    a.q.rows = 6;
    expect_error([&] { f.call(a); }, {"q", "6"});
  }
  SECTION("weights rows") {
    a.w.rows = 3;
    expect_error([&] { f.call(a); }, {"weights", "[3, 2]"});
  }
  SECTION("logits columns") {
    a.out.cols = 95;
    expect_error([&] { f.call(a); }, {"logits", "95"});
  }
  SECTION("max_context_len") {
    a.max_context_len = GENERATE(as<std::int64_t>{}, 0, -1);
    expect_error([&] { f.call(a); }, {"max_context_len", std::to_string(a.max_context_len)});
  }
  SECTION("context_lens without columns") {
    a.lens.cols = 0;
    expect_error([&] { f.call(a); }, {"context_lens", "[2, 0]"});
  }
  SECTION("metadata: context_lens without columns") {
    a.lens.cols = 0;
    expect_error([&] { (void)ml::get_paged_mqa_logits_metadata(a.lens, 32, 1); },
                 {"context_lens", "[2, 0]"});
  }
  SECTION("metadata: num_workers") {
    expect_error([&] { (void)ml::get_paged_mqa_logits_metadata(a.lens, 32, 0); },
                 {"num_workers", "0"});
  }
  CHECK(check::untouched(f.out));
}

TEST_CASE("bad input, paged: cache, strides, nulls and overflowing extents", "[bad_input]") {
  paged_fixture f;
  auto a = f.defaults();
  SECTION("page_stride smaller than a page") {
    a.cache.page_stride = 32 * 68 - 1;
    expect_error([&] { f.call(a); }, {"page_stride", std::to_string(32 * 68 - 1)});
  }
  SECTION("cache null with pages") {
    a.cache.base = nullptr;
    expect_error([&] { f.call(a); }, {"cache", "null"});
  }
  SECTION("negative page count") {
    a.cache.num_pages = -2;
    expect_error([&] { f.call(a); }, {"num_pages", "-2"});
  }
  SECTION("cache extent overflows") {
    a.cache.page_stride = huge;
    expect_error([&] { f.call(a); }, {"cache", std::to_string(huge)});
  }
  SECTION("block_table stride") {
    a.table.stride = 2;
    expect_error([&] { f.call(a); }, {"block_table", "stride 2"});
  }
  SECTION("block_table null") {
    a.table.data = nullptr;
    expect_error([&] { f.call(a); }, {"block_table", "null"});
  }
  SECTION("block_table extent overflows") {
    a.table.stride = huge;
    expect_error([&] { f.call(a); }, {"block_table", std::to_string(huge)});
  }
  SECTION("context_lens null") {
    a.lens.data = nullptr;
    expect_error([&] { f.call(a); }, {"context_lens", "null"});
  }
  SECTION("context_lens extent overflows") {
    a.lens.stride = huge;
    expect_error([&] { f.call(a); }, {"context_lens", std::to_string(huge)});
  }
  SECTION("metadata: context_lens extent overflows") {
    a.lens.stride = huge;
    expect_error([&] { (void)ml::get_paged_mqa_logits_metadata(a.lens, 32, 1); },
                 {"context_lens", std::to_string(huge)});
  }
  SECTION("metadata: context_lens null") {
    a.lens.data = nullptr;
    expect_error([&] { (void)ml::get_paged_mqa_logits_metadata(a.lens, 32, 1); },
                 {"context_lens", "null"});
  }
  SECTION("q data stride") {
    a.q.data_stride = 63;
    expect_error([&] { f.call(a); }, {"q", "63"});
  }
  CHECK(check::untouched(f.out));
}

// ---- sparse ------------------------------------------------------------------------------

namespace {

struct sparse_fixture : check::row_call_inputs<ml::mxfp8, float> {
  static constexpr std::int64_t rows = 2, H = 3, N = 40, cap = 4, B = 8;
  std::vector<std::int32_t> ks{0, 5}, ke{40, 30};
  rnd::owned_matrix<std::int32_t> idx = rnd::sparse_indices(rng, rows, cap, 5);
  ml::logits_buffer<ml::bf16> out{rows, cap* B};

  sparse_fixture() : row_call_inputs(107, rows, H, N) { check::fill_sentinel(out); }
  ml::sparse_mqa_metadata meta(std::int64_t block = B) {
    return ml::get_sparse_mqa_logits_metadata(ks, ke, N, idx.view(), block);
  }
};

}  // namespace

TEST_CASE("bad input, sparse: the valid baseline call succeeds", "[bad_input]") {
  sparse_fixture f;
  ml::fp8_fp4_sparse_mqa_logits(f.q.view(), f.kv.view(), f.w.view(), f.meta(), f.out.view());
  CHECK(!check::untouched(f.out));
}

TEST_CASE("bad input, sparse metadata: block size, capacity, shapes, lengths", "[bad_input]") {
  sparse_fixture f;
  constexpr const char* where = "get_sparse_mqa_logits_metadata";
  SECTION("sparse_block_kv not 8 or 16") {
    const std::int64_t block = GENERATE(as<std::int64_t>{}, 0, 4, 12, 32);
    expect_error([&] { (void)f.meta(block); }, {where, "sparse_block_kv", std::to_string(block)});
  }
  SECTION("capacity 0 or 4097") {
    const std::int64_t cap = GENERATE(as<std::int64_t>{}, 0, 4097);
    auto big = rnd::matrix<std::int32_t>(2, 4097, 0, -1);
    auto v = big.view();
    v.cols = cap;
    expect_error([&] { (void)ml::get_sparse_mqa_logits_metadata(f.ks, f.ke, f.N, v, 8); },
                 {where, "capacity " + std::to_string(cap)});
  }
  SECTION("ks entries") {
    const std::vector<std::int32_t> ks3{0, 0, 0};
    expect_error([&] { (void)ml::get_sparse_mqa_logits_metadata(ks3, f.ke, f.N, f.idx.view(), 8); },
                 {where, "ks", "3"});
  }
  SECTION("ke entries") {
    const std::vector<std::int32_t> ke1{0};
    expect_error([&] { (void)ml::get_sparse_mqa_logits_metadata(f.ks, ke1, f.N, f.idx.view(), 8); },
                 {where, "ke", "1"});
  }
  SECTION("num_kv_tokens not positive") {
    const std::int64_t n = GENERATE(as<std::int64_t>{}, 0, -40);
    expect_error([&] { (void)ml::get_sparse_mqa_logits_metadata(f.ks, f.ke, n, f.idx.view(), 8); },
                 {where, "num_kv_tokens", std::to_string(n)});
  }
  SECTION("indices null") {
    auto v = f.idx.view();
    v.data = nullptr;
    expect_error([&] { (void)ml::get_sparse_mqa_logits_metadata(f.ks, f.ke, f.N, v, 8); },
                 {where, "sparse_kv_block_indices", "null"});
  }
  SECTION("indices stride") {
    auto v = f.idx.view();
    v.stride = 3;
    expect_error([&] { (void)ml::get_sparse_mqa_logits_metadata(f.ks, f.ke, f.N, v, 8); },
                 {where, "sparse_kv_block_indices", "stride 3"});
  }
  SECTION("indices extent overflows") {
    auto v = f.idx.view();
    v.stride = huge;
    expect_error([&] { (void)ml::get_sparse_mqa_logits_metadata(f.ks, f.ke, f.N, v, 8); },
                 {where, "sparse_kv_block_indices", std::to_string(huge)});
  }
  SECTION("ke null") {
    const std::span<const std::int32_t> s(static_cast<const std::int32_t*>(nullptr), 0);
    expect_error(
        [&] {
          (void)ml::get_sparse_mqa_logits_metadata(f.ks, std::span(s.data(), 2), f.N, f.idx.view(),
                                                   8);
        },
        {where, "ke", "null"});
  }
  SECTION("ks null") {
    const std::span<const std::int32_t> s(static_cast<const std::int32_t*>(nullptr), 0);
    expect_error(
        [&] {
          (void)ml::get_sparse_mqa_logits_metadata(std::span(s.data(), 2), f.ke, f.N, f.idx.view(),
                                                   8);
        },
        {where, "ks", "null"});
  }
}

TEST_CASE("bad input, sparse kernel: kv, shapes, strides, metadata", "[bad_input]") {
  sparse_fixture f;
  const auto meta = f.meta();
  auto run = [&](ml::rows_view<ml::mxfp8> q, ml::rows_view<ml::mxfp8> kv,
                 ml::matrix_view<const float> w, const ml::sparse_mqa_metadata& m,
                 ml::matrix_view<ml::bf16> o) { ml::fp8_fp4_sparse_mqa_logits(q, kv, w, m, o); };
  constexpr const char* where = "fp8_fp4_sparse_mqa_logits";
  SECTION("kv shorter than num_kv_tokens") {
    auto kv = f.kv.view();
    kv.rows = 39;
    expect_error([&] { run(f.q.view(), kv, f.w.view(), meta, f.out.view()); },
                 {where, "kv", "39", "40"});
  }
  SECTION("kv data stride") {
    auto kv = f.kv.view();
    kv.data_stride = 100;
    expect_error([&] { run(f.q.view(), kv, f.w.view(), meta, f.out.view()); },
                 {where, "kv", "100"});
  }
  SECTION("kv null") {
    auto kv = f.kv.view();
    kv.data = nullptr;
    expect_error([&] { run(f.q.view(), kv, f.w.view(), meta, f.out.view()); },
                 {where, "kv", "null"});
  }
  SECTION("kv extent overflows") {
    auto kv = f.kv.view();
    kv.data_stride = huge;
    expect_error([&] { run(f.q.view(), kv, f.w.view(), meta, f.out.view()); },
                 {where, "kv", std::to_string(huge)});
  }
  SECTION("logits columns") {
    auto o = f.out.view();
    o.cols = 31;
    expect_error([&] { run(f.q.view(), f.kv.view(), f.w.view(), meta, o); },
                 {where, "logits", "31"});
  }
  SECTION("q rows") {
    auto q = f.q.view();
    q.rows = 5;
    expect_error([&] { run(q, f.kv.view(), f.w.view(), meta, f.out.view()); }, {where, "q", "5"});
  }
  SECTION("weights rows") {
    auto w = f.w.view();
    w.rows = 1;
    expect_error([&] { run(f.q.view(), f.kv.view(), w, meta, f.out.view()); },
                 {where, "weights", "[1, 3]"});
  }
  SECTION("a metadata object not made by get_sparse_mqa_logits_metadata") {
    const ml::sparse_mqa_metadata none;
    auto o = f.out.view();
    o.rows = 0;
    expect_error([&] { run(f.q.view(), f.kv.view(), f.w.view(), none, o); }, {where, "metadata"});
  }
  CHECK(check::untouched(f.out));
}

// ---- paged sparse ------------------------------------------------------------------------

namespace {

struct paged_sparse_fixture : check::paged_call_inputs<ml::mxfp8, float> {
  static constexpr std::int64_t rows = 2, H = 2, cap = 8, B = 16, pages = 3, max_blocks = 3;
  static constexpr std::int32_t page_kv = 64;
  std::vector<std::int32_t> lens{70, 128};
  rnd::owned_matrix<std::int32_t> table = make_table();
  rnd::owned_matrix<std::int32_t> idx = make_idx();
  ml::logits_buffer<float> out{rows, cap* B};

  rnd::owned_matrix<std::int32_t> make_table() {
    auto t = rnd::matrix<std::int32_t>(rows, max_blocks, 0, 90210);  // unread slots: garbage
    t(0, 0) = 0, t(0, 1) = 1, t(1, 0) = 2, t(1, 1) = 0;
    return t;
  }
  static rnd::owned_matrix<std::int32_t> make_idx() {
    auto m = rnd::matrix<std::int32_t>(rows, cap, 0, -1);
    for (std::int64_t b = 0; b < cap; ++b) m(0, b) = m(1, b) = static_cast<std::int32_t>(b);
    return m;
  }
  paged_sparse_fixture() : paged_call_inputs(109, pages, page_kv, rows, H) {
    check::fill_sentinel(out);
  }
  ml::paged_sparse_mqa_metadata meta(
      ml::paged_sparse_protocol protocol = ml::paged_sparse_protocol::reread) {
    return ml::get_paged_sparse_mqa_logits_metadata(lens, table.view(), page_kv, idx.view(), B,
                                                    protocol);
  }
};

}  // namespace

TEST_CASE("bad input, paged sparse: the valid baseline call succeeds", "[bad_input]") {
  paged_sparse_fixture f;
  const auto meta = f.meta();
  ml::fp8_fp4_paged_sparse_mqa_logits(f.q.view(), f.cache.view(), f.w.view(), meta, f.out.view());
  CHECK(!check::untouched(f.out));
}

TEST_CASE("bad input, paged sparse metadata: page_kv, block size, capacity, shapes, lengths",
          "[bad_input]") {
  paged_sparse_fixture f;
  constexpr const char* where = "get_paged_sparse_mqa_logits_metadata";
  auto make = [&](std::span<const std::int32_t> lens, ml::matrix_view<const std::int32_t> table,
                  std::int32_t page_kv, ml::matrix_view<const std::int32_t> idx, std::int64_t B) {
    (void)ml::get_paged_sparse_mqa_logits_metadata(lens, table, page_kv, idx, B);
  };
  SECTION("page_kv not a positive multiple of sparse_block_kv") {
    const std::int32_t page_kv = GENERATE(0, -16, 8, 24, 100);
    expect_error([&] { make(f.lens, f.table.view(), page_kv, f.idx.view(), 16); },
                 {where, "page_kv", std::to_string(page_kv)});
  }
  SECTION("sparse_block_kv not 8 or 16") {
    const std::int64_t block = GENERATE(as<std::int64_t>{}, 1, 32);
    expect_error([&] { make(f.lens, f.table.view(), 64, f.idx.view(), block); },
                 {where, "sparse_block_kv", std::to_string(block)});
  }
  SECTION("capacity 0 or 4097") {
    const std::int64_t cap = GENERATE(as<std::int64_t>{}, 0, 4097);
    auto big = rnd::matrix<std::int32_t>(2, 4097, 0, -1);
    auto v = big.view();
    v.cols = cap;
    expect_error([&] { make(f.lens, f.table.view(), 64, v, 16); },
                 {where, "capacity " + std::to_string(cap)});
  }
  SECTION("context_lens entries") {
    const std::vector<std::int32_t> three{1, 2, 3};
    expect_error([&] { make(three, f.table.view(), 64, f.idx.view(), 16); },
                 {where, "context_lens", "3"});
  }
  SECTION("negative context length") {
    f.lens[1] = -9;
    expect_error([&] { make(f.lens, f.table.view(), 64, f.idx.view(), 16); },
                 {where, "context_lens[1]", "-9"});
  }
  SECTION("block_table rows") {
    auto t = f.table.view();
    t.rows = 1;
    expect_error([&] { make(f.lens, t, 64, f.idx.view(), 16); }, {where, "block_table", "[1, 3]"});
  }
  SECTION("block_table stride") {
    auto t = f.table.view();
    t.stride = 1;
    expect_error([&] { make(f.lens, t, 64, f.idx.view(), 16); },
                 {where, "block_table", "stride 1"});
  }
  SECTION("block_table null") {
    auto t = f.table.view();
    t.data = nullptr;
    expect_error([&] { make(f.lens, t, 64, f.idx.view(), 16); }, {where, "block_table", "null"});
  }
  SECTION("block_table extent overflows") {
    auto t = f.table.view();
    t.stride = huge;
    expect_error([&] { make(f.lens, t, 64, f.idx.view(), 16); },
                 {where, "block_table", std::to_string(huge)});
  }
  SECTION("context_lens null") {
    const std::span<const std::int32_t> s(static_cast<const std::int32_t*>(nullptr), 0);
    expect_error([&] { make(std::span(s.data(), 2), f.table.view(), 64, f.idx.view(), 16); },
                 {where, "context_lens", "null"});
  }
  SECTION("indices extent overflows") {
    auto v = f.idx.view();
    v.stride = huge;
    expect_error([&] { make(f.lens, f.table.view(), 64, v, 16); },
                 {where, "sparse_kv_block_indices", std::to_string(huge)});
  }
  SECTION("indices null") {
    auto v = f.idx.view();
    v.data = nullptr;
    expect_error([&] { make(f.lens, f.table.view(), 64, v, 16); },
                 {where, "sparse_kv_block_indices", "null"});
  }
}

TEST_CASE("bad input, paged sparse kernel: pages, cache, shapes, snapshots", "[bad_input]") {
  paged_sparse_fixture f;
  constexpr const char* where = "fp8_fp4_paged_sparse_mqa_logits";
  auto run = [&](ml::rows_view<ml::mxfp8> q, ml::paged_cache_view<ml::mxfp8> c,
                 ml::matrix_view<const float> w, const ml::paged_sparse_mqa_metadata& m,
                 ml::matrix_view<float> o) { ml::fp8_fp4_paged_sparse_mqa_logits(q, c, w, m, o); };
  SECTION("a read block-table entry that is not a page") {
    const std::int32_t bad = GENERATE(-1, 3, 90210);
    const auto protocol =
        GENERATE(ml::paged_sparse_protocol::reread, ml::paged_sparse_protocol::snapshot);
    f.table(1, 1) = bad;  // row 1 reads positions up to 127: slot 1
    const auto meta = f.meta(protocol);
    expect_error([&] { run(f.q.view(), f.cache.view(), f.w.view(), meta, f.out.view()); },
                 {where, "block_table[1][1] = " + std::to_string(bad)});
    CHECK(!meta.has_snapshot());
  }
  SECTION("cache page_kv differs from the metadata's") {
    const auto meta =
        f.meta(GENERATE(ml::paged_sparse_protocol::reread, ml::paged_sparse_protocol::snapshot));
    auto c = f.cache.view();
    c.page_kv = 32;
    c.page_stride = 32 * 132;
    expect_error([&] { run(f.q.view(), c, f.w.view(), meta, f.out.view()); },
                 {where, "page_kv", "32", "64"});
  }
  SECTION("page_stride smaller than a page") {
    const auto meta = f.meta();
    auto c = f.cache.view();
    c.page_stride = 100;
    expect_error([&] { run(f.q.view(), c, f.w.view(), meta, f.out.view()); },
                 {where, "page_stride", "100"});
  }
  SECTION("cache null") {
    const auto meta = f.meta();
    auto c = f.cache.view();
    c.base = nullptr;
    expect_error([&] { run(f.q.view(), c, f.w.view(), meta, f.out.view()); },
                 {where, "cache", "null"});
  }
  SECTION("cache extent overflows") {
    const auto meta = f.meta();
    auto c = f.cache.view();
    c.page_stride = huge;
    expect_error([&] { run(f.q.view(), c, f.w.view(), meta, f.out.view()); },
                 {where, "cache", std::to_string(huge)});
  }
  SECTION("logits columns") {
    const auto meta = f.meta();
    auto o = f.out.view();
    o.cols = 64;
    expect_error([&] { run(f.q.view(), f.cache.view(), f.w.view(), meta, o); },
                 {where, "logits", "64"});
  }
  SECTION("q rows") {
    const auto meta = f.meta();
    auto q = f.q.view();
    q.rows = 3;
    expect_error([&] { run(q, f.cache.view(), f.w.view(), meta, f.out.view()); },
                 {where, "q", "3"});
  }
  SECTION("a metadata object not made by get_paged_sparse_mqa_logits_metadata") {
    const ml::paged_sparse_mqa_metadata none;
    auto o = f.out.view();
    o.rows = 0;
    expect_error([&] { run(f.q.view(), f.cache.view(), f.w.view(), none, o); },
                 {where, "metadata"});
  }
  CHECK(check::untouched(f.out));
}

TEST_CASE("bad input, paged sparse: snapshot format mismatch", "[bad_input]") {
  paged_sparse_fixture f;
  const auto meta = f.meta(ml::paged_sparse_protocol::snapshot);
  ml::fp8_fp4_paged_sparse_mqa_logits(f.q.view(), f.cache.view(), f.w.view(), meta, f.out.view());
  REQUIRE(meta.has_snapshot());
  // The same bytes read as MXFP4: the snapshot holds MXFP8 tokens.
  const ml::paged_cache_view<ml::mxfp4> c4(f.cache.bytes.data(), 3, 64);
  auto q4 = rnd::rows<ml::mxfp4>(f.rng, 4);
  ml::logits_buffer<float> out(2, 128);
  check::fill_sentinel(out);
  expect_error(
      [&] { ml::fp8_fp4_paged_sparse_mqa_logits(q4.view(), c4, f.w.view(), meta, out.view()); },
      {"fp8_fp4_paged_sparse_mqa_logits", "MXFP8", "MXFP4"});
  CHECK(check::untouched(out));
}
