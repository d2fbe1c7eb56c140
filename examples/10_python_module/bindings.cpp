// The Python side of the extension `mqalogits._mqalogits` (see bindings_common.hpp for its units):
// DeepGEMM's indexer-logits API (deep_gemm.fp8_fp4_mqa_logits and the rest) with upstream's
// names, argument names, order and defaults, over numpy arrays (the package's __init__.py turns
// torch tensors into numpy views and the results back).
//
// Inputs are viewed in place, never copied (int64 index arrays excepted: see narrowed()): an
// array with the wrong dtype or a layout the view cannot describe is refused with ValueError
// instead of being converted. Outputs are the caller's buffers (out=, topk_out=,
// topk_values_out=), checked, or new numpy arrays whose rows are padded as upstream pads them (a
// row stride that is a multiple of 1024 bytes, the first row on a 1024-byte boundary). Library
// errors (mqalogits::error, a std::invalid_argument) reach Python as ValueError with the
// library's message. Kernels release the GIL and run on a pool of `num_threads` threads
// (see threads_of and pool_of), on the host backend whatever the build's default backend is.
#include "bindings.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "../op_registry/all_ops.hpp"
#include "../op_registry/pybind_def.hpp"
#include "bindings_common.hpp"
#include "py_arrays.hpp"

