// Runtime dispatch (mqalogits::dispatch): this file is compiled for the baseline CPU, so every
// fast path it runs comes from the dispatch library. It checks that the path chosen is the
// fastest one the CPU runs (MQALOGITS_EXPECT_PATH names it where /proc/cpuinfo cannot, e.g. under
// qemu), that limit_host_isa caps the choice, that the AMX path is taken only where it is asked
// for (and says why not elsewhere), and that every path the CPU runs computes the four kernels,
// on the three formats, and the fused top-k, as the scalar reference does: on an AMX CPU, the
// AMX path natively.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <mqalogits/mqalogits.hpp>

#include "reference/random_inputs.hpp"
#include "reference/reference.hpp"
#include "support/kernel_check.hpp"

namespace ml = mqalogits;
namespace rnd = ref::rand;

static_assert(ml::host_backend::runtime_dispatch, "this test is built with mqalogits::dispatch");

namespace {

#if defined(__aarch64__)
const std::vector<std::string> ladder = {"portable", "neon", "neon_dotprod"};
#else
const std::vector<std::string> ladder = {"portable",    "avx2",        "avx2_vnni", "avx512",
                                         "avx512_vnni", "avx512_bf16", "avx512_amx"};
#endif

// Whether "native" (no cap) reaches the AMX path (a build option of the library).
#if defined(MQALOGITS_DISPATCH_AMX_BY_DEFAULT) && MQALOGITS_DISPATCH_AMX_BY_DEFAULT
constexpr bool amx_by_default = true;
#else
constexpr bool amx_by_default = false;
#endif

std::set<std::string> cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0 && line.rfind("Features", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) flags.insert(w);
    break;
  }
  return flags;
}

#if !defined(__aarch64__)
bool amd_cpu() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("vendor_id", 0) == 0) return line.find("AuthenticAMD") != std::string::npos;
  return false;
}
#endif

// The paths this CPU runs, from /proc/cpuinfo (or, under emulation, every path up to
// MQALOGITS_EXPECT_PATH except the AVX-VNNI and AMX ones, which no emulated CPU model has).
std::set<std::string> runnable_paths() {
  std::set<std::string> paths = {"portable"};
  if (const char* expect = std::getenv("MQALOGITS_EXPECT_PATH")) {
    for (const std::string& p : ladder) {
      if ((p != "avx2_vnni" && p != "avx512_amx") || p == expect) paths.insert(p);
      if (p == expect) break;
    }
    return paths;
  }
  const auto f = cpuinfo_flags();
  const auto has = [&](const char* flag) { return f.count(flag) > 0; };
#if defined(__aarch64__)
  paths.insert("neon");
  if (has("asimddp")) paths.insert("neon_dotprod");
#else
  const bool avx2 = has("avx2") && has("fma");
  const bool avx512 =
      avx2 && has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq");
  if (avx2) paths.insert("avx2");
  if (avx2 && has("avx_vnni")) paths.insert("avx2_vnni");
  if (avx512) paths.insert("avx512");
  if (avx512 && has("avx512_vnni")) paths.insert("avx512_vnni");
  // The bf16 path is chosen on AMD CPUs only (src/dispatch/select.cpp says why).
  if (avx512 && has("avx512_vnni") && has("avx512_bf16") && amd_cpu()) paths.insert("avx512_bf16");
  // AMX where the CPU has it (Linux 5.16 and later grants the tile state on request).
  if (avx512 && has("avx512_vnni") && has("amx_tile") && has("amx_bf16") && has("amx_int8"))
    paths.insert("avx512_amx");
#endif
  return paths;
}

// The fastest runnable path at or below `cap` on the ladder ("native": no cap, which reaches
// the AMX path only where the library takes it by default).
std::string best_at_most(const std::string& cap) {
  const auto runnable = runnable_paths();
  std::string best = "portable";
  for (const std::string& p : ladder) {
    if (runnable.count(p) && (p != "avx512_amx" || cap == p || (cap == "native" && amx_by_default)))
      best = p;
    if (p == cap) break;
  }
  return best;
}

// Puts the process back on its own choice when a test ends.
struct uncapped {
  ~uncapped() { ml::limit_host_isa("native"); }
};

