// An op's torch kernel written from its declaration (examples/op_registry): a function whose
// parameters are the declared arguments in torch's types (what the schema's types unbox to), and
// whose body reads them by name, arg<"topk">(args). The keyword groups several ops declare are read
// once (kernel_keywords_of, topk_keywords_of).
#pragma once

#include "sparse_ops.hpp"  // first: it includes torch's headers in an order Clang takes

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../op_registry/declared_args.hpp"

namespace mqalogits_torch {

namespace ops = mqalogits_bindings;
using ops::arg;
using ops::arg_kind;

// The C++ type torch unboxes each declared kind to (Class: a "class:Name" argument's class).
template <arg_kind K, class Class>
constexpr auto torch_param() {
  using k = arg_kind;
  if constexpr (K == k::tensor)
    return std::type_identity<at::Tensor>{};
  else if constexpr (K == k::optional_tensor)
    return std::type_identity<c10::optional<at::Tensor>>{};
  else if constexpr (K == k::tensor_list)
    return std::type_identity<std::vector<at::Tensor>>{};
  else if constexpr (K == k::optional_tensor_list)
    return std::type_identity<c10::List<c10::optional<at::Tensor>>>{};
  else if constexpr (K == k::integer)
    return std::type_identity<std::int64_t>{};
  else if constexpr (K == k::optional_integer)
    return std::type_identity<c10::optional<std::int64_t>>{};
  else if constexpr (K == k::boolean)
    return std::type_identity<bool>{};
  else if constexpr (K == k::text)
    return std::type_identity<c10::string_view>{};
  else if constexpr (K == k::optional_text)
    return std::type_identity<c10::optional<c10::string_view>>{};
  else if constexpr (K == k::real)
    return std::type_identity<double>{};
  else if constexpr (K == k::scalar_type)
    return std::type_identity<c10::ScalarType>{};
  else {
    static_assert(K == k::custom_class, "a declared kind without its torch type");
    return std::type_identity<c10::intrusive_ptr<Class>>{};
  }
}

// The custom class a "class:Name" type names (the sparse metadata objects).
template <const ops::op_declaration& D, std::size_t I>
using declared_class =
    std::conditional_t<ops::same_text(D.at(ops::torch, I).type, "class:SparseMetadata"),
                       sparse_metadata, paged_sparse_metadata>;
template <const ops::op_declaration& D, std::size_t I>
constexpr arg_kind kind_at = ops::kind_of(D.at(ops::torch, I).type);
template <const ops::op_declaration& D, std::size_t I>
using torch_type = typename decltype(torch_param<kind_at<D, I>, declared_class<D, I>>())::type;

// How the kernel takes it: tensors, lists and objects by const reference, the rest by value, as
// the ops' other kernels (the Meta ones) do: torch requires one C++ signature per op.
constexpr bool by_reference(arg_kind k) {
  return k == arg_kind::tensor || k == arg_kind::optional_tensor || k == arg_kind::tensor_list ||
         k == arg_kind::optional_tensor_list || k == arg_kind::custom_class;
}
template <const ops::op_declaration& D, std::size_t I>
using torch_param_type =
    std::conditional_t<by_reference(kind_at<D, I>), const torch_type<D, I>&, torch_type<D, I>>;

template <const ops::op_declaration& D, class Body, std::size_t... I>
auto torch_function(std::index_sequence<I...>) {
  return [](torch_param_type<D, I>... a) {
    return Body{}(ops::declared_args<D, ops::torch, torch_type<D, I>...>(a...));
  };
}

// The kernel of the op D declares, for m.impl: body(args) reads the call's arguments by name.
template <const ops::op_declaration& D, class Body>
auto declared_op(Body) {
  return torch_function<D, Body>(std::make_index_sequence<D.count(ops::torch)>{});
}

inline std::string text_of(c10::string_view v) {
  return std::string(v.data(), v.size());
}

// The fused top-k keywords an op declares.
template <class Args>
topk_keywords topk_keywords_of(const Args& a) {
  topk_keywords t;
  t.topk = arg<"topk">(a);
  t.values = arg<"topk_values">(a);
  t.index = text_of(arg<"topk_index">(a));
  t.out = arg<"topk_out">(a);
  t.values_out = arg<"topk_values_out">(a);
  if constexpr (Args::template has<"topk_short_rows">()) t.short_rows = arg<"topk_short_rows">(a);
  return t;
}

// The dense and paged ops' keyword-only arguments.
template <class Args>
kernel_keywords kernel_keywords_of(const Args& a) {
  kernel_keywords kw;
  kw.truncate_long_contexts = arg<"truncate_long_contexts">(a);
  kw.out = arg<"out">(a);
  kw.topk = topk_keywords_of(a);
  if constexpr (Args::template has<"topk_offset">()) kw.topk_offset = arg<"topk_offset">(a);
  kw.candidates = {arg<"candidate_topk_blocks">(a), arg<"candidate_block_size">(a),
                   text_of(arg<"candidate_order">(a)), text_of(arg<"candidate_padding">(a)),
                   arg<"candidate_out">(a)};
  return kw;
}

}  // namespace mqalogits_torch