namespace mqalogits_python {

namespace py = pybind11;

namespace {

template <class T>
void require_dtype(const char* where, const char* name, const py::array& a, const char* want) {
  if (!has_dtype<T>(a))
    fail(where, std::string(name) + " has dtype " + dtype_name(a) + ", expected " + want);
}

void require_ndim(const char* where, const char* name, const py::array& a, int ndim,
                  const char* shape) {
  if (a.ndim() != ndim)
    fail(where, std::string(name) + " has shape " + shape_of(a) + ", expected " + shape);
}

// Trailing dimensions dense in memory (upstream's is_contiguous), leading one any stride.
bool inner_contiguous(const py::array& a) {
  py::ssize_t expect = a.itemsize();
  for (py::ssize_t i = a.ndim() - 1; i >= 1; --i) {
    if (a.shape(i) != 1 && a.strides(i) != expect) return false;
    expect *= a.shape(i);
  }
  return true;
}
bool contiguous(const py::array& a) {
  return inner_contiguous(a) &&
         (a.ndim() == 0 || a.shape(0) <= 1 || a.strides(0) == a.itemsize() * [&] {
           py::ssize_t n = 1;
           for (py::ssize_t i = 1; i < a.ndim(); ++i) n *= a.shape(i);
           return n;
         }());
}
void require_contiguous(const char* where, const char* name, const py::array& a) {
  if (!contiguous(a))
    fail(where, std::string(name) + " must be C-contiguous (views are built without copies)");
}

// Inputs the library never sees: the int64 index arrays (it reads their int32 copies) and the
// schedule_meta array (read into a schedule object first). A kernel call records them (a
// kernel_call_scope is open while its arguments are converted), and run_kernel checks its
// outputs against them, as the library checks every array it sees itself.
struct unseen_input {
  const char* name;
  std::uintptr_t begin, end;
};
thread_local std::vector<unseen_input> unseen_inputs;
thread_local bool in_kernel_call = false;
struct kernel_call_scope {
  kernel_call_scope() {
    unseen_inputs.clear();
    in_kernel_call = true;
  }
  ~kernel_call_scope() {
    unseen_inputs.clear();
    in_kernel_call = false;
  }
  kernel_call_scope(const kernel_call_scope&) = delete;
  kernel_call_scope& operator=(const kernel_call_scope&) = delete;
};

// Index arrays (lengths, block tables, ks / ke, indices) are int32 or int64 (torch's default
// integer type, and what vLLM's and sglang's CPU kernels take). int32 is read in place; int64 is
// narrowed (each value checked to fit) into one of a few per-thread buffers reused across calls,
// so a warm call allocates nothing: the kernels are compiled for int32 indices only, which keeps
// the module's build time at half of what a second index type would cost. The buffers are
// O(rows) integers, read once; the logits the kernels compute are O(rows x keys x heads).
// int64 [rows, cols] with rows `stride` elements apart -> a dense int32 [rows, cols] buffer.
const i32* narrowed(const char* where, const char* name, const std::int64_t* v, i64 rows, i64 cols,
                    i64 stride) {
  constexpr std::size_t ring = 16;  // more index arrays than any call takes
  thread_local std::vector<i32> buffers[ring];
  thread_local std::size_t next = 0;
  std::vector<i32>& b = buffers[next++ % ring];
  b.resize(static_cast<std::size_t>(std::max<i64>(rows * cols, 1)));
  if (in_kernel_call && rows > 0 && cols > 0) {
    const auto begin = reinterpret_cast<std::uintptr_t>(v);
    unseen_inputs.push_back(
        {name, begin, begin + static_cast<std::uintptr_t>(((rows - 1) * stride + cols) * 8)});
  }
  for (i64 r = 0; r < rows; ++r)
    for (i64 c = 0; c < cols; ++c) {
      const std::int64_t x = v[r * stride + c];
      if (x < INT32_MIN || x > INT32_MAX)
        fail(where, std::string(name) + " (int64) holds " + std::to_string(x) + " at [" +
                        std::to_string(r) + "][" + std::to_string(c) + "], outside int32");
      b[static_cast<std::size_t>(r * cols + c)] = static_cast<i32>(x);
    }
  return b.data();
}

void require_index_dtype(const char* where, const char* name, const py::array& a) {
  if (!has_dtype<i32>(a) && !has_dtype<std::int64_t>(a))
    fail(where, std::string(name) + " has dtype " + dtype_name(a) + ", expected int32 or int64");
}

// A 1-D int32 or int64 array as an int32 span.
std::span<const i32> int_span(const char* where, const char* name, const py::handle& obj) {
  const py::array a = as_array(where, name, obj);
  require_index_dtype(where, name, a);
  require_ndim(where, name, a, 1, "1-D");
  require_contiguous(where, name, a);
  const auto n = static_cast<std::size_t>(a.shape(0));
  if (has_dtype<std::int64_t>(a))
    return {narrowed(where, name, static_cast<const std::int64_t*>(a.data()), 1, a.shape(0), 0), n};
  return {static_cast<const i32*>(a.data()), n};
}

// The row stride, in elements of `item` bytes, of a 2-D array whose rows are dense: any stride,
// in whole elements, that keeps the rows apart. A stride of 0 (np.broadcast_to), one below the
// row's bytes (overlapping rows, np.lib.stride_tricks) or a negative one (a[::-1]) is refused:
// the view would describe rows x cols elements of smaller storage, or storage before the first
// row.
i64 dense_rows_stride(const char* where, const char* name, const py::array& a, py::ssize_t item) {
  require_ndim(where, name, a, 2, "2-D");
  if (a.shape(1) > 1 && a.strides(1) != item)
    fail(where, std::string(name) + " has column stride " + std::to_string(a.strides(1)) +
                    " bytes: its rows must be dense (stride(1) == itemsize " +
                    std::to_string(item) + ")");
  const i64 row_bytes = a.shape(1) * item;
  if (a.shape(0) > 1 && (a.strides(0) < row_bytes || a.strides(0) % item != 0))
    fail(where, std::string(name) + " has row stride " + std::to_string(a.strides(0)) +
                    " bytes for rows of " + std::to_string(row_bytes) +
                    " bytes: rows must not overlap or run backwards (no broadcast or negative "
                    "strides; np.ascontiguousarray copies it), and the stride must be whole "
                    "elements");
  return a.shape(0) > 1 ? a.strides(0) / item : a.shape(1);
}

// That array as a matrix_view of T (stored as Storage: bf16 as uint16 bits).
template <class T, class Storage = T>
ml::matrix_view<const T> matrix(const char* where, const char* name, const py::array& a) {
  const i64 stride = dense_rows_stride(where, name, a, static_cast<py::ssize_t>(sizeof(Storage)));
  return ml::matrix_view<const T>(reinterpret_cast<const T*>(a.data()), a.shape(0), a.shape(1),
                                  stride);
}

ml::matrix_view<const i32> int_matrix(const char* where, const char* name, const py::handle& obj) {
  const py::array a = as_array(where, name, obj);
  require_index_dtype(where, name, a);
  const bool wide = has_dtype<std::int64_t>(a);
  if (a.ndim() == 1) {  // [B] is [B, 1]
    require_contiguous(where, name, a);
    if (wide)
      return {narrowed(where, name, static_cast<const std::int64_t*>(a.data()), 1, a.shape(0), 0),
              a.shape(0), 1};
    return {static_cast<const i32*>(a.data()), a.shape(0), 1};
  }
  if (!wide) return matrix<i32>(where, name, a);
  const i64 stride = dense_rows_stride(where, name, a, 8);
  return {narrowed(where, name, static_cast<const std::int64_t*>(a.data()), a.shape(0), a.shape(1),
                   stride),
          a.shape(0), a.shape(1)};
}

// ---- formats ----

const char* format_label(qk_format f) {
  switch (f) {
    case qk_format::mxfp8:
      return "FP8 e4m3 with UE8M0 int32 scales";
    case qk_format::mxfp4:
      return "packed FP4 e2m1 (int8) with UE8M0 int32 scales";
    default:
      return "FP8 e4m3 with fp32 per-token K scales";
  }
}

// The codes of Q or K: uint8 [..., D] FP8 e4m3 codes (a float8 tensor viewed as uint8) or int8
// [..., D / 2] packed FP4 (DeepGEMM's kPackedFP4 dtype). Head dim D = 128 or 64, or 32 for FP8,
// as upstream; the library checks that Q and K agree.
bool is_fp4_codes(const char* where, const char* name, const py::array& a) {
  const bool fp4 = has_dtype<std::int8_t>(a);
  if (!fp4 && !has_dtype<std::uint8_t>(a))
    fail(where, std::string(name) + " has dtype " + dtype_name(a) +
                    ", expected uint8 (FP8 e4m3 codes) or int8 (packed FP4, two e2m1 per byte)");
  const i64 last = a.ndim() < 1 ? 0 : a.shape(a.ndim() - 1);
  const bool ok = fp4 ? last == 64 || last == 32 : last == 128 || last == 64 || last == 32;
  if (!ok)
    fail(where, std::string(name) + " has shape " + shape_of(a) + ": its last dimension must be " +
                    (fp4 ? "64 or 32 (head dim 128 or 64, two e2m1 per int8)"
                         : "128, 64 or 32 (the head dim, e4m3 codes)") +
                    "; packed FP4 must be int8, uint8 is read as FP8 codes");
  return fp4;
}

// The head dim of codes whose last dimension is `last` bytes.
int head_dim_of(i64 last, bool fp4) {
  return static_cast<int>(fp4 ? 2 * last : last);
}

q_input q_of(const char* where, const py::handle& q, int ndim) {
  py::tuple t;
  if (py::isinstance<py::tuple>(q) || py::isinstance<py::list>(q))
    t = py::reinterpret_borrow<py::object>(q).cast<py::tuple>();
  else
    fail(where, "q must be a tuple (q_codes, q_scales or None)");
  if (t.size() != 2) fail(where, "q must be a tuple (q_codes, q_scales or None)");
  const py::array codes = as_array(where, "q[0]", t[0]);
  const bool fp4 = is_fp4_codes(where, "q[0]", codes);
  if (codes.ndim() != ndim)
    fail(where, "q[0] has shape " + shape_of(codes) + ", expected " +
                    (ndim == 3 ? "[num_q, num_heads, head_dim]"
                               : "[batch_size, next_n, num_heads, head_dim]"));
  require_contiguous(where, "q[0]", codes);
  q_input in{};
  in.data = static_cast<const std::uint8_t*>(codes.data());
  in.head_dim = head_dim_of(codes.shape(codes.ndim() - 1), fp4);
  in.rows = 1;
  for (py::ssize_t i = 0; i + 1 < codes.ndim(); ++i) {
    in.dims.push_back(codes.shape(i));
    in.rows *= codes.shape(i);
  }
  if (t[1].is_none()) {
    if (fp4) fail(where, "packed FP4 q needs its UE8M0 scales (q[1] is None)");
    in.format = qk_format::fp8_per_token;
    in.scales = nullptr;
    return in;
  }
  const py::array sf = as_array(where, "q[1]", t[1]);
  require_dtype<i32>(where, "q[1]", sf, "int32 (four UE8M0 exponents per row)");
  bool same = sf.ndim() == codes.ndim() - 1;
  for (py::ssize_t i = 0; same && i < sf.ndim(); ++i) same = sf.shape(i) == codes.shape(i);
  if (!same)
    fail(where, "q[1] has shape " + shape_of(sf) + ", q[0] is " + shape_of(codes) +
                    ": one int32 of scales per (token, head) row");
  require_contiguous(where, "q[1]", sf);
  in.format = fp4 ? qk_format::mxfp4 : qk_format::mxfp8;
  in.scales = sf.data();
  return in;
}

// Token-major K: (codes [N, D], scales [N]: int32 UE8M0 with MX Q, float32 with per-token Q).
kv_input kv_of(const char* where, const py::handle& kv, qk_format format) {
  if (!(py::isinstance<py::tuple>(kv) || py::isinstance<py::list>(kv)) || py::len(kv) != 2)
    fail(where, "kv must be a tuple (kv_codes, kv_scales)");
  const py::tuple t = py::reinterpret_borrow<py::object>(kv).cast<py::tuple>();
  const py::array codes = as_array(where, "kv[0]", t[0]);
  const bool fp4 = is_fp4_codes(where, "kv[0]", codes);
  if (fp4 != (format == qk_format::mxfp4))
    fail(where, std::string("kv[0] is ") + (fp4 ? "packed FP4" : "FP8") + ", q is " +
                    format_label(format));
  require_ndim(where, "kv[0]", codes, 2, "[num_kv_tokens, head_dim]");
  if (codes.strides(1) != 1 || codes.strides(0) < codes.shape(1))
    fail(where, "kv[0] rows must be dense (stride(1) == 1)");
  const py::array sf = as_array(where, "kv[1]", t[1]);
  if (format == qk_format::fp8_per_token)
    require_dtype<float>(where, "kv[1]", sf, "float32 (one scale per token, as q has no scales)");
  else
    require_dtype<i32>(where, "kv[1]", sf, "int32 (four UE8M0 exponents per token)");
  require_ndim(where, "kv[1]", sf, 1, "[num_kv_tokens]");
  if (sf.shape(0) != codes.shape(0))
    fail(where, "kv[1] has " + std::to_string(sf.shape(0)) + " scales for " +
                    std::to_string(codes.shape(0)) + " kv rows");
  return {static_cast<const std::uint8_t*>(codes.data()),
          static_cast<const std::uint8_t*>(sf.data()),
          codes.shape(0),
          codes.shape(0) > 1 ? codes.strides(0) : codes.shape(1),
          sf.shape(0) > 1 ? sf.strides(0) : 4,
          head_dim_of(codes.shape(1), fp4)};
}

// The fused paged cache, uint8 [num_blocks, block_kv, 1, head_dim_with_sf]: per block, block_kv
// code rows then block_kv scale rows (vLLM's and sglang's indexer cache). head_dim_with_sf is
// the code bytes of the head dim + 4 (132 for FP8 at D = 128, 68 for MXFP4 at D = 128).
// The cache's blocks must not overlap: a block stride of 0 (every block the same bytes), below
// a block's bytes or negative would make the view describe num_blocks blocks of smaller
// storage (and a view's page stride of 0 means "packed").
void require_block_stride(const char* where, const py::array& c, i64 block_bytes) {
  if (c.shape(0) > 1 && c.strides(0) < block_bytes)
    fail(where, "kv_cache has block stride " + std::to_string(c.strides(0)) +
                    " bytes for blocks of " + std::to_string(block_bytes) +
                    " bytes: blocks must not overlap or run backwards");
}

cache_input cache_of(const char* where, const py::handle& obj, qk_format format) {
  const py::array c = as_array(where, "kv_cache", obj);
  require_dtype<std::uint8_t>(where, "kv_cache", c, "uint8");
  require_ndim(where, "kv_cache", c, 4, "[num_blocks, block_kv, 1, head_dim_with_sf]");
  const bool fp4 = format == qk_format::mxfp4;
  const i64 token_bytes = c.shape(3);
  // In range before it is narrowed to a head dim (a last dimension of 2^32 + 132 is no 128).
  const int head_dim =
      token_bytes > 4 && token_bytes <= 132 ? head_dim_of(token_bytes - 4, fp4) : 0;
  const bool known = head_dim == 128 || head_dim == 64 || (head_dim == 32 && !fp4);
  if (c.shape(2) != 1 || !known)
    fail(where, "kv_cache has shape " + shape_of(c) + ", expected [num_blocks, block_kv, 1, " +
                    (fp4 ? "68 or 36" : "132, 68 or 36") + "] (head dim " +
                    (fp4 ? "128 or 64" : "128, 64 or 32") + " + 4 scale bytes) for " +
                    format_label(format));
  if (c.strides(3) != 1 || (c.shape(1) > 1 && c.strides(1) != token_bytes))
    fail(where, "kv_cache blocks must be dense (stride(1) == head_dim_with_sf, stride(3) == 1)");
  const i64 used = c.shape(1) * token_bytes;
  require_block_stride(where, c, used);
  return {static_cast<const std::uint8_t*>(c.data()), c.shape(0),
          c.shape(0) > 1 ? i64{c.strides(0)} : used,
          ml::checked_int32(where, "kv_cache's block size (dimension 1)", c.shape(1)), head_dim};
}

// Weights [rows, H]: float32, float16, or bfloat16 as uint16 bits (a bf16 tensor's
// .view(torch.int16) is accepted as int16 too).
struct weights_input {
  py::array array;
  weights_type type;
};

weights_input weights_of(const char* where, const py::handle& obj) {
  const py::array a = as_array(where, "weights", obj);
  const bool f32 = has_dtype<float>(a);
  const bool b16 = has_dtype<std::uint16_t>(a) || has_dtype<std::int16_t>(a);
  const bool f16 = a.dtype().kind() == 'f' && a.dtype().itemsize() == 2;
  if (!f32 && !b16 && !f16)
    fail(where, "weights has dtype " + dtype_name(a) +
                    ", expected float32, float16 or bfloat16 bits as uint16 / int16");
  // [num_q, num_heads, 1] (sglang's weights before its squeeze) is read as [num_q, num_heads].
  if (a.ndim() == 3 && a.shape(2) == 1)
    return {
        py::array(a.dtype(), {a.shape(0), a.shape(1)}, {a.strides(0), a.strides(1)}, a.data(), a),
        f32   ? weights_type::f32
        : f16 ? weights_type::f16
              : weights_type::bf16};
  require_ndim(where, "weights", a, 2, "[num_q, num_heads] (or [num_q, num_heads, 1])");
  return {a, f32 ? weights_type::f32 : f16 ? weights_type::f16 : weights_type::bf16};
}

// ---- outputs ----

logits_type logits_dtype_of(const char* where, const py::handle& obj) {
  const std::string s = py::str(obj).cast<std::string>();
  if (s == "torch.float32" || s == "torch.float" || s == "float32" ||
      s == "<class 'numpy.float32'>")
    return logits_type::f32;
  if (s == "torch.bfloat16" || s == "bfloat16") return logits_type::bf16;
  fail(where, "logits_dtype = " + s + " is not supported (float32 or bfloat16)");
}

// x rounded up to a multiple of a; an overflow is a ValueError naming the argument.
i64 align_up(const char* where, const char* what, i64 x, i64 a) {
  return ml::checked_round_up(where, what, x, a);
}

// A new [rows, cols] array of T (float, or uint16: bf16 bits) whose rows start `stride` elements
// apart, the first on a 1024-byte boundary (upstream allocates [rows, stride] and returns the
// [:, :cols] slice).
template <class T>
py::array new_logits(const char* where, const char* width_name, i64 rows, i64 cols, i64 stride) {
  constexpr i64 align_elems = 1024 / static_cast<i64>(sizeof(T));
  const i64 elements = ml::checked_add(
      where, width_name, ml::checked_mul(where, width_name, rows, stride), align_elems);
  py::array_t<T> storage(std::max<i64>(elements, 1));
  T* base = storage.mutable_data();
  const auto misalign = reinterpret_cast<std::uintptr_t>(base) % 1024;
  T* first = base + (misalign ? (1024 - misalign) / sizeof(T) : 0);
  return py::array(py::dtype::of<T>(), {rows, cols},
                   {stride * static_cast<i64>(sizeof(T)), static_cast<i64>(sizeof(T))}, first,
                   storage);
}

// ---- threads ----

// num_threads=None: thread_pool::default_threads() (OMP_NUM_THREADS when set, else the CPUs
// this process may run on). The package's wrapper passes torch.get_num_threads() instead when the
// call has torch tensors, the count the torch op library always uses.
int threads_of(const char* where, std::optional<int> n) {
  if (!n) return ml::thread_pool::default_threads();
  if (*n < 1) fail(where, "num_threads = " + std::to_string(*n) + " must be >= 1");
  return *n;
}

// The pools of the last few thread counts used, made on first use and kept while in use
// (engines call these kernels every decode step; a pool per call would spawn threads per call).
// A call takes an idle pool of its count: while one Python thread's call runs on a pool, a call
// from another thread gets a second pool of that count (made then, kept for the next time), so
// calls from several threads run at once instead of queueing on one pool; their threads then
// share the CPUs. A new pool evicts the least recently used ones until at most max_pools pools and
// (besides the newest) at most 2 x the cores' threads remain; an evicted pool ends once no
// running call holds it. However many distinct counts a process passes, the idle threads stay
// bounded by the largest recent count plus 2 x the cores.
constexpr std::size_t max_pools = 4;

// The cache, on the heap and never destroyed: a child made by fork() (os.fork(), multiprocessing)
// gets a fresh one (the at-fork handler below), since the parent's may have been locked or
// half-updated by another thread at the fork, and its pools' workers do not exist there. The
// parent's pools are left to the child's exit, where an inherited pool neither waits nor joins.
struct pool_cache {
  std::mutex mutex;
  std::vector<std::pair<int, std::shared_ptr<ml::thread_pool>>> pools;  // most recent last
};
std::atomic<pool_cache*> pools_now{nullptr};

void fresh_pool_cache_in_child() noexcept {
  pools_now.store(new (std::nothrow) pool_cache, std::memory_order_relaxed);
}

// Made when the module is loaded (one thread, under the import lock), so no lock of a first use
// can be inherited held.
[[maybe_unused]] const bool pool_cache_made = [] {
  pools_now.store(new pool_cache, std::memory_order_release);
  ::pthread_atfork(nullptr, nullptr, &fresh_pool_cache_in_child);
  return true;
}();

pool_cache& pool_cache_now() {
  pool_cache* c = pools_now.load(std::memory_order_acquire);
  if (!c) throw std::bad_alloc();  // the child could not allocate its cache
  return *c;
}

std::shared_ptr<ml::thread_pool> pool_of(int n) {
  pool_cache& cache = pool_cache_now();
  auto& pools = cache.pools;
  std::vector<std::shared_ptr<ml::thread_pool>> evicted;  // end (join their threads) unlocked
  std::lock_guard lock(cache.mutex);
  // Idle: held by the cache alone (a running call holds a second reference until it returns).
  auto it = std::find_if(pools.begin(), pools.end(),
                         [&](const auto& p) { return p.first == n && p.second.use_count() == 1; });
  std::shared_ptr<ml::thread_pool> pool;
  if (it != pools.end()) {
    pool = it->second;
    pools.erase(it);
  } else {
    pool = std::make_shared<ml::thread_pool>(n);
  }
  pools.emplace_back(n, pool);
  const i64 cap = 2 * static_cast<i64>(std::max(1u, std::thread::hardware_concurrency()));
  const auto others = [&] {
    i64 t = 0;
    for (std::size_t i = 0; i + 1 < pools.size(); ++i) t += pools[i].first;
    return t;
  };
  while (pools.size() > 1 && (pools.size() > max_pools || others() > cap)) {
    evicted.push_back(std::move(pools.front().second));
    pools.erase(pools.begin());
  }
  return pool;
}

// Upstream's row strides: SM90 / SM100 tile KV by 256 and pad rows to 1024 bytes.
constexpr i64 upstream_block_kv = 256;
i64 upstream_stride(const char* where, const char* what, i64 cols_to_cover, logits_type t) {
  return align_up(where, what, cols_to_cover, 1024 / (t == logits_type::f32 ? 4 : 2));
}

// ---- fused selections: the kernels' keyword-only topk= and candidate_topk_blocks= ----
//
// kernel(..., topk=k) returns, instead of the logits, the int32 [rows, k] columns of each row's
// k largest valid logits (ranked by the fp32 logit, descending, ties to the lower column, -1
// padding: ml::topk), and with topk_values=True the tuple (indices, float32 values [rows, k]).
// topk_index numbers what is written: "column" (the default), "slot" on the paged and
// paged-sparse kernels (cache slots, block_table[b, pos // block_kv] * block_kv + pos % block_kv,
// what vLLM's and sglang's topk_transform make of the positions), "position" on the sparse
// kernels (the request-local position: token - ks on the sparse kernel, the context position on
// the paged-sparse one). topk_short_rows=True (dense and paged) writes a row with len <= k
// valid columns as those columns ascending, -1 after (no values).
// The dense and paged kernels' candidate_topk_blocks=N returns each row's N best blocks of
// candidate_block_size request-local positions, int32 [rows, N] (ml::candidate_blocks); with
// topk=k both come from one pass, as the tuple (indices[, values], blocks).
// The [rows, cols] logits are never materialised; logits_dtype and clean_logits do not apply.

struct topk_request {
  i64 k = 0;
  bool values = false;
  topk_numbering index = topk_numbering::column;
  bool short_rows = false;
};

// The kernels, for what their selections may be.
enum class kernel_kind { dense, paged, sparse, paged_sparse };

// The request of a call's topk / topk_values / topk_index / topk_short_rows keywords; nullopt
// when topk is None.
// topk_out / topk_values_out (the caller's buffers) imply the selection: k is topk_out's
// width when topk is None, and topk_values_out asks for the values.
struct kernel_outputs {
  py::object out, topk_out, topk_values_out;
  bool truncate = false;                  // truncate_long_contexts
  py::object topk_offset = py::none();    // the dense kernels' per-row top-k offset
  py::object candidate_out = py::none();  // the dense and paged kernels' candidate blocks
};

// A positive int32 count from a Python int keyword (topk, candidate_topk_blocks).
i64 count_of(const char* where, const char* name, const char* what, const py::object& v) {
  if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v))
    fail(where, std::string(name) + " must be an int (" + what + "), not " +
                    py::str(py::type::of(v)).cast<std::string>());
  int overflow = 0;
  const long long n = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  if (overflow < 0 || (overflow == 0 && n < 1))
    fail(where, std::string(name) + " = " + py::str(v).cast<std::string>() + " must be >= 1");
  if (overflow > 0 || n > INT32_MAX)
    fail(where,
         std::string(name) + " = " + py::str(v).cast<std::string>() + " must be at most 2^31 - 1");
  return n;
}

