// The dispatch library's choice of host path: the fastest compiled path the CPU and the OS run,
// capped by MQALOGITS_HOST_ISA (read once, at the first call) or limit_runtime_isa(). Compiled
// for the baseline, like the units that call it.
//
// The AMX path (avx512_amx) tops the ladder: "native" reaches it unless the library is built with
// MQALOGITS_DISPATCH_AMX_BY_DEFAULT=0 (CMake's MQALOGITS_AMX_BY_DEFAULT=OFF), which leaves it to
// a cap that names it. Where it is reached, the CPU's features are checked and Linux is asked
// for the tile state first; either refusal falls back to the next path, and
// runtime_amx_refusal() says why.
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <mqalogits/backend/host/amx/tile_permission.hpp>
#include <mqalogits/backend/host/isa/paths.hpp>
#include <mqalogits/backend/host/kernel_abi.hpp>

// Feature detection for GCC and Clang (cpuid.h, inline xgetbv); another compiler gets the
// portable path on x86-64 (a cap the CPU always meets).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MQALOGITS_DISPATCH_X86_CPUID 1
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

namespace mqalogits::MQALOGITS_HOST_ABI_NAMESPACE {

// Every path's table (path.cpp); CMake defines MQALOGITS_DISPATCH_HAS_<path> for every path of
// isa/paths.def: 1 for the ones this library holds, 0 for the others.
#define MQALOGITS_ISA_PATH(name, arch, cpu, opt_in, base, checked, flags) \
  const isa_kernels& isa_kernels_##name() noexcept;
#include <mqalogits/backend/host/isa/paths.def>
#undef MQALOGITS_ISA_PATH

namespace {

// What the CPU (and the OS, which must save the registers) supports: paths.def's cpu column.
struct cpu_features {
  bool baseline = true;  // what the portable path needs
  bool avx2_fma = false, avx_vnni = false, avx512 = false, avx512_vnni = false, avx512_bf16 = false;
  bool neon = false, dotprod = false;
};

cpu_features detect() {
  cpu_features f;
#if defined(MQALOGITS_DISPATCH_X86_CPUID)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28), fma = c & (1u << 12),
             f16c = c & (1u << 29);
  if (!osxsave || !avx) return f;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool ymm_state = (xcr0_lo & 0x6u) == 0x6u;    // SSE and AVX registers
  const bool zmm_state = (xcr0_lo & 0xE6u) == 0xE6u;  // and opmask, ZMM0-15 upper, ZMM16-31
  if (!ymm_state || __get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  const bool avx2 = b & (1u << 5);
  const bool avx512f = b & (1u << 16), avx512dq = b & (1u << 17), avx512bw = b & (1u << 30),
             avx512vl = b & (1u << 31), avx512vnni = c & (1u << 11);
  __cpuid_count(7, 1, a, b, c, d);
  const bool avxvnni = a & (1u << 4), avx512bf16 = a & (1u << 5);
  f.avx2_fma = avx2 && fma && f16c;  // F16C: every AVX2 CPU has it, the paths use it
  f.avx_vnni = f.avx2_fma && avxvnni;
  f.avx512 = f.avx2_fma && zmm_state && avx512f && avx512dq && avx512bw && avx512vl;
  f.avx512_vnni = f.avx512 && avx512vnni;
  // bf16 pair dot products only where vdpbf16ps issues as often as vfmadd231ps (AMD Zen 4 and
  // Zen 5); on Intel's Sapphire / Emerald Rapids it reached half the fp32 FMA rate in flops.
  __get_cpuid(0, &a, &b, &c, &d);
  const bool amd = b == 0x68747541u && d == 0x69746E65u && c == 0x444D4163u;  // AuthenticAMD
  f.avx512_bf16 = f.avx512_vnni && avx512bf16 && amd;
#elif defined(__aarch64__)
  f.neon = true;  // every ARM64 core has Advanced SIMD
#if defined(__linux__) && defined(HWCAP_ASIMDDP)
  f.dotprod = getauxval(AT_HWCAP) & HWCAP_ASIMDDP;
#elif defined(__APPLE__)
  int dotprod = 0;
  std::size_t size = sizeof dotprod;
  f.dotprod = sysctlbyname("hw.optional.arm.FEAT_DotProd", &dotprod, &size, nullptr, 0) == 0 &&
              dotprod != 0;
#endif
#endif
  return f;
}

namespace hb = ::mqalogits::host_backend;

// This architecture's ladder (on any other, the x86-64 one: the portable path, and caps by
// x86-64 names that stop there).
#if defined(__aarch64__)
constexpr hb::path_arch this_ladder = hb::path_arch::arch_aarch64;
#else
constexpr hb::path_arch this_ladder = hb::path_arch::arch_x86_64;
#endif

// A row of paths.def: its table (null where this library lacks the path, or the path is of
// another architecture) and what the CPU must support to run it.
struct path {
  const char* name;
  const isa_kernels* (*kernels)() noexcept;
  bool cpu_features::*runs;
  bool on_ladder;  // on this architecture's ladder
  bool opt_in;
};

// Every path, from the most portable to the fastest.
constexpr path paths[] = {
#define MQALOGITS_ISA_PATH(name, arch, cpu, opt_in, base, checked, flags)  \
  {#name,                                                                  \
   []() noexcept -> const isa_kernels* {                                   \
     if constexpr (MQALOGITS_DISPATCH_HAS_##name &&                        \
                   hb::on_ladder(hb::path_arch::arch_##arch, this_ladder)) \
       return &isa_kernels_##name();                                       \
     else                                                                  \
       return nullptr;                                                     \
   },                                                                      \
   &cpu_features::cpu, hb::on_ladder(hb::path_arch::arch_##arch, this_ladder), (opt_in) != 0},
#include <mqalogits/backend/host/isa/paths.def>
#undef MQALOGITS_ISA_PATH
};
constexpr int path_count = static_cast<int>(sizeof paths / sizeof paths[0]);
static_assert(std::string_view(paths[0].name) == "portable" && paths[0].on_ladder,
              "the first path is the portable one, which every CPU runs");

// A path's position on this architecture's ladder, or -1 for a name of none of its paths
// (whether or not this build holds the path: a cap at a path the library lacks is a cap at the
// paths below it).
int ladder_index(const char* name) {
  for (int i = 0; i < path_count; ++i)
    if (paths[i].on_ladder && std::strcmp(paths[i].name, name) == 0) return i;
  return -1;
}

// The one opt-in path is the AMX one: why_not_amx speaks for it.
constexpr bool only_amx_opts_in() {
  for (const path& p : paths)
    if (p.opt_in != (std::string_view(p.name) == "avx512_amx")) return false;
  return true;
}
static_assert(only_amx_opts_in(), "paths.def's opt-in paths are the AMX path alone");

// Whether "native" (no cap) reaches the AMX path.
#if defined(MQALOGITS_DISPATCH_AMX_BY_DEFAULT) && MQALOGITS_DISPATCH_AMX_BY_DEFAULT
constexpr bool amx_by_default = true;
#else
constexpr bool amx_by_default = false;
#endif

// Why the last choice is not the AMX path (null when it is).
std::atomic<const char*> amx_refusal{nullptr};

// Why the AMX path is not chosen under `cap` (-1: none), or null when it runs. Only a cap that
// reaches it checks the CPU and asks the OS for the tile state.
const char* why_not_amx(int cap, const cpu_features& cpu) {
  const int amx = ladder_index("avx512_amx");
  const bool has_path = MQALOGITS_DISPATCH_HAS_avx512_amx != 0;
  if (amx < 0) return "the AMX path exists on x86-64 only";
  if (!has_path)
    return "this mqalogits::dispatch has no AMX path (its compiler lacks -mamx-tile -mamx-bf16 "
           "-mamx-int8)";
  if (cap < 0 && !amx_by_default)
    return "this mqalogits::dispatch is built with MQALOGITS_AMX_BY_DEFAULT=OFF: "
           "MQALOGITS_HOST_ISA=avx512_amx or limit_host_isa(\"avx512_amx\") asks for it";
  if (cap >= 0 && cap < amx) return "the host path is capped below avx512_amx";
  if (const char* why = ::mqalogits::host_backend::amx::cpu_tile_refusal()) return why;
  if (!cpu.avx512_vnni) return "the CPU lacks AVX-512 F/BW/VL/DQ + VNNI, which the AMX path uses";
  return ::mqalogits::host_backend::amx::tile_refusal();
}

// The fastest path the CPU runs whose ladder position is at most cap (-1: no cap; the AMX path
// only where why_not_amx allows it). Records why the AMX path was not taken.
const isa_kernels* choose(int cap) {
  static const cpu_features cpu = detect();
  const char* amx_why = why_not_amx(cap, cpu);
  amx_refusal.store(amx_why, std::memory_order_release);
  const isa_kernels* best = paths[0].kernels();
  for (int i = 0; i < path_count; ++i) {
    const isa_kernels* kernels = paths[i].kernels();  // null: not held, or not of this ladder
    const bool allowed = paths[i].opt_in ? amx_why == nullptr : cap < 0 || i <= cap;
    if (kernels && allowed && cpu.*paths[i].runs) best = kernels;
  }
  return best;
}

// The cap a name sets: -1 for "native" (none), -2 for an unknown name.
int cap_of(const char* name) {
  if (std::strcmp(name, "native") == 0) return -1;
  const int i = ladder_index(name);
  return i < 0 ? -2 : i;
}

std::atomic<const isa_kernels*> chosen{nullptr};

const isa_kernels* from_environment() {
  const char* env = std::getenv("MQALOGITS_HOST_ISA");
  int cap = -1;
  if (env && *env) {
    cap = cap_of(env);
    if (cap == -2) {
      char names[256] = {};  // the path names, as paths.def lists them (under 200 characters)
      hb::put_isa_path_names([&](const char* text) {
        std::strncat(names, text, sizeof names - 1 - std::strlen(names));
      });
      std::fprintf(stderr,
                   "mqalogits: MQALOGITS_HOST_ISA=%s names no host path of this CPU architecture "
                   "(%s); ignored\n",
                   env, names);
      cap = -1;
    }
  }
  return choose(cap);
}

}  // namespace

const isa_kernels& runtime_isa() noexcept {
  const isa_kernels* k = chosen.load(std::memory_order_acquire);
  if (!k) {
    const isa_kernels* fresh = from_environment();
    // The first caller's choice stands (a racing limit_runtime_isa wins over the environment).
    chosen.compare_exchange_strong(k, fresh, std::memory_order_acq_rel);
    k = chosen.load(std::memory_order_acquire);
  }
  return *k;
}

const char* runtime_amx_refusal() noexcept {
  runtime_isa();  // the first choice, from the environment, if none was made yet
  return amx_refusal.load(std::memory_order_acquire);
}

const char* limit_runtime_isa(const char* name) noexcept {
  const int cap = name ? cap_of(name) : -2;
  if (cap == -2) return nullptr;
  const isa_kernels* k = choose(cap);
  chosen.store(k, std::memory_order_release);
  return k->name;
}

}  // namespace mqalogits::MQALOGITS_HOST_ABI_NAMESPACE
