// What the kernel tests share: the format x logit x weight combinations they are templated
// over, the comparison of a logits buffer against ref:: (the accuracy bound with an exact -inf
// mask), bitwise comparison of two runs, and sentinel fills that show whether a buffer was touched.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>

#include <mqalogits/neuron.hpp>  // the kernel tests also run the NeuronCore model

#include "reference/reference.hpp"
#include "support/accuracy.hpp"
#include "support/formats.hpp"

namespace check {

namespace ml = mqalogits;

// One instantiation of a kernel test: format, logit element, weight element, backend.
template <class F, class O, class W, class Backend = ml::backend::host>
struct combo {
  using format = F;
  using out = O;
  using weight = W;
  using backend = Backend;
};

// Every format the library has: check::all_formats (support/formats.hpp).
using trn2 = ml::backend::neuron<ml::backend::trn2>;

// The kernel tests' instantiations: on the host, every format meets both logit types and the bf16
// and fp32 weights, the MX formats fp16 weights too; on the NeuronCore model every format once,
// and fp16 weights once.
using host_kernel_combos =
    std::tuple<combo<ml::mxfp8, ml::bf16, ml::bf16>, combo<ml::mxfp8, float, float>,
               combo<ml::mxfp4, ml::bf16, float>, combo<ml::mxfp4, float, ml::bf16>,
               combo<ml::fp8_per_token, ml::bf16, float>, combo<ml::fp8_per_token, float, ml::bf16>,
               combo<ml::mxfp8, ml::bf16, ml::fp16>, combo<ml::mxfp4, float, ml::fp16>>;
//
// MQALOGITS_TEST_HOST_COMBOS_ONLY leaves the model's instances out. The ARM64, TSan and ASan
// jobs set it: the model is portable scalar code that runs on the calling thread, so what the
// first two check (the host's ISA paths, races between threads) it does not reach, and ASan
// checks its memory through its own test files (neuron_*_test.cpp); under emulation and the
// sanitizers these instances were a fifth to a third of the jobs' time. The native build runs
// them.
#if defined(MQALOGITS_TEST_HOST_COMBOS_ONLY)
using model_kernel_combos = std::tuple<>;
using model_format_combos = std::tuple<>;
#else
using model_kernel_combos =
    std::tuple<combo<ml::mxfp8, ml::bf16, float, trn2>, combo<ml::mxfp4, float, float, trn2>,
               combo<ml::fp8_per_token, float, ml::bf16, trn2>,
               combo<ml::fp8_per_token, ml::bf16, ml::fp16, trn2>>;
using model_format_combos = std::tuple<combo<ml::mxfp8, float, float, trn2>>;
#endif
using kernel_combos = decltype(std::tuple_cat(host_kernel_combos{}, model_kernel_combos{}));
// Each format once on the host, and MXFP8 on the model: for the large shapes, and for what does
// not depend on the logit or weight type.
using each_format_combos = decltype(std::tuple_cat(
    std::tuple<combo<ml::mxfp8, ml::bf16, ml::bf16>, combo<ml::mxfp4, float, ml::bf16>,
               combo<ml::fp8_per_token, float, float>>{},
    model_format_combos{}));

template <class Backend>
const char* backend_name() {
  return std::is_same_v<Backend, ml::backend::host> ? "host" : "neuron";
}

template <class O>
const char* out_name() {
  return sizeof(O) == 2 ? "bf16 logits" : "fp32 logits";
}

// "" when `out` matches the reference; else the first mismatch and a count. With clean = false
// only the reference's valid columns are compared (invalid ones are unspecified).
template <class O>
std::string against(const ml::logits_buffer<O>& out, const ref::result& expected,
                    bool clean = true) {
  if (out.rows() != expected.rows || out.cols() != expected.cols)
    return "shape [" + std::to_string(out.rows()) + ", " + std::to_string(out.cols()) +
           "], reference [" + std::to_string(expected.rows) + ", " + std::to_string(expected.cols) +
           "]";
  return accuracy::compare(
      out.rows(), out.cols(),
      [&](std::int64_t r, std::int64_t c) {
        const double exact = expected.at(r, c);
        if (!clean && std::isinf(exact) && exact < 0) return exact;  // unspecified: skip
        return static_cast<double>(ml::to_float(out(r, c)));
      },
      [&](std::int64_t r, std::int64_t c) { return expected.at(r, c); },
      [&](std::int64_t r, std::int64_t c) { return expected.mag(r, c); });
}

// Number of valid (not -inf) columns of the reference: tests assert they exercise something.
inline std::int64_t valid_count(const ref::result& r) {
  std::int64_t n = 0;
  for (double v : r.value) n += !(std::isinf(v) && v < 0);
  return n;
}
inline std::int64_t nan_count(const ref::result& r) {
  std::int64_t n = 0;
  for (double v : r.value) n += std::isnan(v);
  return n;
}

// Bitwise equality of the rows x cols elements of two buffers (padding ignored).
template <class O>
bool bitwise_equal(const ml::logits_buffer<O>& a, const ml::logits_buffer<O>& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return false;
  for (std::int64_t r = 0; r < a.rows(); ++r)
    if (a.cols() && std::memcmp(&a(r, 0), &b(r, 0), static_cast<std::size_t>(a.cols()) * sizeof(O)))
      return false;
  return true;
}

// Fills every byte of the allocation (padding too) with `byte`; untouched() checks it.
template <class O>
void fill_sentinel(ml::logits_buffer<O>& out, unsigned char byte = 0xA5) {
  if (out.rows())
    std::memset(static_cast<void*>(out.data()), byte,
                static_cast<std::size_t>(out.rows() * out.stride()) * sizeof(O));
}
template <class O>
bool untouched(const ml::logits_buffer<O>& out, unsigned char byte = 0xA5) {
  const auto* p = reinterpret_cast<const unsigned char*>(out.rows() ? &out(0, 0) : nullptr);
  const auto n = static_cast<std::size_t>(out.rows() * out.stride()) * sizeof(O);
  for (std::size_t i = 0; i < n; ++i)
    if (p[i] != byte) return false;
  return true;
}

}  // namespace check