// The width of a caller's 2-D buffer that implies its selection's size.
py::int_ width_of(const char* where, const char* name, const py::object& buffer,
                  const char* shape) {
  const py::array a = as_array(where, name, buffer);
  if (a.ndim() != 2)
    fail(where, std::string(name) + " has shape " + shape_of(a) + ", expected " + shape);
  return py::int_(a.shape(1));
}

std::optional<topk_request> topk_of(const char* where, py::object topk, bool topk_values,
                                    const std::string& topk_index, kernel_kind kind,
                                    const kernel_outputs& outs, bool short_rows = false) {
  if (topk.is_none() && !outs.topk_out.is_none())
    topk = width_of(where, "topk_out", outs.topk_out, "[rows, k]");
  topk_values = topk_values || !outs.topk_values_out.is_none();
  const bool position = kind == kernel_kind::sparse || kind == kernel_kind::paged_sparse;
  const bool slot = kind == kernel_kind::paged || kind == kernel_kind::paged_sparse;
  if (topk_index != "column" && !(position && topk_index == "position") &&
      !(slot && topk_index == "slot"))
    fail(where, "topk_index = '" + topk_index + "' is not supported (" +
                    (kind == kernel_kind::dense    ? "'column'; 'slot' is the paged kernel's, "
                                                     "'position' the sparse kernels'"
                     : kind == kernel_kind::paged  ? "'column' or 'slot'"
                     : kind == kernel_kind::sparse ? "'column' or 'position'"
                                                   : "'column', 'position' or 'slot'") +
                    ")");
  if (topk.is_none()) {
    if (topk_values || topk_index != "column")
      fail(where, "topk_values / topk_index need topk = k");
    if (short_rows) fail(where, "topk_short_rows needs topk = k");
    return std::nullopt;
  }
  const i64 k = count_of(where, "topk", "the k of the selection", topk);
  if (short_rows && topk_values)
    fail(where,
         "topk_short_rows writes no values (a short row is not ranked): drop topk_values / "
         "topk_values_out");
  return topk_request{k, topk_values,
                      topk_index == "slot"       ? topk_numbering::slot
                      : topk_index == "position" ? topk_numbering::position
                                                 : topk_numbering::column,
                      short_rows};
}

// The candidate blocks of a dense or paged kernel call (ml::candidate_blocks).
struct candidate_request {
  i64 n = 0, block_size = 8;
  ml::candidate_order order = ml::candidate_order::ascending;
  ml::candidate_padding padding = ml::candidate_padding::minus_one;
};

// The request of a call's candidate_* keywords; nullopt when neither candidate_topk_blocks nor
// candidate_out is given (candidate_out alone: N is its width).
std::optional<candidate_request> candidates_of(const char* where, py::object topk_blocks,
                                               i64 block_size, const std::string& order,
                                               const std::string& padding,
                                               const py::object& candidate_out) {
  if (order != "ascending" && order != "score")
    fail(where, "candidate_order = '" + order + "' is not supported ('ascending' or 'score')");
  if (padding != "minus_one" && padding != "repeat_last")
    fail(where,
         "candidate_padding = '" + padding + "' is not supported ('minus_one' or 'repeat_last')");
  if (topk_blocks.is_none() && !candidate_out.is_none())
    topk_blocks = width_of(where, "candidate_out", candidate_out, "[rows, N]");
  if (topk_blocks.is_none()) {
    if (block_size != 8 || order != "ascending" || padding != "minus_one")
      fail(where,
           "candidate_block_size / candidate_order / candidate_padding need "
           "candidate_topk_blocks = N");
    return std::nullopt;
  }
  const i64 n = count_of(where, "candidate_topk_blocks", "the N of the blocks", topk_blocks);
  if (block_size < 1 || block_size > ml::max_candidate_block_size ||
      (block_size & (block_size - 1)) != 0)
    fail(where, "candidate_block_size = " + std::to_string(block_size) +
                    " must be a power of two in [1, 2^20]");
  return candidate_request{
      n, block_size, order == "score" ? ml::candidate_order::score : ml::candidate_order::ascending,
      padding == "repeat_last" ? ml::candidate_padding::repeat_last
                               : ml::candidate_padding::minus_one};
}

