// thread_pool across fork(): a child inherits the parent's pool without its workers, and must
// never block on it — not when it calls it, not when it destroys it, not at exit — whether the
// fork came between calls or during one on another thread. Each child runs under a deadline:
// a hang is killed and reported as a failure, not a stuck test run.
#include <catch2/catch.hpp>

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace ml = mqalogits;

// LeakSanitizer's check at exit can hang in a child forked from a threaded process (it stops the
// world with threads the child does not have), so a child that exits through std::exit (to run
// the static destructors under test) turns it off first; sanitizer builds read this hook.
namespace {
std::atomic<bool> leak_check_off{false};
}  // namespace
extern "C" int __lsan_is_turned_off();
extern "C" int __lsan_is_turned_off() {
  return leak_check_off.load() ? 1 : 0;
}

namespace {

// What a child reports through its exit status.
enum child_status : int { child_ok = 0, child_wrong_sum = 3, child_wrong_concurrency = 4 };
constexpr int child_hung = -1;

// Waits for the child for up to `limit`; kills it after that. Returns its exit status, or
// child_hung.
int wait_for_child(pid_t child, std::chrono::seconds limit = std::chrono::seconds{30}) {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int status = 0;
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (done < 0) return 255;
    if (std::chrono::steady_clock::now() > until) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      return child_hung;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{2});
  }
}

// Sums i over [0, n) through the pool, one task per index.
std::int64_t pool_sum(ml::thread_pool& pool, std::int64_t n) {
  std::vector<std::int64_t> parts(static_cast<std::size_t>(n), 0);
  auto task = [&](std::int64_t i) { parts[static_cast<std::size_t>(i)] = i; };
  pool.parallel_for(n, task);
  return std::accumulate(parts.begin(), parts.end(), std::int64_t{0});
}

constexpr std::int64_t tasks = 1000;
constexpr std::int64_t expected_sum = tasks * (tasks - 1) / 2;

// A child's use of its inherited pool: a call, then the pool's end.
[[noreturn]] void child_calls_and_destroys(std::unique_ptr<ml::thread_pool> pool) {
  int code = child_ok;
  if (pool->concurrency() != 1) code = child_wrong_concurrency;
  if (pool_sum(*pool, tasks) != expected_sum) code = child_wrong_sum;
  pool.reset();
  ::_exit(code);
}

// A pool that lives until the process exits, as an engine's or a binding's cached pool does.
ml::thread_pool& process_pool() {
  static ml::thread_pool pool(3);
  return pool;
}

}  // namespace

TEST_CASE("fork: a child calls and destroys a pool made before the fork", "[fork][pool]") {
  auto pool = std::make_unique<ml::thread_pool>(4);
  REQUIRE(pool_sum(*pool, tasks) == expected_sum);  // its workers have run
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) child_calls_and_destroys(std::move(pool));
  CHECK(wait_for_child(child) == child_ok);
  // The parent's pool is untouched by the child.
  CHECK(pool->concurrency() == 4);
  CHECK(pool_sum(*pool, tasks) == expected_sum);
}

TEST_CASE("fork: a spinning pool, and a fork of a fork", "[fork][pool]") {
  auto pool = std::make_unique<ml::thread_pool>(3, std::chrono::microseconds{200});
  REQUIRE(pool_sum(*pool, tasks) == expected_sum);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (pool_sum(*pool, tasks) != expected_sum) ::_exit(child_wrong_sum);
    const pid_t grandchild = ::fork();
    if (grandchild < 0) ::_exit(5);
    if (grandchild == 0) child_calls_and_destroys(std::move(pool));
    const int status = wait_for_child(grandchild);
    pool.reset();
    ::_exit(status == child_ok ? child_ok : 6);
  }
  CHECK(wait_for_child(child) == child_ok);
  CHECK(pool_sum(*pool, tasks) == expected_sum);
}

TEST_CASE("fork: during a call on another thread, the child neither waits for it nor joins",
          "[fork][pool]") {
  auto pool = std::make_unique<ml::thread_pool>(3);
  std::atomic<int> started{0};
  std::atomic<bool> release{false};
  // A call whose tasks hold the pool (its call lock taken, its workers busy) until released.
  std::thread caller([&] {
    auto task = [&](std::int64_t) {
      started.fetch_add(1);
      while (!release.load()) std::this_thread::sleep_for(std::chrono::microseconds{50});
    };
    pool->parallel_for(3, task);
  });
  while (started.load() < 3) std::this_thread::sleep_for(std::chrono::microseconds{50});
  const pid_t child = ::fork();
  if (child == 0) child_calls_and_destroys(std::move(pool));
  release.store(true);
  caller.join();
  REQUIRE(child > 0);
  CHECK(wait_for_child(child) == child_ok);
  CHECK(pool_sum(*pool, tasks) == expected_sum);
}

TEST_CASE("fork: a child that exits normally ends the process's static pool", "[fork][pool]") {
  REQUIRE(pool_sum(process_pool(), tasks) == expected_sum);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    leak_check_off.store(true);
    std::exit(child_ok);  // runs static destructors: process_pool()'s among them
  }
  CHECK(wait_for_child(child) == child_ok);
  CHECK(pool_sum(process_pool(), tasks) == expected_sum);
}
