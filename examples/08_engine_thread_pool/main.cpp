// Running the kernels on an engine's own thread pool. The library needs only an object with
//   void parallel_for(std::int64_t n, mqalogits::task_ref task);  // run task(i), i in [0, n)
//   int concurrency() const;
// so an engine writes a few-line adapter around whatever pool it already has; here a toy
// engine pool with a submit / wait_idle API (the shape of most job systems). Results are
// bitwise identical to the serial run, whatever the pool does with the order of tasks.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <queue>
#include <random>
#include <thread>
#include <vector>

#include <mqalogits/mqalogits.hpp>

namespace ml = mqalogits;

namespace engine {

// The engine's pool: FIFO jobs, no notion of parallel_for.
class job_pool {
 public:
  explicit job_pool(int threads) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { loop(); });
  }
  ~job_pool() {
    {
      std::lock_guard lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int size() const { return static_cast<int>(workers_.size()); }
  void submit(std::function<void()> job) {
    {
      std::lock_guard lock(m_);
      jobs_.push(std::move(job));
      ++pending_;
    }
    cv_.notify_one();
  }
  void wait_idle() {
    std::unique_lock lock(m_);
    idle_.wait(lock, [&] { return pending_ == 0; });
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (stop_ && jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop();
      }
      job();
      std::lock_guard lock(m_);
      if (--pending_ == 0) idle_.notify_all();
    }
  }
  std::vector<std::thread> workers_;
  std::queue<std::function<void()>> jobs_;
  std::mutex m_;
  std::condition_variable cv_, idle_;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace engine

// The adapter: one job per pool thread, each pulling task indices from a shared counter (so
// uneven tasks balance), and wait for all of them before returning, as parallel_for must.
struct engine_executor {
  engine::job_pool* pool;

  void parallel_for(std::int64_t n, ml::task_ref task) const {
    std::atomic<std::int64_t> next{0};
    for (int j = 0; j < pool->size(); ++j)
      pool->submit([&] {
        for (std::int64_t i; (i = next.fetch_add(1)) < n;) task(i);
      });
    pool->wait_idle();
  }
  int concurrency() const { return pool->size(); }
};
static_assert(ml::executor<engine_executor>);

int main() {
  const std::int64_t H = 64, num_q = 64, N = 4096;
  std::mt19937 rng(8);
  std::uniform_int_distribution<int> byte(0, 255), exponent(118, 124);
  std::vector<std::uint8_t> q(num_q * H * ml::mxfp4::data_bytes), q_sf(num_q * H * 4),
      kv(N * ml::mxfp4::data_bytes), kv_sf(N * 4);
  for (auto* v : {&q, &kv})
    for (auto& b : *v) b = static_cast<std::uint8_t>(byte(rng));
  for (auto* v : {&q_sf, &kv_sf})
    for (auto& b : *v) b = static_cast<std::uint8_t>(exponent(rng));
  std::vector<float> w(num_q * H);
  for (auto& x : w) x = static_cast<float>(byte(rng) - 128) / 128.0f;
  std::vector<std::int32_t> ks(num_q, 0), ke(num_q);
  for (std::int64_t i = 0; i < num_q; ++i) ke[i] = static_cast<std::int32_t>(N - num_q + i + 1);

  const ml::rows_view<ml::mxfp4> qv(q.data(), q_sf.data(), num_q * H);
  const ml::rows_view<ml::mxfp4> kvv(kv.data(), kv_sf.data(), N);
  const ml::matrix_view<const float> wv{w.data(), num_q, H, H};

  ml::logits_buffer<float> serial(num_q, N), pooled(num_q, N);
  ml::fp8_fp4_mqa_logits(qv, kvv, wv, ks, ke, N, serial.view());

  engine::job_pool pool(static_cast<int>(std::max(2u, std::thread::hardware_concurrency())));
  engine_executor exec{&pool};
  ml::fp8_fp4_mqa_logits(qv, kvv, wv, ks, ke, N, pooled.view(), {.executor = exec});

  bool same = true;
  for (std::int64_t r = 0; r < num_q; ++r)
    same = same && std::memcmp(&serial(r, 0), &pooled(r, 0), N * sizeof(float)) == 0;
  std::printf("dense MXFP4 %lld x %lld, H = %lld on the engine's %d-thread pool: %s\n",
              static_cast<long long>(num_q), static_cast<long long>(N), static_cast<long long>(H),
              exec.concurrency(), same ? "bitwise identical to the serial run" : "MISMATCH");
  return same ? 0 : 1;
}
