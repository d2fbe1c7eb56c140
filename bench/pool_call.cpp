// The fixed cost of one thread_pool::parallel_for: a spinning pool of two, two trivial tasks, the
// best of 7 runs of 100,000 calls. What the pool adds per kernel call (a decode call is tens of
// microseconds and more), e.g. the fork check every call makes. Built on request:
//   cmake --build build --target mqalogits_pool_call && build/bench/mqalogits_pool_call
#include <chrono>
#include <cstdint>
#include <cstdio>

#include <mqalogits/mqalogits.hpp>

int main() {
  mqalogits::thread_pool pool(2, std::chrono::microseconds{1000});
  volatile std::int64_t sink = 0;
  auto task = [&](std::int64_t i) { sink = sink + i; };
  for (int i = 0; i < 20000; ++i) pool.parallel_for(2, task);  // warm: workers spinning
  double best = 1e30;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 100000; ++i) pool.parallel_for(2, task);
    const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - t0;
    if (took.count() / 100000 < best) best = took.count() / 100000;
  }
  std::printf("%.0f ns per parallel_for(2) on a spinning pool of 2\n", best);
}
