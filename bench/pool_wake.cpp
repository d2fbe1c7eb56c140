// How long a thread_pool worker takes to join a parallel_for after the pool sat idle: the
// floor under every 2-thread speedup of a call of a few milliseconds (the caller starts at
// once; the worker's share waits for the wake-up). Each iteration sleeps `idle` ms, then runs a
// parallel_for of 64 tasks of 20 us busy work and records when the worker ran its first task.
// The second argument: 0 for a pool whose worker sleeps at once, 1 for one that spins up to
// 100 ms. Counters: the median and the 90th percentile of that delay over the iterations, in us.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace {

namespace ml = mqalogits;
using clock_type = std::chrono::steady_clock;

void pool_wake(benchmark::State& st) {
  static ml::thread_pool sleeping(2), spinning(2, std::chrono::milliseconds(100));
  ml::thread_pool& two = st.range(1) ? spinning : sleeping;
  const auto idle = std::chrono::milliseconds(st.range(0));
  std::vector<double> delays;
  for (auto _ : st) {
    st.PauseTiming();
    std::this_thread::sleep_for(idle);
    st.ResumeTiming();
    const auto t0 = clock_type::now();
    const auto caller = std::this_thread::get_id();
    std::atomic<bool> seen{false};
    double delay = 0;
    auto task = [&](std::int64_t) {
      if (std::this_thread::get_id() != caller && !seen.exchange(true))
        delay = std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
      const auto s = clock_type::now();
      while (clock_type::now() - s < std::chrono::microseconds(20)) {
      }
    };
    two.parallel_for(64, task);
    delays.push_back(seen ? delay : 1280.0);  // the caller ran everything: as late as it gets
  }
  std::sort(delays.begin(), delays.end());
  st.counters["wake_median_us"] = delays[delays.size() / 2];
  st.counters["wake_p90_us"] = delays[delays.size() * 9 / 10];
}
BENCHMARK(pool_wake)
    ->Name("pool/wake_after_idle")
    ->ArgsProduct({{0, 1, 5, 20}, {0, 1}})
    ->ArgNames({"idle_ms", "spin"})
    ->Iterations(100)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