// What a dense or paged kernel call selects instead of its logits (neither: the logits).
struct selection {
  std::optional<topk_request> topk;
  std::optional<candidate_request> candidates;
  bool any() const { return topk || candidates; }
};

// The keywords of the dense and paged kernels' selections (see above), checked.
struct selection_keywords {
  const py::object& topk;
  bool topk_values;
  const std::string& topk_index;
  bool topk_short_rows;
  const py::object& candidate_topk_blocks;
  i64 candidate_block_size;
  const std::string& candidate_order;
  const std::string& candidate_padding;
};
selection selection_of(const char* where, kernel_kind kind, const kernel_outputs& outs,
                       const selection_keywords& k) {
  selection s;
  s.topk = topk_of(where, k.topk, k.topk_values, k.topk_index, kind, outs, k.topk_short_rows);
  s.candidates = candidates_of(where, k.candidate_topk_blocks, k.candidate_block_size,
                               k.candidate_order, k.candidate_padding, outs.candidate_out);
  return s;
}

// ---- the Python half of every kernel call ----

// A kernel's q, k (kv_input or cache_input) and weights, checked in that order.
template <class K>
struct kernel_inputs {
  q_input q;
  K k;
  weights_input w;
};

template <class K>
kernel_inputs<K> inputs_of(const char* where, q_input q, const py::handle& k,
                           const py::handle& weights) {
  const K ki = [&] {
    if constexpr (std::is_same_v<K, kv_input>)
      return kv_of(where, k, q.format);
    else
      return cache_of(where, k, q.format);
  }();
  weights_input wi = weights_of(where, weights);
  return {std::move(q), ki, std::move(wi)};
}

// What a kernel call returns: new logits [rows, cols] of `type` with rows `stride` elements
// apart, or with `topk` the top-k of each of the rows (cols, stride and type do not apply).
struct output_request {
  i64 rows = 0, cols = 0;
  const char* width_name = "the logits' width";  // the argument cols comes from, for errors
  i64 stride = 0;
  logits_type type = logits_type::f32;
  std::optional<topk_request> topk{};
  std::optional<candidate_request> candidates{};
  bool clean_logits = true;  // ml::options::clean_logits
  bool truncate = false;     // ml::options::truncate_long_contexts
  // The caller's buffers (None: new arrays): out for the logits, topk_out / topk_values_out for
  // the top-k's indices / values, candidate_out for the candidate blocks.
  py::object out = py::none(), topk_out = py::none(), topk_values_out = py::none(),
             candidate_out = py::none();
};

// A caller's output buffer: a writeable 2-D array of `rows` x `cols` elements whose rows are
// dense and do not overlap (any row stride at or above the row, as a slice of a larger buffer
// has); the library checks that it shares no byte with an input or another output.
py::array out_array(const char* where, const char* name, const py::object& obj, i64 rows, i64 cols,
                    bool dtype_ok, const char* want) {
  const py::array a = as_array(where, name, obj);
  if (!dtype_ok)
    fail(where, std::string(name) + " has dtype " + dtype_name(a) + ", expected " + want);
  if (a.ndim() != 2 || a.shape(0) != rows || a.shape(1) != cols)
    fail(where, std::string(name) + " has shape " + shape_of(a) + ", expected [" +
                    std::to_string(rows) + ", " + std::to_string(cols) + "]");
  if (!a.writeable()) fail(where, std::string(name) + " is read-only");
  return a;
}

// A library error as Python callers read it: named after the function they called (the legacy
// names run through fp8_fp4_*, whose name the library reports), with the keyword for an option.
std::string python_message(const char* where, std::string m) {
  const std::string name(where), legacy = "fp8_";
  if (name.rfind("fp8_fp4_", 0) != 0 && name.rfind(legacy, 0) == 0) {
    const std::string lib = "fp8_fp4_" + name.substr(legacy.size()) + ": ";
    if (m.rfind(lib, 0) == 0) m = name + ": " + m.substr(lib.size());
  }
  const std::string option = "options::truncate_long_contexts";
  if (const auto at = m.find(option); at != std::string::npos)
    m.replace(at, option.size(), "truncate_long_contexts=True");
  const std::string blocks = "candidate blocks [";  // the library's overlap check
  for (auto at = m.find(blocks); at != std::string::npos; at = m.find(blocks, at))
    m.replace(at, blocks.size() - 2, "candidate_out");
  return m;
}

// The outputs against the inputs the library does not see (unseen_inputs): no shared byte.
// topk_offset is exempt: it is copied before the kernel writes, and may share topk_out's bytes.
// candidate_out against the other outputs too, by their names (the library checks every pair).
void check_outputs_clear_of_unseen(const char* where, const output_view& ov) {
  const auto extent = [](const void* p, i64 rows, i64 cols, i64 stride, i64 item) {
    const auto b = reinterpret_cast<std::uintptr_t>(p);
    const bool empty = !p || rows <= 0 || cols <= 0;
    return std::pair<std::uintptr_t, std::uintptr_t>(
        b, empty ? b : b + static_cast<std::uintptr_t>(((rows - 1) * stride + cols) * item));
  };
  const struct {
    const char* name;
    std::pair<std::uintptr_t, std::uintptr_t> bytes;
  } outputs[] = {
      {"out", extent(ov.logits, ov.rows, ov.cols, ov.stride, ov.type == logits_type::f32 ? 4 : 2)},
      {"topk_out", extent(ov.topk_indices, ov.rows, ov.k, ov.topk_stride, 4)},
      {"topk_values_out", extent(ov.topk_values, ov.rows, ov.k, ov.values_stride, 4)},
      {"candidate_out", extent(ov.candidates, ov.rows, ov.n, ov.candidates_stride, 4)}};
  const auto meet = [](const auto& a, const auto& b) {
    return a.first < a.second && b.first < b.second && a.first < b.second && b.first < a.second;
  };
  for (const auto& o : outputs)
    if (std::string_view(o.name) != "candidate_out" && meet(o.bytes, outputs[3].bytes))
      fail(where, std::string("candidate_out overlaps ") + o.name +
                      ": the outputs of a call must not share a byte");
  for (const auto& o : outputs)
    for (const unseen_input& in : unseen_inputs)
      if (o.bytes.first < o.bytes.second && o.bytes.first < in.end && in.begin < o.bytes.second &&
          std::string_view(in.name) != "topk_offset")
        fail(where, std::string(o.name) + " overlaps " + in.name +
                        ": an output must not share a byte with an input");
}

// The one skeleton of every kernel binding: with the inputs checked and the output decided by
// the binding, it takes the thread pool of `num_threads`, checks the weights' layout, takes the
// caller's output buffers or makes new arrays, and runs kernel(args, views, output, options) with
// the GIL released (the kernel units' run_* functions: bindings_common.hpp). A binding states
// only what differs: its arguments' checks, its output's size, its kernel. It returns the
// output arrays (the caller's own when given).
template <class K, class Args>
py::object run_kernel(const char* where, const kernel_inputs<K>& in, const output_request& out,
                      std::optional<int> num_threads,
                      void (*kernel)(const Args&, const kernel_views<K>&, const output_view&,
                                     const ml::options&),
                      const Args& args) {
  const std::shared_ptr<ml::thread_pool> pool = pool_of(threads_of(where, num_threads));
  const ml::options opt{
      .executor = *pool, .clean_logits = out.clean_logits, .truncate_long_contexts = out.truncate};
  const py::array& wa = in.w.array;
  const py::ssize_t item = in.w.type == weights_type::f32 ? 4 : 2;  // bf16 / fp16 as uint16
  const kernel_views<K> views{in.q,
                              in.k,
                              {wa.data(), wa.shape(0), wa.shape(1),
                               dense_rows_stride(where, "weights", wa, item), in.w.type}};
  output_view ov{.rows = out.rows, .cols = out.cols, .stride = out.stride, .type = out.type};
  py::object result;
  if (out.topk || out.candidates) {
    if (!out.out.is_none())
      fail(where, out.topk ? "out is the logits' buffer; with topk the buffers are topk_out / "
                             "topk_values_out"
                           : "out is the logits' buffer; with candidate_topk_blocks the buffer "
                             "is candidate_out");
    py::list parts;  // returned in this order: indices, values, blocks
    if (out.topk) {
      const topk_request& t = *out.topk;
      py::array indices, values;
      if (out.topk_out.is_none()) {
        indices = py::array_t<i32>({out.rows, t.k});
      } else {
        indices = out_array(where, "topk_out", out.topk_out, out.rows, t.k,
                            has_dtype<i32>(as_array(where, "topk_out", out.topk_out)), "int32");
      }
      ov.topk_indices = static_cast<i32*>(indices.mutable_data());
      ov.topk_stride = dense_rows_stride(where, "topk_out", indices, 4);
      parts.append(indices);
      if (t.values) {
        if (out.topk_values_out.is_none()) {
          values = py::array_t<float>({out.rows, t.k});
        } else {
          values = out_array(
              where, "topk_values_out", out.topk_values_out, out.rows, t.k,
              has_dtype<float>(as_array(where, "topk_values_out", out.topk_values_out)), "float32");
        }
        ov.topk_values = static_cast<float*>(values.mutable_data());
        ov.values_stride = dense_rows_stride(where, "topk_values_out", values, 4);
        parts.append(values);
      }
      ov.k = t.k;
      ov.index = t.index;
      ov.short_rows = t.short_rows;
    }
    if (out.candidates) {
      const candidate_request& c = *out.candidates;
      py::array blocks;
      if (out.candidate_out.is_none()) {
        blocks = py::array_t<i32>({out.rows, c.n});
      } else {
        blocks =
            out_array(where, "candidate_out", out.candidate_out, out.rows, c.n,
                      has_dtype<i32>(as_array(where, "candidate_out", out.candidate_out)), "int32");
      }
      ov.candidates = static_cast<i32*>(blocks.mutable_data());
      ov.candidates_stride = dense_rows_stride(where, "candidate_out", blocks, 4);
      ov.n = c.n;
      ov.block_size = c.block_size;
      ov.order = c.order;
      ov.padding = c.padding;
      parts.append(blocks);
    }
    result = parts.size() == 1 ? py::object(parts[0]) : py::object(py::tuple(parts));
  } else {
    if (!out.topk_out.is_none() || !out.topk_values_out.is_none())
      fail(where, "topk_out / topk_values_out need topk = k (out is the logits' buffer)");
    py::array logits;
    if (out.out.is_none()) {
      logits =
          out.type == logits_type::f32
              ? new_logits<float>(where, out.width_name, out.rows, out.cols, out.stride)
              : new_logits<std::uint16_t>(where, out.width_name, out.rows, out.cols, out.stride);
    } else {
      const py::array a = as_array(where, "out", out.out);
      const bool f32 = out.type == logits_type::f32;
      // bf16 logits are uint16 bits (a bf16 tensor's int16 view passes too).
      const bool ok =
          f32 ? has_dtype<float>(a) : has_dtype<std::uint16_t>(a) || has_dtype<std::int16_t>(a);
      logits = out_array(where, "out", out.out, out.rows, out.cols, ok,
                         f32 ? "float32 (logits_dtype float32)"
                             : "bfloat16 bits as uint16 / int16 (logits_dtype bfloat16)");
      ov.stride = dense_rows_stride(where, "out", logits, f32 ? 4 : 2);
    }
    ov.logits = logits.mutable_data();
    result = logits;
  }
  check_outputs_clear_of_unseen(where, ov);
  try {
    py::gil_scoped_release release;
    kernel(args, views, ov, opt);
  } catch (const std::invalid_argument& e) {
    throw py::value_error(python_message(where, e.what()));
  }
  return result;
}

