// Version, backend selection and the versioned inline namespace.
#pragma once

#include "target.hpp"

#define MQALOGITS_VERSION_MAJOR 0
#define MQALOGITS_VERSION_MINOR 1
#define MQALOGITS_VERSION_PATCH 0

// Exactly one default backend. CMake's MQALOGITS_BACKEND cache variable defines one of these
// as an INTERFACE compile definition; a translation unit may also define it by hand.
#if defined(MQALOGITS_BACKEND_HOST) && defined(MQALOGITS_BACKEND_NEURON)
#error "mqalogits: both MQALOGITS_BACKEND_HOST and MQALOGITS_BACKEND_NEURON are defined; pick one"
#endif
#if !defined(MQALOGITS_BACKEND_HOST) && !defined(MQALOGITS_BACKEND_NEURON)
#define MQALOGITS_BACKEND_HOST 1
#endif

// The inline namespace carries the version and the instruction set the unit is compiled for
// (target.hpp): a header-only library is compiled anew in every translation unit, and an engine
// may build one hot file with -march=native and the rest without. With the ISA in every mangled
// name, two such units never share a symbol, so the linker cannot keep one unit's code for both
// (which would run one unit's path in the other, or SIGILL on an older CPU). Two vendored copies
// of different versions stay apart for the same reason.
#define MQALOGITS_CONCAT_(a, b) a##b
#define MQALOGITS_CONCAT(a, b) MQALOGITS_CONCAT_(a, b)
//
// MQALOGITS_ONLY_HEAD_DIM (128, 64 or 32; default 0: every head dim) compiles the kernels for that
// one head dim: a third of the kernel code for an engine that serves one model (DeepSeek-V3.2's
// indexer: 128), and rows of any other head dim are refused with a named error. Since it changes
// what the entry points compile, it is part of the namespace too.
#if !defined(MQALOGITS_ONLY_HEAD_DIM)
#define MQALOGITS_ONLY_HEAD_DIM 0
#endif
//
// MQALOGITS_RUNTIME_DISPATCH (defined by the mqalogits::dispatch CMake target) makes the host
// kernels come from the dispatch library's path picked at run time (backend/host/dispatch.hpp):
// the entry points then do something else than in a header-only unit of the same flags, so it
// is part of the namespace as well (suffix _rt). The dispatch library's own copies of the paths
// have a suffix of their own (_lib): a consumer unit built for the same path with other flags
// (-march=native adds instructions the library's copy must not use) never shares their names.
#if defined(MQALOGITS_RUNTIME_DISPATCH)
#define MQALOGITS_ABI_ISA_ MQALOGITS_CONCAT(MQALOGITS_ISA_TAG, _rt)
#elif defined(MQALOGITS_DISPATCH_PATH)
#define MQALOGITS_ABI_ISA_ MQALOGITS_CONCAT(MQALOGITS_ISA_TAG, _lib)
#else
#define MQALOGITS_ABI_ISA_ MQALOGITS_ISA_TAG
#endif
#if MQALOGITS_ONLY_HEAD_DIM == 0
#define MQALOGITS_ABI_NAMESPACE MQALOGITS_CONCAT(v0_1_, MQALOGITS_ABI_ISA_)
#elif MQALOGITS_ONLY_HEAD_DIM == 128 || MQALOGITS_ONLY_HEAD_DIM == 64 || \
    MQALOGITS_ONLY_HEAD_DIM == 32
#define MQALOGITS_ABI_NAMESPACE                                 \
  MQALOGITS_CONCAT(MQALOGITS_CONCAT(v0_1_, MQALOGITS_ABI_ISA_), \
                   MQALOGITS_CONCAT(_hd, MQALOGITS_ONLY_HEAD_DIM))
#else
#error "mqalogits: MQALOGITS_ONLY_HEAD_DIM must be 128, 64 or 32 (or 0: every head dim)"
#endif
#define MQALOGITS_NAMESPACE_BEGIN \
  namespace mqalogits {           \
  inline namespace MQALOGITS_ABI_NAMESPACE {
#define MQALOGITS_NAMESPACE_END \
  }                             \
  }

// The entry points without a backend tag call the default backend, so their bodies depend on
// it too: they live in one more inline namespace that names it (host, neuron_trn1, ...).
#if defined(MQALOGITS_BACKEND_NEURON)
#if defined(MQALOGITS_NEURON_GEN_TRN1)
#define MQALOGITS_DEFAULT_BACKEND_TAG neuron_trn1
#elif defined(MQALOGITS_NEURON_GEN_TRN3)
#define MQALOGITS_DEFAULT_BACKEND_TAG neuron_trn3
#else
#define MQALOGITS_DEFAULT_BACKEND_TAG neuron_trn2
#endif
#else
#define MQALOGITS_DEFAULT_BACKEND_TAG host
#endif
#define MQALOGITS_DEFAULT_BACKEND_NAMESPACE_BEGIN \
  inline namespace MQALOGITS_CONCAT(default_, MQALOGITS_DEFAULT_BACKEND_TAG) {
#define MQALOGITS_DEFAULT_BACKEND_NAMESPACE_END }

MQALOGITS_NAMESPACE_BEGIN
inline constexpr int version_major = MQALOGITS_VERSION_MAJOR;
inline constexpr int version_minor = MQALOGITS_VERSION_MINOR;
inline constexpr int version_patch = MQALOGITS_VERSION_PATCH;

// The head dimension a format and a view have unless told otherwise (DeepSeek-V3.2's indexer).
// Upstream also runs 64, and 32 for the FP8 formats: see block_scaled::supports_head_dim and
// rows_view's head_dim_t constructors.
inline constexpr int default_head_dim = 128;
// The same value under its older name, for existing callers.
inline constexpr int head_dim = default_head_dim;

// A row's head dimension, passed to a view's constructor: rows_view(data, scales, rows,
// head_dim_t{64}). A type of its own so it cannot be mistaken for a stride.
struct head_dim_t {
  int value = default_head_dim;
};
// The largest supported head count (DeepSeek-V3.2 uses 64, GLM-5 32).
inline constexpr int max_heads = 128;

template <class...>
inline constexpr bool dependent_false = false;
MQALOGITS_NAMESPACE_END
