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
//
// One unit (pybind11's headers parse once) in parts, bindings/*.hpp: the arrays' checks, the
// formats, the outputs, the threads, the selections, the kernel call, the metadata, each
// kernel family and the cache writer; this file adds them to the module.
#include "bindings.hpp"

#include <atomic>
#include <string>

#include "../op_registry/all_ops.hpp"
#include "../op_registry/pybind_def.hpp"
#include "bindings/cache_writer.hpp"  // and, through it, every part before it

namespace mqalogits_python {

namespace py = pybind11;

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
  // The kernels read their arguments by name from their declarations.
  using ops::def_op_reading;
  def_op_reading<ops::fp8_fp4_mqa_logits>(m, [](const auto& a) { return fp8_fp4_mqa_logits(a); });
  def_op_reading<ops::fp8_mqa_logits>(m, [](const auto& a) { return fp8_mqa_logits(a); });
  def_op_reading<ops::fp8_fp4_paged_mqa_logits>(
      m, [](const auto& a) { return fp8_fp4_paged_mqa_logits(a); });
  def_op_reading<ops::fp8_paged_mqa_logits>(m,
                                            [](const auto& a) { return fp8_paged_mqa_logits(a); });
  def_op_reading<ops::fp8_fp4_sparse_mqa_logits>(
      m, [](const auto& a) { return fp8_fp4_sparse_mqa_logits(a); });
  def_op_reading<ops::fp8_fp4_paged_sparse_mqa_logits>(
      m, [](const auto& a) { return fp8_fp4_paged_sparse_mqa_logits(a); });
  def_op<ops::indexer_k_quant_and_cache>(m, &indexer_k_quant_and_cache);
}

}  // namespace mqalogits_python