// ---- metadata objects ----

// get_mqa_logits_metadata: upstream's SM100 dense schedule. Here the dense kernel needs none;
// the object records what it was made for so a call with other lengths is refused, as a stale
// upstream schedule would be wrong.
struct mqa_logits_metadata {
  std::vector<i32> ks, ke;
  i64 num_kv_tokens = 0, num_heads = 0;
};

struct sparse_mqa_logits_metadata {
  ml::sparse_mqa_metadata meta;
  bool fp4 = false, use_unaligned_ks = false;
};

// Upstream's paged-sparse metadata resolves blocks once and every kernel call reads the cache it
// is given (vLLM and sglang reuse one metadata across indexer layers, each with its own cache):
// the library's reread protocol.
struct paged_sparse_mqa_logits_metadata {
  ml::paged_sparse_mqa_metadata meta;
  bool fp4 = false;
};

bool qk_dtype_is_fp4(const char* where, const py::handle& obj) {
  const std::string s = py::str(obj).cast<std::string>();
  if (s == "torch.int8" || s == "int8" || s == "<class 'numpy.int8'>" || s == "float4_e2m1fn_x2" ||
      s == "torch.float4_e2m1fn_x2")
    return true;
  if (s == "torch.float8_e4m3fn" || s == "float8_e4m3fn" || s == "uint8" ||
      s == "<class 'numpy.uint8'>" || s == "torch.uint8")
    return false;
  fail(where, "qk_dtype = " + s +
                  " is not supported: torch.float8_e4m3fn / numpy.uint8 (FP8) or torch.int8 / "
                  "numpy.int8 (packed FP4)");
}

// ---- metadata objects' makers ----

mqa_logits_metadata get_mqa_logits_metadata(const py::object& cu_seq_len_k_start,
                                            const py::object& cu_seq_len_k_end, i64 num_kv_tokens,
                                            i64 num_heads) {
  constexpr const char* where = "get_mqa_logits_metadata";
  const auto ks = int_span(where, "cu_seq_len_k_start", cu_seq_len_k_start);
  const auto ke = int_span(where, "cu_seq_len_k_end", cu_seq_len_k_end);
  if (ks.size() != ke.size() || ks.empty())
    fail(where, "cu_seq_len_k_start has " + std::to_string(ks.size()) +
                    " entries and cu_seq_len_k_end " + std::to_string(ke.size()) +
                    " (both num_q > 0)");
  if (num_kv_tokens <= 0)
    fail(where, "num_kv_tokens = " + std::to_string(num_kv_tokens) + " must be > 0");
  if (num_heads < 1 || num_heads > 128)
    fail(where, "num_heads = " + std::to_string(num_heads) + " must be in 1..128");
  return {std::vector<i32>(ks.begin(), ks.end()), std::vector<i32>(ke.begin(), ke.end()),
          num_kv_tokens, num_heads};
}

std::optional<std::span<const i32>> indices_of(const char* where, const py::object& indices);

// get_paged_mqa_logits_metadata returns upstream's schedule table, int32 [num_workers + 1, 2]
// (the library's array form: row w is where worker w starts, (block-table row, unit of its
// context), the last row the end). The paged kernels take it back (or a copy of it in the
// engine's own buffer): the library rebuilds the schedule from the call's context_lens, indices,
// the cache's block_kv and the table's worker count, and refuses a table that differs (stale
// lengths, another block_kv, another call's table), naming the first differing row; the kernel
// runs the rebuilt schedule, so no table makes it read outside the call's contexts.
// With out= (an engine's scheduler_metadata_buffer, int32 [num_sms + 1, 2]) the table is written
// there and out returned.
py::array get_paged_mqa_logits_metadata(const py::object& context_lens, i32 block_kv, int num_sms,
                                        const py::object& indices, const py::object& out) {
  constexpr const char* where = "get_paged_mqa_logits_metadata";
  const auto lens = int_matrix(where, "context_lens", context_lens);
  const auto idx = indices_of(where, indices);
  const ml::paged_mqa_schedule s =
      idx ? ml::get_paged_mqa_logits_metadata(lens, block_kv, num_sms, *idx)
          : ml::get_paged_mqa_logits_metadata(lens, block_kv, num_sms);
  const i64 rows = ml::paged_mqa_schedule_array_rows(s.num_workers());
  py::array table;
  if (out.is_none()) {
    table = py::array_t<i32>({rows, ml::paged_mqa_schedule_array_cols});
  } else {
    const py::array a = as_array(where, "out", out);
    table = out_array(where, "out", out, rows, ml::paged_mqa_schedule_array_cols, has_dtype<i32>(a),
                      "int32");
  }
  ml::write_paged_mqa_schedule_array(
      s, ml::matrix_view<i32>(static_cast<i32*>(table.mutable_data()), rows,
                              ml::paged_mqa_schedule_array_cols,
                              dense_rows_stride(where, "out", table, 4)));
  return table;
}

// The schedule of a paged kernel call, from its schedule_meta table (see above).
ml::paged_mqa_schedule schedule_of(const char* where, const py::object& schedule_meta,
                                   ml::matrix_view<const i32> lens, i32 block_kv,
                                   std::optional<std::span<const i32>> indices) {
  if (!py::isinstance<py::array>(schedule_meta))
    fail(where,
         "schedule_meta must be the int32 [num_workers + 1, 2] array of "
         "get_paged_mqa_logits_metadata, not " +
             py::str(py::type::of(schedule_meta)).cast<std::string>());
  const py::array a = as_array(where, "schedule_meta", schedule_meta);
  require_dtype<i32>(where, "schedule_meta", a, "int32 (get_paged_mqa_logits_metadata's)");
  const auto table = matrix<i32>(where, "schedule_meta", a);
  if (in_kernel_call && table.rows > 0) {
    const auto begin = reinterpret_cast<std::uintptr_t>(table.data);
    unseen_inputs.push_back(
        {"schedule_meta", begin,
         begin + static_cast<std::uintptr_t>(((table.rows - 1) * table.stride + table.cols) * 4)});
  }
  try {
    if (indices) return ml::paged_mqa_schedule_from_array(table, lens, block_kv, *indices);
    return ml::paged_mqa_schedule_from_array(table, lens, block_kv);
  } catch (const std::invalid_argument& e) {
    fail(where, std::string("schedule_meta: ") + e.what());  // the library names its helper
  }
}

sparse_mqa_logits_metadata get_sparse_mqa_logits_metadata(
    const py::object& cu_seq_len_k_start, const py::object& cu_seq_len_k_end, i64 num_kv_tokens,
    const py::object& sparse_kv_block_indices, const py::object& qk_dtype, i64 sparse_block_kv,
    bool use_unaligned_ks) {
  constexpr const char* where = "get_sparse_mqa_logits_metadata";
  const bool fp4 = qk_dtype_is_fp4(where, qk_dtype);
  const auto ks = int_span(where, "cu_seq_len_k_start", cu_seq_len_k_start);
  const auto ke = int_span(where, "cu_seq_len_k_end", cu_seq_len_k_end);
  const auto idx = int_matrix(where, "sparse_kv_block_indices", sparse_kv_block_indices);
  return {ml::get_sparse_mqa_logits_metadata(ks, ke, num_kv_tokens, idx, sparse_block_kv,
                                             use_unaligned_ks),
          fp4, use_unaligned_ks};
}

paged_sparse_mqa_logits_metadata get_paged_sparse_mqa_logits_metadata(
    const py::object& context_lens, const py::object& block_table, const py::object& indices,
    i32 page_kv, const py::object& sparse_kv_block_indices, const py::object& qk_dtype,
    i64 sparse_block_kv) {
  constexpr const char* where = "get_paged_sparse_mqa_logits_metadata";
  paged_sparse_mqa_logits_metadata m;
  m.fp4 = qk_dtype_is_fp4(where, qk_dtype);
  const auto lens = int_span(where, "context_lens", context_lens);
  const auto table = int_matrix(where, "block_table", block_table);
  const auto idx = int_span(where, "indices", indices);
  const auto sel = int_matrix(where, "sparse_kv_block_indices", sparse_kv_block_indices);
  // The library checks indices against the table (consecutive runs, identical rows) after
  // checking the shapes, so it never reads past an array.
  m.meta =
      ml::get_paged_sparse_mqa_logits_metadata(lens, table, idx, page_kv, sel, sparse_block_kv);
  return m;
}

// ---- the kernels ----

// A metadata object of the kernel's own kind (a wrong object is a named error, not pybind11's
// cast failure).
template <class M>
const M& metadata_of(const char* where, const char* name, const py::object& obj,
                     const char* maker) {
  if (!py::isinstance<M>(obj))
    fail(where, std::string(name) + " must be what " + maker + " returns, not " +
                    py::str(py::type::of(obj)).cast<std::string>());
  return obj.cast<const M&>();
}