template <class F>
void check_kernels_on_this_path(rnd::engine& rng, std::int64_t H) {
  using O = float;
  INFO(F::name << ", H " << H << ", path " << ml::host_isa_name());
  ml::thread_pool pool(2);
  const std::int64_t num_q = 5, N = 300;
  const auto q = rnd::rows<F>(rng, num_q * H);
  const auto kv = rnd::rows<F>(rng, N);
  const auto w = rnd::weights<float>(rng, num_q, H);

  // Dense, causal-style windows.
  std::vector<std::int32_t> ks = {0, 3, 100, 250, 299}, ke = {1, 200, 300, 300, 300};
  {
    const ref::result expected =
        ref::dense(q.view(), kv.view(), w.view(), std::span(ks), std::span(ke), 0);
    ml::logits_buffer<O> out(num_q, N);
    ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), std::span<const std::int32_t>(ks),
                           std::span<const std::int32_t>(ke), 0, out.view(), {.executor = pool});
    CHECK(check::against(out, expected) == "");
    // The fused top-k: the best 37 columns of each row, in the logits' order.
    const std::int64_t k = 37;
    std::vector<std::int32_t> idx(static_cast<std::size_t>(num_q * k), -7);
    std::vector<float> val(idx.size());
    ml::fp8_fp4_mqa_logits(q.view(), kv.view(), w.view(), std::span<const std::int32_t>(ks),
                           std::span<const std::int32_t>(ke), 0,
                           ml::topk(ml::matrix_view<std::int32_t>(idx.data(), num_q, k),
                                    ml::matrix_view<float>(val.data(), num_q, k)),
                           {.executor = pool});
    for (std::int64_t r = 0; r < num_q; ++r) {
      std::vector<std::int32_t> cols;
      for (std::int32_t c = ks[static_cast<std::size_t>(r)]; c < ke[static_cast<std::size_t>(r)];
           ++c)
        cols.push_back(c);
      std::stable_sort(cols.begin(), cols.end(),
                       [&](std::int32_t a, std::int32_t b) { return out(r, a) > out(r, b); });
      for (std::int64_t i = 0; i < k; ++i) {
        const auto expect = i < static_cast<std::int64_t>(cols.size())
                                ? cols[static_cast<std::size_t>(i)]
                                : std::int32_t{-1};
        INFO("row " << r << ", rank " << i);
        CHECK(idx[static_cast<std::size_t>(r * k + i)] == expect);
      }
    }
  }
  // Paged: two requests, next_n 2, page 16.
  {
    const std::int32_t page_kv = 16;
    const auto cache = rnd::paged_cache<F>(rng, 24, page_kv, 0, {});
    auto lens = rnd::matrix<std::int32_t>(2, 2);
    lens.data = {70, 71, 150, 151};
    const auto table = rnd::block_table(rng, lens, 12, page_kv, 24);
    const auto pq = rnd::rows<F>(rng, 4 * H);
    const auto pw = rnd::weights<float>(rng, 4, H);
    const ref::result expected =
        ref::paged(pq.view(), cache.view(), pw.view(), lens.view(), table.view(), 192);
    const auto schedule = ml::get_paged_mqa_logits_metadata(lens.view(), page_kv, 3);
    ml::logits_buffer<O> out(4, 192);
    ml::fp8_fp4_paged_mqa_logits(pq.view(), cache.view(), pw.view(), lens.view(), table.view(),
                                 schedule, 192, out.view(), {.executor = pool});
    CHECK(check::against(out, expected) == "");
  }
  // Sparse: selected blocks of 8 keys, some -1.
  {
    const std::int64_t B = 8, cap = 16;
    const auto idx = rnd::sparse_indices(rng, num_q, cap, N / B);
    const ref::result expected = ref::sparse(q.view(), kv.view(), w.view(), std::span(ks),
                                             std::span(ke), N, idx.view(), B, false);
    const auto meta = ml::get_sparse_mqa_logits_metadata(std::span<const std::int32_t>(ks),
                                                         std::span<const std::int32_t>(ke), N,
                                                         idx.view(), B, false);
    ml::logits_buffer<O> out(num_q, cap * B);
    ml::fp8_fp4_sparse_mqa_logits(q.view(), kv.view(), w.view(), meta, out.view(),
                                  {.executor = pool});
    CHECK(check::against(out, expected) == "");
  }
}

}  // namespace

TEST_CASE("dispatch: the path chosen at run time is the fastest this CPU runs", "[dispatch]") {
  // MQALOGITS_HOST_ISA caps the choice for the process (an unknown name is ignored).
  const char* expect = std::getenv("MQALOGITS_EXPECT_PATH");
  const char* cap = std::getenv("MQALOGITS_HOST_ISA");
  const std::string want = expect ? expect : best_at_most(cap && *cap ? cap : "native");
  INFO("chosen " << ml::host_isa_name() << ", expected " << want);
  CHECK(std::string(ml::host_isa_name()) == want);
}

