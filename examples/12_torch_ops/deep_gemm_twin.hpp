// The DeepGEMM-named ops' one way to the op library: torch.ops.<MQALOGITS_TORCH_NAMESPACE>.<name>
// called through torch's dispatcher.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <string>
#include <utility>
#include <vector>

#define MQALOGITS_DG_STR2(x) #x
#define MQALOGITS_DG_STR(x) MQALOGITS_DG_STR2(x)

namespace mqalogits_deep_gemm {

// Calls torch.ops.<namespace>.<name> with the leading arguments `args`, the rest at their
// defaults, and returns its one result.
inline c10::IValue call_twin(const char* name, std::vector<c10::IValue> args) {
  const std::string qualified =
      MQALOGITS_DG_STR(MQALOGITS_TORCH_NAMESPACE) "::" + std::string(name);
  const c10::OperatorHandle op =
      c10::Dispatcher::singleton().findSchemaOrThrow(qualified.c_str(), "");
  const auto& params = op.schema().arguments();
  for (std::size_t i = args.size(); i < params.size(); ++i)
    args.push_back(params[i].default_value().value_or(c10::IValue()));
  torch::jit::Stack stack(std::move(args));
  op.callBoxed(&stack);
  return std::move(stack.at(0));
}

}  // namespace mqalogits_deep_gemm