output_request with_outputs(output_request r, const kernel_outputs& o) {
  r.out = o.out;
  r.topk_out = o.topk_out;
  r.topk_values_out = o.topk_values_out;
  r.candidate_out = o.candidate_out;
  r.truncate = o.truncate;
  return r;
}

// Dense.
// A get_mqa_logits_metadata result passed to the dense kernel must describe the call.
void check_dense_schedule(const char* where, const py::object& schedule_meta, const q_input& qi,
                          const kv_input& ki, std::span<const i32> ks, std::span<const i32> ke) {
  if (schedule_meta.is_none()) return;
  const auto& m = metadata_of<mqa_logits_metadata>(where, "schedule_meta", schedule_meta,
                                                   "get_mqa_logits_metadata");
  if (!std::equal(ks.begin(), ks.end(), m.ks.begin(), m.ks.end()) ||
      !std::equal(ke.begin(), ke.end(), m.ke.begin(), m.ke.end()) || m.num_kv_tokens != ki.rows ||
      (qi.dims.size() == 2 && m.num_heads != qi.dims[1]))
    fail(where,
         "schedule_meta was made for other cu_seq_len_k_start / cu_seq_len_k_end / "
         "num_kv_tokens / num_heads (regenerate it with get_mqa_logits_metadata)");
}

// Logits [num_q, max_seqlen_k or N] of type t, rows padded as upstream's.
output_request dense_output(const char* where, i64 rows, i64 num_kv, i64 max_seqlen_k,
                            logits_type t, bool clean_logits) {
  ml::check::max_seqlen_k(where, max_seqlen_k);  // the library's check, before sizing the array
  return {.rows = rows,
          .cols = max_seqlen_k == 0 ? num_kv : max_seqlen_k,
          .width_name = max_seqlen_k == 0 ? "num_kv" : "max_seqlen_k",
          .stride =
              max_seqlen_k == 0
                  ? upstream_stride(where, "num_kv",
                                    ml::checked_add(where, "num_kv", num_kv, upstream_block_kv), t)
                  : upstream_stride(
                        where, "max_seqlen_k",
                        align_up(where, "max_seqlen_k", max_seqlen_k, upstream_block_kv), t),
          .type = t,
          .clean_logits = clean_logits};
}

// The dense call of both names (the legacy one with a bare FP8 q, fp32 logits only).
py::object dense_call(const char* where, q_input qi, const py::object& kv,
                      const py::object& weights, const py::object& cu_seq_len_k_start,
                      const py::object& cu_seq_len_k_end, bool clean_logits, i64 max_seqlen_k,
                      std::optional<logits_type> logits, std::optional<int> num_threads,
                      const selection& sel, const kernel_outputs& outs, bool legacy) {
  const kernel_call_scope scope;
  const std::optional<topk_request>& t = sel.topk;
  const auto in = inputs_of<kv_input>(where, std::move(qi), kv, weights);
  const auto ks = int_span(where, "cu_seq_len_k_start", cu_seq_len_k_start);
  const auto ke = int_span(where, "cu_seq_len_k_end", cu_seq_len_k_end);
  const output_request out = with_outputs(
      sel.any() ? output_request{.rows = in.q.dims[0], .topk = t, .candidates = sel.candidates}
                : dense_output(where, in.q.dims[0], in.k.rows, max_seqlen_k,
                               logits.value_or(logits_type::f32), clean_logits),
      outs);
  // sglang's ragged prefill: each row's top-k columns plus its topk_indices_offset, -1 kept.
  // Added here after the selection (O(rows x k); a library output type of its own would compile
  // every dense kernel once more), from a copy taken before the kernel writes (the offsets may
  // share bytes with topk_out).
  thread_local std::vector<i32> offsets;
  offsets.clear();
  if (!outs.topk_offset.is_none()) {
    if (!t) fail(where, "topk_offset needs topk = k");
    const auto o = int_span(where, "topk_offset", outs.topk_offset);
    if (static_cast<i64>(o.size()) != out.rows)
      fail(where, "topk_offset has " + std::to_string(o.size()) + " entries for " +
                      std::to_string(out.rows) + " rows");
    const i64 cols = max_seqlen_k > 0 ? max_seqlen_k : in.k.rows;
    for (std::size_t r = 0; r < o.size(); ++r)
      if (o[r] < 0 || std::max<i64>(cols - 1, 0) > INT32_MAX - i64{o[r]})
        fail(where, "topk_offset[" + std::to_string(r) + "] = " + std::to_string(o[r]) +
                        ": must be >= 0, and column + offset must fit int32 (columns < " +
                        std::to_string(cols) + ")");
    offsets.assign(o.begin(), o.end());
  }
  // The legacy logits have their own compiled calls; its top-k is the per-token one of
  // fp8_fp4_mqa_logits (the same computation).
  py::object result =
      run_kernel(where, in, out, num_threads, legacy && !sel.any() ? &run_legacy_dense : &run_dense,
                 dense_args{ks, ke, max_seqlen_k, clean_logits});
  if (!offsets.empty()) {
    py::array idx = py::reinterpret_borrow<py::array>(
        py::isinstance<py::tuple>(result) ? py::object(result.cast<py::tuple>()[0]) : result);
    auto* base = static_cast<char*>(idx.mutable_data());
    for (py::ssize_t r = 0; r < idx.shape(0); ++r)
      for (py::ssize_t j = 0; j < idx.shape(1); ++j) {
        i32& v = *reinterpret_cast<i32*>(base + r * idx.strides(0) + j * idx.strides(1));
        if (v >= 0) v += offsets[static_cast<std::size_t>(r)];
      }
  }
  return result;
}

py::object fp8_fp4_mqa_logits(
    const py::object& q, const py::object& kv, const py::object& weights,
    const py::object& cu_seq_len_k_start, const py::object& cu_seq_len_k_end, bool clean_logits,
    i64 max_seqlen_k, const py::object& logits_dtype, const py::object& schedule_meta,
    std::optional<int> num_threads, bool truncate_long_contexts, const py::object& out,
    const py::object& topk, bool topk_values, const std::string& topk_index,
    const py::object& topk_out, const py::object& topk_values_out, const py::object& topk_offset,
    bool topk_short_rows, const py::object& candidate_topk_blocks, i64 candidate_block_size,
    const std::string& candidate_order, const std::string& candidate_padding,
    const py::object& candidate_out) {
  constexpr const char* where = "fp8_fp4_mqa_logits";
  const kernel_outputs outs{out,         topk_out,     topk_values_out, truncate_long_contexts,
                            topk_offset, candidate_out};
  const selection sel =
      selection_of(where, kernel_kind::dense, outs,
                   {topk, topk_values, topk_index, topk_short_rows, candidate_topk_blocks,
                    candidate_block_size, candidate_order, candidate_padding});
  q_input qi = q_of(where, q, 3);
  // The selections take no logits_dtype, and leave max_seqlen_k to the library.
  const logits_type lt = sel.any() ? logits_type::f32 : logits_dtype_of(where, logits_dtype);
  if (!schedule_meta.is_none()) {
    const auto k = kv_of(where, kv, qi.format);
    check_dense_schedule(where, schedule_meta, qi, k,
                         int_span(where, "cu_seq_len_k_start", cu_seq_len_k_start),
                         int_span(where, "cu_seq_len_k_end", cu_seq_len_k_end));
  }
  return dense_call(where, std::move(qi), kv, weights, cu_seq_len_k_start, cu_seq_len_k_end,
                    clean_logits, max_seqlen_k, lt, num_threads, sel, outs, false);
}

// Legacy names, through the library's legacy wrappers: Q is a bare FP8 array [.., H, D] (no
// scales), K per-token FP8 (fp32 scales), fp32 logits; topk= as on the fp8_fp4_* names.
q_input bare_q(const char* where, const py::object& q, int ndim) {
  if (py::isinstance<py::tuple>(q) || py::isinstance<py::list>(q))
    fail(where, "q is a bare FP8 array here (no scales); the fp8_fp4_* names take (q, q_scales)");
  const py::array codes = as_array(where, "q", q);
  if (is_fp4_codes(where, "q", codes)) fail(where, "q must be FP8 codes (uint8), not packed FP4");
  return q_of(where, py::make_tuple(q, py::none()), ndim);
}

py::object fp8_mqa_logits(const py::object& q, const py::object& kv, const py::object& weights,
                          const py::object& cu_seq_len_k_start, const py::object& cu_seq_len_k_end,
                          bool clean_logits, i64 max_seqlen_k, std::optional<int> num_threads,
                          bool truncate_long_contexts, const py::object& out,
                          const py::object& topk, bool topk_values, const std::string& topk_index,
                          const py::object& topk_out, const py::object& topk_values_out,
                          const py::object& topk_offset, bool topk_short_rows,
                          const py::object& candidate_topk_blocks, i64 candidate_block_size,
                          const std::string& candidate_order, const std::string& candidate_padding,
                          const py::object& candidate_out) {
  constexpr const char* where = "fp8_mqa_logits";
  const kernel_outputs outs{out,         topk_out,     topk_values_out, truncate_long_contexts,
                            topk_offset, candidate_out};
  const selection sel =
      selection_of(where, kernel_kind::dense, outs,
                   {topk, topk_values, topk_index, topk_short_rows, candidate_topk_blocks,
                    candidate_block_size, candidate_order, candidate_padding});
  return dense_call(where, bare_q(where, q, 3), kv, weights, cu_seq_len_k_start, cu_seq_len_k_end,
                    clean_logits, max_seqlen_k, std::nullopt, num_threads, sel, outs, true);
}

