// 64-bit safety (bad sizes never overflow an offset): every byte offset is computed in 64 bits,
// offsets past 2^31 (and past 2^32) address the right bytes, and sizes whose byte extents overflow
// int64 are rejected with an error before anything is read or written (no signed overflow on the
// way: run under UBSan).
#include <catch2/catch.hpp>

#include <chrono>

#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/accuracy.hpp"

namespace ml = mqalogits;
using i32 = std::int32_t;
using i64 = std::int64_t;

namespace {

constexpr i64 i64_max = std::numeric_limits<i64>::max();

// A read-only-after-fill anonymous mapping reserved without backing store: only the pages that
// are written get memory, so a >4 GiB view costs a few KiB.
struct sparse_mapping {
  void* base = MAP_FAILED;
  std::size_t size = 0;
  explicit sparse_mapping(std::size_t bytes) : size(bytes) {
    base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  }
  ~sparse_mapping() {
    if (ok()) ::munmap(base, size);
  }
  bool ok() const { return base != MAP_FAILED; }
  std::uint8_t* bytes() const { return static_cast<std::uint8_t*>(base); }
};

// The output is untouched when a call is rejected.
template <class O>
bool all_equal(const ml::logits_buffer<O>& out, O value) {
  for (i64 r = 0; r < out.rows(); ++r)
    for (i64 c = 0; c < out.cols(); ++c)
      if (std::memcmp(&out(r, c), &value, sizeof(O)) != 0) return false;
  return true;
}

}  // namespace

TEST_CASE("view offsets are 64-bit: row, scale and page addresses past 2^32 bytes", "[offsets]") {
  // Pure address arithmetic on views over a fake base: nothing is dereferenced.
  alignas(16) static const std::uint8_t anchor[16] = {};
  const i64 far_row = (i64{1} << 33) / ml::mxfp8::data_bytes + 3;  // row offset ~2^33 bytes
  ml::rows_view<ml::mxfp8> rows;
  rows.data = anchor;
  rows.scales = anchor;
  rows.rows = far_row + 1;
  rows.data_stride = 4096;
  rows.scale_stride = 640;
  CHECK(reinterpret_cast<std::uintptr_t>(rows.row(far_row)) -
            reinterpret_cast<std::uintptr_t>(anchor) ==
        static_cast<std::uintptr_t>(far_row * 4096));
  CHECK(reinterpret_cast<std::uintptr_t>(rows.scale(far_row)) -
            reinterpret_cast<std::uintptr_t>(anchor) ==
        static_cast<std::uintptr_t>(far_row * 640));

  const i32 page_kv = 64;
  const i64 stride = i64{page_kv} * 132 + 512;
  const i64 page = (i64{1} << 32) / stride + 7;  // the page starts past 2^32 bytes
  const ml::paged_cache_view<ml::mxfp8> cache(anchor, page + 1, page_kv, stride);
  const auto off = [&](const std::uint8_t* p) {
    return static_cast<i64>(reinterpret_cast<std::uintptr_t>(p) -
                            reinterpret_cast<std::uintptr_t>(anchor));
  };
  CHECK(off(cache.page(page)) == page * stride);
  CHECK(off(cache.data(page, 63)) == page * stride + 63 * 128);
  CHECK(off(cache.scale(page, 63)) == page * stride + 64 * 128 + 63 * 4);

  // Row 2^31 - 1 of a matrix with 2^20-element rows: int32 arithmetic would wrap.
  const ml::matrix_view<const float> m(reinterpret_cast<const float*>(anchor), i64{1} << 31, 8,
                                       i64{1} << 20);
  CHECK(static_cast<i64>(reinterpret_cast<std::uintptr_t>(m.row((i64{1} << 31) - 1)) -
                         reinterpret_cast<std::uintptr_t>(anchor)) ==
        ((i64{1} << 31) - 1) * (i64{1} << 20) * 4);
}

