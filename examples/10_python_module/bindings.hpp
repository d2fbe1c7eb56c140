// The Python side's parts of the module (bindings.cpp), each adding its functions and classes to
// the module; module.cpp calls them in this order.
#pragma once

#include <pybind11/pybind11.h>

namespace mqalogits_python {

void register_metadata(pybind11::module_& m);  // first: the kernels' signatures name its classes
void register_kernels(pybind11::module_& m);   // and vLLM's FP8 K cache insert
void register_ops(pybind11::module_& m);       // ops_bindings.cpp: the ops around the kernels

}  // namespace mqalogits_python