// Paged.
// The library checks the indices against the schedule and the block table.
// A paged call's context_lens: [batch_size, next_n], or upstream's 1-D [batch_size] with one
// length per request, whose next_n query rows are causal among themselves: row j sees the
// positions t <= context_lens[b] - next_n + j (ml::expand_context_lens writes that as the 2-D
// form, into a per-thread buffer the library reads in place of the caller's array). The
// schedule table get_paged_mqa_logits_metadata makes from the 1-D lengths is the one for the
// expanded lengths, so either form may make it.
ml::matrix_view<const i32> paged_lens(const char* where, const py::object& context_lens,
                                      const q_input& qi) {
  const py::array a = as_array(where, "context_lens", context_lens);
  const auto lens = int_matrix(where, "context_lens", context_lens);
  if (a.ndim() == 1 ? lens.rows != qi.dims[0] : lens.rows != qi.dims[0] || lens.cols != qi.dims[1])
    fail(where, "q is [" + std::to_string(qi.dims[0]) + ", " + std::to_string(qi.dims[1]) +
                    ", ...] but context_lens has shape " + shape_of(a) +
                    ": expected [batch_size, next_n] or [batch_size]");
  const i64 next_n = qi.dims[1];
  if (a.ndim() != 1 || next_n == 1) return lens;
  if (in_kernel_call && has_dtype<i32>(a) && lens.rows > 0) {  // int64: narrowed() recorded it
    const auto begin = reinterpret_cast<std::uintptr_t>(a.data());
    unseen_inputs.push_back(
        {"context_lens", begin, begin + static_cast<std::uintptr_t>(lens.rows * 4)});
  }
  thread_local std::vector<i32> expanded;
  expanded.resize(static_cast<std::size_t>(std::max<i64>(lens.rows * next_n, 1)));
  ml::expand_context_lens(std::span<const i32>(lens.data, static_cast<std::size_t>(lens.rows)),
                          ml::matrix_view<i32>(expanded.data(), lens.rows, next_n));
  return {expanded.data(), lens.rows, next_n};
}

std::optional<std::span<const i32>> indices_of(const char* where, const py::object& indices) {
  if (indices.is_none()) return std::nullopt;
  return int_span(where, "indices", indices);
}

// Logits [batch_size * next_n, max_context_len] of type t, rows padded as upstream's.
output_request paged_output(const char* where, ml::matrix_view<const i32> lens, i64 max_context_len,
                            logits_type t, bool clean_logits) {
  return {.rows = lens.rows * lens.cols,
          .cols = max_context_len,
          .width_name = "max_context_len",
          .stride = upstream_stride(
              where, "max_context_len",
              align_up(where, "max_context_len", max_context_len, upstream_block_kv), t),
          .type = t,
          .clean_logits = clean_logits};
}

// The paged call of both names (the legacy one with a bare FP8 q, fp32 logits only).
py::object paged_call(const char* where, q_input qi, const py::object& kv_cache,
                      const py::object& weights, const py::object& context_lens,
                      const py::object& block_table, const py::object& schedule_meta,
                      i64 max_context_len, bool clean_logits, logits_type lt,
                      const py::object& indices, std::optional<int> num_threads,
                      const selection& sel, const kernel_outputs& outs, bool legacy) {
  const kernel_call_scope scope;
  const auto in = inputs_of<cache_input>(where, std::move(qi), kv_cache, weights);
  if (sel.candidates && sel.candidates->block_size > in.k.page_kv)
    fail(where, "candidate_block_size = " + std::to_string(sel.candidates->block_size) +
                    " is larger than kv_cache's block_kv " + std::to_string(in.k.page_kv));
  const auto lens = paged_lens(where, context_lens, in.q);
  const auto table = int_matrix(where, "block_table", block_table);
  ml::check::max_context_len(where, max_context_len);  // the library's, before sizing the array
  const auto idx = indices_of(where, indices);
  const ml::paged_mqa_schedule schedule =
      schedule_of(where, schedule_meta, lens, in.k.page_kv, idx);
  const output_request out =
      with_outputs(sel.any() ? output_request{.rows = lens.rows * lens.cols,
                                              .topk = sel.topk,
                                              .candidates = sel.candidates}
                             : paged_output(where, lens, max_context_len, lt, clean_logits),
                   outs);
  // The selections are a unit of their own (paged_topk_kernels.cpp), the legacy name's too.
  return run_kernel(where, in, out, num_threads,
                    sel.any() ? &run_paged_topk
                    : legacy  ? &run_legacy_paged
                              : &run_paged,
                    paged_args{lens, table, schedule, max_context_len, idx, clean_logits});
}

py::object fp8_fp4_paged_mqa_logits(
    const py::object& q, const py::object& kv_cache, const py::object& weights,
    const py::object& context_lens, const py::object& block_table, const py::object& schedule_meta,
    i64 max_context_len, bool clean_logits, const py::object& logits_dtype,
    const py::object& indices, std::optional<int> num_threads, bool truncate_long_contexts,
    const py::object& out, const py::object& topk, bool topk_values, const std::string& topk_index,
    const py::object& topk_out, const py::object& topk_values_out, bool topk_short_rows,
    const py::object& candidate_topk_blocks, i64 candidate_block_size,
    const std::string& candidate_order, const std::string& candidate_padding,
    const py::object& candidate_out) {
  constexpr const char* where = "fp8_fp4_paged_mqa_logits";
  const kernel_outputs outs{out,        topk_out,     topk_values_out, truncate_long_contexts,
                            py::none(), candidate_out};
  const selection sel =
      selection_of(where, kernel_kind::paged, outs,
                   {topk, topk_values, topk_index, topk_short_rows, candidate_topk_blocks,
                    candidate_block_size, candidate_order, candidate_padding});
  q_input qi = q_of(where, q, 4);
  // The selections take no logits_dtype.
  const logits_type lt = sel.any() ? logits_type::f32 : logits_dtype_of(where, logits_dtype);
  return paged_call(where, std::move(qi), kv_cache, weights, context_lens, block_table,
                    schedule_meta, max_context_len, clean_logits, lt, indices, num_threads, sel,
                    outs, false);
}

py::object fp8_paged_mqa_logits(const py::object& q, const py::object& kv_cache,
                                const py::object& weights, const py::object& context_lens,
                                const py::object& block_table, const py::object& schedule_meta,
                                i64 max_context_len, bool clean_logits, const py::object& indices,
                                std::optional<int> num_threads, bool truncate_long_contexts,
                                const py::object& out, const py::object& topk, bool topk_values,
                                const std::string& topk_index, const py::object& topk_out,
                                const py::object& topk_values_out, bool topk_short_rows,
                                const py::object& candidate_topk_blocks, i64 candidate_block_size,
                                const std::string& candidate_order,
                                const std::string& candidate_padding,
                                const py::object& candidate_out) {
  constexpr const char* where = "fp8_paged_mqa_logits";
  const kernel_outputs outs{out,        topk_out,     topk_values_out, truncate_long_contexts,
                            py::none(), candidate_out};
  const selection sel =
      selection_of(where, kernel_kind::paged, outs,
                   {topk, topk_values, topk_index, topk_short_rows, candidate_topk_blocks,
                    candidate_block_size, candidate_order, candidate_padding});
  return paged_call(where, bare_q(where, q, 4), kv_cache, weights, context_lens, block_table,
                    schedule_meta, max_context_len, clean_logits, logits_type::f32, indices,
                    num_threads, sel, outs, true);
}

// Sparse and paged-sparse: bf16 logits, as upstream.
void check_cap(const char* where, i64 num_max_sparse_blocks, i64 sparse_block_kv, i64 cap,
               i64 block) {
  if (num_max_sparse_blocks != cap)
    fail(where, "num_max_sparse_blocks = " + std::to_string(num_max_sparse_blocks) +
                    " but the metadata has " + std::to_string(cap) + " blocks per row");
  if (sparse_block_kv != block)
    fail(where, "sparse_block_kv = " + std::to_string(sparse_block_kv) +
                    " but the metadata was made with " + std::to_string(block));
}

void check_fp4(const char* where, qk_format f, bool meta_fp4) {
  if ((f == qk_format::mxfp4) != meta_fp4)
    fail(where, std::string("q is ") + format_label(f) +
                    " but the metadata was made for qk_dtype " + (meta_fp4 ? "packed FP4" : "FP8"));
}

// The sparse kernel's arguments must agree with its metadata.
void check_sparse_call(const char* where, const q_input& qi,
                       const sparse_mqa_logits_metadata& metadata, i64 num_max_sparse_blocks,
                       i64 sparse_block_kv, bool use_unaligned_ks) {
  check_fp4(where, qi.format, metadata.fp4);
  check_cap(where, num_max_sparse_blocks, sparse_block_kv, metadata.meta.capacity(),
            metadata.meta.sparse_block_kv());
  if (use_unaligned_ks != metadata.use_unaligned_ks)
    fail(where, std::string("use_unaligned_ks = ") + (use_unaligned_ks ? "True" : "False") +
                    " but the metadata was made with " +
                    (metadata.use_unaligned_ks ? "True" : "False"));
}

// What both sparse kernels return: bf16 logits [rows, capacity x block] in upstream's padded
// rows, or with `topk` the top-k of each row.
template <class Meta>
output_request sparse_output(const char* where, const Meta& meta,
                             const std::optional<topk_request>& topk) {
  return {.rows = meta.num_rows(),
          .cols = meta.num_cols(),
          .width_name = "the metadata's columns",
          .stride =
              upstream_stride(where, "the metadata's columns", meta.num_cols(), logits_type::bf16),
          .type = logits_type::bf16,
          .topk = topk};
}

py::object fp8_fp4_sparse_mqa_logits(const py::object& q, const py::object& kv,
                                     const py::object& weights, const py::object& metadata_obj,
                                     i64 num_max_sparse_blocks, i64 sparse_block_kv,
                                     bool use_unaligned_ks, std::optional<int> num_threads,
                                     const py::object& out, const py::object& topk,
                                     bool topk_values, const std::string& topk_index,
                                     const py::object& topk_out,
                                     const py::object& topk_values_out) {
  constexpr const char* where = "fp8_fp4_sparse_mqa_logits";
  const kernel_outputs outs{out, topk_out, topk_values_out};
  const auto t = topk_of(where, topk, topk_values, topk_index, kernel_kind::sparse, outs);
  const auto& metadata = metadata_of<sparse_mqa_logits_metadata>(where, "metadata", metadata_obj,
                                                                 "get_sparse_mqa_logits_metadata");
  const auto in = inputs_of<kv_input>(where, q_of(where, q, 3), kv, weights);
  check_sparse_call(where, in.q, metadata, num_max_sparse_blocks, sparse_block_kv,
                    use_unaligned_ks);
  const auto& meta = metadata.meta;
  return run_kernel(where, in, with_outputs(sparse_output(where, meta, t), outs), num_threads,
                    &run_sparse, meta);
}

