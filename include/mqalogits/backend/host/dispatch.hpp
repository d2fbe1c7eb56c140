// Which host path a call runs.
//
// Header-only (the default), a unit runs the widest path its compiler flags allow (target.hpp,
// isa/ladder.hpp): a build for the machine it runs on (-march=native) is fast, a build for
// baseline x86-64 or armv8-a runs the portable or plain NEON path.
//
// With runtime dispatch (link the mqalogits::dispatch CMake target, which defines
// MQALOGITS_RUNTIME_DISPATCH), the kernels come from a small compiled library that holds every
// path, each compiled with its own flags, and picks at run time the fastest one the CPU runs
// (isa/paths.def lists them, with their flags and ladder order). The AMX path (avx512_amx) is
// taken where the CPU has AMX and Linux grants the tile state (a library built with
// MQALOGITS_AMX_BY_DEFAULT=OFF only where MQALOGITS_HOST_ISA=avx512_amx or
// limit_host_isa("avx512_amx") asks for it); host_amx_refusal() says why it is not the path
// that runs.
// The unit itself can then be built for the baseline, and calls the same entry points.
// MQALOGITS_HOST_ISA=<path> in the environment, or limit_host_isa(), caps the choice.
// A format the library is not compiled for (one defined by the caller) runs the unit's own path.
#pragma once

#include <cstdint>
#include <string_view>

#include "../../config.hpp"
#include "../../error.hpp"
#include "../../format/fp8_per_token.hpp"
#include "../../format/mx.hpp"
#include "../../output/selection_steps.hpp"
#include "amx/tile_permission.hpp"
#include "isa/ladder.hpp"
#include "isa/paths.hpp"
#include "kernel_abi.hpp"
#include "kernel_table.hpp"

#if defined(MQALOGITS_RUNTIME_DISPATCH)
// Defined by the dispatch library (src/dispatch/select.cpp).
namespace mqalogits::MQALOGITS_HOST_ABI_NAMESPACE {
// The path chosen for this process (the first call reads MQALOGITS_HOST_ISA).
const isa_kernels& runtime_isa() noexcept;
// Caps the choice at `name` (a path name, or "native" for no cap) and returns the path now
// chosen; null when `name` names no path.
const char* limit_runtime_isa(const char* name) noexcept;
// Why the path chosen is not the AMX path, or null when it is.
const char* runtime_amx_refusal() noexcept;
}  // namespace mqalogits::MQALOGITS_HOST_ABI_NAMESPACE
#endif

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// The dispatch library's id of a format, if it has one.
template <class Format>
struct dispatch_format {
  static constexpr bool compiled = false;
};
template <int D>
struct dispatch_format<mxfp8_format<D>> {
  static constexpr bool compiled = true;
  static constexpr host_abi::format_id id = host_abi::format_id::mxfp8;
};
template <int D>
struct dispatch_format<mxfp4_format<D>> {
  static constexpr bool compiled = true;
  static constexpr host_abi::format_id id = host_abi::format_id::mxfp4;
};
template <int D>
struct dispatch_format<fp8_per_token_format<D>> {
  static constexpr bool compiled = true;
  static constexpr host_abi::format_id id = host_abi::format_id::fp8_per_token;
};

#if defined(MQALOGITS_RUNTIME_DISPATCH)
inline constexpr bool runtime_dispatch = true;

// The kernels a call on Format runs: the dispatch library's for the path chosen at run time.
template <class Format>
const host_abi::format_kernels& host_kernels() {
  if constexpr (dispatch_format<Format>::compiled) {
    const host_abi::format_kernels* k =
        host_abi::runtime_isa().find(dispatch_format<Format>::id, Format::head_dim);
    if (!k)
      throw error("mqalogits: the dispatch library has no kernel for this format and head dim");
    return *k;
  } else {
    return kernels_of<isa_best, Format>;
  }
}

