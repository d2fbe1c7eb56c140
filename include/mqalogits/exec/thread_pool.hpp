// A small fixed-size thread pool implementing the executor concept.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "../config.hpp"
#include "executor.hpp"

MQALOGITS_NAMESPACE_BEGIN

// parallel_for hands out task indices through an atomic counter; the calling thread works too.
// One parallel_for runs at a time per pool (calls from several threads are serialised). The
// first exception thrown by a task is rethrown to the caller after all workers stop.
class thread_pool {
 public:
  explicit thread_pool(int threads = static_cast<int>(std::thread::hardware_concurrency()))
      : size_(std::max(1, threads)) {
    for (int i = 1; i < size_; ++i) workers_.emplace_back([this] { worker_loop(); });
  }
  ~thread_pool() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int concurrency() const { return size_; }

  void parallel_for(std::int64_t n, task_ref task) {
    if (n <= 0) return;
    if (size_ == 1 || n == 1) {
      for (std::int64_t i = 0; i < n; ++i) task(i);
      return;
    }
    std::lock_guard call_lock(call_mutex_);
    job current(task, n);
    {
      std::lock_guard lock(mutex_);
      job_ = &current;
      ++generation_;
    }
    wake_.notify_all();
    work_on(current);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return current.active == 0; });
    job_ = nullptr;
    if (current.failure) std::rethrow_exception(current.failure);
  }

 private:
  struct job {
    job(task_ref t, std::int64_t count) : task(t), n(count) {}
    task_ref task;
    std::int64_t n;
    std::atomic<std::int64_t> next{0};
    int active = 0;  // workers inside work_on, guarded by mutex_
    std::exception_ptr failure;
    std::mutex failure_mutex;
  };

  static void work_on(job& j) {
    for (std::int64_t i; (i = j.next.fetch_add(1, std::memory_order_relaxed)) < j.n;) {
      try {
        j.task(i);
      } catch (...) {
        std::lock_guard lock(j.failure_mutex);
        if (!j.failure) j.failure = std::current_exception();
        j.next.store(j.n, std::memory_order_relaxed);  // stop handing out work
      }
    }
  }

  void worker_loop() {
    std::uint64_t seen = 0;
    for (;;) {
      job* j;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || (job_ && generation_ != seen); });
        if (stop_) return;
        seen = generation_;
        j = job_;
        ++j->active;
      }
      work_on(*j);
      {
        std::lock_guard lock(mutex_);
        --j->active;
      }
      done_.notify_all();
    }
  }

  int size_;
  std::vector<std::thread> workers_;
  std::mutex call_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  job* job_ = nullptr;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
};

static_assert(executor<thread_pool>);

MQALOGITS_NAMESPACE_END