// The paged-sparse Q: [num_q, H, D] or decode's [num_q, 1, H, D].
q_input paged_sparse_q(const char* where, const py::object& q) {
  const py::tuple t = py::isinstance<py::tuple>(q) ? py::tuple(q) : py::tuple();
  const bool four_d = t.size() == 2 && py::isinstance<py::array>(t[0]) &&
                      py::reinterpret_borrow<py::array>(t[0]).ndim() == 4;
  q_input qi = q_of(where, q, four_d ? 4 : 3);
  if (four_d) {
    if (qi.dims[1] != 1)
      fail(where, "q has next_n = " + std::to_string(qi.dims[1]) + ", expected 1");
    qi.dims.erase(qi.dims.begin() + 1);
  }
  return qi;
}

// The paged-sparse kernel's arguments must agree with its metadata.
void check_paged_sparse_call(const char* where, const q_input& qi, const cache_input& ci,
                             const paged_sparse_mqa_logits_metadata& metadata,
                             i64 num_max_sparse_blocks, i64 sparse_block_kv) {
  check_fp4(where, qi.format, metadata.fp4);
  const auto& meta = metadata.meta;
  check_cap(where, num_max_sparse_blocks, sparse_block_kv, meta.capacity(), meta.sparse_block_kv());
  if (ci.page_kv != meta.page_kv())
    fail(where, "kv_cache has block_kv = " + std::to_string(ci.page_kv) +
                    " but the metadata was made with page_kv = " + std::to_string(meta.page_kv()));
}

py::object fp8_fp4_paged_sparse_mqa_logits(
    const py::object& q, const py::object& kv_cache, const py::object& weights,
    const py::object& metadata_obj, i64 num_max_sparse_blocks, i64 sparse_block_kv,
    std::optional<int> num_threads, bool truncate_long_contexts, const py::object& out,
    const py::object& topk, bool topk_values, const std::string& topk_index,
    const py::object& topk_out, const py::object& topk_values_out) {
  constexpr const char* where = "fp8_fp4_paged_sparse_mqa_logits";
  const kernel_outputs outs{out, topk_out, topk_values_out, truncate_long_contexts};
  const auto t = topk_of(where, topk, topk_values, topk_index, kernel_kind::paged_sparse, outs);
  const auto& metadata = metadata_of<paged_sparse_mqa_logits_metadata>(
      where, "metadata", metadata_obj, "get_paged_sparse_mqa_logits_metadata");
  const auto in = inputs_of<cache_input>(where, paged_sparse_q(where, q), kv_cache, weights);
  check_paged_sparse_call(where, in.q, in.k, metadata, num_max_sparse_blocks, sparse_block_kv);
  const auto& meta = metadata.meta;
  return run_kernel(where, in, with_outputs(sparse_output(where, meta, t), outs), num_threads,
                    &run_paged_sparse, meta);
}

// ---- the cache writer ----

// vLLM's indexer_k_quant_and_cache(k, kv_cache, slot_mapping, quant_block_size, scale_fmt): k
// [num_tokens, 128] float32 or bfloat16 bits, quantised to FP8 with one fp32 scale per token as
// vLLM computes it (amax clamped at 1e-4, / 448, a power of two with scale_fmt "ue8m0") into
// kv_cache uint8 [num_blocks, block_size, 132] (or [..., 1, 132]) in place, token t at slot
// slot_mapping[t] (int64 or int32; negative skips). hadamard=True stores each token's
// Walsh-Hadamard rotation (DeepSeek-V4's K), computed in float32 in the same pass.
void indexer_k_quant_and_cache(const py::object& k, const py::object& kv_cache,
                               const py::object& slot_mapping, i64 quant_block_size,
                               const py::object& scale_fmt, bool hadamard) {
  constexpr const char* where = "indexer_k_quant_and_cache";
  if (quant_block_size != ml::head_dim)
    fail(where, "quant_block_size = " + std::to_string(quant_block_size) +
                    " is not supported (128: one scale per token)");
  const std::string fmt = scale_fmt.is_none() ? "" : py::str(scale_fmt).cast<std::string>();
  if (fmt != "" && fmt != "ue8m0")
    fail(where, "scale_fmt = " + fmt + " is not supported (\"ue8m0\" or None)");
  const py::array ka = as_array(where, "k", k);
  py::array c = as_array(where, "kv_cache", kv_cache);
  require_dtype<std::uint8_t>(where, "kv_cache", c, "uint8");
  if (!c.writeable()) fail(where, "kv_cache is read-only (the tokens are written into it)");
  const bool four = c.ndim() == 4;
  if ((c.ndim() != 3 && !four) || (four && c.shape(2) != 1) || c.shape(c.ndim() - 1) != 132)
    fail(where, "kv_cache has shape " + shape_of(c) +
                    ", expected [num_blocks, block_size, 132] (or [num_blocks, block_size, 1, "
                    "132])");
  if (c.strides(c.ndim() - 1) != 1 || (c.shape(1) > 1 && c.strides(1) != 132) || c.strides(0) < 0)
    fail(where, "kv_cache blocks must be dense (stride(1) == 132, stride(-1) == 1)");
  const i32 block_size =
      ml::checked_int32(where, "kv_cache's block size (dimension 1)", c.shape(1));
  require_block_stride(where, c, i64{block_size} * 132);
  const i64 stride = c.shape(0) > 1 ? i64{c.strides(0)} : i64{block_size} * 132;
  const ml::mutable_paged_cache<ml::fp8_per_token> cache(
      static_cast<std::uint8_t*>(c.mutable_data()), c.shape(0), block_size, stride);
  const ml::per_token_scaling scaling = ml::vllm_indexer_k_scaling(fmt == "ue8m0");
  const ml::row_rotation rotation = hadamard ? ml::row_rotation::hadamard : ml::row_rotation::none;
  const py::array sa = as_array(where, "slot_mapping", slot_mapping);
  require_ndim(where, "slot_mapping", sa, 1, "[num_tokens]");
  require_contiguous(where, "slot_mapping", sa);
  const auto store = [&](auto kv) {
    if (has_dtype<std::int64_t>(sa))
      ml::store_into_pages(
          kv,
          std::span<const std::int64_t>(static_cast<const std::int64_t*>(sa.data()),
                                        static_cast<std::size_t>(sa.shape(0))),
          cache, scaling, rotation);
    else if (has_dtype<i32>(sa))
      ml::store_into_pages(kv,
                           std::span<const i32>(static_cast<const i32*>(sa.data()),
                                                static_cast<std::size_t>(sa.shape(0))),
                           cache, scaling, rotation);
    else
      fail(where, "slot_mapping has dtype " + dtype_name(sa) + ", expected int64 or int32");
  };
  if (has_dtype<float>(ka))
    store(matrix<float>(where, "k", ka));
  else if (has_dtype<std::uint16_t>(ka) || has_dtype<std::int16_t>(ka))
    store(matrix<ml::bf16, std::uint16_t>(where, "k", ka));
  else
    fail(where, "k has dtype " + dtype_name(ka) + ", expected float32 or bfloat16 bits as uint16");
}

}  // namespace

// ---- each part's functions, in the module (module.cpp calls these) ----

// set_num_sms's value; 0: not set (get_num_sms reports the default thread count).
static std::atomic<int> num_sms_setting{0};

// The classes come first: the kernels' signatures name them. Each function's names, defaults
// and docstring are its declaration's (examples/op_registry).
void register_metadata(py::module_& m) {
  namespace ops = mqalogits_bindings;
  using ops::def_op;
  py::class_<mqa_logits_metadata>(m, "MqaLogitsMetadata");
  py::class_<sparse_mqa_logits_metadata>(m, "SparseMqaLogitsMetadata");
  py::class_<paged_sparse_mqa_logits_metadata>(m, "PagedSparseMqaLogitsMetadata");

  // The host path the kernels run: in the default build, the one chosen at run time for this
  // CPU (runtime dispatch), which limit_host_isa caps.
  def_op<ops::host_isa_name>(m, [] { return std::string(mqalogits::host_isa_name()); });
#if defined(MQALOGITS_RUNTIME_DISPATCH)
  def_op<ops::limit_host_isa>(
      m, [](const std::string& path) { return std::string(mqalogits::limit_host_isa(path)); });
#endif
  def_op<ops::get_mqa_logits_metadata>(m, &get_mqa_logits_metadata);
  def_op<ops::get_paged_mqa_logits_metadata>(m, &get_paged_mqa_logits_metadata);
  // DeepGEMM's device setting, on the host: the number of work partitions an engine asks
  // get_paged_mqa_logits_metadata for (its num_sms argument), default the kernels' default
  // thread count. The kernels run a schedule of any partition count on any number of threads
  // (num_threads), so this only sets what get_num_sms() reports.
  def_op<ops::get_num_sms>(m, [] {
    const int n = num_sms_setting.load(std::memory_order_relaxed);
    return n > 0 ? n : ml::thread_pool::default_threads();
  });
  def_op<ops::set_num_sms>(m, [](int n) {
    if (n < 1 || n > ml::max_paged_workers)
      fail("set_num_sms", "num_sms = " + std::to_string(n) + " must be in [1, " +
                              std::to_string(ml::max_paged_workers) + "]");
    num_sms_setting.store(n, std::memory_order_relaxed);
  });
  def_op<ops::get_sparse_mqa_logits_metadata>(m, &get_sparse_mqa_logits_metadata);
  def_op<ops::get_paged_sparse_mqa_logits_metadata>(m, &get_paged_sparse_mqa_logits_metadata);
}

void register_kernels(py::module_& m) {
  namespace ops = mqalogits_bindings;
  using ops::def_op;
  def_op<ops::fp8_fp4_mqa_logits>(m, &fp8_fp4_mqa_logits);
  def_op<ops::fp8_mqa_logits>(m, &fp8_mqa_logits);
  def_op<ops::fp8_fp4_paged_mqa_logits>(m, &fp8_fp4_paged_mqa_logits);
  def_op<ops::fp8_paged_mqa_logits>(m, &fp8_paged_mqa_logits);
  def_op<ops::fp8_fp4_sparse_mqa_logits>(m, &fp8_fp4_sparse_mqa_logits);
  def_op<ops::fp8_fp4_paged_sparse_mqa_logits>(m, &fp8_fp4_paged_sparse_mqa_logits);
  def_op<ops::indexer_k_quant_and_cache>(m, &indexer_k_quant_and_cache);
}

}  // namespace mqalogits_python
