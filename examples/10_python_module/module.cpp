// The compiled part of the Python package `mqalogits` (mqalogits/_mqalogits): DeepGEMM's
// indexer-logits API (deep_gemm.fp8_fp4_mqa_logits and the rest) with upstream's names, argument
// names, order and defaults, over numpy arrays. The package's __init__.py wraps every function
// of it so that torch tensors pass too. This unit defines the extension; bindings.cpp binds the
// functions, the *_kernels.cpp units compile the kernels (see bindings_common.hpp).
#include <string>

#include <mqalogits/config.hpp>

#include "bindings.hpp"

PYBIND11_MODULE(_mqalogits, m) {
  namespace mp = mqalogits_python;
  namespace ml = mqalogits;
  m.doc() =
      "mqalogits: DeepSeek-V3.2 lightning-indexer logits from FP8 / FP4 inputs on the host CPU, "
      "with DeepGEMM's Python names, argument names, order and defaults, over numpy arrays.";
  m.attr("__version__") = std::to_string(ml::version_major) + "." +
                          std::to_string(ml::version_minor) + "." +
                          std::to_string(ml::version_patch);
  m.attr("float32") = pybind11::str("float32");
  m.attr("bfloat16") = pybind11::str("bfloat16");
  m.attr("float8_e4m3fn") = pybind11::str("float8_e4m3fn");
  m.attr("float4_e2m1fn_x2") = pybind11::str("float4_e2m1fn_x2");

  mp::register_metadata(m);
  mp::register_kernels(m);
  mp::register_ops(m);
}
