// Peak throughput of the AMX tile instructions the AMX path multiplies with (TDPBF16PS for the
// e4m3 formats, TDPBSSD for MXFP4), measured like peak.cpp's: independent accumulators (4 tiles
// of 16 x 16 results, enough to cover the instruction's latency), so only issue throughput
// limits them. Built with peak.cpp's -march=native: present where the build machine has AMX, and
// each thread asks the OS for the tile state first (skipped, with the reason, where refused).
// Counters in the kernels' unit: FLOP/s with a multiply-add counted as 2 operations.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <thread>

#include <mqalogits/backend/host/amx/tile_native.hpp>

#if defined(MQALOGITS_TARGET_AMX)
namespace {

namespace amx = mqalogits::host_backend::amx;
using tiles = amx::tile_native;
constexpr int steps = 256;

// Four accumulators C0-C3 += A (tile 4) . B (tile 5), `steps` times per iteration.
template <bool Bf16>
void peak_tiles(benchmark::State& st) {
  if (const char* why = amx::tile_refusal()) {
    st.SkipWithError(why);
    return;
  }
  amx::tile_config config;
  for (int t = 0; t < 4; ++t) config.shape(t, 16, 64);
  config.shape(4, 16, 64).shape(5, 16, 64);
  alignas(64) static const std::uint8_t operand[16 * 64] = {};  // zeros: no special values
  tiles::configure(config);
  tiles::load<4>(operand, 64);
  tiles::load<5>(operand, 64);
  tiles::zero<0>();
  tiles::zero<1>();
  tiles::zero<2>();
  tiles::zero<3>();
  for (auto _ : st)
    for (int s = 0; s < steps; ++s) {
      if constexpr (Bf16) {
        tiles::dot_bf16<0, 4, 5>();
        tiles::dot_bf16<1, 4, 5>();
        tiles::dot_bf16<2, 4, 5>();
        tiles::dot_bf16<3, 4, 5>();
      } else {
        tiles::dot_s8<0, 4, 5>();
        tiles::dot_s8<1, 4, 5>();
        tiles::dot_s8<2, 4, 5>();
        tiles::dot_s8<3, 4, 5>();
      }
    }
  tiles::release();
  // 16 x 16 results of 32 bf16 (64 int8) products each, a multiply-add counted as 2.
  const double ops = 2.0 * 16 * 16 * (Bf16 ? 32 : 64);
  st.counters["FLOP/s"] = benchmark::Counter(ops * 4 * steps / st.threads(),
                                             benchmark::Counter::kIsIterationInvariantRate);
}

const int all_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

BENCHMARK(peak_tiles<true>)->Name("peak/tdpbf16ps")->Threads(1)->UseRealTime();
BENCHMARK(peak_tiles<true>)->Name("peak/tdpbf16ps")->Threads(all_threads)->UseRealTime();
BENCHMARK(peak_tiles<false>)->Name("peak/tdpbssd")->Threads(1)->UseRealTime();
BENCHMARK(peak_tiles<false>)->Name("peak/tdpbssd")->Threads(all_threads)->UseRealTime();

}  // namespace
#endif
