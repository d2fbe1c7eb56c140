// thread_pool's default size: OMP_NUM_THREADS when set to a count, else the CPUs the caller may
// run on (its affinity mask: taskset, a container's cpuset), not the machine's thread count.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include <mqalogits/mqalogits.hpp>

#if defined(__linux__)
#include <sched.h>
#endif

namespace ml = mqalogits;

namespace {

// Sets OMP_NUM_THREADS (or unsets it: nullopt) for the scope, restoring the caller's value.
class omp_env {
 public:
  explicit omp_env(std::optional<std::string> value) {
    if (const char* old = std::getenv("OMP_NUM_THREADS")) old_ = old;
    if (value)
      ::setenv("OMP_NUM_THREADS", value->c_str(), 1);
    else
      ::unsetenv("OMP_NUM_THREADS");
  }
  ~omp_env() {
    if (old_)
      ::setenv("OMP_NUM_THREADS", old_->c_str(), 1);
    else
      ::unsetenv("OMP_NUM_THREADS");
  }
  omp_env(const omp_env&) = delete;
  omp_env& operator=(const omp_env&) = delete;

 private:
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("thread_pool: the default size is the CPUs this thread may run on", "[pool]") {
  const omp_env unset(std::nullopt);
  CHECK(ml::thread_pool::default_threads() >= 1);
  CHECK(ml::thread_pool::default_threads() == ml::thread_pool::affinity_threads());
#if defined(__linux__)
  cpu_set_t all;
  CPU_ZERO(&all);
  REQUIRE(::sched_getaffinity(0, sizeof all, &all) == 0);
  CHECK(ml::thread_pool::default_threads() == CPU_COUNT(&all));
  // A thread pinned to one CPU (as under taskset -c N) gets a pool of one, however many the
  // machine has; the test's own thread keeps its mask.
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  int pinned = 0, pool_size = 0, set_result = -1;
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    set_result = ::sched_setaffinity(0, sizeof one, &one);
    pinned = ml::thread_pool::default_threads();
    pool_size = ml::thread_pool().concurrency();
  }).join();
  REQUIRE(set_result == 0);
  CHECK(pinned == 1);
  CHECK(pool_size == 1);
  cpu_set_t after;
  CPU_ZERO(&after);
  REQUIRE(::sched_getaffinity(0, sizeof after, &after) == 0);
  CHECK(CPU_EQUAL(&after, &all));
#endif
}

TEST_CASE("thread_pool: OMP_NUM_THREADS sets the default size when it is a count", "[pool]") {
  const int cpus = [] {
    const omp_env unset(std::nullopt);
    return ml::thread_pool::affinity_threads();
  }();
  const auto with = [](const char* value) {
    const omp_env env{std::string(value)};
    return ml::thread_pool::default_threads();
  };
  CHECK(with("3") == 3);
  CHECK(with(" 5 ") == 5);
  CHECK(with("7,2") == 7);  // nested levels: the outer one
  CHECK(with("4096") == 4096);
  // Anything else is ignored, as OpenMP runtimes ignore it: the affinity count.
  for (const char* bad : {"", "0", "-2", "abc", "3x", "4097", "99999999999999999999"}) {
    INFO("OMP_NUM_THREADS=\"" << bad << "\"");
    CHECK(with(bad) == cpus);
  }
  const omp_env two{std::string("2")};
  CHECK(ml::thread_pool().concurrency() == 2);
}