TEST_CASE("dispatch: limit_host_isa caps the path, native lifts the cap", "[dispatch]") {
  const uncapped restore;
  const std::string chosen = ml::host_isa_name();
  for (const std::string& cap : ladder) {
    INFO("cap " << cap);
    const std::string got = ml::limit_host_isa(cap);
    CHECK(got == best_at_most(cap));
    CHECK(std::string(ml::host_isa_name()) == got);
  }
  CHECK(std::string(ml::limit_host_isa("native")) == best_at_most("native"));
  CHECK_THROWS_AS(ml::limit_host_isa("avx1024"), ml::error);
  CHECK_THROWS_AS(ml::limit_host_isa(""), ml::error);
  // A NUL ends the name the dispatcher compares: "avx2\0junk" must not read as avx2, nor
  // "native\0avx2" as native. The cap is left where it was, and the message shows the NUL.
  const std::string before = ml::host_isa_name();
  using namespace std::string_view_literals;
  for (const std::string_view bad : {"avx2\0junk"sv, "native\0avx2"sv, "portable\0"sv}) {
    INFO("name of " << bad.size() << " bytes");
    CHECK_THROWS_WITH(ml::limit_host_isa(bad), Catch::Contains("\\0"));
    CHECK(std::string(ml::host_isa_name()) == before);
  }
}

#if !defined(__aarch64__)  // the AMX path is a name of the x86-64 ladder only
TEST_CASE("dispatch: the AMX path runs only where asked for and says why not", "[dispatch]") {
  const uncapped restore;
  const bool amx_cpu = runnable_paths().count("avx512_amx") > 0;
  // Asked for: the AMX path where the CPU has it, the best path below it elsewhere.
  const std::string forced = ml::limit_host_isa("avx512_amx");
  CHECK(forced == best_at_most("avx512_amx"));
  if (amx_cpu) {
    INFO("refusal: " << (ml::host_amx_refusal() ? ml::host_amx_refusal() : "none"));
    CHECK(forced == "avx512_amx");
    CHECK(ml::host_amx_refusal() == nullptr);
  } else {
    REQUIRE(ml::host_amx_refusal() != nullptr);
    INFO("refusal: " << ml::host_amx_refusal());
    CHECK(forced != "avx512_amx");
    CHECK(std::string(ml::host_amx_refusal()).size() > 10);
  }
  // Forbidden by a lower cap, whatever the CPU.
  CHECK(std::string(ml::limit_host_isa("avx512_bf16")) != "avx512_amx");
  REQUIRE(ml::host_amx_refusal() != nullptr);
  CHECK_THAT(ml::host_amx_refusal(), Catch::Contains("capped below avx512_amx") ||
                                         Catch::Contains("no AMX path") ||
                                         Catch::Contains("x86-64 only"));
  // Not asked for: "native" stops below it (unless the library takes it by default).
  const std::string native = ml::limit_host_isa("native");
  CHECK(native == best_at_most("native"));
  if (!amx_by_default) {
    CHECK(native != "avx512_amx");
    REQUIRE(ml::host_amx_refusal() != nullptr);
    CHECK_THAT(ml::host_amx_refusal(), Catch::Contains("MQALOGITS_AMX_BY_DEFAULT=OFF") ||
                                           Catch::Contains("no AMX path") ||
                                           Catch::Contains("x86-64 only"));
  }
}
#endif

TEST_CASE("dispatch: every path this CPU runs matches the reference", "[dispatch]") {
  const uncapped restore;
  const auto runnable = runnable_paths();
  int paths = 0;
  for (const std::string& path : ladder) {
    if (!runnable.count(path)) continue;
    REQUIRE(std::string(ml::limit_host_isa(path)) == path);
    ++paths;
    rnd::engine rng(static_cast<std::uint64_t>(paths));
    for (std::int64_t H : {5, 64}) {
      check_kernels_on_this_path<ml::mxfp8>(rng, H);
      check_kernels_on_this_path<ml::mxfp4>(rng, H);
      check_kernels_on_this_path<ml::fp8_per_token>(rng, H);
    }
  }
  CHECK(paths == static_cast<int>(runnable.size()));
}