// The fused top-k's steps on the path chosen at run time.
struct topk_isa {
  static std::int64_t admit_keys(const float* scores, const unsigned char* valid, std::int64_t n,
                                 std::int64_t col, std::uint64_t floor, float bar,
                                 std::uint64_t* out) {
    return host_abi::runtime_isa().topk.admit_keys(scores, valid, n, col, floor, bar, out);
  }
  static std::int64_t compact_at_least(std::uint64_t* keys, std::int64_t n, std::uint64_t t) {
    return host_abi::runtime_isa().topk.compact_at_least(keys, n, t);
  }
};
#else
inline constexpr bool runtime_dispatch = false;

// A unit built for the AMX path runs its base path's kernels where the OS refuses the tiles.
template <class Format>
const host_abi::format_kernels& host_kernels() {
#if defined(MQALOGITS_HOST_AMX)
  if (amx::tile_refusal()) return kernels_of<isa_best::base, Format>;
#endif
  return kernels_of<isa_best, Format>;
}
using topk_isa = isa_best;
#endif

}  // namespace host_backend

// The selections' steps (output/selection_steps.hpp): this host path's, for every backend.
struct detail::selection_steps : host_backend::topk_isa {};
static_assert(detail::selection_step_set<detail::selection_steps>);

// Whether this unit's host kernels are chosen at run time (linked with mqalogits::dispatch) or
// fixed by its compiler flags.
inline constexpr bool host_runtime_dispatch = host_backend::runtime_dispatch;

#if defined(MQALOGITS_RUNTIME_DISPATCH)
// The host path calls run on: the one picked at run time (see above).
inline const char* host_isa_name() noexcept {
  return host_abi::runtime_isa().name;
}

// Why the host path is not the AMX one (a sentence), or null when calls run on AMX tiles.
inline const char* host_amx_refusal() noexcept {
  return host_abi::runtime_amx_refusal();
}

// Caps the host path at `path` (a path of isa/paths.def: "avx512_vnni", "avx2", "neon",
// "portable", ...; "native" lifts the cap): the fastest path the CPU runs at or below it serves
// every later call. Returns the path chosen; an unknown name is an
// error. For tests and for comparing paths; MQALOGITS_HOST_ISA does the same for a whole process.
inline const char* limit_host_isa(std::string_view path) {
  char name[32] = {};  // every path name is shorter: a longer one names no path
  // A NUL inside the name would end the C string the dispatcher compares ("avx2\0junk" would
  // read as avx2): no path name holds one.
  const bool fits = path.size() < sizeof name && path.find('\0') == std::string_view::npos;
  for (std::size_t i = 0; fits && i < path.size(); ++i) name[i] = path[i];
  const char* chosen = fits ? host_abi::limit_runtime_isa(name) : nullptr;
  detail::require(chosen != nullptr, "limit_host_isa", [&](detail::message& m) {
    m << "'";
    for (const char c : path) m << (c == '\0' ? std::string_view("\\0") : std::string_view(&c, 1));
    m << "' names no host path (";
    host_backend::put_isa_path_names([&](const char* text) { m << text; });
    m << ")";
  });
  return chosen;
}
#else
// The host path this translation unit was compiled for (target.hpp's tag, a path of
// isa/paths.def: "avx512_vnni", "avx2", "neon_dotprod", "portable", ...). Each unit answers for
// itself (the name lives in the unit's ISA-tagged namespace), so an engine that builds
// one hot file with -march=native can check what that file runs.
#if defined(MQALOGITS_HOST_AMX)
// A unit built for the AMX path: "avx512_amx", or "avx512_vnni" where the OS refuses the tiles.
inline const char* host_isa_name() noexcept {
  return host_backend::amx::tile_refusal() ? host_backend::isa_best::base::path
                                           : host_backend::isa_best::path;
}
inline const char* host_amx_refusal() noexcept {
  return host_backend::amx::tile_refusal();
}
#else
constexpr const char* host_isa_name() noexcept {
  return host_backend::isa_best::path;
}
// Why the host path is not the AMX one: this unit is not built for it.
constexpr const char* host_amx_refusal() noexcept {
  return "this unit is not built for the AMX path (it takes AVX-512 VNNI and -mamx-tile "
         "-mamx-bf16 -mamx-int8, without MQALOGITS_ENABLE_AMX=0)";
}
#endif
#endif

MQALOGITS_NAMESPACE_END
