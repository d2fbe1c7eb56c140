// Per-thread scratch of the host backend: decoded query rows and one decoded key tile. Buffers
// grow on first use and are reused by every later work item on the thread, so the hot loop
// never allocates; nothing is proportional to num_q x H x T.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "../../config.hpp"
#include "../../variant/plan.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// A 64-byte aligned array that only grows; new space is zeroed.
template <class T>
class aligned_buffer {
 public:
  aligned_buffer() = default;
  aligned_buffer(const aligned_buffer&) = delete;
  aligned_buffer& operator=(const aligned_buffer&) = delete;
  ~aligned_buffer() { release(); }

  T* reserve(std::size_t n) {
    if (n > size_) {
      release();
      data_ = static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64}));
      std::fill(data_, data_ + n, T{});
      size_ = n;
    }
    return data_;
  }
  T* data() const { return data_; }

 private:
  void release() {
    if (data_) ::operator delete (data_, std::align_val_t{64});
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

struct workspace {
  // Decoded query rows of the current item, and which call / rows they hold (consecutive items
  // of one row block reuse them: Q is decoded once per query on a thread).
  aligned_buffer<float> q_f32, w;
  aligned_buffer<std::int32_t> q_i8, q_bias;
  aligned_buffer<float> q_scale;
  // MXFP4 rows in their folded form too, when they fold (q_folds[row] / k_folds[key] say).
  aligned_buffer<std::int32_t> q_fold, q_fold_start;
  aligned_buffer<float> q_fold_scale;
  aligned_buffer<unsigned char> q_folds;
  std::uint64_t call = 0;
  std::int64_t row_begin = -1, row_end = -1;
  // One decoded key tile (+ padding rows a key group may read past the tile).
  aligned_buffer<float> k_f32, k_scale;
  aligned_buffer<std::uint8_t> k_i8, k_fold;
  aligned_buffer<float> k_fold_scale;
  aligned_buffer<unsigned char> k_folds;
  aligned_buffer<unsigned char> key_valid;
  aligned_buffer<key_ref> refs;
  aligned_buffer<float> scores;
};

inline workspace& thread_workspace() {
  thread_local workspace ws;
  return ws;
}

// The work list of a call, reused by every later call on the same thread at the same nesting
// depth (a kernel called from inside another call's task gets a list of its own): a warm call
// allocates nothing for it.
class scoped_work_list {
 public:
  scoped_work_list() : lists_(stack()) {
    if (lists_.depth == lists_.lists.size()) lists_.lists.push_back(std::make_unique<work_list>());
    list_ = lists_.lists[lists_.depth++].get();
  }
  scoped_work_list(const scoped_work_list&) = delete;
  scoped_work_list& operator=(const scoped_work_list&) = delete;
  ~scoped_work_list() { --lists_.depth; }
  work_list& get() const { return *list_; }

 private:
  struct lists_in_use {
    std::vector<std::unique_ptr<work_list>> lists;
    std::size_t depth = 0;
  };
  static lists_in_use& stack() {
    thread_local lists_in_use s;
    return s;
  }
  lists_in_use& lists_;
  work_list* list_;
};

// Every kernel call gets a fresh id, so a workspace never reuses rows decoded by another call.
inline std::uint64_t next_call_id() {
  static std::atomic<std::uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