TEST_CASE("paged kernels read a high page past 4 GiB of a sparse mapping", "[offsets]") {
  // 2^31 + 2^30 ... : a cache whose last page starts beyond 2^32 bytes. Only the pages the table
  // names are written (and so backed); the kernels must read exactly those bytes.
  using F = ml::mxfp8;
  const i32 page_kv = 64;
  const i64 stride = i64{page_kv} * (F::data_bytes + F::scale_bytes);  // 8448
  const i64 num_pages = ((i64{5} << 30) / stride) + 1;                 // > 5 GiB of pages
  const i64 high = num_pages - 1, low = 3;
  REQUIRE(high * stride > (i64{1} << 32));
  const sparse_mapping map(static_cast<std::size_t>(num_pages * stride));
  if (!map.ok()) {
    WARN("mmap of " << num_pages * stride
                    << " bytes (MAP_NORESERVE) failed; covered by the "
                       "address arithmetic test only");
    return;
  }
  std::mt19937_64 rng(20261201);
  // Fill the two pages the table names with random valid codes.
  const auto src = ref::rand::paged_cache<F>(rng, 2, page_kv);
  std::memcpy(map.bytes() + low * stride, src.bytes.data(), static_cast<std::size_t>(stride));
  std::memcpy(map.bytes() + high * stride, src.bytes.data() + stride,
              static_cast<std::size_t>(stride));
  const ml::paged_cache_view<F> cache(map.bytes(), num_pages, page_kv, stride);

  const i64 H = 4, B = 2;
  const auto q = ref::rand::rows<F>(rng, B * H);
  const auto w = ref::rand::weights<float>(rng, B, H);
  auto lens = ref::rand::matrix<i32>(B, 1);
  lens(0, 0) = 2 * page_kv;  // reads low then high
  lens(1, 0) = page_kv + 5;  // reads high then low (part of the page)
  auto table = ref::rand::matrix<i32>(B, 3);
  table(0, 0) = static_cast<i32>(low);
  table(0, 1) = static_cast<i32>(high);
  table(0, 2) = -1;  // past the context: never read
  table(1, 0) = static_cast<i32>(high);
  table(1, 1) = static_cast<i32>(low);
  table(1, 2) = std::numeric_limits<i32>::min();
  const i64 max_context_len = 2 * page_kv + 3;

  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 2);
  ml::logits_buffer<float> out(B, max_context_len);
  ml::fp8_fp4_paged_mqa_logits(q.view(), cache, w.view(), lens.view(), table.view(), schedule,
                               max_context_len, out.view());
  const auto exact =
      ref::paged(q.view(), cache, w.view(), lens.view(), table.view(), max_context_len);
  const std::string diff = accuracy::compare(
      B, max_context_len, [&](i64 r, i64 c) { return double(out(r, c)); },
      [&](i64 r, i64 c) { return exact.at(r, c); }, [&](i64 r, i64 c) { return exact.mag(r, c); });
  CHECK(diff == "");

  // The same high page through the paged-sparse gather.
  const i32 Bs = 16;
  auto idx = ref::rand::matrix<i32>(B, 4, 0, -1);
  idx(0, 0) = 5;  // position 80: page slot 1 (high)
  idx(0, 1) = 0;  // positions 0..15: slot 0 (low)
  idx(1, 0) = 3;  // positions 48..63: slot 0 (high)
  std::vector<i32> slens = {2 * page_kv, page_kv + 5};
  const auto meta =
      ml::get_paged_sparse_mqa_logits_metadata(slens, table.view(), page_kv, idx.view(), Bs);
  ml::logits_buffer<float> sout(B, 4 * Bs);
  ml::fp8_fp4_paged_sparse_mqa_logits(q.view(), cache, w.view(), meta, sout.view());
  const auto sexact =
      ref::paged_sparse(q.view(), cache, w.view(), slens, table.view(), idx.view(), Bs);
  const std::string sdiff = accuracy::compare(
      B, 4 * Bs, [&](i64 r, i64 c) { return double(sout(r, c)); },
      [&](i64 r, i64 c) { return sexact.at(r, c); },
      [&](i64 r, i64 c) { return sexact.mag(r, c); });
  CHECK(sdiff == "");
}

