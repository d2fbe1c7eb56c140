// The AMX instructions themselves, behind the tile model's interface (tile_model.hpp). Compiled
// only where the compiler targets AMX-TILE, AMX-BF16 and AMX-INT8 (-mamx-tile -mamx-bf16
// -mamx-int8, or -march=sapphirerapids and later); a unit without them never sees this code.
//
// The intrinsics name tiles by literal numbers (GCC pastes them into the instruction text), so
// each operation spells out every tile number and the template picks one at compile time.
#pragma once

#include "../../../config.hpp"

#if defined(MQALOGITS_TARGET_AMX)
#include <immintrin.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "tile_config.hpp"
#include "tile_permission.hpp"

// `op(t, args)` with t the literal tile number T (0..7).
#define MQALOGITS_AMX_ONE_TILE(T, op, ...) \
  if constexpr (T == 0) {                  \
    op(0, __VA_ARGS__);                    \
  } else if constexpr (T == 1) {           \
    op(1, __VA_ARGS__);                    \
  } else if constexpr (T == 2) {           \
    op(2, __VA_ARGS__);                    \
  } else if constexpr (T == 3) {           \
    op(3, __VA_ARGS__);                    \
  } else if constexpr (T == 4) {           \
    op(4, __VA_ARGS__);                    \
  } else if constexpr (T == 5) {           \
    op(5, __VA_ARGS__);                    \
  } else if constexpr (T == 6) {           \
    op(6, __VA_ARGS__);                    \
  } else {                                 \
    static_assert(T == 7, "tiles 0 to 7"); \
    op(7, __VA_ARGS__);                    \
  }
// A dot product `op(c, a, b)`: accumulator C in tiles 0-3, the first operand in tile 4 or 5 and
// the second in a later tile up to 7 (the roles the AMX path's kernels give them). Clang checks
// the tile numbers of every branch, taken or not, so no branch names one tile twice.
#define MQALOGITS_AMX_DOT_A4(op, c) \
  if constexpr (B == 5) {           \
    op(c, 4, 5);                    \
  } else if constexpr (B == 6) {    \
    op(c, 4, 6);                    \
  } else {                          \
    op(c, 4, 7);                    \
  }
#define MQALOGITS_AMX_DOT_A5(op, c) \
  if constexpr (B == 6) {           \
    op(c, 5, 6);                    \
  } else {                          \
    op(c, 5, 7);                    \
  }
#define MQALOGITS_AMX_DOT_A(op, c) \
  if constexpr (A == 4) {          \
    MQALOGITS_AMX_DOT_A4(op, c)    \
  } else {                         \
    MQALOGITS_AMX_DOT_A5(op, c)    \
  }
#define MQALOGITS_AMX_DOT(op)    \
  if constexpr (C == 0) {        \
    MQALOGITS_AMX_DOT_A(op, 0)   \
  } else if constexpr (C == 1) { \
    MQALOGITS_AMX_DOT_A(op, 1)   \
  } else if constexpr (C == 2) { \
    MQALOGITS_AMX_DOT_A(op, 2)   \
  } else {                       \
    MQALOGITS_AMX_DOT_A(op, 3)   \
  }

MQALOGITS_NAMESPACE_BEGIN
namespace host_backend::amx {

struct tile_native {
  static constexpr const char* path = "avx512_amx";

  // Asks the OS for the tile state first (once per process): code that reaches the tiles
  // without the dispatcher (a test running this path directly) gets an exception where the
  // first tile instruction would be SIGILL.
  static void configure(const tile_config& c) {
    static const char* const refusal = tile_refusal();
    if (refusal) [[unlikely]]
      throw std::runtime_error(std::string("mqalogits: no AMX tiles: ") + refusal);
    memory_barrier();
    _tile_loadconfig(&c);
  }
  static void release() { _tile_release(); }
  template <int T>
  static void zero() {
#define MQALOGITS_AMX_ZERO(t, unused) _tile_zero(t)
    MQALOGITS_AMX_ONE_TILE(T, MQALOGITS_AMX_ZERO, 0)
#undef MQALOGITS_AMX_ZERO
  }
  template <int T>
  static void load(const void* base, std::int64_t stride) {
    memory_barrier();
    MQALOGITS_AMX_ONE_TILE(T, _tile_loadd, base, stride)
  }
  template <int T>
  static void store(void* base, std::int64_t stride) {
    MQALOGITS_AMX_ONE_TILE(T, _tile_stored, base, stride)
    memory_barrier();
  }
  template <int C, int A, int B>
  static void dot_bf16() {
    static_assert(C >= 0 && C < 4 && (A == 4 || A == 5) && B > A && B < 8,
                  "accumulators in tiles 0-3, operands in tile 4 or 5 and tiles 5-7");
    MQALOGITS_AMX_DOT(_tile_dpbf16ps)
  }
  template <int C, int A, int B>
  static void dot_s8() {
    static_assert(C >= 0 && C < 4 && (A == 4 || A == 5) && B > A && B < 8,
                  "accumulators in tiles 0-3, operands in tile 4 or 5 and tiles 5-7");
    MQALOGITS_AMX_DOT(_tile_dpbssd)
  }

 private:
  // GCC's tile loads and stores are asm statements that name only the address: without this,
  // the compiler would not know that a load reads the stores before it, nor that a store writes
  // the memory read after it.
  static void memory_barrier() {
    __asm__ volatile("" ::: "memory");
  }
};

}  // namespace host_backend::amx
MQALOGITS_NAMESPACE_END

#undef MQALOGITS_AMX_ONE_TILE
#undef MQALOGITS_AMX_DOT_A4
#undef MQALOGITS_AMX_DOT_A5
#undef MQALOGITS_AMX_DOT_A
#undef MQALOGITS_AMX_DOT
#endif
