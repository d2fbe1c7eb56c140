// What the ops' units share: the thread pool the kernels run on, the logits output and the
// errors (the ops themselves: dense_ops.cpp, paged_ops.cpp, sparse_ops.cpp; their schemas:
// registration.cpp).
#include "ops.hpp"  // first: it includes torch's headers in an order Clang takes

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <pthread.h>

#include <atomic>
#include <mutex>
#include <new>
#include <string>

namespace mqalogits_torch {

// The ops' pool, sized by torch's intra-op thread count. Held on the heap and never destroyed: a
// child made by fork() gets a fresh holder (the at-fork handler below), since the parent's mutex
// may have been held by another thread at the fork and its pool's workers do not exist there;
// the parent's pool is left to the child's exit, where an inherited pool neither waits nor joins.
struct pool_holder {
  std::mutex mutex;
  std::shared_ptr<ml::thread_pool> pool;
};
std::atomic<pool_holder*> pool_now{nullptr};

void fresh_pool_in_child() noexcept {
  pool_now.store(new (std::nothrow) pool_holder, std::memory_order_relaxed);
}

// Made when the library is loaded (one thread), so no first-use lock can be inherited held.
[[maybe_unused]] const bool pool_holder_made = [] {
  pool_now.store(new pool_holder, std::memory_order_release);
  ::pthread_atfork(nullptr, nullptr, &fresh_pool_in_child);
  return true;
}();

run_options options_for(bool clean_logits, bool truncate_long_contexts) {
  run_options r;
  r.opt.clean_logits = clean_logits;
  r.opt.truncate_long_contexts = truncate_long_contexts;
  const int n = at::get_num_threads();
  if (n > 1) {
    pool_holder* h = pool_now.load(std::memory_order_acquire);
    if (!h) throw std::bad_alloc();  // a forked child could not allocate its holder
    std::lock_guard lock(h->mutex);
    if (!h->pool || h->pool->concurrency() != n) h->pool = std::make_shared<ml::thread_pool>(n);
    r.pool = h->pool;  // kept alive by this call even if another one replaces it
    r.opt.executor = *r.pool;
  }
  return r;
}

void rethrow_as_value_error(const char* op, const char* message) {
  std::string text(message);
  const std::size_t colon = text.find(": ");
  if (colon != std::string::npos && text.find(' ') > colon) text.replace(0, colon, op);
  // The library's option as the op's callers know it: a keyword.
  const std::string option = "options::truncate_long_contexts";
  if (const auto at = text.find(option); at != std::string::npos)
    text.replace(at, option.size(), "truncate_long_contexts=True");
  C10_THROW_ERROR(ValueError, text);
}

at::Tensor logits_output(const char* where, const c10::optional<at::Tensor>& out, std::int64_t rows,
                         std::int64_t cols, c10::ScalarType dtype, const char* width_name) {
  check_logits_dtype(where, dtype);
  if (out.has_value()) {
    const at::Tensor& o = *out;
    ml::torch_checks::require_tensor(o, where, "out");
    ml::torch_checks::require_dtype(o, dtype, where, "out");
    ml::check::require(o.dim() == 2 && o.size(0) == rows && o.size(1) == cols, where, [&](auto& m) {
      m << "out has shape " << ml::torch_checks::shape{o} << ", expected [" << rows << ", " << cols
        << "]";
    });
    return o;
  }
  // Rows padded to a multiple of 1024 bytes, as DeepGEMM lays its logits out.
  // A width from the caller (max_seqlen_k, max_context_len): its rounding and the tensor's size
  // are overflow-checked, a ValueError naming it rather than torch's message about a negative
  // size.
  const std::int64_t per = 1024 / static_cast<std::int64_t>(c10::elementSize(dtype));
  const std::int64_t stride = ml::checked_round_up(where, width_name, cols, per);
  ml::checked_mul(where, width_name, rows, stride);  // the tensor's elements
  return at::empty({rows, stride}, at::TensorOptions().dtype(dtype)).slice(1, 0, cols);
}

}  // namespace mqalogits_torch
