// A declaration as the torch schema TORCH_LIBRARY registers:
// "name(Type arg=default, ..., *, Type keyword=default, ...) -> Returns".
#pragma once

#include <string>

#include "declaration.hpp"

namespace mqalogits_bindings {

// A declared type in schema text: "class:Name" is the custom class Name under `class_prefix`
// ("__torch__.torch.classes.<namespace>.").
inline std::string torch_type(const char* type, const std::string& class_prefix) {
  std::string text(type);
  const std::string mark = "class:";
  for (std::size_t at; (at = text.find(mark)) != std::string::npos;)
    text.replace(at, mark.size(), class_prefix);
  return text;
}

inline std::string torch_schema(const op_declaration& d, const std::string& class_prefix = "") {
  std::string text = std::string(d.name) + "(";
  const std::size_t n = d.count(torch), positional = d.positional_count(torch);
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) text += ", ";
    if (i == positional) text += "*, ";
    const param& a = d.at(torch, i);
    text += torch_type(a.type, class_prefix) + " " + a.name;
    if (!a.required()) text += std::string("=") + a.default_value;
  }
  return text + ") -> " + torch_type(d.returns, class_prefix);
}

}  // namespace mqalogits_bindings
