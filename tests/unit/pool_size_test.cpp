// thread_pool's default size follows the CPUs the caller may run on (its affinity mask: taskset,
// a container's cpuset), not the machine's thread count.
#include <catch2/catch.hpp>

#include <thread>

#include <mqalogits/mqalogits.hpp>

#if defined(__linux__)
#include <sched.h>
#endif

namespace ml = mqalogits;

TEST_CASE("thread_pool: the default size is the CPUs this thread may run on", "[pool]") {
  CHECK(ml::thread_pool::default_threads() >= 1);
#if defined(__linux__)
  cpu_set_t all;
  CPU_ZERO(&all);
  REQUIRE(::sched_getaffinity(0, sizeof all, &all) == 0);
  CHECK(ml::thread_pool::default_threads() == CPU_COUNT(&all));
  // Pinned to one CPU (as under taskset -c N): a pool of one, however many the machine has.
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  REQUIRE(::sched_setaffinity(0, sizeof one, &one) == 0);
  const int pinned = ml::thread_pool::default_threads();
  const int pool_size = ml::thread_pool().concurrency();
  REQUIRE(::sched_setaffinity(0, sizeof all, &all) == 0);
  CHECK(pinned == 1);
  CHECK(pool_size == 1);
#endif
}
