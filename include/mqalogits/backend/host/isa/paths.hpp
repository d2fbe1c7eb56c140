// The host paths of isa/paths.def as a C++ table: each path's name, its architecture's ladder and
// whether it is opt-in, for the dispatcher and for the messages that list the paths.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string_view>

#include "../../../config.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// The ladder a path is on; `any` is on every one (the portable path).
enum class path_arch { arch_any, arch_x86_64, arch_aarch64 };

struct isa_path {
  const char* name;
  path_arch arch;
  bool opt_in;  // taken only where asked for by name
};

// Every path, in paths.def's order: ladder order within each architecture.
inline constexpr isa_path isa_paths[] = {
#define MQALOGITS_ISA_PATH(name, arch, cpu, opt_in, base, checked, flags) \
  {#name, path_arch::arch_##arch, (opt_in) != 0},
#include "paths.def"
#undef MQALOGITS_ISA_PATH
};

// Each path by its name, as an index into isa_paths: an ISA file names its path through the
// table (isa_path_name(isa_path_id::avx2)), so a name paths.def lacks does not compile.
enum class isa_path_id : std::size_t {
#define MQALOGITS_ISA_PATH(name, arch, cpu, opt_in, base, checked, flags) name,
#include "paths.def"
#undef MQALOGITS_ISA_PATH
};

constexpr const char* isa_path_name(isa_path_id id) {
  return isa_paths[static_cast<std::size_t>(id)].name;
}

// Whether a path of `path` is on the ladder of `ladder`.
constexpr bool on_ladder(path_arch path, path_arch ladder) {
  return path == path_arch::arch_any || path == ladder;
}

// Whether `name` names a path of paths.def.
constexpr bool is_isa_path(std::string_view name) {
  for (const isa_path& p : isa_paths)
    if (name == p.name) return true;
  return false;
}

// Calls put(text) with the pieces of the list of path names that messages show, fastest first:
// "avx512_amx, ..., portable; neon_dotprod, neon, portable on ARM64; or native".
template <class Put>
void put_isa_path_names(Put put) {
  for (const path_arch ladder : {path_arch::arch_x86_64, path_arch::arch_aarch64}) {
    const char* separator = "";
    for (std::size_t i = sizeof isa_paths / sizeof isa_paths[0]; i-- > 0;)
      if (on_ladder(isa_paths[i].arch, ladder)) {
        put(separator);
        put(isa_paths[i].name);
        separator = ", ";
      }
    put(ladder == path_arch::arch_x86_64 ? "; " : " on ARM64; or native");
  }
}

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
