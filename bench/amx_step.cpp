// The AMX path's score step alone (backend/host/amx_scores.hpp), without the key decode and the
// driver around it: one query row of 64 heads in MXFP8's bf16 form against keys already in bf16
// pairs, in the step's calls of 64 keys. 64 keys stay in L1 with the row; 512 (the driver's key
// tile) come from L2 for each row, as they do in the kernels. Counters: FLOP/s (2 x 64 x 128 per
// query row x key, the kernels' unit) and the seconds per query row x key (at 16 cycles per tile
// product, the tile unit's rate, a row x key takes 16 cycles). Built with peak.cpp's
// -march=native: present where the build machine has AMX, skipped with the reason where the OS
// refuses the tile state.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include <mqalogits/target.hpp>

#if defined(MQALOGITS_HOST_AMX)
#include <mqalogits/backend/host/amx_scores.hpp>
#include <mqalogits/backend/host/isa/avx512_amx.hpp>

namespace {

namespace hb = mqalogits::host_backend;
constexpr int heads = 64, head_dim = 128, pairs = head_dim / 2;

void amx_score_step(benchmark::State& st) {
  if (const char* why = hb::amx::tile_refusal()) {
    st.SkipWithError(why);
    return;
  }
  const std::int64_t keys = st.range(0);
  // bf16 values of magnitude [1, 2) and random signs: normal numbers, no special values.
  std::mt19937 rng(52);
  auto value = [&rng] { return 0x3F803F80u ^ (static_cast<std::uint32_t>(rng()) & 0x807F807Fu); };
  std::vector<std::uint32_t> q(static_cast<std::size_t>(pairs * heads));
  std::vector<std::uint32_t> k(static_cast<std::size_t>((keys + hb::amx::call_keys) * pairs));
  for (auto& x : q) x = value();
  for (auto& x : k) x = value();
  std::vector<float> w(heads, 0.5f), out(static_cast<std::size_t>(keys + hb::amx::call_keys));
  const mqalogits::host_abi::bf16_query row{q.data(), nullptr, w.data(), heads, heads};
  using step = hb::amx::bf16_scores<hb::isa_avx512_amx, head_dim, false>;
  for (auto _ : st) {
    for (std::int64_t t = 0; t < keys; t += hb::amx::call_keys)
      step::score(row, {k.data() + t * pairs, nullptr}, out.data() + t);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const auto n = static_cast<double>(keys);
  st.counters["FLOP/s"] =
      benchmark::Counter(2.0 * heads * head_dim * n, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["s per row x key"] = benchmark::Counter(
      n, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

BENCHMARK(amx_score_step)->Name("amx_step/MXFP8_H64")->Arg(64)->Arg(512)->UseRealTime();

}  // namespace
#endif