TEST_CASE("dense kernel reads a KV row past 2^32 bytes of a sparse mapping", "[offsets]") {
  using F = ml::mxfp4;
  const i64 stride = i64{1} << 26;  // 64 MiB between KV rows: row 80 is 5 GiB in
  const i64 N = 81;
  const sparse_mapping data(static_cast<std::size_t>((N - 1) * stride + F::data_bytes));
  if (!data.ok()) {
    WARN("mmap (MAP_NORESERVE) failed; covered by the address arithmetic test only");
    return;
  }
  std::mt19937_64 rng(7);
  const auto src = ref::rand::rows<F>(rng, N);
  for (i64 r = 0; r < N; ++r)
    std::memcpy(data.bytes() + r * stride, src.data.data() + r * F::data_bytes, F::data_bytes);
  const ml::rows_view<F> kv(data.bytes(), src.scales.data(), N, stride);
  const i64 H = 2, Q = 2;
  const auto q = ref::rand::rows<F>(rng, Q * H);
  const auto w = ref::rand::weights<ml::bf16>(rng, Q, H);
  const std::vector<i32> ks = {70, 0}, ke = {81, 81};
  ml::logits_buffer<ml::bf16> out(Q, 16);
  // Row 1 holds 81 tokens: it keeps its first 16 columns, as the reference.
  ml::fp8_fp4_mqa_logits(q.view(), kv, w.view(), ks, ke, 16, out.view(),
                         {.truncate_long_contexts = true});
  const auto exact =
      ref::dense(q.view(), kv, w.view(), std::span<const i32>(ks), std::span<const i32>(ke), 16);
  const std::string diff = accuracy::compare(
      Q, 16, [&](i64 r, i64 c) { return double(ml::to_float(out(r, c))); },
      [&](i64 r, i64 c) { return exact.at(r, c); }, [&](i64 r, i64 c) { return exact.mag(r, c); });
  CHECK(diff == "");
}

TEST_CASE("byte extents that overflow int64 are rejected, output untouched", "[offsets]") {
  using F = ml::mxfp8;
  std::mt19937_64 rng(11);
  const i64 Q = 2, H = 2, N = 8;
  const auto q = ref::rand::rows<F>(rng, Q * H);
  const auto kv = ref::rand::rows<F>(rng, N);
  const auto w = ref::rand::weights<float>(rng, Q, H);
  const std::vector<i32> ks = {0, 0}, ke = {8, 8};
  const float sentinel = 12345.0f;

  const auto rejected = [&](auto&& call, ml::logits_buffer<float>& out) {
    for (i64 r = 0; r < out.rows(); ++r)
      for (i64 c = 0; c < out.cols(); ++c) out(r, c) = sentinel;
    std::string what;
    try {
      call();
    } catch (const ml::error& e) {
      what = e.what();
    }
    INFO(what);
    CHECK(what.find("overflow") != std::string::npos);
    CHECK(all_equal(out, sentinel));
  };

  ml::logits_buffer<float> out(Q, 8);
  SECTION("kv data stride") {
    auto kvv = kv.view();
    kvv.data_stride = i64_max - 64;
    rejected([&] { ml::fp8_fp4_mqa_logits(q.view(), kvv, w.view(), ks, ke, 8, out.view()); }, out);
  }
  SECTION("q scale stride") {
    auto qv = q.view();
    qv.scale_stride = i64_max / 2 + 1;  // (4 - 1) rows x stride overflows
    rejected([&] { ml::fp8_fp4_mqa_logits(qv, kv.view(), w.view(), ks, ke, 8, out.view()); }, out);
  }
  SECTION("weights stride: stride x sizeof(T) itself overflows") {
    // Regression: check_matrix multiplied stride by sizeof(T) before bounding the stride (UB).
    auto wv = w.view();
    wv.stride = i64_max - 3;
    rejected([&] { ml::fp8_fp4_mqa_logits(q.view(), kv.view(), wv, ks, ke, 8, out.view()); }, out);
  }
  SECTION("logits stride") {
    auto ov = out.view();
    ov.stride = i64_max / 3;
    rejected([&] { ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), ks, ke, 8, ov); }, out);
  }
  SECTION("paged cache page stride") {
    const auto cache = ref::rand::paged_cache<F>(rng, 2, 64);
    auto cv = cache.view();
    cv.page_stride = i64_max - 100;
    auto lens = ref::rand::matrix<i32>(Q, 1, 0, 10);
    auto table = ref::rand::matrix<i32>(Q, 1, 0, 1);
    const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), 64, 1);
    rejected(
        [&] {
          ml::fp8_fp4_paged_mqa_logits(q.view(), cv, w.view(), lens.view(), table.view(), schedule,
                                       8, out.view());
        },
        out);
  }
}

