// Software prefetch of keys: where a key's lines are fetched, and whether this CPU keeps a
// prefetch "into L2" out of L1.
#pragma once

#include <cstdint>

#include "../../config.hpp"
#include "kernel_abi.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define MQALOGITS_HOST_X86_CPUID 1
#endif

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// Keys are decoded while the one `prefetch_keys` ahead is fetched, so the decode does not wait
// on memory (paged keys sit wherever their pages are).
inline constexpr std::int64_t prefetch_keys = 32;

// One cache line towards L2 (x86 prefetcht1, ARM PLDL2KEEP): L1 stays for the query row and the
// tile being written, on the CPUs that honour the hint (prefetch_fills_l1 says which do not).
inline void prefetch_line(const void* p) {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p, 0, 2);
#else
  (void)p;
#endif
}

template <class Format>
inline void prefetch_key(const host_abi::key_ptrs& key) {
  if (!key.data) return;
  for (int b = 0; b < Format::data_bytes; b += 64) prefetch_line(key.data + b);
  prefetch_line(key.scale);
}

// Whether a CPU puts prefetcht1's line into L1 as well: AMD's (and Hygon's) cores before Zen 4
// treat every prefetch hint as prefetcht0. Zen 4 and later, and Intel's cores, fill L2 only.
// family and model as CPUID reports them, the extended fields added in.
constexpr bool prefetch_fills_l1(bool amd, unsigned family, unsigned model) {
  if (!amd) return false;
  if (family < 0x19) return true;
  // Family 19h holds Zen 3 (models 00-0Fh, 20-2Fh, 40-5Fh) and Zen 4 (10-1Fh, 60-7Fh, A0-AFh).
  return family == 0x19 &&
         (model <= 0x0F || (model >= 0x20 && model <= 0x2F) || (model >= 0x40 && model <= 0x5F));
}

// The CPU this process runs on (read once). A fetch a whole tile ahead (the driver's, for keys
// on scattered pages) then runs only where it lands in L2: on Zen 3, where it landed in L1, it
// evicted the query rows and decoded keys being scored, and paged decode ran 1-7% slower
// (MXFP4) with it than without.
inline bool this_cpu_prefetch_fills_l1() {
#if defined(MQALOGITS_HOST_X86_CPUID)
  static const bool fills = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
    const bool amd = (b == 0x68747541u && d == 0x69746E65u && c == 0x444D4163u) ||  // AuthenticAMD
                     (b == 0x6F677948u && d == 0x6E65476Eu && c == 0x656E6975u);    // HygonGenuine
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    unsigned family = (a >> 8) & 0xF, model = (a >> 4) & 0xF;
    if (family == 0xF) {
      family += (a >> 20) & 0xFF;
      model |= ((a >> 16) & 0xF) << 4;
    }
    return prefetch_fills_l1(amd, family, model);
  }();
  return fills;
#else
  return false;
#endif
}

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
