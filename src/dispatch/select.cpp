// The dispatch library's choice of host path: the fastest compiled path the CPU and the OS run,
// capped by MQALOGITS_HOST_ISA (read once, at the first call) or limit_runtime_isa(). Compiled
// for the baseline, like the units that call it.
//
// The AMX path (avx512_amx) is opt-in until it has passed the test suite on an AMX CPU: without
// a cap that names it, "native" stops below it (unless the library is built with
// MQALOGITS_DISPATCH_AMX_BY_DEFAULT). Where it is asked for, the CPU's features are checked and
// Linux is asked for the tile state first; either refusal falls back to the next path, and
// runtime_amx_refusal() says why.
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <mqalogits/backend/host/amx/tile_permission.hpp>
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

// Every path's table (path.cpp); CMake defines MQALOGITS_DISPATCH_HAS_<path> for the ones this
// library holds.
const isa_kernels& isa_kernels_portable() noexcept;
const isa_kernels& isa_kernels_avx2() noexcept;
const isa_kernels& isa_kernels_avx2_vnni() noexcept;
const isa_kernels& isa_kernels_avx512() noexcept;
const isa_kernels& isa_kernels_avx512_vnni() noexcept;
const isa_kernels& isa_kernels_avx512_bf16() noexcept;
const isa_kernels& isa_kernels_avx512_amx() noexcept;
const isa_kernels& isa_kernels_neon() noexcept;
const isa_kernels& isa_kernels_neon_dotprod() noexcept;

namespace {

// What the CPU (and the OS, which must save the registers) supports.
struct cpu_features {
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

struct path {
  const char* name;
  const isa_kernels& (*kernels)() noexcept;
  bool (*runs)(const cpu_features&);
};

// From the most portable to the fastest.
constexpr path paths[] = {
    {"portable", &isa_kernels_portable, [](const cpu_features&) { return true; }},
#if defined(MQALOGITS_DISPATCH_HAS_avx2)
    {"avx2", &isa_kernels_avx2, [](const cpu_features& f) { return f.avx2_fma; }},
#endif
#if defined(MQALOGITS_DISPATCH_HAS_avx2_vnni)
    {"avx2_vnni", &isa_kernels_avx2_vnni, [](const cpu_features& f) { return f.avx_vnni; }},
#endif
#if defined(MQALOGITS_DISPATCH_HAS_avx512)
    {"avx512", &isa_kernels_avx512, [](const cpu_features& f) { return f.avx512; }},
#endif
#if defined(MQALOGITS_DISPATCH_HAS_avx512_vnni)
    {"avx512_vnni", &isa_kernels_avx512_vnni, [](const cpu_features& f) { return f.avx512_vnni; }},
#endif
#if defined(MQALOGITS_DISPATCH_HAS_avx512_bf16)
    {"avx512_bf16", &isa_kernels_avx512_bf16, [](const cpu_features& f) { return f.avx512_bf16; }},
#endif
#if defined(MQALOGITS_DISPATCH_HAS_avx512_amx)
    {"avx512_amx", &isa_kernels_avx512_amx,
     [](const cpu_features& f) {
       return f.avx512_vnni && ::mqalogits::host_backend::amx::tile_refusal() == nullptr;
     }},
#endif
#if defined(MQALOGITS_DISPATCH_HAS_neon)
    {"neon", &isa_kernels_neon, [](const cpu_features& f) { return f.neon; }},
#endif
#if defined(MQALOGITS_DISPATCH_HAS_neon_dotprod)
    {"neon_dotprod", &isa_kernels_neon_dotprod, [](const cpu_features& f) { return f.dotprod; }},
#endif
};
constexpr int path_count = static_cast<int>(sizeof paths / sizeof paths[0]);

// The path names of this architecture, in ladder order (whether or not this build holds each):
// a cap at a path the library lacks is a cap at the paths below it.
#if defined(__aarch64__)
constexpr const char* ladder[] = {"portable", "neon", "neon_dotprod"};
#else
constexpr const char* ladder[] = {"portable",    "avx2",        "avx2_vnni", "avx512",
                                  "avx512_vnni", "avx512_bf16", "avx512_amx"};
#endif

int ladder_index(const char* name) {
  for (int i = 0; i < static_cast<int>(sizeof ladder / sizeof ladder[0]); ++i)
    if (std::strcmp(ladder[i], name) == 0) return i;
  return -1;
}

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
#if defined(MQALOGITS_DISPATCH_HAS_avx512_amx)
  const bool has_path = true;
#else
  const bool has_path = false;
#endif
  if (amx < 0) return "the AMX path exists on x86-64 only";
  if (!has_path)
    return "this mqalogits::dispatch has no AMX path (its compiler lacks -mamx-tile -mamx-bf16 "
           "-mamx-int8)";
  if (cap < 0 && !amx_by_default)
    return "the AMX path is opt-in until it has passed the test suite on an AMX CPU: "
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
  const isa_kernels* best = &paths[0].kernels();
  for (int i = 0; i < path_count; ++i) {
    const bool amx = std::strcmp(paths[i].name, "avx512_amx") == 0;
    const bool allowed = amx ? amx_why == nullptr : cap < 0 || ladder_index(paths[i].name) <= cap;
    if (allowed && paths[i].runs(cpu)) best = &paths[i].kernels();
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
      std::fprintf(stderr,
                   "mqalogits: MQALOGITS_HOST_ISA=%s names no host path of this CPU architecture "
                   "(avx512_amx, avx512_bf16, avx512_vnni, avx512, avx2_vnni, avx2, portable; "
                   "neon_dotprod, neon, "
                   "portable on ARM64; or native); ignored\n",
                   env);
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