TEST_CASE("a logits view with no columns may be null, rows or not", "[offsets]") {
  // Regression: the driver formed null + r * stride for such a view (UB, seen by the fuzzer).
  using F = ml::mxfp4;
  std::mt19937_64 rng(3);
  const i64 Q = 3, H = 1;
  const auto q = ref::rand::rows<F>(rng, Q * H);
  const auto w = ref::rand::weights<float>(rng, Q, H);
  const std::vector<i32> ks = {0, 1, 2}, ke = {0, 1, 2};
  const ml::rows_view<F> empty_kv(nullptr, static_cast<const std::uint8_t*>(nullptr), 0);
  const ml::matrix_view<float> out(nullptr, Q, 0, 0);
  CHECK_NOTHROW(ml::fp8_fp4_mqa_logits(q.view(), empty_kv, w.view(), ks, ke, 0, out));
  ml::options opt;
  opt.clean_logits = false;
  CHECK_NOTHROW(ml::fp8_fp4_mqa_logits(q.view(), empty_kv, w.view(), ks, ke, 0, out, opt));
}

TEST_CASE("a block table too wide for max_blocks * page_kv in int64 is rejected", "[offsets]") {
  // Regression: a [1, 2^59] table view passes the byte-extent check (2^61 bytes), but the plan's
  // capacity 2^59 * page_kv overflowed (UB) before any slot was read.
  using F = ml::mxfp8;
  std::mt19937_64 rng(5);
  const i64 H = 2;
  const auto q = ref::rand::rows<F>(rng, H);
  const auto w = ref::rand::weights<float>(rng, 1, H);
  const auto cache = ref::rand::paged_cache<F>(rng, 1, 256);
  auto lens = ref::rand::matrix<i32>(1, 1, 0, 10);
  const std::vector<i32> table_storage = {0};
  const ml::matrix_view<const i32> table(table_storage.data(), 1, i64{1} << 59);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), 256, 1);
  ml::logits_buffer<float> out(1, 16);
  const float sentinel = -7.0f;
  for (i64 c = 0; c < 16; ++c) out(0, c) = sentinel;
  std::string what;
  try {
    ml::fp8_fp4_paged_mqa_logits(q.view(), cache.view(), w.view(), lens.view(), table, schedule, 16,
                                 out.view());
  } catch (const ml::error& e) {
    what = e.what();
  }
  INFO(what);
  CHECK(what.find("block_table has") != std::string::npos);
  CHECK(all_equal(out, sentinel));
}

TEST_CASE("context lengths of INT32_MAX cost what the output costs, not 2^31 keys", "[offsets]") {
  // Regression (fuzz_paged slow units): the paged plan walked every 512-key unit of a request's
  // context, 4M of them for a length of INT32_MAX, even when max_context_len and the table's
  // capacity stop it after a few keys. 512 such requests took minutes; now they take no time.
  using F = ml::mxfp4;
  std::mt19937_64 rng(9);
  const i64 B = 512, H = 1, page_kv = 64, max_blocks = 2, cols = 100;
  const auto q = ref::rand::rows<F>(rng, B * H);
  const auto w = ref::rand::weights<float>(rng, B, H);
  const auto cache = ref::rand::paged_cache<F>(rng, 2, page_kv);
  auto lens = ref::rand::matrix<i32>(B, 1, 0, std::numeric_limits<i32>::max());
  auto table = ref::rand::matrix<i32>(B, max_blocks, 0, 1);
  const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 4);
  ml::logits_buffer<float> out(B, cols);
  const auto t0 = std::chrono::steady_clock::now();
  ml::fp8_fp4_paged_mqa_logits(q.view(), cache.view(), w.view(), lens.view(), table.view(),
                               schedule, cols, out.view(),
                               ml::options{.truncate_long_contexts = true});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(seconds < 10.0);
  const auto exact = ref::paged(q.view(), cache.view(), w.view(), lens.view(), table.view(), cols);
  CHECK(accuracy::compare(
            B, cols, [&](i64 r, i64 c) { return double(out(r, c)); },
            [&](i64 r, i64 c) { return exact.at(r, c); },
            [&](i64 r, i64 c) { return exact.mag(r, c); }) == "");
}
