// Version, backend selection and the versioned inline namespace.
#pragma once

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

// The inline namespace carries the version, so two vendored copies of different versions
// linked into one program never share a symbol (no ODR clash). Backend code lives in further
// nested namespaces of its own.
#define MQALOGITS_NAMESPACE_BEGIN \
  namespace mqalogits {           \
  inline namespace v0_1 {
#define MQALOGITS_NAMESPACE_END \
  }                             \
  }

MQALOGITS_NAMESPACE_BEGIN
inline constexpr int version_major = MQALOGITS_VERSION_MAJOR;
inline constexpr int version_minor = MQALOGITS_VERSION_MINOR;
inline constexpr int version_patch = MQALOGITS_VERSION_PATCH;

// Head dimension of every row (DeepSeek-V3.2's indexer); the formats are built around it.
inline constexpr int head_dim = 128;
// Elements per UE8M0 scale block.
inline constexpr int scale_block = 32;
// The largest supported head count (SPEC §1).
inline constexpr int max_heads = 128;

template <class...>
inline constexpr bool dependent_false = false;
MQALOGITS_NAMESPACE_END
