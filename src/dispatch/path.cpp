// One host path of the dispatch library. CMake compiles this file once per path, each time
// with the flags of that path (cmake/mqalogits_dispatch.cmake); target.hpp then names the path
// (MQALOGITS_ISA_TAG) and the library's ISA-tagged namespace keeps each copy's code apart.
// What it exports is one function, isa_kernels_<path>(), in the namespace every build shares:
// the table of the path's kernels for each format and head dim the library serves.
#include <string_view>

#include <mqalogits/backend/host/kernel_table.hpp>
#include <mqalogits/format/fp8_per_token.hpp>
#include <mqalogits/format/mx.hpp>

#if !defined(MQALOGITS_DISPATCH_PATH)
#error "path.cpp is compiled by the dispatch library's CMake, which names the path it builds"
#endif
#define MQALOGITS_DISPATCH_STRINGIZE_(x) #x
#define MQALOGITS_DISPATCH_STRINGIZE(x) MQALOGITS_DISPATCH_STRINGIZE_(x)

namespace mqalogits::MQALOGITS_HOST_ABI_NAMESPACE {
namespace {

namespace hb = ::mqalogits::host_backend;
using I = hb::isa_best;

// The kernels of Format at head dim d, if the format has that head dim.
template <template <int> class Format>
const format_kernels* at_head_dim(int d) {
  if (d == 128) return &hb::kernels_of<I, Format<128>>;
  if constexpr (Format<128>::supports_head_dim(64))
    if (d == 64) return &hb::kernels_of<I, Format<64>>;
  if constexpr (Format<128>::supports_head_dim(32))
    if (d == 32) return &hb::kernels_of<I, Format<32>>;
  return nullptr;
}

const format_kernels* find(format_id format, int head_dim) {
  switch (format) {
    case format_id::mxfp8:
      return at_head_dim<mxfp8_format>(head_dim);
    case format_id::mxfp4:
      return at_head_dim<mxfp4_format>(head_dim);
    case format_id::fp8_per_token:
      return at_head_dim<fp8_per_token_format>(head_dim);
  }
  return nullptr;
}

}  // namespace

// The flags CMake gave this copy must build the path it is named for.
static_assert(std::string_view(I::path) == MQALOGITS_DISPATCH_STRINGIZE(MQALOGITS_DISPATCH_PATH),
              "the dispatch library's flags for this path build another path");

#define MQALOGITS_DISPATCH_ENTRY MQALOGITS_CONCAT(isa_kernels_, MQALOGITS_DISPATCH_PATH)
const isa_kernels& MQALOGITS_DISPATCH_ENTRY() noexcept {
  static constexpr isa_kernels kernels{I::path, &find, hb::topk_steps_of<I>};
  return kernels;
}

}  // namespace mqalogits::MQALOGITS_HOST_ABI_NAMESPACE
