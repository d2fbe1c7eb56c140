// Scratch of the host backend: decoded query rows and one decoded key tile per running task.
// A call reserves every buffer its tasks need before it touches the output (so a failed
// allocation leaves the output as it was, and no task allocates), and the calling thread's
// later calls reuse them; nothing is proportional to num_q x H x T.
#pragma once

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "../../config.hpp"
#include "../../exec/thread_scratch.hpp"
#include "../../std_abi.hpp"
#include "../../variant/plan.hpp"
#include "kernel_abi.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// A 64-byte aligned array that only grows; new space is zeroed. A sealed buffer (inside a call's
// tasks) must already be large enough.
template <class T>
class aligned_buffer {
 public:
  aligned_buffer() = default;
  aligned_buffer(const aligned_buffer&) = delete;
  aligned_buffer& operator=(const aligned_buffer&) = delete;
  ~aligned_buffer() { release(); }

  T* reserve(std::size_t n) {
    if (n > size_) {
      assert(!sealed_ && "mqalogits: a task grew a workspace buffer its call did not reserve");
      release();
      data_ = static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64}));
      // (A loop, not std::fill: T may be a type of kernel_abi.hpp, which has one name in every
      // build, and a standard template instantiated on it would be too.)
      for (std::size_t i = 0; i < n; ++i) data_[i] = T{};
      size_ = n;
    }
    return data_;
  }
  T* data() const { return data_; }
  void seal(bool sealed) { sealed_ = sealed; }

 private:
  void release() {
    if (data_) ::operator delete (data_, std::align_val_t{64});
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
  bool sealed_ = false;
};

struct workspace {
  // Decoded query rows of the current item, and which call / rows they hold (consecutive items
  // of one row block reuse them: Q is decoded once per query on a thread).
  aligned_buffer<float> q_f32, w;
  aligned_buffer<std::int32_t> q_i8, q_bias;
  aligned_buffer<float> q_scale;
  // Rows in their compact form too, when they have it (q_compact[row] / k_compact[key] say):
  // MXFP4 rows folded, e4m3 rows as bf16 pairs.
  aligned_buffer<std::int32_t> q_fold, q_fold_start;
  aligned_buffer<float> q_fold_scale;
  aligned_buffer<std::uint32_t> q_bf16;
  aligned_buffer<float> q_bf16_scale;
  // Per row: 0, or what its compact form is (1 on the int8 path; on the bf16 path,
  // host_abi::bf16_pairs or bf16_scaled_pairs).
  aligned_buffer<unsigned char> q_compact;
  std::uint64_t call = 0;
  std::int64_t row_begin = -1, row_end = -1;
  // One decoded key tile (+ padding rows a key group may read past the tile).
  aligned_buffer<float> k_f32, k_scale;
  aligned_buffer<std::uint8_t> k_i8, k_fold;
  aligned_buffer<float> k_fold_scale;
  aligned_buffer<std::uint32_t> k_bf16;
  aligned_buffer<float> k_bf16_scale;
  aligned_buffer<unsigned char> k_compact;
  aligned_buffer<unsigned char> key_valid;
  // The addresses of the tile's keys, and of the tile scored next (fetched while this one is).
  aligned_buffer<host_abi::key_ptrs> refs, next_refs;
  aligned_buffer<float> scores;

  // Sealed while a call's tasks run: every buffer was reserved for the call before it.
  void seal(bool sealed) {
    for (auto* b : {&q_f32, &w, &q_scale, &q_fold_scale, &k_f32, &k_scale, &k_fold_scale,
                    &k_bf16_scale, &q_bf16_scale, &scores})
      b->seal(sealed);
    for (auto* b : {&q_i8, &q_bias, &q_fold, &q_fold_start}) b->seal(sealed);
    for (auto* b : {&q_bf16, &k_bf16}) b->seal(sealed);
    for (auto* b : {&q_compact, &k_i8, &k_fold, &k_compact, &key_valid}) b->seal(sealed);
    refs.seal(sealed);
    next_refs.seal(sealed);
  }
};

// What a call needs besides its output: the work list and one workspace per task that runs at
// once, reused by every later call on the same thread at the same nesting depth (a kernel
// called from inside another call's task gets scratch of its own): a warm call allocates
// nothing.
class scoped_call_scratch {
  struct slot {
    workspace ws;
    std::atomic<bool> busy{false};
  };
  struct scratch {
    work_list work;
    detail::vector<std::unique_ptr<slot>> slots;
    std::size_t active = 0;  // slots reserved for the current call
  };

 public:
  scoped_call_scratch() : scratch_(&lease_.get()) {}
  scoped_call_scratch(const scoped_call_scratch&) = delete;
  scoped_call_scratch& operator=(const scoped_call_scratch&) = delete;
  ~scoped_call_scratch() {
    for (std::size_t i = 0; i < scratch_->active; ++i) scratch_->slots[i]->ws.seal(false);
    scratch_->active = 0;
  }

  work_list& work() const { return scratch_->work; }

  // `count` (at least one) workspaces for the call's tasks, each passed to `reserve` (which
  // reserves every buffer a task uses) and then sealed. Call before the output is touched: this
  // is where the call's workspace allocations happen, and where std::bad_alloc comes from.
  template <class Reserve>
  void reserve(std::size_t count, Reserve&& reserve) const {
    count = std::max<std::size_t>(count, 1);
    auto& slots = scratch_->slots;
    if (slots.size() < count) {
      slots.reserve(count);
      while (slots.size() < count) slots.push_back(std::make_unique<slot>());
    }
    for (std::size_t i = 0; i < count; ++i) {
      workspace& ws = slots[i]->ws;
      ws.seal(false);
      reserve(ws);
      ws.seal(true);
    }
    scratch_->active = count;
  }

  // A reserved workspace no other task holds, for as long as it lives. The thread's previous
  // workspace first, so consecutive tasks on a thread reuse its decoded query rows. An executor
  // that runs more tasks at once than the call reserved for has the extra ones wait for one.
  class lease {
   public:
    explicit lease(const scoped_call_scratch& call) : slots_(call.scratch_->slots) {
      const std::size_t n = call.scratch_->active;
      assert(n > 0 && "mqalogits: a task ran before its call reserved workspaces");
      for (std::size_t tries = 0;; ++tries) {
        for (std::size_t i = 0; i < n; ++i) {
          const std::size_t at = (preferred() + i) % n;
          if (!slots_[at]->busy.exchange(true, std::memory_order_acquire)) {
            slot_ = slots_[at].get();
            preferred() = at;
            return;
          }
        }
        std::this_thread::yield();
      }
    }
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    ~lease() { slot_->busy.store(false, std::memory_order_release); }
    workspace& get() const { return slot_->ws; }

   private:
    static std::size_t& preferred() {
      thread_local std::size_t at = 0;
      return at;
    }
    const detail::vector<std::unique_ptr<slot>>& slots_;
    slot* slot_ = nullptr;
  };

 private:
  detail::thread_scratch<scratch> lease_;
  scratch* scratch_;
};

// Every kernel call gets a fresh id, so a workspace never reuses rows decoded by another call.
inline std::uint64_t next_call_id() {
  static std::atomic<std::uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
