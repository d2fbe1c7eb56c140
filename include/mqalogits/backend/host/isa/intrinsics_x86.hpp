// <immintrin.h> for the x86 ISA files, without the warnings GCC 12's AVX-512 intrinsics raise
// (they seed results with _mm512_undefined_*(), which -Wuninitialized reports once inlined):
// the pragma covers the header's lines when this is its first inclusion, and
// MQALOGITS_GCC12_INTRINSICS_WARNINGS_OFF / _ON cover the code that calls them, for a consumer
// that included <immintrin.h> first. And in_register, which keeps the micro-kernels' schedule
// independent of the -mtune an engine builds with.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#define MQALOGITS_GCC12_INTRINSICS_WARNINGS_OFF                                        \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"") \
      _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define MQALOGITS_GCC12_INTRINSICS_WARNINGS_ON _Pragma("GCC diagnostic pop")
#else
#define MQALOGITS_GCC12_INTRINSICS_WARNINGS_OFF
#define MQALOGITS_GCC12_INTRINSICS_WARNINGS_ON
#endif

MQALOGITS_GCC12_INTRINSICS_WARNINGS_OFF
#include <immintrin.h>
MQALOGITS_GCC12_INTRINSICS_WARNINGS_ON

#include "../../../config.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

// A loaded vector the micro-kernel reuses across several multiply-adds, pinned to a register.
// Without it GCC's AMD Zen tuning (-march=znver*, -mtune=znver*) folds the load into every
// multiply-add that reads it ("vfmadd231ps (mem)" once per key), turning one load per query
// vector into one per product: the loads, not the multiply-adds, then bound the loop (a 2 x 4
// fp32 block issued 12 loads per 8 FMAs and ran at 41% of the FMA peak instead of 91%). The
// empty asm generates no instruction; it only makes the value live in a register (volatile:
// without it GCC 12 may still drop it and fold the loads).
template <class V>
inline V in_register(V v) {
#if defined(__GNUC__) || defined(__clang__)
  __asm__ volatile("" : "+v"(v));
#endif
  return v;
}

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
