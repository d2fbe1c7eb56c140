// Whether this process may run AMX tile instructions: the CPU must report AMX-TILE, AMX-BF16
// and AMX-INT8, the OS must save the tile state (XCR0 bits 17 and 18), and Linux must grant
// this process the tile data (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)); without
// that grant the first tile instruction is SIGILL. The request is made once, at the first
// call, and only where the AMX path is asked for: it enlarges every signal frame of the
// process.
#pragma once

#include "../../../config.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#endif
#endif

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend::amx {

// Why the CPU cannot run tile instructions, or null when it reports all three AMX features
// and the OS saves their state.
inline const char* cpu_tile_refusal() noexcept {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return "the CPU reports no AMX (no CPUID leaf 7)";
  __cpuid_count(7, 0, a, b, c, d);
  const bool amx_bf16 = d & (1u << 22), amx_tile = d & (1u << 24), amx_int8 = d & (1u << 25);
  if (!(amx_tile && amx_bf16 && amx_int8))
    return "the CPU does not report AMX-TILE, AMX-BF16 and AMX-INT8";
  __get_cpuid(1, &a, &b, &c, &d);
  if (!(c & (1u << 27))) return "the OS does not enable XSAVE (no OSXSAVE)";
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0x60000u) != 0x60000u)
    return "the OS does not save the tile state (XCR0 bits 17 and 18)";
  return nullptr;
#else
  return "AMX exists on x86-64 only";
#endif
}

// Why this process may not run tile instructions, or null when it may: the CPU's answer, then
// (on Linux) the kernel's answer to the tile data request, asked once per process.
inline const char* tile_refusal() noexcept {
  static const char* const why = []() noexcept -> const char* {
    if (const char* cpu = cpu_tile_refusal()) return cpu;
#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
    constexpr long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
    if (syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) != 0)
      return errno == EINVAL || errno == ENOSYS
                 ? "the Linux kernel has no tile data permission to grant (5.16 or later has)"
                 : "Linux refused this process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM)";
    return nullptr;
#else
    return "the AMX path asks for the tile state on Linux only";
#endif
  }();
  return why;
}

}  // namespace host_backend::amx
MQALOGITS_NAMESPACE_END
